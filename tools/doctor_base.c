// SPDX-License-Identifier: Apache-2.0
/*
 * What every `braid doctor` check uses: the list of results, and the host's files read
 * under the root (tools/doctor.h). The checks call down into this file, never up into
 * the command (tools/doctor.c).
 */
#include "tools/doctor.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A symlink's last component longer than the caller's buffer is cut, as a name shown in
 * a message may be. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

void doc_add(struct doctor *d, enum doc_status st, const char *id, const char *fix, const char *fmt,
	     ...)
{
	struct doc_check *c;
	va_list ap;

	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 32;
		struct doc_check *nc = realloc(d->c, cap * sizeof(*nc));

		if (!nc)
			return;
		d->c = nc;
		d->cap = cap;
	}
	c = &d->c[d->n++];
	memset(c, 0, sizeof(*c));
	snprintf(c->id, sizeof(c->id), "%s", id);
	c->status = st;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	snprintf(c->fix, sizeof(c->fix), "%s", fix ? fix : "");
	for (char *p = c->msg; *p; p++)
		if (*p == '\n')
			*p = ' ';
}

int doc_want(const struct doctor *d, const char *group)
{
	size_t n = strlen(group);
	const char *p = d->only;

	if (!p)
		return 1;
	while (*p) {
		size_t len = strcspn(p, ",");

		if (len == n && !strncmp(p, group, n))
			return 1;
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

int doc_path(const struct doctor *d, char *buf, size_t len, const char *path)
{
	int w = snprintf(buf, len, "%s%s", d->root, path);

	if (w < 0 || (size_t)w >= len) {
		if (len)
			buf[0] = '\0';
		return -1;
	}
	return 0;
}

int doc_read(const struct doctor *d, const char *path, char *buf, size_t len)
{
	char full[4096];
	FILE *f;
	size_t n;

	buf[0] = '\0';
	if (doc_path(d, full, sizeof(full), path))
		return -1;
	f = fopen(full, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	return 0;
}

int doc_exists(const struct doctor *d, const char *path)
{
	char full[4096];

	return doc_path(d, full, sizeof(full), path) == 0 && access(full, F_OK) == 0;
}

/* Sorted entries of a directory under the root, without dot entries. */
int doc_list_dir(const struct doctor *d, const char *path, char names[][DOC_NAME_LEN], int max)
{
	char full[4096];
	struct dirent **ents = NULL;
	int ne, n = 0;

	if (doc_path(d, full, sizeof(full), path))
		return 0;
	ne = scandir(full, &ents, NULL, versionsort);
	for (int i = 0; i < ne; i++) {
		if (ents[i]->d_name[0] != '.' && n < max)
			snprintf(names[n++], DOC_NAME_LEN, "%s", ents[i]->d_name);
		free(ents[i]);
	}
	free(ents);
	return n;
}

/* The last component of a symlink under the root ("" when it is not one). */
void doc_link_base(const struct doctor *d, const char *path, char *buf, size_t len)
{
	char full[4096], target[4096];
	ssize_t n;
	const char *b;

	buf[0] = '\0';
	if (doc_path(d, full, sizeof(full), path))
		return;
	n = readlink(full, target, sizeof(target) - 1);
	if (n <= 0)
		return;
	target[n] = '\0';
	b = strrchr(target, '/');
	snprintf(buf, len, "%s", b ? b + 1 : target);
}
