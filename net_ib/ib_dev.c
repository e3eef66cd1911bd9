// SPDX-License-Identifier: Apache-2.0
/*
 * Devices: every ACTIVE port of every verbs device that BRAID_IB_HCA / NCCL_IB_HCA keeps
 * is one NCCL device. Per port: link layer, LID, MTU, speed and (RoCE) the GID index,
 * chosen as NCCL does and logged with the reason. Per HCA: context, PD, GPUDirect
 * detection, async events.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net_ib/ib.h"
#include "plugin/comm_limit.h"
#include "plugin/filter.h"
#include "plugin/fsroot.h"
#include "plugin/gid.h"
#include "plugin/log.h"
#include "plugin/params.h"
#include "plugin/peermem.h"
#include "topo/topo.h"

struct ib_state ib;

void ib_gid_str(const union ibv_gid *gid, char *buf, size_t len)
{
	if (!inet_ntop(AF_INET6, gid->raw, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

static const char *gid_type_name(int type)
{
	switch (type) {
	case IBV_GID_TYPE_IB: return "IB";
	case IBV_GID_TYPE_ROCE_V1: return "RoCEv1";
	case IBV_GID_TYPE_ROCE_V2: return "RoCEv2";
	default: return "unknown";
	}
}

/* Mbps per lane, from ibv_port_attr.active_speed (NCCL's table). */
static int lane_mbps(uint8_t speed)
{
	switch (speed) {
	case 1: return 2500;     /* SDR */
	case 2: return 5000;     /* DDR */
	case 4: return 10000;    /* QDR */
	case 8: return 10000;    /* FDR10 */
	case 16: return 14000;   /* FDR */
	case 32: return 25000;   /* EDR */
	case 64: return 50000;   /* HDR */
	case 128: return 100000; /* NDR */
	default: return 10000;
	}
}

static int lanes(uint8_t width)
{
	switch (width) {
	case 1: return 1;
	case 2: return 4;
	case 4: return 8;
	case 8: return 12;
	case 16: return 2;
	default: return 1;
	}
}

static int is_zero_gid(const union ibv_gid *g)
{
	static const union ibv_gid zero;

	return !memcmp(g, &zero, sizeof(zero));
}

static int query_gid(struct ibv_context *ctx, int port, int idx, union ibv_gid *gid, int *type)
{
	struct ibv_gid_entry e;

	if (ibv.query_gid_ex) {
		memset(&e, 0, sizeof(e));
		if (ibv.query_gid_ex(ctx, (uint32_t)port, (uint32_t)idx, &e, 0, sizeof(e)))
			return -1;
		*gid = e.gid;
		*type = (int)e.gid_type;
		return 0;
	}
	*type = -1;
	return ibv.query_gid(ctx, (uint8_t)port, idx, gid) ? -1 : 0;
}

_Static_assert((int)BRAID_GID_ROCE_V2 == (int)IBV_GID_TYPE_ROCE_V2 &&
		       (int)BRAID_GID_ROCE_V1 == (int)IBV_GID_TYPE_ROCE_V1 &&
		       (int)BRAID_GID_IB == (int)IBV_GID_TYPE_IB,
	       "plugin/gid.h numbers GID types as ibv_gid_type");

/* RoCE GID choice (plugin/gid.c, the rule `braid doctor` applies too); 0 and d->gid_*
 * set, or -1 with why. */
