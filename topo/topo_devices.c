// SPDX-License-Identifier: Apache-2.0
/*
 * Device discovery from hwloc: GPUs are NVIDIA PCI display/3D controllers plus any PCI
 * device carrying a CUDA or NVML OS device; NICs are OpenFabrics OS devices (verbs, EFA)
 * and network interfaces. A network interface on the PCI device of a verbs device is not a
 * NIC of its own (ib0 is mlx5_0's netdev), so each NIC is one PCI function.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "topo/topo_int.h"

#define PCI_VENDOR_NVIDIA 0x10de
#define PCI_VENDOR_AMAZON 0x1d0f
#define PCI_CLASS_VGA 0x0300
#define PCI_CLASS_3D 0x0302
/* A malformed topology could nest without end; no real PCI tree is this deep. */
#define MAX_PCI_DEPTH 64

static void format_bus_id(hwloc_obj_t pci, char out[16])
{
	const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;

	snprintf(out, 16, "%04x:%02x:%02x.%01x", (unsigned)a->domain & 0xffff, (unsigned)a->bus,
		 (unsigned)a->dev & 0x1f, (unsigned)a->func & 0x7);
}

static void copy_str(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

/* NUMA node of an I/O object: that of its first CPU-side ancestor, when it is exactly one. */
static int numa_of(hwloc_topology_t h, hwloc_obj_t obj)
{
	hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(h, obj);

	if (!a || !a->nodeset || hwloc_bitmap_weight(a->nodeset) != 1)
		return -1;
	return hwloc_bitmap_first(a->nodeset);
}

/* The PCI device an OS device hangs under, NULL when it has none (virtual). */
static hwloc_obj_t pci_parent(hwloc_obj_t obj)
{
	int n = 0;

	for (obj = obj->parent; obj && n < MAX_PCI_DEPTH; obj = obj->parent, n++) {
		if (obj->type == HWLOC_OBJ_PCI_DEVICE)
			return obj;
		if (obj->type != HWLOC_OBJ_OS_DEVICE && obj->type != HWLOC_OBJ_BRIDGE)
			return NULL;
	}
	return NULL;
}

/*
 * /sys/devices/pci<domain>:<bus>/<bridge>/.../<device>, as Linux lays it out: the root
 * is named after the host bridge's bus, then one component per PCI bridge or device.
 */
static void synth_pci_path(hwloc_obj_t pci, char *out, size_t len)
{
	hwloc_obj_t chain[MAX_PCI_DEPTH], o;
	unsigned dom, bus;
	size_t used;
	int n = 0, i;

	out[0] = '\0';
	for (o = pci; o && n < MAX_PCI_DEPTH; o = o->parent) {
		if (o->type == HWLOC_OBJ_PCI_DEVICE ||
		    (o->type == HWLOC_OBJ_BRIDGE &&
		     o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI))
			chain[n++] = o;
		else
			break;
	}
	if (!n)
		return;
	if (o && o->type == HWLOC_OBJ_BRIDGE &&
	    o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST &&
	    o->attr->bridge.downstream_type == HWLOC_OBJ_BRIDGE_PCI) {
		dom = o->attr->bridge.downstream.pci.domain;
		bus = o->attr->bridge.downstream.pci.secondary_bus;
	} else {
		dom = chain[n - 1]->attr->pcidev.domain;
		bus = chain[n - 1]->attr->pcidev.bus;
	}
	used = (size_t)snprintf(out, len, "/sys/devices/pci%04x:%02x", dom & 0xffff, bus & 0xff);
	for (i = n - 1; i >= 0 && used < len; i--) {
		char id[16];

		format_bus_id(chain[i], id);
		used += (size_t)snprintf(out + used, len - used, "/%s", id);
	}
	if (used >= len)
		out[0] = '\0'; /* a truncated path would point at the wrong device */
}

static void pci_path_of(const struct braid_topo *t, hwloc_obj_t pci, const char *bus_id, char *out,
			size_t len)
{
	char sys[64], real[PATH_MAX];

	if (t->thissystem) {
		snprintf(sys, sizeof(sys), "/sys/bus/pci/devices/%s", bus_id);
		if (realpath(sys, real) && strlen(real) < len) {
			copy_str(out, len, real);
			return;
		}
	}
	synth_pci_path(pci, out, len);
}

static double link_speed(hwloc_obj_t pci)
{
	float s = pci->attr->pcidev.linkspeed;

	return s > 0 && s < 1e6 ? (double)s : 0; /* ignore nonsense from a hand-made XML */
}

static int is_nvidia_gpu(hwloc_obj_t pci)
{
	const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;

	return a->vendor_id == PCI_VENDOR_NVIDIA &&
	       (a->class_id == PCI_CLASS_3D || a->class_id == PCI_CLASS_VGA);
}

/* cudaN (CUDA, CoProc) and nvmlN (NVML, GPU) OS devices name NVIDIA GPUs. */
static int gpu_osdev_index(hwloc_obj_t os, int *is_cuda)
{
	const char *n = os->name ? os->name : "";
	char *end;
	long v;

	if (!strncmp(n, "cuda", 4) && os->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC)
		*is_cuda = 1;
	else if (!strncmp(n, "nvml", 4) && os->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU)
		*is_cuda = 0;
	else
		return -1;
	errno = 0;
	v = strtol(n + 4, &end, 10);
	if (end == n + 4 || *end || errno || v < 0 || v > INT_MAX)
		return -1;
	return (int)v;
}

/* Room for one more element. Device counts are small: a realloc each is fine. */
static void *grow(void *arr, int n, size_t elem)
{
	return realloc(arr, (size_t)(n + 1) * elem);
}

static struct braid_topo_gpu_rec *add_gpu(struct braid_topo *t, hwloc_topology_t h, hwloc_obj_t pci)
{
	struct braid_topo_gpu_rec *g, *arr = grow(t->gpus, t->ngpus, sizeof(*g));

	if (!arr)
		return NULL;
	t->gpus = arr;
	g = &arr[t->ngpus++];
	memset(g, 0, sizeof(*g));
	g->pci = pci;
	g->info.cuda_index = -1;
	g->info.rail = -1;
	g->info.numa_node = -1;
	if (pci) {
		format_bus_id(pci, g->info.bus_id);
		copy_str(g->info.model, sizeof(g->info.model),
			 hwloc_obj_get_info_by_name(pci, "PCIDevice"));
		g->info.link_gbytes = link_speed(pci);
		g->info.numa_node = numa_of(h, pci);
	}
	return g;
}

static struct braid_topo_gpu_rec *gpu_by_pci(struct braid_topo *t, hwloc_obj_t pci)
{
	int i;

	for (i = 0; i < t->ngpus; i++)
		if (t->gpus[i].pci == pci)
			return &t->gpus[i];
	return NULL;
}

static struct braid_topo_nic_rec *add_nic(struct braid_topo *t, hwloc_topology_t h, hwloc_obj_t os,
					  hwloc_obj_t pci, enum braid_topo_nic_kind kind)
{
	struct braid_topo_nic_rec *n, *arr = grow(t->nics, t->nnics, sizeof(*n));

	if (!arr)
		return NULL;
	t->nics = arr;
	n = &arr[t->nnics++];
	memset(n, 0, sizeof(*n));
	n->pci = pci;
	copy_str(n->info.name, sizeof(n->info.name), os->name);
	n->info.kind = kind;
	n->info.rdma = kind != BRAID_TOPO_NIC_NETDEV;
	n->info.rail = -1;
	n->info.numa_node = pci ? numa_of(h, pci) : numa_of(h, os);
	if (pci) {
		format_bus_id(pci, n->info.bus_id);
		pci_path_of(t, pci, n->info.bus_id, n->info.pci_path, sizeof(n->info.pci_path));
		copy_str(n->info.model, sizeof(n->info.model),
			 hwloc_obj_get_info_by_name(pci, "PCIDevice"));
		n->info.link_gbytes = link_speed(pci);
	} else {
		/* Attached to the CPU side only by hwloc's guess: NUMA is not known. */
		n->info.numa_node = -1;
	}
	return n;
}

static struct braid_topo_nic_rec *nic_by_pci(struct braid_topo *t, hwloc_obj_t pci)
{
	int i;

	if (!pci)
		return NULL;
	for (i = 0; i < t->nnics; i++)
		if (t->nics[i].pci == pci)
			return &t->nics[i];
	return NULL;
}

static void add_alias(struct braid_topo_nic_rec *n, const char *name)
{
	if (!name || !*name)
		return;
	if (!n->info.netdev[0] && n->info.kind != BRAID_TOPO_NIC_NETDEV) {
		copy_str(n->info.netdev, sizeof(n->info.netdev), name);
		return;
	}
	if (n->naliases < BRAID_TOPO_MAX_ALIASES)
		copy_str(n->aliases[n->naliases++], sizeof(n->aliases[0]), name);
}

static int scan_gpus(struct braid_topo *t, hwloc_topology_t h)
{
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_pcidev(h, o))) {
		t->npcidev++;
		if (is_nvidia_gpu(o) && !add_gpu(t, h, o))
			return -ENOMEM;
	}
	o = NULL;
	while ((o = hwloc_get_next_osdev(h, o))) {
		struct braid_topo_gpu_rec *g;
		hwloc_obj_t pci;
		int idx, is_cuda;

		idx = gpu_osdev_index(o, &is_cuda);
		if (idx < 0)
			continue;
		pci = pci_parent(o);
		g = pci ? gpu_by_pci(t, pci) : NULL;
		if (!g)
			g = add_gpu(t, h, pci);
		if (!g)
			return -ENOMEM;
		if (!pci)
			g->info.numa_node = numa_of(h, o);
		/* CUDA's numbering is what users and NCCL see; NVML's only without CUDA. */
		if (g->info.cuda_index < 0 || (is_cuda && strncmp(g->info.osdev, "cuda", 4))) {
			g->info.cuda_index = idx;
			copy_str(g->info.osdev, sizeof(g->info.osdev), o->name);
		}
	}
	return 0;
}

