// SPDX-License-Identifier: Apache-2.0
/*
 * Warnings (what a user should act on) and notes (what braid could not see). Texts are
 * one line: the problem, then what to do. Their order is fixed (no RDMA, GPUs, NICs,
 * rails), so that tests and users can compare outputs.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_int.h"

#define LIST_MAX 4 /* names listed in one line before "..." */

static char *vformat(const char *fmt, va_list ap)
{
	char *s = NULL;

	if (vasprintf(&s, fmt, ap) < 0)
		return NULL;
	return s;
}

int braid_topo_add_note(struct braid_topo *t, const char *fmt, ...)
{
	char **arr;
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = vformat(fmt, ap);
	va_end(ap);
	arr = s ? realloc(t->notes, (size_t)(t->nnotes + 1) * sizeof(*arr)) : NULL;
	if (!arr) {
		free(s);
		return -ENOMEM;
	}
	t->notes = arr;
	t->notes[t->nnotes++] = s;
	return 0;
}

int braid_topo_add_warning(struct braid_topo *t, enum braid_topo_warn_code code, int gpu, int nic,
			   int rail, const char *fmt, ...)
{
	struct braid_topo_warn_rec *arr;
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = vformat(fmt, ap);
	va_end(ap);
	arr = s ? realloc(t->warns, (size_t)(t->nwarns + 1) * sizeof(*arr)) : NULL;
	if (!arr) {
		free(s);
		return -ENOMEM;
	}
	t->warns = arr;
	t->warns[t->nwarns++] = (struct braid_topo_warn_rec){ code, gpu, nic, rail, s };
	return 0;
}

/* Append name to a "a, b, c, ..." list of at most LIST_MAX names. */
static void list_add(char *buf, size_t len, int *count, const char *name)
{
	size_t used = strlen(buf);

	if (*count < LIST_MAX)
		snprintf(buf + used, len - used, "%s%s", *count ? ", " : "", name);
	else if (*count == LIST_MAX)
		snprintf(buf + used, len - used, ", ...");
	(*count)++;
}

static void gpu_label(const struct braid_topo_gpu_info *g, char *buf, size_t len)
{
	if (g->bus_id[0] && g->osdev[0])
		snprintf(buf, len, "GPU %s (%s)", g->bus_id, g->osdev);
	else
		snprintf(buf, len, "GPU %s", g->bus_id[0] ? g->bus_id : g->osdev);
}

static void numa_label(int numa, char *buf, size_t len)
{
	if (numa >= 0)
		snprintf(buf, len, "NUMA node %d", numa);
	else
		snprintf(buf, len, "unknown NUMA node");
}

static int any_rdma(const struct braid_topo *t)
{
	for (int n = 0; n < t->nnics; n++)
		if (t->nics[n].info.rdma)
			return 1;
	return 0;
}

static int warn_no_rdma(struct braid_topo *t)
{
	char names[256] = "";
	int n, count = 0;

	if (!t->nnics)
		return braid_topo_add_warning(
			t, BRAID_TOPO_WARN_NO_RDMA, -1, -1, -1,
			"no NIC found at all: braid has nothing to send through; check that the "
			"NIC drivers are loaded (`ip link`, `ibv_devices`)");
	for (n = 0; n < t->nnics; n++)
		list_add(names, sizeof(names), &count, t->nics[n].info.name);
	return braid_topo_add_warning(
		t, BRAID_TOPO_WARN_NO_RDMA, -1, -1, -1,
		"no RDMA NIC (verbs or EFA) found, only network interfaces (%s): braid can only "
		"use TCP; install rdma-core and load the NIC's RDMA driver (mlx5_ib, efa)",
		names);
}

/* A GPU whose nearest candidate NIC is SYS-distant. */
static int warn_gpu_sys(struct braid_topo *t, int g, int rdma)
{
	const struct braid_topo_gpu_info *gi = &t->gpus[g].info;
	char label[64], names[256] = "", gnuma[32], nnuma[32];
	int n, count = 0, best = -1, virt = 0;

	for (n = 0; n < t->nnics; n++) {
		const struct braid_topo_link *l = braid_topo_link_at(t, g, n);

		if (rdma && !t->nics[n].info.rdma)
			continue;
		if (l->path != BRAID_TOPO_PATH_SYS)
			return 0; /* something nearer exists */
		if (best < 0 ||
		    (l->distance >= 0 && (braid_topo_link_at(t, g, best)->distance < 0 ||
					  l->distance < braid_topo_link_at(t, g, best)->distance)))
			best = n;
	}
	if (best < 0)
		return 0;
	for (n = 0; n < t->nnics; n++) {
		const struct braid_topo_link *l = braid_topo_link_at(t, g, n);

		if ((rdma && !t->nics[n].info.rdma) ||
		    l->distance != braid_topo_link_at(t, g, best)->distance)
			continue;
		list_add(names, sizeof(names), &count, t->nics[n].info.name);
		virt |= !t->nics[n].info.bus_id[0];
	}
	gpu_label(gi, label, sizeof(label));
	numa_label(gi->numa_node, gnuma, sizeof(gnuma));
	numa_label(t->nics[best].info.numa_node, nnuma, sizeof(nnuma));
	if (virt || !gi->bus_id[0])
		return braid_topo_add_warning(
			t, BRAID_TOPO_WARN_GPU_SYS, g, best, gi->rail,
			"%s: nearest NIC %s has no known place on PCI, so its traffic "
			"may cross CPU sockets; give it a PCI NIC on its own socket",
			label, names);
	return braid_topo_add_warning(
		t, BRAID_TOPO_WARN_GPU_SYS, g, best, gi->rail,
		"%s on %s: nearest NIC%s %s %s SYS-distant (%s), so its traffic crosses the "
		"CPU interconnect at up to half line rate; put a NIC on the GPU's socket or "
		"move the GPU next to one",
		label, gnuma, count > 1 ? "s" : "", names, count > 1 ? "are" : "is", nnuma);
}

