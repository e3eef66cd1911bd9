// SPDX-License-Identifier: Apache-2.0
/*
 * Provider choice and devices. With BRAID_OFI_PROVIDER unset braid takes efa, then any
 * other RDMA-capable provider; tcp, shm, sockets, udp (and utility stacks on them) only
 * when named, and then says loudly that this is a slow path.
 */
#include <errno.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_ofi/ofi.h"
#include "net_ofi/ofi_hmem.h"
#include "plugin/comm_limit.h"
#include "plugin/cuda_dl.h"
#include "plugin/gpudirect.h"
#include "plugin/log.h"
#include "plugin/params.h"
#include "topo/topo.h"

struct ofi_state ofi;

/* Core providers braid never picks on its own: they move bytes through the kernel's
 * sockets or shared memory, not a NIC's RDMA engine. */
static const char *const slow_providers[] = { "tcp", "sockets", "udp", "shm", "net", NULL };

const char *ofi_strerror(int err)
{
	if (err < 0)
		err = -err;
	return ofi_dl.strerror ? ofi_dl.strerror(err) : strerror(err);
}

/* The core provider of a stack: "tcp" for "tcp;ofi_rxm". */
static void core_provider(const char *prov, char *out, size_t len)
{
	size_t n = strcspn(prov, ";");

	snprintf(out, len, "%.*s", (int)n, prov);
}

static int is_slow(const char *prov)
{
	char core[32];

	core_provider(prov, core, sizeof(core));
	for (int i = 0; slow_providers[i]; i++)
		if (!strcmp(core, slow_providers[i]))
			return 1;
	return 0;
}

static struct fi_info *make_hints(const char *prov)
{
	struct fi_info *h = ofi_dl.dupinfo(NULL);

	if (!h)
		return NULL;
	h->caps = FI_TAGGED | FI_MSG | FI_SEND | FI_RECV; /* data tagged, announcements not */
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = FI_EP_RDM;
	/* Everything braid can honour; the provider keeps the bits it needs. */
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				  FI_MR_ENDPOINT;
	/* Comms run on different NCCL threads and share the domain, but braid serialises
	 * every call on it under the device's ep_lock (it must guard its own state there
	 * anyway): the provider need not lock a second time. */
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	if (prov && prov[0])
		h->fabric_attr->prov_name = strdup(prov);
	return h;
}

/* Pick the provider among what fi_getinfo returned. */
static const char *choose_provider(struct fi_info *list, char *seen, size_t seen_len)
{
	const char *pick = NULL;
	size_t used = 0;

	seen[0] = '\0';
	for (struct fi_info *i = list; i; i = i->next) {
		const char *p = i->fabric_attr->prov_name;

		if (!strstr(seen, p))
			used += (size_t)snprintf(seen + used, used < seen_len ? seen_len - used : 0,
						 "%s%s", used ? ", " : "", p);
		if (used >= seen_len)
			used = seen_len - 1;
	}
	for (struct fi_info *i = list; i && !pick; i = i->next) {
		char core[32];

		core_provider(i->fabric_attr->prov_name, core, sizeof(core));
		if (!strcmp(core, "efa"))
			pick = i->fabric_attr->prov_name;
	}
	for (struct fi_info *i = list; i && !pick; i = i->next)
		if (!is_slow(i->fabric_attr->prov_name))
			pick = i->fabric_attr->prov_name;
	return pick;
}

/* From the core at init (braid_backend_env): read-only until fini. */
static const struct braid_topo *ofi_topo;

/* Where the NIC sits, from topo/ (loaded by the core before any backend). */
static void place_nic(struct ofi_dev *d)
{
	const struct braid_topo *topo = ofi_topo;
	struct braid_topo_nic_place place;

	d->numa_node = -1;
	if (topo && braid_topo_nic_place(topo, d->name, &place) == 0) {
		d->numa_node = place.numa_node;
		snprintf(d->pci_path, sizeof(d->pci_path), "%s", place.pci_path);
	}
}

int ofi_tag_format_ok(uint64_t mem_tag_format, char *why, size_t whylen)
{
	/* The provider may use the tag bits above its format's highest bit; 0 means all 64
	 * (FI_TAG_GENERIC is 0xaaaa...: all 64 bits usable). */
	int bits = mem_tag_format ? 64 - __builtin_clzll(mem_tag_format) : 64;

	if (bits >= OFI_TAG_BITS)
		return 0;
	snprintf(why, whylen,
		 "its tags have %d bits (mem_tag_format %#llx); braid needs %d "
		 "(comm id, buffer number)",
		 bits, (unsigned long long)mem_tag_format, OFI_TAG_BITS);
	return -1;
}

