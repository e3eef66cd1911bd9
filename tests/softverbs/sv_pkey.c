// SPDX-License-Identifier: MIT
/*
 * softverbs: partitions. Each port has a P_Key table (IBA 10.9); a QP sends with the
 * P_Key at its pkey_index, and a responder takes a requester only when their P_Keys
 * match: the same 15-bit partition, at least one of them a full member (bit 15), neither
 * the invalid key 0. A mismatched requester is dropped as a real HCA drops its packets,
 * so its sends end with IBV_WC_RETRY_EXC_ERR.
 *
 * SOFTVERBS_PKEYS=DEV:PKEY[/PKEY...][,DEV:...] sets the table of every port of DEV from
 * index 0 (e.g. svib0:0xffff/0x8001); other ports keep the default table {0xffff}.
 * Entries past the table are read as 0 (empty). The table is per process: two processes
 * on one "host" can be put on different partitions.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/softverbs/sv_internal.h"

int sv_pkey_table_len(const struct sv_device *d)
{
	return d->roce ? 1 : SV_PKEY_TABLE_LEN;
}

uint16_t sv_pkey_at(const struct sv_port *p, int index)
{
	return index >= 0 && index < p->npkeys ? p->pkey[index] : 0;
}

bool sv_pkey_match(uint16_t a, uint16_t b)
{
	return (a & 0x7fff) && (a & 0x7fff) == (b & 0x7fff) && ((a | b) & 0x8000);
}

/* One DEV:PKEY/... entry into tab; the number of keys, or -1 when it does not parse. */
static int parse_keys(char *keys, uint16_t *tab, int max)
{
	char *save = NULL, *k;
	int n = 0;

	for (k = strtok_r(keys, "/", &save); k; k = strtok_r(NULL, "/", &save)) {
		char *end;
		unsigned long v = strtoul(k, &end, 0);

		if (!*k || *end || v > 0xffff || n == max)
			return -1;
		tab[n++] = (uint16_t)v;
	}
	return n ? n : -1;
}

void sv_pkeys_load(struct sv_device *devs, int ndevs)
{
	static const char var[] = "SOFTVERBS_PKEYS";
	const char *v = getenv(var);
	char buf[512], *save = NULL, *tok;

	for (int d = 0; d < ndevs; d++)
		for (int p = 0; p < SV_MAX_PORTS; p++) {
			devs[d].port[p].npkeys = 1;
			devs[d].port[p].pkey[0] = 0xffff;
		}
	if (!v || !*v)
		return;
	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':');
		uint16_t tab[SV_PKEY_TABLE_LEN];
		int d, n;

		if (!colon) {
			sv_log("%s: bad entry '%s' (want DEV:PKEY[/PKEY...]): ignored", var, tok);
			continue;
		}
		*colon = '\0';
		for (d = 0; d < ndevs && strcmp(devs[d].ibdev.name, tok); d++)
			;
		n = d < ndevs ? parse_keys(colon + 1, tab, sv_pkey_table_len(&devs[d])) : -1;
		if (n < 0) {
			sv_log("%s: bad entry for '%s' (no such device, a key over 0xffff, or more "
			       "keys than the table holds): ignored",
			       var, tok);
			continue;
		}
		for (int p = 0; p < SV_MAX_PORTS; p++) {
			memcpy(devs[d].port[p].pkey, tab, (size_t)n * sizeof(tab[0]));
			devs[d].port[p].npkeys = n;
		}
		sv_debug("device %s: %d P_Key(s), index 0 = 0x%04x", tok, n, tab[0]);
	}
}