static int choose_gid(struct ib_dev *d, struct ibv_context *ctx, int tbl_len, char *why,
		      size_t whylen)
{
	struct braid_gid_entry *g = calloc(tbl_len > 0 ? (size_t)tbl_len : 1, sizeof(*g));
	struct braid_gid_rule rule;
	struct braid_gid_pick pick;
	int n = 0;

	if (!g) {
		snprintf(why, whylen, "%s:%d: no memory for a GID table of %d", d->name, d->port,
			 tbl_len);
		return -1;
	}
	braid_gid_rule_from_params(&rule);
	for (int i = 0; i < tbl_len; i++) {
		union ibv_gid gid;
		int type;

		if (query_gid(ctx, d->port, i, &gid, &type) || is_zero_gid(&gid))
			continue;
		g[n].index = i;
		memcpy(g[n].raw, gid.raw, sizeof(g[n].raw));
		g[n].type = type;
		n++;
	}
	braid_gid_choose(g, n, &rule, &pick);
	if (pick.range_bad)
		BRAID_WARN("%s=\"%s\" is not an address/prefix; ignoring it",
			   braid_param_source(BRAID_P_IB_ADDR_RANGE), rule.range);
	if (pick.pos < 0 && rule.want_index >= 0)
		snprintf(why, whylen, "%s=%d: no such GID on %s:%d (table of %d)",
			 braid_param_source(BRAID_P_IB_GID_INDEX), rule.want_index, d->name,
			 d->port, tbl_len);
	else if (pick.pos < 0) /* the choice's why, cut to fit the caller's 256 bytes */
		snprintf(why, whylen, "%s:%d has %.170s", d->name, d->port, pick.why);
	if (pick.pos < 0) {
		free(g);
		return -1;
	}
	d->gid_index = g[pick.pos].index;
	memcpy(d->gid.raw, g[pick.pos].raw, sizeof(d->gid.raw));
	d->gid_type = g[pick.pos].type;
	if (rule.want_index >= 0)
		snprintf(d->gid_why, sizeof(d->gid_why), "set by %s",
			 braid_param_source(BRAID_P_IB_GID_INDEX));
	else
		snprintf(d->gid_why, sizeof(d->gid_why), "%s", pick.why);
	free(g);
	return 0;
}

/* Peer memory (plugin/peermem.c, the list `braid doctor` checks too), under BRAID_FSROOT. */
static int peermem_loaded(void)
{
	return braid_peermem_file(braid_fsroot()) != NULL;
}

/* GPUDirect, as NCCL detects it: peer memory from the kernel module, dma-buf from a
 * probe registration with fd -1 (EOPNOTSUPP / EPROTONOSUPPORT: not supported; anything
 * else, EBADF on a real mlx5: supported). */
static void detect_gdr(struct ib_hca *h)
{
	int err = EOPNOTSUPP;

	h->gdr_peermem = peermem_loaded();
	h->gdr_dmabuf = 0;
	if (ibv.reg_dmabuf_mr) {
		struct ibv_mr *mr;

		errno = 0;
		mr = ibv.reg_dmabuf_mr(h->pd, 0, 0, 0, -1, 0);
		err = errno;
		if (mr)
			ibv.dereg_mr(mr); /* cannot happen with fd -1; be tidy */
		else if (err != EOPNOTSUPP && err != EPROTONOSUPPORT)
			h->gdr_dmabuf = 1;
	}
	BRAID_INFO(NCCL_INIT | NCCL_NET,
		   "ib: %s: peer memory %s (%s%s, %s or %s); dma-buf %s (fd -1 probe: %s)", h->name,
		   h->gdr_peermem ? "yes" : "no", braid_fsroot()[0] ? "under BRAID_FSROOT: " : "",
		   braid_peermem_files[0], braid_peermem_files[1], braid_peermem_files[2],
		   h->gdr_dmabuf ? "yes" : "no",
		   ibv.reg_dmabuf_mr ? strerror(err) : "no ibv_reg_dmabuf_mr in libibverbs");
}

static void hca_close(struct ib_hca *h)
{
	ib_mr_cache_purge(h);
	if (h->pd)
		ibv.dealloc_pd(h->pd);
	if (h->ctx)
		ibv.close_device(h->ctx);
	pthread_mutex_destroy(&h->lock);
}

void ib_fini(void)
{
	ib_async_stop();
	for (int i = 0; i < ib.nhcas; i++)
		hca_close(&ib.hcas[i]);
	free(ib.hcas);
	free(ib.devs);
	memset(&ib, 0, sizeof(ib));
}

static int query_port_full(struct ibv_context *ctx, int port, struct ibv_port_attr *pa)
{
	memset(pa, 0, sizeof(*pa));
	/* The exported ibv_query_port fills the part up to link_layer, which is all we read. */
	return ibv.query_port(ctx, (uint8_t)port, pa);
}

