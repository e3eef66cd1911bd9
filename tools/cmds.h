/* SPDX-License-Identifier: Apache-2.0 */
/* The braid command's subcommands, one file each, and what they share. */
#ifndef BRAID_TOOLS_CMDS_H
#define BRAID_TOOLS_CMDS_H

#include <stddef.h>

/* From the VERSION file at the top of the tree, through the Makefile (-DBRAID_VERSION):
 * the one place that `braid version`, the .deb and the .rpm take it from. */
#ifndef BRAID_VERSION
#error "BRAID_VERSION is defined by the Makefile from the VERSION file"
#endif

/* Each takes argv[0] = its own name ("perf"), returns the process exit status. */
int braid_cmd_version(int argc, char **argv);
int braid_cmd_perf(int argc, char **argv);
int braid_cmd_topo(int argc, char **argv);
int braid_cmd_stat(int argc, char **argv);
int braid_cmd_doctor(int argc, char **argv);

/*
 * The plugin a tool loads when not told: libnccl-net-braid.so next to the braid binary,
 * else the name alone (found by the dynamic loader, as NCCL would with
 * NCCL_NET_PLUGIN=braid). Writes it into buf.
 */
void braid_default_plugin(char *buf, size_t len);
/* The running binary's path (/proc/self/exe), for re-executing itself. */
int braid_self_path(char *buf, size_t len);

#endif /* BRAID_TOOLS_CMDS_H */