static int is_loopback_domain(const struct fi_info *i)
{
	return !strcmp(i->domain_attr->name, "lo");
}

/* Does this libfabric register CUDA memory at all? A provider reports FI_HMEM for host
 * memory interfaces alone too (shm does, in a libfabric built without CUDA, and then fails
 * every FI_HMEM_CUDA registration with -FI_ENOSYS): one registration of a host buffer as
 * CUDA device 0 in a scratch domain tells. Any other answer (a real CUDA-enabled libfabric
 * may well refuse a host pointer) means the interface is there. */
static int hmem_cuda_usable(struct fi_info *info)
{
	struct fid_fabric *fab = NULL;
	struct fid_domain *dom = NULL;
	struct fid_mr *mr = NULL;
	struct fi_mr_attr attr;
	struct iovec iov;
	int rc;

	rc = ofi_dl.fabric(info->fabric_attr, &fab, NULL);
	if (!rc)
		rc = fi_domain(fab, info, &dom, NULL);
	if (!rc) {
		static char probe[4096] __attribute__((aligned(4096)));

		ofi_hmem_mr_attr(&attr, &iov, probe, sizeof(probe), FI_SEND | FI_RECV, 1,
				 NCCL_PTR_CUDA, 0);
		rc = fi_mr_regattr(dom, &attr, 0, &mr);
		if (!rc)
			fi_close(&mr->fid);
		rc = rc == -FI_ENOSYS || rc == -FI_EOPNOTSUPP ? rc : 0;
	} else {
		BRAID_INFO(NCCL_INIT | NCCL_NET, "ofi: %s: FI_HMEM probe domain: %s",
			   info->domain_attr->name, ofi_strerror(rc));
	}
	if (dom)
		fi_close(&dom->fid);
	if (fab)
		fi_close(&fab->fid);
	return rc == 0;
}

/* The init hints for d's own domain, with caps added (the probes below). */
static struct fi_info *domain_hints(const struct ofi_dev *d, uint64_t caps)
{
	struct fi_info *hints = make_hints(d->info->fabric_attr->prov_name);

	if (!hints)
		return NULL;
	free(hints->domain_attr->name);
	hints->domain_attr->name = strdup(d->name);
	hints->caps |= caps;
	return hints;
}

/* A copy of i (one entry) becomes d's info; 0, or -1 (no memory: d keeps its own). */
static int take_info(struct ofi_dev *d, const struct fi_info *i)
{
	struct fi_info *mine = ofi_dl.dupinfo(i);

	if (!mine)
		return -1;
	mine->next = NULL;
	ofi_dl.freeinfo(d->info);
	d->info = mine;
	return 0;
}

/* FI_HMEM, asked only where a CUDA driver could name a buffer's device (else nothing
 * changes): when the provider reports it for this domain, that info (its caps, its mr_mode
 * with FI_MR_HMEM where it needs it) becomes the device's. */
static void probe_hmem(struct ofi_dev *d)
{
	struct fi_info *hints, *list = NULL;

	if (!braid_cuda_available())
		return;
	/* The init hints, not a copy of the info: its sizes (inject, queues) may exceed what
	 * the provider offers with FI_HMEM. */
	hints = domain_hints(d, FI_HMEM);
	if (!hints)
		return;
	hints->domain_attr->mr_mode = (int)ofi_hmem_mr_mode_offered();
	if (!ofi_dl.getinfo(ofi.api_version, NULL, NULL, 0, hints, &list)) {
		for (struct fi_info *i = list; i; i = i->next) {
			if (!(i->caps & FI_HMEM) || strcmp(i->domain_attr->name, d->name))
				continue;
			if (!hmem_cuda_usable(i)) {
				BRAID_INFO(NCCL_INIT | NCCL_NET,
					   "ofi: %s: FI_HMEM reported, but this libfabric registers "
					   "no CUDA memory (FI_HMEM_CUDA: not implemented)",
					   d->name);
				break;
			}
			if (!take_info(d, i))
				d->hmem_caps = d->info->caps;
			break;
		}
		ofi_dl.freeinfo(list);
	}
	ofi_dl.freeinfo(hints);
	BRAID_INFO(NCCL_INIT | NCCL_NET, "ofi: %s: FI_HMEM %s", d->name,
		   d->hmem_caps ? "usable: CUDA buffers registered with FI_HMEM_CUDA"
				: "not usable: host memory only");
}

