// SPDX-License-Identifier: Apache-2.0
/*
 * Writes docs/configuration.md from the parameter table, and with `ncclib` the NCCL_IB_*
 * table of docs/ib.md from plugin/ncclib_env.c (`make docs`); test-config-doc.sh fails
 * when a committed doc differs, so the docs cannot drift from the code.
 */
#include <stdio.h>
#include <string.h>

#include "plugin/ncclib_env.h"
#include "plugin/params.h"

static const char *type_name(const struct braid_param_desc *d)
{
	switch (d->type) {
	case BRAID_PARAM_INT: return "integer";
	case BRAID_PARAM_BOOL: return "boolean";
	case BRAID_PARAM_STR: return "string";
	case BRAID_PARAM_ENUM: return "choice";
	}
	return "?";
}

/* "a|b|c" as "`a`, `b`, `c`": a bare '|' would split the markdown table cell. */
static void choice_list(const char *choices, char *out, size_t len)
{
	size_t used = 0;

	for (const char *p = choices; *p && used + 8 < len; p++) {
		if (p == choices)
			out[used++] = '`';
		if (*p == '|') {
			used += (size_t)snprintf(out + used, len - used, "`, `");
			continue;
		}
		out[used++] = *p;
	}
	snprintf(out + used, len - used, "`");
}

static int ncclib_table(void)
{
	size_t n;
	const struct braid_ncclib_var *v = braid_ncclib_vars(&n);

	printf("| Variable | NCCL default | NCCL's meaning | braid | What braid does | NCCL source |\n"
	       "|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < n; i++)
		printf("| `%s` | %s | %s | %s | %s | `%s` |\n", v[i].name, v[i].nccl_default,
		       v[i].meaning, braid_ncclib_how_name(v[i].how), v[i].braid, v[i].source);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "ncclib") == 0)
		return ncclib_table();
	printf("# braid configuration\n\n"
	       "Every knob is an environment variable, read once when the plugin initialises.\n"
	       "A value that does not parse or is out of range gets one WARN naming the variable,\n"
	       "the value and the default used instead. Where an NCCL variable of the same meaning\n"
	       "exists, braid honours it when its own is unset.\n\n"
	       "This file is generated from plugin/params.h by `make docs`; a unit test fails when\n"
	       "it is out of date.\n\n"
	       "| Variable | Type | Default | Allowed | NCCL equivalent | Meaning |\n"
	       "|---|---|---|---|---|---|\n");
	for (int id = 0; id < BRAID_P_COUNT; id++) {
		const struct braid_param_desc *d = braid_param_desc((enum braid_param_id)id);
		char allowed[128];

		if (d->type == BRAID_PARAM_INT)
			snprintf(allowed, sizeof(allowed), "%lld to %lld", (long long)d->min,
				 (long long)d->max);
		else if (d->type == BRAID_PARAM_BOOL)
			snprintf(allowed, sizeof(allowed), "0/1, true/false, yes/no, on/off");
		else if (d->type == BRAID_PARAM_ENUM)
			choice_list(d->choices, allowed, sizeof(allowed));
		else
			snprintf(allowed, sizeof(allowed), "text");
		printf("| `%s` | %s | %s%s%s | %s | %s%s%s | %s |\n", d->name, type_name(d),
		       d->def[0] ? "`" : "", d->def[0] ? d->def : "(unset)", d->def[0] ? "`" : "",
		       allowed, d->alias ? "`" : "", d->alias ? d->alias : "-", d->alias ? "`" : "",
		       d->doc);
	}
	return 0;
}