/* From the core at init (braid_backend_env): read-only until fini. */
static const struct braid_topo *ib_topo;

static void pci_path_of(struct ib_dev *d)
{
	const struct braid_topo *topo = ib_topo;
	struct braid_topo_nic_place place;
	char path[128], real[PATH_MAX];

	d->pci_path[0] = '\0';
	d->numa_node = -1;
	if (topo && braid_topo_nic_place(topo, d->name, &place) == 0) {
		d->numa_node = place.numa_node;
		if (place.pci_path[0]) {
			snprintf(d->pci_path, sizeof(d->pci_path), "%s", place.pci_path);
			return;
		}
	}
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device", d->name);
	if (realpath(path, real) && strlen(real) < sizeof(d->pci_path))
		memcpy(d->pci_path, real, strlen(real) + 1);
}

/*
 * The partition key of the port's QPs: NCCL's NCCL_IB_PKEY is an index into the port's
 * P_Key table, given to every QP at INIT. An index past the table, or at an empty entry,
 * would make every QP fail or reach no one: the port is not used, with a WARN, rather than
 * a job quietly falling back to another network.
 */
static int choose_pkey(struct ib_dev *d, struct ibv_context *ctx, int tbl_len, char *why,
		       size_t whylen)
{
	__be16 key = 0;

	d->pkey_index = (int)braid_param_int(BRAID_P_IB_PKEY);
	d->pkey = 0;
	if (tbl_len > 0 && d->pkey_index >= tbl_len) {
		snprintf(why, whylen, "%s=%d is past the P_Key table of %s:%d (%d entries)",
			 braid_param_source(BRAID_P_IB_PKEY), d->pkey_index, d->name, d->port,
			 tbl_len);
		BRAID_WARN("ib: %s; the port is not used", why);
		return -1;
	}
	if (!ibv.query_pkey)
		return 0;
	if (ibv.query_pkey(ctx, (uint8_t)d->port, d->pkey_index, &key) == 0 &&
	    (be16toh(key) & 0x7fff) == 0) {
		snprintf(why, whylen, "%s=%d names an empty P_Key table entry on %s:%d",
			 braid_param_source(BRAID_P_IB_PKEY), d->pkey_index, d->name, d->port);
		BRAID_WARN("ib: %s; the port is not used", why);
		return -1;
	}
	d->pkey = be16toh(key);
	return 0;
}

static int add_port(struct ib_hca *h, int port, const struct ibv_port_attr *pa, char *why,
		    size_t whylen)
{
	struct ib_dev *d = &ib.devs[ib.ndevs];
	int qps = (int)braid_param_int(BRAID_P_IB_QPS_PER_CONN);
	int64_t ar;

	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", h->name);
	d->port = port;
	d->hca = h;
	d->link_layer = pa->link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET
								  : IBV_LINK_LAYER_INFINIBAND;
	d->lid = pa->lid;
	d->mtu = pa->active_mtu;
	d->max_msg_sz = pa->max_msg_sz ? pa->max_msg_sz : (1u << 31);
	d->speed_mbps = lane_mbps(pa->active_speed) * lanes(pa->active_width);
	d->gid_index = -1;
	d->gid_type = -1;
	if (d->link_layer == IBV_LINK_LAYER_ETHERNET) {
		if (choose_gid(d, h->ctx, pa->gid_tbl_len, why, whylen))
			return -1;
	} else {
		if (pa->lid == 0) {
			snprintf(why, whylen,
				 "%s:%d is InfiniBand without a LID (no subnet manager?)", d->name,
				 port);
			return -1;
		}
		d->gid_index = 0;
		d->gid_type = IBV_GID_TYPE_IB;
		ibv.query_gid(h->ctx, (uint8_t)port, 0, &d->gid);
		snprintf(d->gid_why, sizeof(d->gid_why),
			 "InfiniBand: LID %u, GID 0 for the GRH "
			 "across subnets",
			 pa->lid);
	}
	if (choose_pkey(d, h->ctx, pa->pkey_tbl_len, why, whylen))
		return -1;
	d->nqps = qps ? qps : d->link_layer == IBV_LINK_LAYER_ETHERNET ? 4 : 1;
	/* NCCL's default: on for InfiniBand (init.cc), where switches route adaptively */
	ar = braid_param_int(BRAID_P_IB_ADAPTIVE_ROUTING);
	d->ar = ar == -2 ? d->link_layer == IBV_LINK_LAYER_INFINIBAND : ar != 0;
	pci_path_of(d);
	ib.ndevs++;
	return 0;
}

