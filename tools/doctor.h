/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `braid doctor`'s parts, each calling only downwards: the command and its output
 * (tools/doctor.c) runs the checks (tools/doctor_lib.c, tools/doctor_rdma.c,
 * tools/doctor_gpu.c), which record results and read host files under the root through
 * tools/doctor_base.c. docs/doctor.md describes every check.
 */
#ifndef BRAID_TOOLS_DOCTOR_H
#define BRAID_TOOLS_DOCTOR_H

#include <stdbool.h>
#include <stddef.h>

enum doc_status {
	DOC_PASS,
	DOC_INFO, /* skipped or not exposed, with the reason: never counted as a pass */
	DOC_WARN,
	DOC_FAIL,
};

struct doc_check {
	char id[64];
	enum doc_status status;
	char msg[768];
	char fix[384];
};

struct braid_topo;

struct doctor {
	const char *root; /* "" for the real root, else without a trailing '/' */
	const char *xml;  /* --xml, or NULL */
	const char *only; /* comma list of check-id prefixes, or NULL for all */
	bool json;
	struct doc_check *c;
	size_t n, cap;
	/* what one check learns for another */
	int nrdma;         /* RDMA devices under /sys/class/infiniband */
	int nefa;          /* of them, EFA devices */
	bool verbs_dmabuf; /* libibverbs exports ibv_reg_dmabuf_mr */
	bool verbs_loaded; /* libibverbs.so.1 loads */
	struct braid_topo *topo;
};

/* tools/doctor_base.c */
/* Record one result. fix may be NULL (none). Messages are cut to one line. */
void doc_add(struct doctor *d, enum doc_status st, const char *id, const char *fix, const char *fmt,
	     ...) __attribute__((format(printf, 5, 6)));

/* 1 when checks of group `group` ("port", "gid", ...) are to run (--only). */
int doc_want(const struct doctor *d, const char *group);

/* root + path into buf; -1 when it does not fit. */
int doc_path(const struct doctor *d, char *buf, size_t len, const char *path);
/* Read a host file under the root into buf, trailing newlines and spaces cut. 0 or -1. */
int doc_read(const struct doctor *d, const char *path, char *buf, size_t len);
/* 1 when path exists under the root. */
int doc_exists(const struct doctor *d, const char *path);

#define DOC_MAX_NAMES 64
#define DOC_NAME_LEN 128
/* Sorted entries of a directory under the root, without dot entries; how many. */
int doc_list_dir(const struct doctor *d, const char *path, char names[][DOC_NAME_LEN], int max);
/* The last component of a symlink under the root ("" when it is not one). */
void doc_link_base(const struct doctor *d, const char *path, char *buf, size_t len);

/* tools/doctor_lib.c: lib (libibverbs, libfabric, NCCL), plugin, env */
void doc_check_lib(struct doctor *d);
/* tools/doctor_rdma.c */
void doc_scan(struct doctor *d);       /* counts RDMA devices: nrdma, nefa */
void doc_check_rdma(struct doctor *d); /* dev, memlock, port, gid, ecn, pfc */
/* tools/doctor_gpu.c */
void doc_check_gpu(struct doctor *d); /* gpudirect, topo, acs, iommu */

#endif /* BRAID_TOOLS_DOCTOR_H */
