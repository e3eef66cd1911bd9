// SPDX-License-Identifier: Apache-2.0
/*
 * `braid doctor`'s GPU checks, read from files under the root (tools/doctor.h):
 * GPUDirect (peermem, dma-buf); per GPU its nearest NIC (topo/), PCIe ACS on the switch
 * ports between them (config space), and the IOMMU mode of their groups. docs/doctor.md
 * has the rules.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin/peermem.h"
#include "tools/doctor.h"
#include "topo/topo.h"

/* Paths and messages here are built from names of bounded length into fixed buffers; a
 * cut path only fails to open, a cut message stays one line. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
/* ---- GPUDirect ---- */

static int kernel_at_least(struct doctor *d, int maj, int min)
{
	char rel[128];
	int a = 0, b = 0;

	if (doc_read(d, "/proc/sys/kernel/osrelease", rel, sizeof(rel)) ||
	    sscanf(rel, "%d.%d", &a, &b) != 2)
		return -1;
	return a > maj || (a == maj && b >= min);
}

static void check_gpudirect(struct doctor *d, int ngpu)
{
	const char *peermem;
	int kdmabuf;

	if (!ngpu && !doc_exists(d, "/sys/module/nvidia")) {
		doc_add(d, DOC_INFO, "gpudirect", NULL,
			"no NVIDIA driver (/sys/module/nvidia) and no GPU in the topology: skipped");
		return;
	}
	peermem = braid_peermem_file(d->root); /* the files net_ib checks (plugin/peermem.c) */
	if (peermem) {
		doc_add(d, DOC_PASS, "gpudirect", NULL,
			"peer memory: %s exists (GPUDirect RDMA through nvidia-peermem)", peermem);
		return;
	}
	kdmabuf = kernel_at_least(d, 5, 12);
	if (kdmabuf == 1 && d->verbs_dmabuf)
		doc_add(d, DOC_WARN, "gpudirect",
			"modprobe nvidia-peermem, or keep dma-buf (needs the open GPU kernel modules "
			"and CUDA 11.7+)",
			"no peer memory module (nvidia_peermem); GPUDirect RDMA only through dma-buf "
			"(kernel and libibverbs support it)");
	else
		doc_add(d, DOC_FAIL, "gpudirect",
			"modprobe nvidia-peermem (or a 5.12+ kernel and rdma-core with dma-buf)",
			"no peer memory module (nvidia_peermem) and no dma-buf (%s%s): GPU buffers are "
			"staged through host memory",
			kdmabuf == 1   ? "kernel 5.12+"
			: kdmabuf == 0 ? "kernel older than 5.12"
				       : "kernel version unknown",
			d->verbs_dmabuf ? "" : ", libibverbs without ibv_reg_dmabuf_mr");
}

/* ---- topology: GPU-NIC distance, ACS, IOMMU ---- */

/* The PCI path of a device under the root ("/sys/devices/pci0000:10/.../0000:13:00.0"):
 * the target of /sys/bus/pci/devices/BDF, else fallback. */
static void pci_path(struct doctor *d, const char *bdf, const char *fallback, char *buf, size_t len)
{
	char p[512], full[4096], real[PATH_MAX], rootreal[PATH_MAX] = "";

	buf[0] = '\0';
	snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s", bdf);
	if (!doc_path(d, full, sizeof(full), p) && realpath(full, real)) {
		size_t rl = 0;

		if (d->root[0] && realpath(d->root, rootreal))
			rl = strlen(rootreal);
		snprintf(buf, len, "%s", real + rl);
		return;
	}
	if (fallback)
		snprintf(buf, len, "%s", fallback);
}

/* Split a PCI path into its bus-id components. */
static int pci_components(const char *path, char comp[][16], int max)
{
	char tmp[512], *save = NULL, *tok;
	int n = 0;

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (tok = strtok_r(tmp, "/", &save); tok && n < max; tok = strtok_r(NULL, "/", &save)) {
		unsigned a, b, c, f;

		if (strlen(tok) == 12 && sscanf(tok, "%4x:%2x:%2x.%1x", &a, &b, &c, &f) == 4)
			snprintf(comp[n++], 16, "%s", tok);
	}
	return n;
}

/* ACS control of a PCI device from its config space under the root: the control
 * register (>= 0), -1 no ACS capability, -2 config space not readable past 256 bytes. */
