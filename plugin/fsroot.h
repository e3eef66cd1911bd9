/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host files (/sys, /proc) read under a root directory, BRAID_FSROOT (unset: the real
 * root), in the manner of hwloc's HWLOC_FSROOT. Tests describe a host by building a small
 * tree in a temporary directory; a support engineer can point braid at a copy of another
 * machine's files. Every read of a host file that decides what braid does goes through
 * here.
 */
#ifndef BRAID_FSROOT_H
#define BRAID_FSROOT_H

#include <stddef.h>

/* BRAID_FSROOT as set ("" for the real root), for messages. */
const char *braid_fsroot(void);

/* root + path into buf (path is absolute: "/sys/module/x"). 0, or -1 when it does not
 * fit (buf then holds ""). */
int braid_fsroot_path(char *buf, size_t len, const char *path);

/* 1 when path exists under the root (access F_OK), else 0. */
int braid_fsroot_exists(const char *path);

#endif