static enum braid_topo_nic_kind ofa_kind(hwloc_obj_t os, hwloc_obj_t pci)
{
	if (pci && pci->attr->pcidev.vendor_id == PCI_VENDOR_AMAZON)
		return BRAID_TOPO_NIC_EFA;
	if (os->name && !strncmp(os->name, "efa", 3))
		return BRAID_TOPO_NIC_EFA;
	return BRAID_TOPO_NIC_VERBS;
}

static int scan_nics(struct braid_topo *t, hwloc_topology_t h)
{
	hwloc_obj_t o = NULL;

	/* Verbs and EFA devices first, so that network interfaces can join them. */
	while ((o = hwloc_get_next_osdev(h, o))) {
		hwloc_obj_t pci;

		if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || !o->name || !*o->name)
			continue;
		pci = pci_parent(o);
		if (!add_nic(t, h, o, pci, ofa_kind(o, pci)))
			return -ENOMEM;
	}
	o = NULL;
	while ((o = hwloc_get_next_osdev(h, o))) {
		struct braid_topo_nic_rec *n;
		hwloc_obj_t pci;

		if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK || !o->name || !*o->name ||
		    !strcmp(o->name, "lo"))
			continue;
		pci = pci_parent(o);
		n = nic_by_pci(t, pci);
		if (n)
			add_alias(n, o->name);
		else if (!add_nic(t, h, o, pci, BRAID_TOPO_NIC_NETDEV))
			return -ENOMEM;
	}
	return 0;
}