/* What iflush needs: reads of our own registered memory through our own endpoint. */
#define FLUSH_CAPS (FI_RMA | FI_READ | FI_REMOTE_READ)
enum { FLUSH_AUTO, FLUSH_ALWAYS, FLUSH_NEVER }; /* BRAID_OFI_FLUSH */

/*
 * iflush reads the receive buffer back through the device's own endpoint (ofi_flush.c),
 * which takes FI_RMA reads. They are asked for only where flushes are due, so a device
 * with nothing to flush keeps the info it had: BRAID_OFI_FLUSH=auto on a device that
 * registers CUDA memory (unless NCCL_GDR_FLUSH_DISABLE, as NCCL's IB transport reads
 * it), or always. The info the provider answers with becomes the device's.
 */
static void probe_flush(struct ofi_dev *d)
{
	int mode = (int)braid_param_int(BRAID_P_OFI_FLUSH);
	struct fi_info *hints, *list = NULL;
	uint64_t want;

	if (mode == FLUSH_NEVER ||
	    (mode == FLUSH_AUTO && (!d->hmem_caps || braid_gdr_nccl_flush_disabled())))
		return;
	want = FLUSH_CAPS | (d->info->caps & FI_HMEM);
	hints = domain_hints(d, want);
	if (!hints)
		return;
	if (d->hmem_caps)
		hints->domain_attr->mr_mode = (int)ofi_hmem_mr_mode_offered();
	if (!ofi_dl.getinfo(ofi.api_version, NULL, NULL, 0, hints, &list)) {
		for (struct fi_info *i = list; i; i = i->next) {
			if ((i->caps & want) != want || strcmp(i->domain_attr->name, d->name))
				continue;
			if (!take_info(d, i)) {
				d->hmem_caps = d->hmem_caps ? d->info->caps : 0;
				d->flush = 1;
			}
			break;
		}
		ofi_dl.freeinfo(list);
	}
	ofi_dl.freeinfo(hints);
	if (d->flush)
		BRAID_INFO(NCCL_INIT | NCCL_NET, "ofi: %s: iflush reads %s buffers back (FI_RMA)",
			   d->name, mode == FLUSH_ALWAYS ? "every receive's" : "GPU receive");
	d->flush_unable = !d->flush;
	if (!d->flush) /* iflush WARNs if NCCL ever asks (GPUs under compute capability 9.0, ...) */
		BRAID_INFO(NCCL_INIT | NCCL_NET,
			   "ofi: %s: provider %s offers no FI_RMA reads here: iflush reads "
			   "nothing back",
			   d->name, d->info->fabric_attr->prov_name);
}

int ofi_flush_due(const struct ofi_dev *d, int type)
{
	return d->flush &&
	       (type == NCCL_PTR_CUDA || braid_param_int(BRAID_P_OFI_FLUSH) == FLUSH_ALWAYS);
}

/*
 * fi_getinfo answers tcp;ofi_rxm's FI_THREAD_SAFE to the hint's FI_THREAD_DOMAIN (a level
 * that covers it), and a domain opened with that info locks inside every call: 17 of the
 * 40 mutex lock and unlock pairs of an 8-byte message on libfabric 1.17, 11 % of its
 * instructions (docs/benchmarks-ipm.md). braid serialises its calls itself (make_hints),
 * so it opens the domain at the level it asked for. Not where the provider progresses
 * data on a thread of its own (FI_PROGRESS_AUTO, or rxm's FI_OFI_RXM_DATA_AUTO_PROGRESS,
 * read as a boolean; a value that is none keeps the provider's locks): that thread needs
 * them.
 */
static void ask_thread_domain(struct fi_info *info)
{
	static const struct braid_param_desc rxm_auto = { .name = "FI_OFI_RXM_DATA_AUTO_PROGRESS",
							  .type = BRAID_PARAM_BOOL };
	const char *text = getenv(rxm_auto.name);
	int64_t on = 0;

	if (info->domain_attr->data_progress == FI_PROGRESS_AUTO ||
	    (text && (braid_param_parse(&rxm_auto, text, &on) || on)))
		return;
	info->domain_attr->threading = FI_THREAD_DOMAIN;
}

