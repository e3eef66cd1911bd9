/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Strict mode: BRAID_REQUIRE lists what this host must give braid (RDMA, GPUDirect,
 * NICs per GPU, ...). It is checked once, at init, after the backend and the device table
 * are chosen; when the host falls short init fails with one WARN per unmet requirement
 * that says what is missing, what braid found instead and how to fix it. NCCL then skips
 * braid, or, with NCCL_NET=braid, fails the communicator: the job stops at start instead
 * of running slowly. The requirements, their WARNs and NCCL's behaviour: docs/strict.md.
 *
 * The parser and the decision are pure functions of their arguments (tests feed them
 * made-up hosts); braid_require_check() gathers the facts from the running plugin.
 */
#ifndef BRAID_REQUIRE_H
#define BRAID_REQUIRE_H

#include <stddef.h>

#include "plugin/backend.h"

struct braid_topo;

enum braid_req_kind {
	BRAID_REQ_RDMA = 1, /* not on a slow path (fallback record slow_path == 0) */
	BRAID_REQ_GDR,      /* GPUDirect RDMA on with every device (fallback gpudirect == 1) */
	BRAID_REQ_RAILS,    /* every GPU has at least num of braid's NICs in its rail */
	BRAID_REQ_NICS,     /* braid has at least num NICs */
	BRAID_REQ_BACKEND,  /* the backend is word ("ib" or "ofi") */
	BRAID_REQ_PROVIDER, /* the ofi backend runs libfabric provider word */
	BRAID_REQ_NIC_SPEED /* every NIC of braid's runs at num Gbit/s or more */
};

#define BRAID_REQ_MAX 16

struct braid_req {
	enum braid_req_kind kind;
	long num;      /* rails, nics, nic_speed */
	char word[64]; /* backend, provider */
	char text[80]; /* the entry as written, for messages */
};

struct braid_req_set {
	int n;
	struct braid_req r[BRAID_REQ_MAX];
};

/* Parse a BRAID_REQUIRE value: a comma list, entries case-insensitive, blanks around them
 * ignored; "" and "none" require nothing. 0 with *out filled, or -1 with why naming the
 * entry that is wrong and what is accepted. */
int braid_require_parse(const char *text, struct braid_req_set *out, char *why, size_t whylen);

/* What init chose, as the decision sees it. */
struct braid_req_facts {
	enum braid_backend_kind backend;
	const char *backend_name; /* "ib", "ofi" */
	const char *provider;     /* the fallback record's provider */
	const char *why;          /* the fallback record's why (the choice and its reasons) */
	int slow_path;            /* the fallback record's slow_path */
	int provider_named;       /* BRAID_OFI_PROVIDER is set */
	int backend_named;        /* BRAID_BACKEND is set to ib or ofi */
	/* GPUDirect as NCCL will see it (plugin/gpudirect.h): devices where it is off, the
	 * first of them, why and what to do */
	int gdr_off;
	const char *gdr_dev;
	const char *gdr_why;
	const char *gdr_fix;
	/* braid's NICs (the backend's devices, before any fusing) */
	const struct braid_dev_props *nics;
	int nnics;
	const struct braid_topo *topo; /* NULL: no topology */
};

/* One unmet requirement: the whole WARN line (what is missing, what braid found instead,
 * the fix, what NCCL does next). */
struct braid_req_failure {
	const struct braid_req *req;
	char msg[900]; /* NCCL's logger takes up to 1024 bytes with its own prefix */
};

/* Check every requirement; fill fails[0..max) with the unmet ones, in the order written,
 * and return how many there are. */
int braid_require_eval(const struct braid_req_set *reqs, const struct braid_req_facts *facts,
		       struct braid_req_failure *fails, int max);

/* At init, after the backend and the device table: read BRAID_REQUIRE, check it against
 * what init chose, WARN once per unmet requirement and note the outcome in the fallback
 * record's why. ncclSuccess; ncclInvalidUsage when BRAID_REQUIRE is malformed;
 * ncclSystemError when the host falls short. */
ncclResult_t braid_require_check(const struct braid_backend_ops *ops,
				 const struct braid_dev_props *nics, int nnics,
				 const struct braid_topo *topo);

#endif