int braid_topo_scan_devices(struct braid_topo *t, hwloc_topology_t h)
{
	int rc = scan_gpus(t, h);

	return rc ? rc : scan_nics(t, h);
}

/* Bus ids are zero-padded lower-case hex, so strcmp orders them; no bus id goes last. */
static int cmp_key(const char *bus_a, const char *name_a, const char *bus_b, const char *name_b)
{
	int c;

	if (!*bus_a != !*bus_b)
		return *bus_a ? -1 : 1;
	c = strcmp(bus_a, bus_b);
	return c ? c : strcmp(name_a, name_b);
}

static int cmp_gpu(const void *a, const void *b)
{
	const struct braid_topo_gpu_rec *x = a, *y = b;

	return cmp_key(x->info.bus_id, x->info.osdev, y->info.bus_id, y->info.osdev);
}

static int cmp_nic(const void *a, const void *b)
{
	const struct braid_topo_nic_rec *x = a, *y = b;

	return cmp_key(x->info.bus_id, x->info.name, y->info.bus_id, y->info.name);
}

void braid_topo_sort(struct braid_topo *t)
{
	int i, any_cuda = 0;

	if (t->ngpus)
		qsort(t->gpus, (size_t)t->ngpus, sizeof(*t->gpus), cmp_gpu);
	if (t->nnics)
		qsort(t->nics, (size_t)t->nnics, sizeof(*t->nics), cmp_nic);
	for (i = 0; i < t->ngpus; i++)
		any_cuda |= t->gpus[i].info.cuda_index >= 0;
	/* Without CUDA/NVML devices, assume CUDA_DEVICE_ORDER=PCI_BUS_ID numbering. */
	if (!any_cuda) {
		for (i = 0; i < t->ngpus; i++) {
			t->gpus[i].info.cuda_index = i;
			t->gpus[i].info.cuda_index_guessed = 1;
		}
	}
}