static int add_device(struct fi_info *info)
{
	struct ofi_dev *d = &ofi.devs[ofi.ndevs];
	uint64_t mr_mode;

	memset(d, 0, sizeof(*d));
	d->info = ofi_dl.dupinfo(info);
	if (!d->info)
		return -ENOMEM;
	d->info->next = NULL;
	snprintf(d->name, sizeof(d->name), "%s", info->domain_attr->name);
	d->is_iface = if_nametoindex(d->name) != 0;
	probe_hmem(d);
	probe_flush(d);
	ask_thread_domain(d->info);
	mr_mode = d->info->domain_attr->mr_mode;
	d->mr_hmem = !!(mr_mode & FI_MR_HMEM);
	d->mr_local = !!(mr_mode & FI_MR_LOCAL);
	d->mr_endpoint = !!(mr_mode & FI_MR_ENDPOINT);
	d->mr_virt_addr = !!(mr_mode & FI_MR_VIRT_ADDR);
	d->mr_prov_key = !!(mr_mode & FI_MR_PROV_KEY);
	d->next_key = 1;
	place_nic(d);
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->ep_lock, NULL);
	d->ctr = braid_counters_dev(ofi.ndevs);
	snprintf(d->ctr->name, sizeof(d->ctr->name), "%s", d->name);
	snprintf(d->ctr->provider, sizeof(d->ctr->provider), "%s", ofi.provider);
	d->ctr->in_use = 1;
	ofi.ndevs++;
	return 0;
}

/* One device per domain; loopback only when nothing else exists (single-host use). */
static int collect_devices(struct fi_info *list, const char *prov)
{
	int count = 0, have_real = 0;

	for (struct fi_info *i = list; i; i = i->next) {
		count++;
		if (!strcmp(i->fabric_attr->prov_name, prov) && !is_loopback_domain(i))
			have_real = 1;
	}
	ofi.devs = calloc((size_t)count, sizeof(*ofi.devs));
	if (!ofi.devs)
		return -ENOMEM;
	for (struct fi_info *i = list; i; i = i->next) {
		int dup = 0;

		char why[160];

		if (strcmp(i->fabric_attr->prov_name, prov) || (have_real && is_loopback_domain(i)))
			continue;
		if (ofi_tag_format_ok(i->ep_attr->mem_tag_format, why, sizeof(why))) {
			BRAID_INFO(NCCL_INIT | NCCL_NET, "ofi: domain %s of %s not used: %s",
				   i->domain_attr->name, prov, why);
			continue;
		}
		for (int d = 0; d < ofi.ndevs && !dup; d++)
			dup = !strcmp(ofi.devs[d].name, i->domain_attr->name);
		if (!dup && add_device(i))
			return -ENOMEM;
	}
	return 0;
}

static void record_fallback(const char *seen, int named)
{
	struct braid_ctr_fallback *fb = &braid_counters()->fallback;
	size_t used;

	snprintf(fb->provider, sizeof(fb->provider), "%s", ofi.provider);
	fb->slow_path = ofi.slow;
	used = strlen(fb->why);
	snprintf(fb->why + used, sizeof(fb->why) - used, "%sofi provider %s: %s (available: %s)",
		 used ? "; " : "", ofi.provider,
		 named ? "named by BRAID_OFI_PROVIDER" : "first RDMA-capable provider found", seen);
	/* The gpudirect fields are the core's, from ptrSupport (CUDA where FI_HMEM is reported). */
}

void ofi_devs_free(void)
{
	for (int d = 0; d < ofi.ndevs; d++) {
		struct ofi_dev *dev = &ofi.devs[d];

		if (dev->domain)
			fi_close(&dev->domain->fid);
		if (dev->fabric)
			fi_close(&dev->fabric->fid);
		ofi_dl.freeinfo(dev->info);
		pthread_mutex_destroy(&dev->ep_lock);
		pthread_mutex_destroy(&dev->lock);
	}
	free(ofi.devs);
	memset(&ofi, 0, sizeof(ofi));
}

