// SPDX-License-Identifier: Apache-2.0
/*
 * Meeting points between the two sides: small files in a directory both see. Files and
 * not sockets because the two sides may live in different network namespaces, which
 * share the filesystem. A file appears atomically (written aside, then renamed).
 */
#include "tests/conformance/conf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void path_of(const struct side *s, char role, const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s.%s.%c", s->dir, s->key, name, role);
}

static char peer_of(const struct side *s)
{
	return s->role == 'a' ? 'b' : 'a';
}

int rdv_put(const struct side *s, const char *name, const void *data, size_t len)
{
	char path[512], tmp[600];
	int fd;

	path_of(s, s->role, name, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return conf_fail(s, "rdv: open(%s): %s", tmp, strerror(errno));
	if (len && write(fd, data, len) != (ssize_t)len) {
		close(fd);
		return conf_fail(s, "rdv: write(%s, %zu bytes): %s", tmp, len, strerror(errno));
	}
	close(fd);
	if (rename(tmp, path))
		return conf_fail(s, "rdv: rename(%s): %s", path, strerror(errno));
	return 0;
}

bool rdv_peer_aborted(const struct side *s)
{
	char path[512];

	path_of(s, peer_of(s), "abort", path, sizeof(path));
	return access(path, F_OK) == 0;
}

void rdv_abort(const struct side *s)
{
	rdv_put(s, "abort", "", 0);
}

int rdv_get(const struct side *s, const char *name, void *data, size_t len, double timeout_s)
{
	return rdv_get_from(s, peer_of(s), name, data, len, timeout_s);
}

int rdv_get_from(const struct side *s, char role, const char *name, void *data, size_t len,
		 double timeout_s)
{
	double deadline = now_s() + timeout_s;
	char path[512];
	ssize_t got;
	int fd;

	path_of(s, role, name, path, sizeof(path));
	for (;;) {
		fd = open(path, O_RDONLY);
		if (fd >= 0)
			break;
		if (rdv_peer_aborted(s))
			return conf_fail(s, "rdv: peer %c gave up before publishing '%s'", role,
					 name);
		if (now_s() > deadline)
			return conf_fail(s, "rdv: peer %c did not publish '%s' within %.0f s (%s)",
					 role, name, timeout_s, path);
		struct timespec ts = { 0, 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	got = len ? read(fd, data, len) : 0;
	close(fd);
	if (got != (ssize_t)len)
		return conf_fail(s, "rdv: '%s' holds %zd bytes, expected %zu", path, got, len);
	return 0;
}

int rdv_sync(const struct side *s, const char *name)
{
	if (rdv_put(s, name, "", 0))
		return -1;
	return rdv_get(s, name, NULL, 0, CONF_RDV_TIMEOUT_S);
}

bool rdv_peek(const struct side *s, const char *name, void *data, size_t len)
{
	char path[512];
	ssize_t got;
	int fd;

	path_of(s, peer_of(s), name, path, sizeof(path));
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	got = len ? read(fd, data, len) : 0;
	close(fd);
	return got == (ssize_t)len;
}
