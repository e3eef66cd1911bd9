// SPDX-License-Identifier: Apache-2.0
#include "plugin/params.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plugin/log.h"

static const struct braid_param_desc param_table[BRAID_P_COUNT] = {
#define BRAID_PARAM_DESC(id, n, t, d, lo, hi, ch, al, doc) \
	[BRAID_P_##id] = { n, t, d, lo, hi, ch, al, doc },
	BRAID_PARAM_LIST(BRAID_PARAM_DESC)
#undef BRAID_PARAM_DESC
};

struct param_value {
	int64_t num;
	char str[256];
	const char *source;
};

/* Written once under load_lock, then only read: readers need no lock after loaded. */
static struct param_value values[BRAID_P_COUNT];
static int loaded;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

const struct braid_param_desc *braid_param_desc(enum braid_param_id id)
{
	return &param_table[id];
}

/* Index of word in a '|' list, case-insensitive; -1 when absent. */
static int enum_index(const char *choices, const char *word)
{
	size_t wlen = strlen(word);
	int idx = 0;

	for (const char *p = choices; *p; idx++) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);

		if (len == wlen && strncasecmp(p, word, len) == 0)
			return idx;
		if (!bar)
			break;
		p = bar + 1;
	}
	return -1;
}

int braid_param_parse(const struct braid_param_desc *d, const char *text, int64_t *out)
{
	char *end;
	long long v;

	switch (d->type) {
	case BRAID_PARAM_STR: *out = 0; return strlen(text) < sizeof(values[0].str) ? 0 : -1;
	case BRAID_PARAM_ENUM:
		v = enum_index(d->choices, text);
		if (v < 0)
			return -1;
		*out = v;
		return 0;
	case BRAID_PARAM_BOOL:
		if (!strcasecmp(text, "1") || !strcasecmp(text, "true") ||
		    !strcasecmp(text, "yes") || !strcasecmp(text, "on")) {
			*out = 1;
			return 0;
		}
		if (!strcasecmp(text, "0") || !strcasecmp(text, "false") ||
		    !strcasecmp(text, "no") || !strcasecmp(text, "off")) {
			*out = 0;
			return 0;
		}
		return -1;
	case BRAID_PARAM_INT:
		errno = 0;
		v = strtoll(text, &end, 0);
		if (errno || end == text || *end != '\0' || v < d->min || v > d->max)
			return -1;
		*out = v;
		return 0;
	}
	return -1;
}

static void load_one(enum braid_param_id id)
{
	const struct braid_param_desc *d = &param_table[id];
	struct param_value *val = &values[id];
	const char *text = getenv(d->name);
	const char *source = d->name;
	int64_t def;

	if (!text && d->alias) {
		text = getenv(d->alias);
		source = d->alias;
	}
	/* The table's defaults are valid by construction (tests/unit/test_params.c). */
	if (braid_param_parse(d, d->def, &def))
		def = 0;
	val->num = def;
	snprintf(val->str, sizeof(val->str), "%s", d->type == BRAID_PARAM_STR ? d->def : "");
	val->source = "default";
	if (!text)
		return;
	if (braid_param_parse(d, text, &val->num)) {
		if (d->type == BRAID_PARAM_INT)
			BRAID_WARN("%s=\"%s\" is not an integer in [%lld, %lld]; using the default %s",
				   source, text, (long long)d->min, (long long)d->max, d->def);
		else if (d->type == BRAID_PARAM_STR)
			BRAID_WARN("%s is longer than %zu characters; using the default \"%s\"",
				   source, sizeof(val->str) - 1, d->def);
		else
			BRAID_WARN("%s=\"%s\" is not one of %s; using the default %s", source, text,
				   d->type == BRAID_PARAM_BOOL ? "0|1|true|false|yes|no|on|off"
							       : d->choices,
				   d->def);
		val->num = def;
		return;
	}
	if (d->type == BRAID_PARAM_STR)
		snprintf(val->str, sizeof(val->str), "%s", text);
	val->source = source;
}

void braid_params_load(void)
{
	if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&load_lock);
	if (!loaded) {
		/* BRAID_DEBUG first, so the WARNs about the others respect it. */
		load_one(BRAID_P_DEBUG);
		braid_log_set_level((enum braid_log_level)values[BRAID_P_DEBUG].num);
		for (int id = 0; id < BRAID_P_COUNT; id++)
			if (id != BRAID_P_DEBUG)
				load_one((enum braid_param_id)id);
		__atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&load_lock);
}

void braid_params_reset(void)
{
	pthread_mutex_lock(&load_lock);
	__atomic_store_n(&loaded, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&load_lock);
}

int64_t braid_param_int(enum braid_param_id id)
{
	braid_params_load();
	return values[id].num;
}

const char *braid_param_str(enum braid_param_id id)
{
	braid_params_load();
	return values[id].str;
}

const char *braid_param_source(enum braid_param_id id)
{
	braid_params_load();
	return values[id].source;
}