int ofi_devs_init(const struct braid_backend_env *env, char *why, size_t whylen)
{
	const char *named = braid_param_str(BRAID_P_OFI_PROVIDER);
	struct fi_info *hints, *list = NULL;
	char seen[256];
	const char *prov;
	int rc;

	ofi_topo = env->topo;
	if (ofi_dl_open(why, whylen))
		return -1;
	ofi.api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
	if (ofi_dl.version() < ofi.api_version)
		ofi.api_version = ofi_dl.version();
	hints = make_hints(named);
	if (!hints) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	rc = ofi_dl.getinfo(ofi.api_version, NULL, NULL, 0, hints, &list);
	ofi_dl.freeinfo(hints);
	if (rc || !list) {
		if (named[0])
			snprintf(why, whylen,
				 "libfabric provider \"%s\" (BRAID_OFI_PROVIDER) offers no reliable "
				 "datagram endpoint with tagged and untagged messages here: %s",
				 named, ofi_strerror(rc));
		else
			snprintf(why, whylen,
				 "libfabric found no provider with reliable datagram "
				 "endpoints and tagged and untagged messages: %s",
				 ofi_strerror(rc));
		return -1;
	}
	prov = named[0] ? list->fabric_attr->prov_name : choose_provider(list, seen, sizeof(seen));
	if (named[0])
		choose_provider(list, seen, sizeof(seen));
	if (!prov) {
		snprintf(why, whylen,
			 "no RDMA-capable libfabric provider (found only: %s); braid uses slow "
			 "providers only when named, e.g. BRAID_OFI_PROVIDER=\"tcp;ofi_rxm\"",
			 seen);
		ofi_dl.freeinfo(list);
		return -1;
	}
	snprintf(ofi.provider, sizeof(ofi.provider), "%s", prov);
	ofi.slow = is_slow(ofi.provider);
	rc = collect_devices(list, ofi.provider);
	ofi_dl.freeinfo(list);
	if (rc || ofi.ndevs == 0) {
		snprintf(why, whylen,
			 "provider %s has no usable domain (BRAID_DEBUG=INFO says why)",
			 ofi.provider);
		ofi_devs_free();
		return -1;
	}
	record_fallback(seen, named[0] != '\0');
	BRAID_INFO(NCCL_INIT | NCCL_NET, "ofi: provider %s, %d device(s), libfabric API %u.%u",
		   ofi.provider, ofi.ndevs, FI_MAJOR(ofi.api_version), FI_MINOR(ofi.api_version));
	if (ofi.slow)
		BRAID_WARN("SLOW PATH: running over libfabric provider %s (BRAID_OFI_PROVIDER): "
			   "kernel sockets or shared memory, not NIC RDMA; expect a fraction of "
			   "line rate. Unset BRAID_OFI_PROVIDER on RDMA hosts.",
			   ofi.provider);
	return 0;
}

/* guid: stable per NIC and distinct between NICs (NCCL merges ports by it). */
static uint64_t dev_guid(const struct ofi_dev *d)
{
	uint64_t h = 1469598103934665603ULL;

	for (const char *p = d->name; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ULL;
	return h;
}

static int dev_speed_mbps(const struct ofi_dev *d)
{
	const struct fid_nic *nic = d->info->nic;
	char path[128];
	FILE *f;
	int mbps = 0;

	if (nic && nic->link_attr && nic->link_attr->speed)
		return (int)(nic->link_attr->speed / 1000000ULL);
	/* tcp domains are network interfaces: ask the kernel. */
	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", d->name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%d", &mbps) != 1)
			mbps = 0;
		fclose(f);
	}
	/* Virtual interfaces report -1: assume 10 Gb/s so NCCL's tuning stays sane. */
	return mbps > 0 ? mbps : 10000;
}

ncclResult_t ofi_get_props(int devidx, struct braid_dev_props *p)
{
	struct ofi_dev *d = &ofi.devs[devidx];
	size_t max_msg = d->info->ep_attr->max_msg_size;

	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", d->name);
	snprintf(p->pci_path, sizeof(p->pci_path), "%s", d->pci_path);
	p->numa_node = d->numa_node;
	p->guid = dev_guid(d);
	p->ptr_support = ofi_hmem_ptr_support(d->hmem_caps, braid_cuda_available());
	/* One endpoint per device: FI_MR_ENDPOINT registrations are device-wide too. */
	p->reg_is_global = braid_param_int(BRAID_P_MR_CACHE);
	p->force_flush = 0;
	p->speed_mbps = dev_speed_mbps(d);
	p->port = 1;
	p->latency_us = 0;
	/* Comms share the device's endpoint: the comm ids in the tags are the limit. */
	p->max_comms = braid_max_comms(OFI_MAX_COMM_IDS - 1);
	p->max_recvs = BRAID_MAX_RECVS;
	/* int-sized messages are what v8 can express; later versions get the provider's limit. */
	p->max_p2p_bytes = max_msg > (1ULL << 40) ? (1ULL << 40) : max_msg;
	p->max_coll_bytes = p->max_p2p_bytes;
	return ncclSuccess;
}
