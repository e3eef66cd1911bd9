// SPDX-License-Identifier: Apache-2.0
#include "plugin/filter.h"

#include <stdlib.h>
#include <string.h>

int braid_filter_parse(const char *spec, struct braid_filter *f)
{
	memset(f, 0, sizeof(*f));
	if (!spec)
		return 0;
	if (*spec == '^') {
		f->exclude = 1;
		spec++;
	}
	if (*spec == '=') {
		f->exact = 1;
		spec++;
	}
	while (*spec) {
		const char *comma = strchr(spec, ',');
		size_t len = comma ? (size_t)(comma - spec) : strlen(spec);
		const char *colon = memchr(spec, ':', len);
		size_t nlen = colon ? (size_t)(colon - spec) : len;

		if (len == 0) {
			spec++;
			continue;
		}
		if (f->n == BRAID_FILTER_MAX || nlen == 0 || nlen >= sizeof(f->item[0].name))
			return -1;
		memcpy(f->item[f->n].name, spec, nlen);
		f->item[f->n].name[nlen] = '\0';
		f->item[f->n].port = -1;
		if (colon) {
			char digits[16] = "";
			char *end;
			size_t dlen = len - nlen - 1;
			long port;

			if (dlen == 0 || dlen >= sizeof(digits))
				return -1;
			memcpy(digits, colon + 1, dlen);
			port = strtol(digits, &end, 10);
			if (*end || port < 0 || port > 255)
				return -1;
			f->item[f->n].port = (int)port;
		}
		f->n++;
		spec += len;
		if (*spec == ',')
			spec++;
	}
	return 0;
}

int braid_filter_match(const struct braid_filter *f, const char *name, int port)
{
	int hit = 0;

	if (f->n == 0)
		return 1;
	for (int i = 0; i < f->n && !hit; i++) {
		const char *want = f->item[i].name;
		int name_ok = f->exact ? strcmp(name, want) == 0
				       : strncmp(name, want, strlen(want)) == 0;

		hit = name_ok && (f->item[i].port < 0 || port < 0 || f->item[i].port == port);
	}
	return f->exclude ? !hit : hit;
}