static int acs_ctl(struct doctor *d, const char *bdf)
{
	char p[512], full[4096];
	unsigned char cfg[4096];
	size_t n;
	FILE *f;
	unsigned off = 0x100;

	snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s/config", bdf);
	if (doc_path(d, full, sizeof(full), p) || !(f = fopen(full, "rb")))
		return -2;
	n = fread(cfg, 1, sizeof(cfg), f);
	fclose(f);
	if (n <= 0x100)
		return -2;
	for (int hops = 0; off >= 0x100 && off + 8 <= n && hops < 64; hops++) {
		uint32_t h = (uint32_t)cfg[off] | (uint32_t)cfg[off + 1] << 8 |
			     (uint32_t)cfg[off + 2] << 16 | (uint32_t)cfg[off + 3] << 24;

		if ((h & 0xffff) == 0x000d)
			return cfg[off + 6] | cfg[off + 7] << 8;
		off = (h >> 20) & 0xffc;
		if (!off)
			break;
	}
	return -1;
}

static void check_acs(struct doctor *d, const struct braid_topo_gpu_info *g,
		      const struct braid_topo_nic_info *nic, enum braid_topo_path path)
{
	char id[64], gp[512], np[512], gc[16][16], nc[16][16], redir[256] = "", unread[256] = "";
	int ngc, nnc, common = 0, nchecked = 0;

	snprintf(id, sizeof(id), "acs gpu%d", g->cuda_index);
	if (path > BRAID_TOPO_PATH_PXB) {
		doc_add(d, DOC_INFO, id, NULL,
			"%s to %s is %s: traffic crosses the CPU anyway, ACS redirection does not "
			"change it",
			g->bus_id, nic->name, braid_topo_path_name(path));
		return;
	}
	pci_path(d, g->bus_id, NULL, gp, sizeof(gp));
	pci_path(d, nic->bus_id, nic->pci_path, np, sizeof(np));
	ngc = pci_components(gp, gc, 16);
	nnc = pci_components(np, nc, 16);
	if (!ngc || !nnc) {
		doc_add(d, DOC_INFO, id, NULL,
			"no sysfs PCI path for %s under the root: ACS not checked", g->bus_id);
		return;
	}
	while (common < ngc && common < nnc && !strcmp(gc[common], nc[common]))
		common++;
	/* The switch ports below the shared one: everything between it and the endpoints. */
	for (int side = 0; side < 2; side++) {
		char(*c)[16] = side ? nc : gc;
		int nn = side ? nnc : ngc;

		for (int i = common; i < nn - 1; i++) {
			int ctl = acs_ctl(d, c[i]);

			nchecked++;
			if (ctl == -2)
				snprintf(unread + strlen(unread), sizeof(unread) - strlen(unread),
					 "%s%s", unread[0] ? "," : "", c[i]);
			else if (ctl >= 0 && (ctl & 0x0c))
				snprintf(redir + strlen(redir), sizeof(redir) - strlen(redir),
					 "%s%s (ACSCtl %#x)", redir[0] ? ", " : "", c[i], ctl);
		}
	}
	if (redir[0])
		doc_add(d, DOC_WARN, id,
			"disable ACS P2P redirect on the switch ports (setpci -s BDF ECAP_ACS+6.w=0, "
			"or the BIOS), or the NCCL_IGNORE_DISABLED_P2P route",
			"%s and %s share a PCIe switch, but ACS redirects peer traffic to the root "
			"complex at %s: GPUDirect RDMA slows down or breaks",
			g->bus_id, nic->name, redir);
	else if (nchecked && unread[0])
		doc_add(d, DOC_INFO, id, NULL,
			"config space of %s not readable past 256 bytes (run as root): ACS not "
			"checked",
			unread);
	else
		doc_add(d, DOC_PASS, id, NULL,
			"no ACS P2P redirect on the %d switch port(s) between %s and %s", nchecked,
			g->bus_id, nic->name);
}

