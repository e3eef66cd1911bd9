/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The devices braid shows NCCL. Each is a set of 1 to BRAID_VDEV_MAX_NICS of the
 * backend's physical devices (NICs, or ports of a NIC). One NIC each unless
 * BRAID_MERGE fuses them at init, and NCCL (v9+) may fuse more with makeVDevice.
 * A comm on a fused device holds one connection per NIC and stripes over them
 * (plugin/stripe.c). Rules and defaults: docs/multirail.md.
 */
#ifndef BRAID_VDEV_H
#define BRAID_VDEV_H

#include <stddef.h>

#include "plugin/backend.h"

struct braid_topo;

/* Build the table from the physical devices' properties, BRAID_MERGE and the topology
 * (rails). api_version: the ncclNet version NCCL loaded (the default depends on it).
 * 0, or -1 with a WARN that says what is wrong with BRAID_MERGE. */
int braid_vdev_setup(const struct braid_dev_props *phys, int nphys, const struct braid_topo *topo,
		     int api_version, int max_nics);
void braid_vdev_teardown(void);

/* Devices NCCL may use: those made at init; makeVDevice adds more after them. */
int braid_vdev_initial_count(void);
int braid_vdev_count(void);
/* NULL when d is not a device. Entries never change once made. */
const struct braid_vdev *braid_vdev_get(int d);
const struct braid_dev_props *braid_vdev_props(int d);

/* makeVDevice: fuse the NICs of the listed devices into a new device. */
ncclResult_t braid_vdev_make(int *d, int ndevs, const int *devs);

/* The properties of a fused device, from its NICs' (exposed for tests). */
void braid_vdev_merge_props(const struct braid_dev_props *const *nics, int n,
			    struct braid_dev_props *out);

/* Parse a BRAID_MERGE list ("a+b,c+d"); 0 with groups filled, or -1 with why. Names are
 * physical device names, optionally with ":port". Exposed for tests. */
int braid_vdev_parse_list(const char *text, const struct braid_dev_props *phys, int nphys,
			  struct braid_vdev *groups, int max, int *ngroups, char *why,
			  size_t whylen);

#endif