/* An RDMA NIC that every GPU reaches only across sockets. */
static int warn_nic_far(struct braid_topo *t, int n)
{
	const struct braid_topo_nic_info *ni = &t->nics[n].info;
	char numa[32];
	int g;

	if (!ni->rdma)
		return 0;
	for (g = 0; g < t->ngpus; g++)
		if (braid_topo_link_at(t, g, n)->path != BRAID_TOPO_PATH_SYS)
			return 0;
	if (!ni->bus_id[0])
		return braid_topo_add_warning(
			t, BRAID_TOPO_WARN_NIC_FAR, -1, n, ni->rail,
			"NIC %s has no PCI device, so no GPU is known to be near it; prefer PCI "
			"NICs next to the GPUs for GPU traffic",
			ni->name);
	numa_label(ni->numa_node, numa, sizeof(numa));
	return braid_topo_add_warning(
		t, BRAID_TOPO_WARN_NIC_FAR, -1, n, ni->rail,
		"NIC %s (%s, %s) is not near any GPU (all SYS-distant): GPU traffic through it "
		"crosses the CPU interconnect; move it to a PCIe slot on a GPU's socket",
		ni->name, ni->bus_id, numa);
}

static int warn_mixed_speed(struct braid_topo *t, int r)
{
	double lo = 0, hi = 0;
	char list[512] = "";
	int n, count = 0;

	for (n = 0; n < t->nnics; n++) {
		const struct braid_topo_nic_info *ni = &t->nics[n].info;
		char item[96];

		if (ni->rail != r || ni->link_gbytes <= 0)
			continue;
		if (!count || ni->link_gbytes < lo)
			lo = ni->link_gbytes;
		if (!count || ni->link_gbytes > hi)
			hi = ni->link_gbytes;
		snprintf(item, sizeof(item), "%s %.1f GB/s", ni->name, ni->link_gbytes);
		list_add(list, sizeof(list), &count, item);
	}
	/* hwloc's speeds are exact per PCIe generation and width; 1% absorbs rounding. */
	if (count < 2 || hi <= lo * 1.01)
		return 0;
	return braid_topo_add_warning(
		t, BRAID_TOPO_WARN_MIXED_SPEED, -1, -1, r,
		"rail %d mixes NIC PCIe link speeds (%s): striping runs at the slowest NIC's "
		"pace; use NICs of one model and slot width in a rail, or check `lspci -vv` "
		"LnkSta for a link that trained down",
		r, list);
}

static int add_notes(struct braid_topo *t)
{
	char names[256] = "";
	int i, count = 0, rc = 0, speeds = 0, pcidevs = 0;

	if (!t->npcidev)
		rc = braid_topo_add_note(
			t, "hwloc saw no PCI devices (a VM or container "
			   "without PCI in sysfs?): bus ids, PCI paths, link speeds and path types "
			   "are unknown");
	if (!rc && !t->ngpus)
		rc = braid_topo_add_note(t, "no GPU found (no NVIDIA PCI display or 3D "
					    "controller, no CUDA or NVML device): no rails");
	if (!rc && t->ngpus && t->gpus[0].info.cuda_index_guessed)
		rc = braid_topo_add_note(t,
					 "no CUDA or NVML devices in the topology (hwloc "
					 "without its CUDA/NVML plugins): CUDA indexes assume PCI bus order "
					 "(CUDA_DEVICE_ORDER=PCI_BUS_ID)");
	for (i = 0; i < t->ngpus; i++)
		if (t->gpus[i].info.cuda_index < 0)
			list_add(names, sizeof(names), &count, t->gpus[i].info.bus_id);
	if (!rc && count)
		rc = braid_topo_add_note(t,
					 "%d GPU%s without a CUDA or NVML device (%s): "
					 "CUDA index unknown",
					 count, count > 1 ? "s" : "", names);
	names[0] = '\0';
	count = 0;
	for (i = 0; i < t->nnics; i++) {
		if (!t->nics[i].info.bus_id[0])
			list_add(names, sizeof(names), &count, t->nics[i].info.name);
		else
			pcidevs++, speeds += t->nics[i].info.link_gbytes > 0;
	}
	if (!rc && count)
		rc = braid_topo_add_note(t,
					 "%d NIC%s without a PCI device (%s): virtual or "
					 "unplaced, NUMA node and distance to GPUs unknown",
					 count, count > 1 ? "s" : "", names);
	for (i = 0; i < t->ngpus; i++)
		if (t->gpus[i].info.bus_id[0])
			pcidevs++, speeds += t->gpus[i].info.link_gbytes > 0;
	if (!rc && pcidevs && !speeds)
		rc = braid_topo_add_note(t, "the topology has no PCIe link speeds: link speeds "
					    "unknown, mixed-speed rails cannot be detected");
	return rc;
}

int braid_topo_build_warnings(struct braid_topo *t)
{
	int rdma = any_rdma(t), i, rc = 0;

	if (!rdma)
		rc = warn_no_rdma(t);
	for (i = 0; !rc && t->nnics && i < t->ngpus; i++)
		rc = warn_gpu_sys(t, i, rdma);
	for (i = 0; !rc && t->ngpus && i < t->nnics; i++)
		rc = warn_nic_far(t, i);
	for (i = 0; !rc && i < t->nrails; i++)
		rc = warn_mixed_speed(t, i);
	return rc ? rc : add_notes(t);
}
