/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's device/interface list syntax (NCCL_SOCKET_IFNAME, NCCL_IB_HCA): a comma list of
 * name prefixes, each with an optional ":port"; a leading '^' makes it an exclude list,
 * a leading '=' asks for exact names ("^=" for both).
 */
#ifndef BRAID_FILTER_H
#define BRAID_FILTER_H

#define BRAID_FILTER_MAX 32

struct braid_filter {
	int exclude;
	int exact;
	int n;
	struct {
		char name[64];
		int port; /* -1: any */
	} item[BRAID_FILTER_MAX];
};

/* Empty or NULL spec: matches everything. Returns -1 for a spec it cannot parse. */
int braid_filter_parse(const char *spec, struct braid_filter *f);
/* port -1: the thing has no port (an interface). Returns 1 when it is selected. */
int braid_filter_match(const struct braid_filter *f, const char *name, int port);

#endif
