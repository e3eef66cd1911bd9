/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPUDirect peer memory, by NCCL's rule (ncclIbGdrSupport): one of the kernel's peer
 * memory files exists. One list for net_ib (under BRAID_FSROOT) and `braid doctor`
 * (under --root). A module directory without its version file does not count.
 */
#ifndef BRAID_PEERMEM_H
#define BRAID_PEERMEM_H

#define BRAID_PEERMEM_NFILES 3
extern const char *const braid_peermem_files[BRAID_PEERMEM_NFILES];

/* The first of braid_peermem_files that exists under root ("" for the real root), or
 * NULL when none does (or root + file does not fit a path). */
const char *braid_peermem_file(const char *root);

#endif
