/* SPDX-License-Identifier: Apache-2.0 */
/*
 * braid topology: which NICs and GPUs this machine has, where they sit on PCIe and
 * which NICs each GPU should use (its rail group). Built once from hwloc, then
 * read-only: every query below is a lookup in plain arrays, safe to call from any
 * thread once braid_topo_load() has returned.
 *
 * Nothing here prints. Failures come back as negative errno values or NULL plus a
 * one-line reason; what a user should act on comes back as warnings (text without the
 * "WARNING:" prefix, which the caller adds), what braid could not see as notes.
 *
 * The rules (path types, distances, rails) are in docs/topology.md.
 */
#ifndef BRAID_TOPO_H
#define BRAID_TOPO_H

#include <stddef.h>

struct braid_topo;

/* Load a topology with I/O devices: from xml_file if non-NULL, else $HWLOC_XMLFILE if set,
 * else this machine. On failure return NULL and write a one-line reason into err. */
struct braid_topo *braid_topo_load(const char *xml_file, char *err, size_t errlen);
void braid_topo_free(struct braid_topo *topo);

struct braid_topo_nic_place {
	char bus_id[16];    /* "0000:17:00.0", "" when the NIC has no PCI device (virtual) */
	char pci_path[256]; /* realpath of the NIC's sysfs PCI device when it exists on this
	                        machine, else a path synthesized from the hwloc PCI ancestry
	                        ("/sys/devices/pci0000:10/0000:10:01.0/0000:17:00.0"), "" if none */
	int numa_node;      /* -1 when unknown */
	int rail;           /* rail group index (see braid_topo_rail_*), -1 when none */
};

/* Find a NIC by OS device name ("mlx5_0", "efa_0", "rdmap16s27", "eth0", "ib0") or by PCI
 * bus id ("0000:17:00.0"). A libfabric domain name ("rdmap16s27-rdm", "efa_0-dgrm") finds
 * its device. Returns 0 and fills *out, or -ENOENT (-EINVAL for NULL arguments). */
int braid_topo_nic_place(const struct braid_topo *topo, const char *name,
			 struct braid_topo_nic_place *out);

/* ---- Rails: disjoint groups of NICs; each GPU maps to at most one group. ---- */

/* Number of rail groups (0 without GPUs or without NICs). */
int braid_topo_rail_count(const struct braid_topo *topo);

/* The NICs of rail `rail`, in NIC order: stores up to max names (valid until
 * braid_topo_free) and returns how many NICs the rail has (may exceed max),
 * or -ENOENT for a rail that does not exist. */
int braid_topo_rail_nics(const struct braid_topo *topo, int rail, const char **names, int max);

/* Rail group of a NIC (same lookup as braid_topo_nic_place): index >= 0, -1 when the NIC
 * is in no group, -ENOENT when there is no such NIC. */
int braid_topo_nic_rail(const struct braid_topo *topo, const char *name);

/* Rail group of a GPU given by PCI bus id ("0000:17:00.0"; "17:00.0" means domain 0,
 * case-insensitive): index >= 0, -1 when the GPU has no rail (no NIC), -ENOENT when
 * there is no such GPU. */
int braid_topo_gpu_rail(const struct braid_topo *topo, const char *bus_id);

/* The same by CUDA device index (see braid_topo_gpu_info.cuda_index). */
int braid_topo_cuda_rail(const struct braid_topo *topo, int cuda_index);

/* ---- Enumeration, for `braid topo` and for logs. ---- */

enum braid_topo_nic_kind {
	BRAID_TOPO_NIC_VERBS,  /* an RDMA verbs device (mlx5_0, rxe0, ...) */
	BRAID_TOPO_NIC_EFA,    /* an AWS EFA device (efa_0, rdmap16s27) */
	BRAID_TOPO_NIC_NETDEV, /* a network interface only (eth0): TCP */
};