static void record_fallback(const char *list)
{
	struct braid_ctr_region *r = braid_counters();
	struct braid_ctr_fallback *fb = &r->fallback;
	const struct ib_dev *d = &ib.devs[0];
	size_t used = strlen(fb->why);

	snprintf(fb->provider, sizeof(fb->provider), "%s", list);
	snprintf(fb->why + used, sizeof(fb->why) - used, "%sverbs: %d active port(s): %s",
		 used ? "; " : "", ib.ndevs, list);
	fb->slow_path = 0;
	snprintf(fb->link_layer, sizeof(fb->link_layer), "%s",
		 d->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand");
	fb->gid_index = d->gid_index;
	snprintf(fb->gid_type, sizeof(fb->gid_type), "%s", gid_type_name(d->gid_type));
	fb->mtu = 128 << d->mtu;
	/* The gpudirect fields are the core's, from ptrSupport (plugin/gpudirect.h). */
	r->qp_rec_size = sizeof(struct braid_ctr_qp);
	r->max_qps = BRAID_CTR_MAX_QPS;
}

/* NCCL's key: the PCI address in the last component of the device's path; no path: last. */
static int64_t pci_order_key(const struct ib_dev *d)
{
	const char *s = strrchr(d->pci_path, '/');
	unsigned int dom, bus, dev, fn;

	s = s ? s + 1 : d->pci_path;
	if (sscanf(s, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
		return INT64_MAX;
	return (int64_t)dom << 24 | (int64_t)bus << 16 | (int64_t)dev << 8 | fn;
}

static void log_device(int i, const struct ib_dev *d)
{
	char gs[64];

	ib_gid_str(&d->gid, gs, sizeof(gs));
	BRAID_INFO(NCCL_INIT | NCCL_NET,
		   "ib: device %d = %s:%d, %s, %d Mb/s, MTU %s, LID %u, GID %d %s (%s): %s, "
		   "%d QP(s) per connection, P_Key 0x%04x at index %d, adaptive routing %s",
		   i, d->name, d->port,
		   d->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", d->speed_mbps,
		   ib_mtu_str(d->mtu), d->lid, d->gid_index, gs, gid_type_name(d->gid_type),
		   d->gid_why, d->nqps, d->pkey, d->pkey_index, d->ar ? "on" : "off");
}

/*
 * NCCL_IB_DEVICE_PCI_ORDER (default 1): number the devices in PCI order, the same on every
 * node of one build whatever order the verbs library lists them in, as NCCL sorts its
 * ncclIbDevs. Stable, so the ports of one NIC keep their order. Then each device gets the
 * counter record of its final index.
 */
static void order_devices(void)
{
	char list[512] = "";
	size_t used = 0;

	for (int i = 1; braid_param_int(BRAID_P_IB_DEVICE_PCI_ORDER) && i < ib.ndevs; i++) {
		struct ib_dev d = ib.devs[i];
		int j = i;

		for (; j > 0 && pci_order_key(&ib.devs[j - 1]) > pci_order_key(&d); j--)
			ib.devs[j] = ib.devs[j - 1];
		ib.devs[j] = d;
	}
	for (int i = 0; i < ib.ndevs; i++) {
		struct ib_dev *d = &ib.devs[i];

		d->ctr = braid_counters_dev(i);
		snprintf(d->ctr->name, sizeof(d->ctr->name), "%.56s:%d", d->name, d->port & 0xff);
		snprintf(d->ctr->provider, sizeof(d->ctr->provider), "verbs %s",
			 d->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB");
		d->ctr->in_use = 1;
		log_device(i, d);
		if (used < sizeof(list))
			used += (size_t)snprintf(list + used, sizeof(list) - used, " [%d]%s:%d", i,
						 d->name, d->port);
	}
	BRAID_INFO(NCCL_INIT | NCCL_NET, "ib: devices%s:%s",
		   braid_param_int(BRAID_P_IB_DEVICE_PCI_ORDER) ? " in PCI order" : "", list);
}

/*
 * NCCL_IB_DATA_DIRECT on an HCA with a data-direct path (ib_mlx5.c): each of its ports,
 * devices first.. of ib.devs, becomes (1) or is followed by (2) its data-direct device,
 * named <device>_dma, at that PCI path, as NCCL's init.cc lists them.
 */
static void add_data_direct(struct ib_hca *h, int first)
{
	int both = braid_param_int(BRAID_P_IB_DATA_DIRECT) == 2;

	for (int i = ib.ndevs - 1; i >= first; i--) {
		struct ib_dev *d = &ib.devs[i];

		if (both) {
			memmove(d + 2, d + 1, (size_t)(ib.ndevs - i - 1) * sizeof(*d));
			d[1] = d[0];
			d++;
			ib.ndevs++;
		}
		snprintf(d->name, sizeof(d->name), "%.59s_dma", h->name);
		snprintf(d->pci_path, sizeof(d->pci_path), "%s", h->dd_path);
		d->data_direct = 1;
	}
}

int ib_init(const struct braid_backend_env *env, char *why, size_t whylen)
{
	const char *spec = braid_param_str(BRAID_P_IB_HCA);
	struct braid_filter f;
	struct ibv_device **list;
	int nlist = 0, nports = 0, active = 0;
	char ports[256] = "", first_why[256] = "";
	size_t used = 0;

	ib_topo = env->topo;
	if (ibv_dl_open(why, whylen))
		return -1;
	ib_relaxed_ordering_init();
	if (braid_filter_parse(spec, &f)) {
		snprintf(why, whylen, "%s=\"%s\" cannot be parsed",
			 braid_param_source(BRAID_P_IB_HCA), spec);
		return -1;
	}
	list = ibv.get_device_list(&nlist);
	if (!list || nlist == 0) {
		if (list)
			ibv.free_device_list(list);
		snprintf(why, whylen, "no verbs device");
		return -1;
	}
	ib.hcas = calloc((size_t)nlist, sizeof(*ib.hcas));
	/* up to 4 ports an HCA, and each port twice with NCCL_IB_DATA_DIRECT=2 */
	ib.devs = calloc((size_t)nlist * 8 + 8, sizeof(*ib.devs));
	if (!ib.hcas || !ib.devs) {
		ibv.free_device_list(list);
		ib_fini();
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	for (int i = 0; i < nlist; i++) {
		struct ib_hca *h = &ib.hcas[ib.nhcas];
		const char *name = ibv.get_device_name(list[i]);
		int first_dev = ib.ndevs;

		memset(h, 0, sizeof(*h));
		snprintf(h->name, sizeof(h->name), "%s", name);
		pthread_mutex_init(&h->lock, NULL);
		h->ctx = ibv.open_device(list[i]);
		if (!h->ctx || ibv.query_device(h->ctx, &h->attr)) {
			BRAID_INFO(NCCL_INIT | NCCL_NET, "ib: cannot open %s: %s", name,
				   strerror(errno));
			hca_close(h);
			continue;
		}
		for (int p = 1; p <= h->attr.phys_port_cnt && ib.ndevs < nlist * 4 + 4; p++) {
			struct ibv_port_attr pa;
			char pwhy[256];

			if (query_port_full(h->ctx, p, &pa) || pa.state != IBV_PORT_ACTIVE)
				continue;
			active++;
			if (!braid_filter_match(&f, name, p))
				continue;
			if (add_port(h, p, &pa, pwhy, sizeof(pwhy))) {
				BRAID_INFO(NCCL_INIT | NCCL_NET, "ib: skipping %s:%d: %s", name, p,
					   pwhy);
				if (!first_why[0])
					snprintf(first_why, sizeof(first_why), "%s", pwhy);
				continue;
			}
			nports++;
			if (used < sizeof(ports))
				used += (size_t)snprintf(ports + used, sizeof(ports) - used,
							 "%s%s:%d", used ? " " : "", name, p);
		}
		if (ib.ndevs == first_dev) {
			hca_close(h);
			continue;
		}
		h->pd = ibv.alloc_pd(h->ctx);
		if (!h->pd) {
			BRAID_INFO(NCCL_INIT | NCCL_NET, "ib: ibv_alloc_pd on %s: %s", name,
				   strerror(errno));
			ib.ndevs = first_dev;
			hca_close(h);
			continue;
		}
		/* Async events are drained without blocking from the data path. */
		fcntl(h->ctx->async_fd, F_SETFL, fcntl(h->ctx->async_fd, F_GETFL) | O_NONBLOCK);
		detect_gdr(h);
		if (ib_mlx5_data_direct(h, list[i]))
			add_data_direct(h, first_dev);
		for (int d = first_dev; d < ib.ndevs; d++)
			ib.devs[d].hca = h;
		ib.nhcas++;
	}
	ibv.free_device_list(list);
	if (ib.ndevs == 0) {
		if (active == 0)
			snprintf(why, whylen, "no verbs device has an active port");
		else if (first_why[0])
			snprintf(why, whylen, "%d active port(s), none usable: %s", active,
				 first_why);
		else
			snprintf(why, whylen, "%d active verbs port(s), none selected by %s=\"%s\"",
				 active, braid_param_source(BRAID_P_IB_HCA), spec);
		ib_fini();
		return -1;
	}
	(void)nports;
	order_devices();
	record_fallback(ports);
	ib_async_start();
	return 0;
}

int ib_ndevs(void)
{
	return ib.ndevs;
}

/* The comms a port can hold: a comm takes nqps QPs (+1 for the flush QP, at most). NCCL's
 * IB transport reports max_qp itself; braid divides, since each comm takes several. */
int ib_dev_comm_limit(const struct ib_dev *d)
{
	int n = d->hca->attr.max_qp > 0 ? d->hca->attr.max_qp / (d->nqps + 1) : 1024;

	return n < 1 ? 1 : n;
}

ncclResult_t ib_get_props(int devidx, struct braid_dev_props *p)
{
	struct ib_dev *d = &ib.devs[devidx];
	struct ib_hca *h = d->hca;

	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", d->name);
	snprintf(p->pci_path, sizeof(p->pci_path), "%s", d->pci_path);
	p->numa_node = d->numa_node;
	p->guid = h->attr.sys_image_guid ? h->attr.sys_image_guid : h->attr.node_guid;
	/* As NCCL's IB transport: CUDA only where regMr(NCCL_PTR_CUDA) works (peer memory);
	 * with dma-buf alone NCCL registers CUDA buffers through regMrDmaBuf, and only when
	 * it uses dma-buf itself. */
	p->ptr_support = NCCL_PTR_HOST;
	if (h->gdr_peermem)
		p->ptr_support |= NCCL_PTR_CUDA;
	if (h->gdr_dmabuf)
		p->ptr_support |= NCCL_PTR_DMABUF;
	p->reg_is_global = (int)braid_param_int(BRAID_P_MR_CACHE);
	/* As NCCL: the data-direct device needs the flush (its control path is C2C, its data
	 * path PCIe: paths.cc). */
	p->force_flush = d->data_direct;
	p->speed_mbps = d->speed_mbps;
	p->port = d->port;
	p->latency_us = 0;
	p->max_comms = braid_max_comms(ib_dev_comm_limit(d));
	p->max_recvs = BRAID_MAX_RECVS;
	/* A chunk is one work request; a message is split over at most nqps of them. */
	p->max_p2p_bytes = d->max_msg_sz < IB_MAX_CHUNK ? d->max_msg_sz : IB_MAX_CHUNK;
	p->max_coll_bytes = p->max_p2p_bytes;
	return ncclSuccess;
}
