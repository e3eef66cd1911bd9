/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's device/interface list syntax (NCCL_SOCKET_IFNAME, NCCL_IB_HCA): a comma list of
 * name prefixes, each with an optional ":port"; a leading '^' makes it an exclude list,
 * a leading '=' asks for exact names ("^=" for both). NCCL 2.30's NCCL_IB_HCA entries
 * may go on with a rail and a plane: "name:port:rail:plane" (src/misc/utils.cc,
 * parseStringList); a field may be left empty ("mlx5_0::3:1") when a later one is given.
 */
#ifndef BRAID_FILTER_H
#define BRAID_FILTER_H

#define BRAID_FILTER_MAX 32
/* Largest rail and plane an entry may give: railId and planeId are int16_t in ncclNet
 * v12, and NCCL's IB transport refuses plane ids with bit 14 set (its virtual-plane bit). */
#define BRAID_FILTER_RAIL_MAX 32767
#define BRAID_FILTER_PLANE_MAX 16383

struct braid_filter {
	int exclude;
	int exact;
	int n;
	struct {
		char name[64];
		int port;  /* -1: any */
		int rail;  /* -1: not given */
		int plane; /* -1: not given */
	} item[BRAID_FILTER_MAX];
};

/* Empty or NULL spec: matches everything. Returns -1 for a spec it cannot parse. */
int braid_filter_parse(const char *spec, struct braid_filter *f);
/* port -1: the thing has no port (an interface). Returns 1 when it is selected. */
int braid_filter_match(const struct braid_filter *f, const char *name, int port);
/* The entry that selects the thing, as NCCL's matchIfList: the first that matches, or -1
 * when none does, the list is empty, or it is an exclude list (whose entries name what
 * is left out, so none describes a device that is kept). */
int braid_filter_entry(const struct braid_filter *f, const char *name, int port);

#endif