/* How a GPU reaches a NIC, best first (NCCL's names). See docs/topology.md. */
enum braid_topo_path {
	BRAID_TOPO_PATH_PIX = 1, /* at most one PCIe switch (or bridge) between them */
	BRAID_TOPO_PATH_PXB,     /* several PCIe switches, not the CPU's host bridge */
	BRAID_TOPO_PATH_PHB,     /* through the CPU's PCIe host bridge */
	BRAID_TOPO_PATH_NODE,    /* across host bridges within one NUMA node */
	BRAID_TOPO_PATH_SYS,     /* across NUMA nodes / sockets, or locality unknown */
};

const char *braid_topo_path_name(enum braid_topo_path path);      /* "PIX", ... "?" */
const char *braid_topo_nic_kind_name(enum braid_topo_nic_kind k); /* "verbs", "EFA", "netdev" */

struct braid_topo_gpu_info {
	char bus_id[16];        /* "0000:17:00.0" */
	char osdev[32];         /* "cuda0" / "nvml0" when hwloc saw one, else "" */
	char model[96];         /* PCI device name from the topology, "" if unknown */
	int cuda_index;         /* from a cudaN/nvmlN OS device; when no GPU has one, the position
	                        in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID); -1 unknown */
	int cuda_index_guessed; /* 1 when cuda_index is the PCI-order position */
	double link_gbytes;     /* PCIe link speed in GB/s as hwloc reports it, 0 unknown */
	int numa_node;          /* -1 when unknown */
	int rail;               /* -1 when none */
};

struct braid_topo_nic_info {
	char name[64];   /* verbs/EFA device name, else the network interface name */
	char netdev[64]; /* the interface of a verbs device ("ib0"), "" if none */
	char model[96];  /* PCI device name from the topology, "" if unknown */
	enum braid_topo_nic_kind kind;
	int rdma;           /* 1 for verbs and EFA */
	char bus_id[16];    /* "" when virtual */
	char pci_path[256]; /* as in braid_topo_nic_place */
	double link_gbytes; /* PCIe link speed in GB/s, 0 unknown */
	int numa_node;      /* -1 when unknown */
	int rail;           /* -1 when none */
};

/* Counts and the i-th entry (0 <= i < count; GPUs and NICs are sorted by PCI bus id,
 * NICs without PCI last by name). info functions return 0 or -ENOENT. */
int braid_topo_gpu_count(const struct braid_topo *topo);
int braid_topo_nic_count(const struct braid_topo *topo);
int braid_topo_gpu_info(const struct braid_topo *topo, int gpu, struct braid_topo_gpu_info *out);
int braid_topo_nic_info(const struct braid_topo *topo, int nic, struct braid_topo_nic_info *out);

/* Path type and distance from GPU index to NIC index. The distance counts the links
 * between the two devices in hwloc's tree (each bridge, host bridge and CPU package
 * crossed adds to it); -1 when the NIC has no PCI device. Returns 0 or -ENOENT. */
int braid_topo_path(const struct braid_topo *topo, int gpu, int nic, enum braid_topo_path *path,
		    int *distance);

/* What a user should act on. */
enum braid_topo_warn_code {
	BRAID_TOPO_WARN_GPU_SYS = 1, /* a GPU's nearest NIC is SYS-distant */
	BRAID_TOPO_WARN_NIC_FAR,     /* an RDMA NIC that no GPU is near (all SYS) */
	BRAID_TOPO_WARN_MIXED_SPEED, /* NICs of one rail with different link speeds */
	BRAID_TOPO_WARN_NO_RDMA,     /* no verbs or EFA device at all */
};

struct braid_topo_warning {
	enum braid_topo_warn_code code;
	int gpu;          /* GPU index it is about, -1 if none */
	int nic;          /* NIC index it is about, -1 if none */
	int rail;         /* rail it is about, -1 if none */
	const char *text; /* one line: the problem, then what to do */
};

int braid_topo_warning_count(const struct braid_topo *topo);
int braid_topo_warning(const struct braid_topo *topo, int i, struct braid_topo_warning *out);

/* What braid could not see (no PCI, no GPU, virtual NICs, ...): one line each. */
int braid_topo_note_count(const struct braid_topo *topo);
const char *braid_topo_note(const struct braid_topo *topo, int i);

/* Where the topology came from: "this machine" or the XML file name. */
const char *braid_topo_source(const struct braid_topo *topo);

#endif /* BRAID_TOPO_H */
