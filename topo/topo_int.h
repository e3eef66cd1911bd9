/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside of struct braid_topo, shared by the files of topo/ only. Loading runs in steps
 * (scan devices, classify paths, build rails, write warnings), each in its own file;
 * afterwards the hwloc topology is gone and everything lives in the arrays below.
 */
#ifndef BRAID_TOPO_INT_H
#define BRAID_TOPO_INT_H

#include <hwloc.h>
#include <stdarg.h>

#include "topo/topo.h"

#define BRAID_TOPO_MAX_ALIASES 4

struct braid_topo_nic_rec {
	struct braid_topo_nic_info info;
	/* More names that find this NIC: further network interfaces on its PCI device. */
	char aliases[BRAID_TOPO_MAX_ALIASES][64];
	int naliases;
	hwloc_obj_t pci; /* its PCI device while loading, NULL when virtual */
};

struct braid_topo_gpu_rec {
	struct braid_topo_gpu_info info;
	hwloc_obj_t pci; /* while loading; NULL for a CUDA device hwloc saw without PCI */
};

/* GPU-to-NIC link, row-major: links[gpu * nnics + nic]. */
struct braid_topo_link {
	enum braid_topo_path path;
	int distance; /* -1 unknown */
};

struct braid_topo_warn_rec {
	enum braid_topo_warn_code code;
	int gpu, nic, rail;
	char *text;
};

struct braid_topo {
	char source[256]; /* "this machine" or the XML file */
	int thissystem;   /* sysfs paths can be trusted */
	int npcidev;      /* PCI devices hwloc saw */
	int numa_nodes;   /* NUMA nodes in the topology */

	struct braid_topo_gpu_rec *gpus;
	int ngpus;
	struct braid_topo_nic_rec *nics;
	int nnics;
	struct braid_topo_link *links;
	int nrails;

	struct braid_topo_warn_rec *warns;
	int nwarns;
	char **notes;
	int nnotes;
};

/* topo_devices.c: find GPUs and NICs in hwloc, sorted, with bus ids, paths, NUMA. */
int braid_topo_scan_devices(struct braid_topo *t, hwloc_topology_t h);
/* topo_sysfs.c: add NICs hwloc does not list (virtual ones) from sysfs_root/class/. */
int braid_topo_scan_sysfs(struct braid_topo *t, const char *sysfs_root);
/* Sort GPUs and NICs into their documented order (bus id, virtual last). */
void braid_topo_sort(struct braid_topo *t);
/* topo_paths.c: fill t->links from the hwloc objects. */
int braid_topo_classify(struct braid_topo *t, hwloc_topology_t h);
/* topo_rails.c: set info.rail of every GPU and NIC, and t->nrails. */
int braid_topo_build_rails(struct braid_topo *t);
/* topo_warn.c: warnings and notes. */
int braid_topo_build_warnings(struct braid_topo *t);

__attribute__((format(printf, 2, 3))) int braid_topo_add_note(struct braid_topo *t, const char *fmt,
							      ...);
__attribute__((format(printf, 6, 7))) int braid_topo_add_warning(struct braid_topo *t,
								 enum braid_topo_warn_code code,
								 int gpu, int nic, int rail,
								 const char *fmt, ...);

/* NIC record by any of its names or bus id, NULL if none. */
const struct braid_topo_nic_rec *braid_topo_find_nic(const struct braid_topo *t, const char *name);
/* Normalize "17:00.0" / "0000:17:00.0" (any case) into out[16]; -EINVAL if not a bus id. */
int braid_topo_parse_bus_id(const char *s, char out[16]);

static inline const struct braid_topo_link *braid_topo_link_at(const struct braid_topo *t, int gpu,
							       int nic)
{
	return &t->links[(size_t)gpu * (size_t)t->nnics + (size_t)nic];
}

#endif /* BRAID_TOPO_INT_H */