static void check_iommu(struct doctor *d)
{
	char groups[DOC_MAX_NAMES][DOC_NAME_LEN], devs[DOC_MAX_NAMES][DOC_NAME_LEN], p[512],
		grp[32], type[32];
	char dma[256] = "", ident[256] = "";
	int ng = doc_list_dir(d, "/sys/kernel/iommu_groups", groups, DOC_MAX_NAMES), ndev, nk = 0;

	if (!ng) {
		doc_add(d, DOC_PASS, "iommu", NULL,
			"no IOMMU groups (/sys/kernel/iommu_groups empty): DMA is not translated");
		return;
	}
	ndev = doc_list_dir(d, "/sys/class/infiniband", devs, DOC_MAX_NAMES);
	for (int i = 0; i < ndev; i++) {
		char bdf[64];

		snprintf(p, sizeof(p), "/sys/class/infiniband/%s/device", devs[i]);
		doc_link_base(d, p, bdf, sizeof(bdf));
		if (!bdf[0])
			continue;
		snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s/iommu_group", bdf);
		doc_link_base(d, p, grp, sizeof(grp));
		if (!grp[0])
			continue;
		snprintf(p, sizeof(p), "/sys/kernel/iommu_groups/%s/type", grp);
		if (doc_read(d, p, type, sizeof(type)))
			continue;
		nk++;
		if (!strncmp(type, "DMA", 3))
			snprintf(dma + strlen(dma), sizeof(dma) - strlen(dma),
				 "%s%s (group %s, %s)", dma[0] ? ", " : "", devs[i], grp, type);
		else
			snprintf(ident + strlen(ident), sizeof(ident) - strlen(ident), "%s%s (%s)",
				 ident[0] ? ", " : "", devs[i], type);
	}
	if (dma[0])
		doc_add(d, DOC_WARN, "iommu",
			"boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on iommu=pt)",
			"the IOMMU translates DMA of %s: GPUDirect peer traffic is translated or "
			"blocked, and registration costs more",
			dma);
	else if (nk)
		doc_add(d, DOC_PASS, "iommu", NULL,
			"%d IOMMU groups; RDMA devices in passthrough: %s", ng, ident);
	else
		doc_add(d, DOC_INFO, "iommu", NULL,
			"%d IOMMU groups, but no RDMA device's group type could be read: not checked",
			ng);
}

void doc_check_gpu(struct doctor *d)
{
	const char *xml = d->xml ? d->xml : getenv("HWLOC_XMLFILE");
	char err[256];
	int ngpu = 0, nnic;
	bool want_topo = doc_want(d, "topo") || doc_want(d, "acs");

	if (want_topo || doc_want(d, "gpudirect")) {
		if (!xml && d->root[0]) {
			if (want_topo)
				doc_add(d, DOC_INFO, "topo", NULL,
					"under --root the topology comes from --xml (or HWLOC_XMLFILE): "
					"not checked");
		} else {
			d->topo = braid_topo_load(xml, err, sizeof(err));
			if (!d->topo && want_topo)
				doc_add(d, DOC_INFO, "topo", NULL, "no topology: %s", err);
		}
		if (d->topo)
			ngpu = braid_topo_gpu_count(d->topo);
	}
	if (doc_want(d, "gpudirect"))
		check_gpudirect(d, ngpu);
	if (d->topo && want_topo) {
		nnic = braid_topo_nic_count(d->topo);
		if (!ngpu)
			doc_add(d, DOC_INFO, "topo", NULL, "no GPU in the topology (%s): skipped",
				braid_topo_source(d->topo));
		for (int gi = 0; gi < ngpu; gi++) {
			struct braid_topo_gpu_info g;
			struct braid_topo_nic_info nic, best_nic;
			enum braid_topo_path best = BRAID_TOPO_PATH_SYS, pth;
			int best_dist = 1 << 30, dist, found = 0;
			char id[64];

			braid_topo_gpu_info(d->topo, gi, &g);
			snprintf(id, sizeof(id), "topo gpu%d", g.cuda_index);
			for (int ni = 0; ni < nnic; ni++) {
				if (braid_topo_nic_info(d->topo, ni, &nic) || !nic.rdma ||
				    braid_topo_path(d->topo, gi, ni, &pth, &dist) || dist < 0)
					continue;
				if (!found || pth < best || (pth == best && dist < best_dist)) {
					best = pth;
					best_dist = dist;
					best_nic = nic;
					found = 1;
				}
			}
			if (!found) {
				if (doc_want(d, "topo"))
					doc_add(d, DOC_INFO, id, NULL,
						"%s: no RDMA NIC with a PCI path in the topology",
						g.bus_id);
				continue;
			}
			if (doc_want(d, "topo")) {
				if (best == BRAID_TOPO_PATH_SYS)
					doc_add(d, DOC_WARN, id,
						"put a NIC on the GPU's socket, or move the GPU next "
						"to one (braid topo shows the map)",
						"%s (NUMA %d): nearest NIC %s (NUMA %d) is SYS/%d, on "
						"the other socket: traffic crosses the CPU "
						"interconnect, no GPUDirect RDMA by default",
						g.bus_id, g.numa_node, best_nic.name,
						best_nic.numa_node, best_dist);
				else
					doc_add(d, DOC_PASS, id, NULL,
						"%s: nearest NIC %s is %s/%d", g.bus_id,
						best_nic.name, braid_topo_path_name(best),
						best_dist);
			}
			if (doc_want(d, "acs"))
				check_acs(d, &g, &best_nic, best);
		}
	}
	if (doc_want(d, "iommu"))
		check_iommu(d);
}
