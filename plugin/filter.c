// SPDX-License-Identifier: Apache-2.0
#include "plugin/filter.h"

#include <stdlib.h>
#include <string.h>

/* One numeric field of an entry: "" (not given: -1), "-1" (NCCL's "not given"), or a
 * decimal number in 0..max. 0 or -1 when it is none of those. */
static int parse_field(const char *s, size_t len, int max, int *out)
{
	char digits[16];
	char *end;
	long v;

	*out = -1;
	if (len == 0)
		return 0;
	if (len >= sizeof(digits))
		return -1;
	memcpy(digits, s, len);
	digits[len] = '\0';
	if (!strcmp(digits, "-1"))
		return 0;
	if (digits[0] < '0' || digits[0] > '9')
		return -1;
	v = strtol(digits, &end, 10);
	if (*end || v < 0 || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

/* "name[:port[:rail[:plane]]]" of length len into the next item. */
static int parse_entry(const char *s, size_t len, struct braid_filter *f)
{
	static const int max[] = { 255, BRAID_FILTER_RAIL_MAX, BRAID_FILTER_PLANE_MAX };
	const char *colon = memchr(s, ':', len);
	size_t nlen = colon ? (size_t)(colon - s) : len;
	int nfields = 0, *field[3];

	if (f->n >= BRAID_FILTER_MAX || nlen == 0 || nlen >= sizeof(f->item[0].name))
		return -1;
	field[0] = &f->item[f->n].port;
	field[1] = &f->item[f->n].rail;
	field[2] = &f->item[f->n].plane;
	memcpy(f->item[f->n].name, s, nlen);
	f->item[f->n].name[nlen] = '\0';
	for (int k = 0; k < 3; k++)
		*field[k] = -1;
	while (colon) {
		const char *start = colon + 1;
		size_t rest = len - (size_t)(start - s);
		size_t flen;

		colon = memchr(start, ':', rest);
		flen = colon ? (size_t)(colon - start) : rest;
		/* an empty field only before a given one: "mlx5_0:" is a typo */
		if (nfields == 3 || (flen == 0 && !colon) ||
		    parse_field(start, flen, max[nfields], field[nfields]))
			return -1;
		nfields++;
	}
	f->n++;
	return 0;
}

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

		if (len == 0) {
			spec++;
			continue;
		}
		if (parse_entry(spec, len, f))
			return -1;
		spec += len;
		if (*spec == ',')
			spec++;
	}
	return 0;
}

static int first_hit(const struct braid_filter *f, const char *name, int port)
{
	for (int i = 0; i < f->n; i++) {
		const char *want = f->item[i].name;
		int name_ok = f->exact ? strcmp(name, want) == 0
				       : strncmp(name, want, strlen(want)) == 0;

		if (name_ok && (f->item[i].port < 0 || port < 0 || f->item[i].port == port))
			return i;
	}
	return -1;
}

int braid_filter_match(const struct braid_filter *f, const char *name, int port)
{
	int hit;

	if (f->n == 0)
		return 1;
	hit = first_hit(f, name, port) >= 0;
	return f->exclude ? !hit : hit;
}

int braid_filter_entry(const struct braid_filter *f, const char *name, int port)
{
	return f->exclude ? -1 : first_hit(f, name, port);
}
