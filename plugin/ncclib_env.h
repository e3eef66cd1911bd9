/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every NCCL_IB_* variable NCCL 2.30's IB transport reads (the .cc files of src/transport/net_ib/), and
 * what braid does with it. Training images carry these variables for years; a job moved
 * onto braid must not lose one in silence. The table is the one source for:
 *   - the INFO/WARN lines at init for variables that are set but not honoured,
 *   - the table in docs/ib.md (`make docs`; tests/unit/test-config-doc.sh checks it),
 *   - `braid doctor`'s list of them;
 * and tests/unit/test_ncclib_env checks it against the aliases of plugin/params.h.
 */
#ifndef BRAID_NCCLIB_ENV_H
#define BRAID_NCCLIB_ENV_H

#include <stddef.h>

enum braid_ncclib_how {
	BRAID_NCCLIB_HONOURED, /* read, with NCCL's meaning */
	BRAID_NCCLIB_COVERED,  /* not read: braid does the same job its own way (INFO) */
	BRAID_NCCLIB_IGNORED,  /* not read; a job behaves the same without it (INFO) */
	BRAID_NCCLIB_WARN,     /* not read, and ignoring it changes behaviour (WARN) */
};

struct braid_ncclib_var {
	const char *name;         /* NCCL_IB_... */
	const char *nccl_default; /* as NCCL writes it */
	const char *meaning;      /* NCCL's meaning, in brief */
	enum braid_ncclib_how how;
	const char *braid;  /* HONOURED: the BRAID_* knob that reads it, or the file that does;
			     * otherwise what braid does instead */
	const char *source; /* file:line in NVIDIA/nccl v2.30.7 src/transport/net_ib/ */
};

const struct braid_ncclib_var *braid_ncclib_vars(size_t *n);
const char *braid_ncclib_how_name(enum braid_ncclib_how how);

/* One INFO (or WARN) line for each variable of the table that is set in the environment
 * and that braid does not honour. Returns how many it reported. */
int braid_ncclib_report(void);

#endif
