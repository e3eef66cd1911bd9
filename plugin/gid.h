/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The RoCE GID a port uses, decided once for net_ib (from ibv_query_gid_ex) and for
 * `braid doctor` (from sysfs under its root), so that both name the same index on the
 * same host. braid_gid_choose is pure: the table and the rule in, the choice out.
 */
#ifndef BRAID_GID_H
#define BRAID_GID_H

#include <stdbool.h>
#include <stdint.h>

/* A GID's type, numbered as enum ibv_gid_type (net_ib checks that it is). */
enum braid_gid_type {
	BRAID_GID_UNKNOWN = -1, /* not readable (no ibv_query_gid_ex, no sysfs types file) */
	BRAID_GID_IB = 0,
	BRAID_GID_ROCE_V1 = 1,
	BRAID_GID_ROCE_V2 = 2,
};

struct braid_gid_entry {
	int index;       /* in the port's GID table */
	uint8_t raw[16]; /* not all zero (an empty slot is not an entry) */
	int type;        /* enum braid_gid_type */
};

struct braid_gid_rule {
	int want_index;    /* >= 0: that index and nothing else; -1: choose */
	int family;        /* AF_INET or AF_INET6 */
	const char *range; /* "address/prefix" of that family; NULL or "": any address */
	int roce_version;  /* the RoCE version to prefer, 1 or 2 (0: 2), NCCL_IB_ROCE_VERSION_NUM */
};

struct braid_gid_pick {
	int pos;               /* into the entries; -1: none fits */
	bool version_fallback; /* no GID of the preferred RoCE version (untyped ones count as
				* RoCEv2) fits: the first of the other version that does */
	bool range_bad;        /* the range is not address/prefix: ignored (the caller warns) */
	char why[192];         /* how it was chosen, or (pos -1) what is missing, with the skips */
};

/* The rule from BRAID_IB_GID_INDEX, BRAID_IB_ADDR_FAMILY, BRAID_IB_ADDR_RANGE and
 * BRAID_IB_ROCE_VERSION_NUM (or their NCCL_* aliases, plugin/params.h). r->range points
 * into the parameter table. */
void braid_gid_rule_from_params(struct braid_gid_rule *r);

/*
 * Choose among n entries (in table order): with want_index, that index if it is there;
 * else the first GID of the family, not IPv6 link-local, within the range, of the
 * preferred RoCE version (2 unless the rule says 1, as NCCL_IB_ROCE_VERSION_NUM); when
 * only GIDs of the other version fit, the first of them. out->pos -1 when none fits.
 */
void braid_gid_choose(const struct braid_gid_entry *g, int n, const struct braid_gid_rule *r,
		      struct braid_gid_pick *out);

/* "IB", "RoCEv1", "RoCEv2", "(type unknown)" */
const char *braid_gid_type_name(int type);

#endif
