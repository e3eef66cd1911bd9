// SPDX-License-Identifier: MIT
/*
 * softverbs: devices from SOFTVERBS_DEVICES, device and port queries, the
 * RoCE GID table (generated, or from SOFTVERBS_GID_ROOT), async events.
 *
 * A "host" is a network namespace: LIDs, GUIDs and RoCE interface ids are
 * derived from the namespace's inode number, so two namespaces look like two
 * machines, and two processes in one namespace see the same device.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "tests/softverbs/sv_internal.h"

/* Not in the public headers: rdma-core's private export used by ibv_devinfo. */
enum ibv_gid_type_sysfs {
	IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
	IBV_GID_TYPE_SYSFS_ROCE_V2,
};

SV_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
				 enum ibv_gid_type_sysfs *type);

#define SV_DEFAULT_DEVICES "svroce0:roce:1,svib0:ib:1"

static struct sv_device sv_devs[SV_MAX_DEVICES];
static int sv_ndevs;
static pthread_once_t sv_devs_once = PTHREAD_ONCE_INIT;

static uint64_t host_id(void)
{
	struct stat st;

	if (stat("/proc/self/ns/net", &st) == 0)
		return (uint64_t)st.st_ino;
	return 1;
}

/* The namespace's first up, non-loopback IPv4 address (127.0.0.1 if none). */
static void host_ipv4(uint32_t *addr, int *ifindex)
{
	struct ifaddrs *ifa, *i;

	*addr = htonl(INADDR_LOOPBACK);
	*ifindex = 1;
	if (getifaddrs(&ifa))
		return;
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		*addr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
		*ifindex = (int)if_nametoindex(i->ifa_name);
		break;
	}
	freeifaddrs(ifa);
}

static void set_gid(union ibv_gid *g, uint64_t prefix, uint64_t iid)
{
	g->global.subnet_prefix = htobe64(prefix);
	g->global.interface_id = htobe64(iid);
}

/* One line of a sysfs-like file into buf ("" when it cannot be read). */
static void read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	buf[0] = '\0';
	if (!f)
		return;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

/*
 * SOFTVERBS_GID_ROOT=DIR: RoCE port N of device NAME takes its GID table from
 * DIR/sys/class/infiniband/NAME/ports/N/gids/I and gid_attrs/types/I, laid out as the
 * kernel's sysfs, so that a test can give the plugin the table of a `braid doctor`
 * fixture host. An index without a file is empty; a type that names v1 is RoCE v1,
 * anything else RoCE v2.
 */
static void load_gid_table(struct sv_port *port, const char *dev, int portnum, const char *root)
{
	char path[512], line[128];

	port->ngids = 0;
	memset(port->gid, 0, sizeof(port->gid));
	for (int i = 0; i < SV_ROCE_GIDS; i++) {
		snprintf(path, sizeof(path), "%s/sys/class/infiniband/%s/ports/%d/gids/%d", root,
			 dev, portnum, i);
		read_line(path, line, sizeof(line));
		if (!line[0] || inet_pton(AF_INET6, line, port->gid[i].raw) != 1)
			continue;
		snprintf(path, sizeof(path),
			 "%s/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", root, dev,
			 portnum, i);
		read_line(path, line, sizeof(line));
		port->gid_type[i] = strstr(line, "v1") ? IBV_GID_TYPE_ROCE_V1
						       : IBV_GID_TYPE_ROCE_V2;
		port->ngids = i + 1;
	}
}

static void init_port(struct sv_device *d, int p, uint64_t hid)
{
	const char *gid_root = getenv("SOFTVERBS_GID_ROOT");
	struct sv_port *port = &d->port[p];
	uint64_t guid = be64toh(d->node_guid) + (uint64_t)p + 1;

	port->state = IBV_PORT_ACTIVE;
	if (!d->roce) {
		port->link_layer = IBV_LINK_LAYER_INFINIBAND;
		port->lid = (uint16_t)(1 +
				       sv_hash64(hid ^ ((uint64_t)d->index << 8) ^ (uint64_t)p) %
					       0xbffe);
		port->ngids = 1;
		set_gid(&port->gid[0], 0xfe80000000000000ull, guid);
		port->gid_type[0] = IBV_GID_TYPE_IB;
		return;
	}
	port->link_layer = IBV_LINK_LAYER_ETHERNET;
	host_ipv4(&port->ipv4, &port->ifindex);
	port->ngids = 4;
	/* As an mlx5 port shows them: link-local v1/v2, then IPv4-mapped v1/v2. */
	set_gid(&port->gid[0], 0xfe80000000000000ull, guid);
	set_gid(&port->gid[1], 0xfe80000000000000ull, guid);
	for (int i = 2; i < 4; i++) {
		memset(&port->gid[i], 0, sizeof(port->gid[i]));
		port->gid[i].raw[10] = 0xff;
		port->gid[i].raw[11] = 0xff;
		memcpy(&port->gid[i].raw[12], &port->ipv4, 4);
	}
	port->gid_type[0] = port->gid_type[2] = IBV_GID_TYPE_ROCE_V1;
	port->gid_type[1] = port->gid_type[3] = IBV_GID_TYPE_ROCE_V2;
	if (gid_root && *gid_root)
		load_gid_table(port, d->ibdev.name, p + 1, gid_root);
}

static int parse_device(const char *spec, int index, uint64_t hid)
{
	struct sv_device *d = &sv_devs[index];
	char buf[128], *save = NULL, *name, *kind, *ports;
	long nports = 1;

	snprintf(buf, sizeof(buf), "%s", spec);
	name = strtok_r(buf, ":", &save);
	kind = strtok_r(NULL, ":", &save);
	ports = strtok_r(NULL, ":", &save);
	if (!name || !kind || strlen(name) >= IBV_SYSFS_NAME_MAX) {
		sv_log("SOFTVERBS_DEVICES: bad entry '%s' (want NAME:roce|ib[:PORTS])", spec);
		return -1;
	}
	if (strcmp(kind, "roce") && strcmp(kind, "ib")) {
		sv_log("SOFTVERBS_DEVICES: '%s': kind must be roce or ib", spec);
		return -1;
	}
	if (ports)
		nports = strtol(ports, NULL, 10);
	if (nports < 1 || nports > SV_MAX_PORTS) {
		sv_log("SOFTVERBS_DEVICES: '%s': 1 to %d ports", spec, SV_MAX_PORTS);
		return -1;
	}
	memset(d, 0, sizeof(*d));
	d->index = index;
	d->roce = !strcmp(kind, "roce");
	d->nports = (int)nports;
	d->node_guid = htobe64(0x5356000000000000ull |
			       ((sv_hash64(hid * 131 + (uint64_t)index) & 0xffffffffffull) << 8));
	d->ibdev.node_type = IBV_NODE_CA;
	d->ibdev.transport_type = IBV_TRANSPORT_IB;
	snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s", name);
	snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs%d", index);
	snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path),
		 "/softverbs/class/infiniband_verbs/uverbs%d", index);
	snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path), "/softverbs/class/infiniband/%s",
		 name);
	for (int p = 0; p < d->nports; p++)
		init_port(d, p, hid);
	return 0;
}

static void load_devices(void)
{
	const char *v = getenv("SOFTVERBS_DEVICES");
	char buf[1024], *save = NULL, *tok;
	uint64_t hid = host_id();

	snprintf(buf, sizeof(buf), "%s", v && *v ? v : SV_DEFAULT_DEVICES);
	for (tok = strtok_r(buf, ",", &save); tok && sv_ndevs < SV_MAX_DEVICES;
	     tok = strtok_r(NULL, ",", &save)) {
		if (parse_device(tok, sv_ndevs, hid) == 0)
			sv_ndevs++;
	}
	sv_pkeys_load(sv_devs, sv_ndevs);
	sv_ece_load(sv_devs, sv_ndevs);
	sv_subnets_load(sv_devs, sv_ndevs);
}

struct sv_device *sv_devices(int *n)
{
	pthread_once(&sv_devs_once, load_devices);
	*n = sv_ndevs;
	return sv_devs;
}

static struct sv_device *to_dev(struct ibv_device *d)
{
	return sv_container_of(d, struct sv_device, ibdev);
}

static struct sv_context *to_ctx(struct ibv_context *c)
{
	return sv_container_of(c, struct sv_context, vctx.context);
}

int sv_port_check(struct sv_device *dev, uint8_t port)
{
	return port >= 1 && port <= dev->nports ? 0 : EINVAL;
}

SV_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	int n;
	struct sv_device *devs = sv_devices(&n);
	struct ibv_device **list = calloc((size_t)n + 1, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < n; i++)
		list[i] = &devs[i].ibdev;
	if (num_devices)
		*num_devices = n;
	return list;
}

SV_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list); /* devices themselves live for the process */
}

SV_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

SV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	return to_dev(device)->node_guid;
}

SV_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return to_dev(device)->index;
}

static int sv_query_port_ex(struct ibv_context *context, uint8_t port_num,
			    struct ibv_port_attr *attr, size_t len);
static int sv_query_device_ex(struct ibv_context *context,
			      const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr, size_t attr_size);

SV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct sv_context *ctx = calloc(1, sizeof(*ctx));
	struct ibv_context *c;
	int fds[2];

	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	if (pipe2(fds, O_CLOEXEC)) {
		free(ctx);
		return NULL;
	}
	ctx->dev = to_dev(device);
	ctx->async_wfd = fds[1];
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	ctx->vctx.sz = sizeof(ctx->vctx);
	ctx->vctx.query_port = sv_query_port_ex;
	ctx->vctx.query_device_ex = sv_query_device_ex;
	c = &ctx->vctx.context;
	c->device = device;
	c->cmd_fd = -1;
	c->async_fd = fds[0];
	c->num_comp_vectors = 1;
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->ops.poll_cq = sv_poll_cq;
	c->ops.req_notify_cq = sv_req_notify_cq;
	c->ops.post_send = sv_post_send;
	c->ops.post_recv = sv_post_recv;
	pthread_mutex_init(&c->mutex, NULL);
	if (sv_engine_get(ctx)) {
		int err = errno;

		close(fds[0]);
		close(fds[1]);
		pthread_mutex_destroy(&c->mutex);
		free(ctx);
		errno = err;
		return NULL;
	}
	return c;
}

SV_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct sv_context *ctx = to_ctx(context);

	sv_engine_put(ctx);
	close(context->async_fd);
	close(ctx->async_wfd);
	pthread_mutex_destroy(&context->mutex);
	free(ctx);
	return 0;
}

static void fill_device_attr(struct sv_device *d, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "softverbs-1.0");
	a->node_guid = d->node_guid;
	a->sys_image_guid = d->node_guid;
	a->max_mr_size = ~0ull;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = 0;
	a->vendor_part_id = 0;
	a->hw_ver = 1;
	a->max_qp = SV_MAX_QP;
	a->max_qp_wr = SV_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_RC_RNR_NAK_GEN |
			      IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_CURR_QP_STATE_MOD;
	a->max_sge = SV_MAX_SGE;
	a->max_sge_rd = SV_MAX_SGE;
	a->max_cq = 1 << 24;
	a->max_cqe = SV_MAX_CQE;
	a->max_mr = 1 << 24;
	a->max_pd = 1 << 24;
	a->max_qp_rd_atom = SV_MAX_RD_ATOM;
	a->max_res_rd_atom = SV_MAX_RD_ATOM * SV_MAX_QP;
	a->max_qp_init_rd_atom = SV_MAX_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_NONE;
	a->max_pkeys = (uint16_t)sv_pkey_table_len(d);
	a->local_ca_ack_delay = 16;
	a->phys_port_cnt = (uint8_t)d->nports;
}

SV_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr)
{
	fill_device_attr(to_ctx(context)->dev, device_attr);
	return 0;
}

static int sv_query_device_ex(struct ibv_context *context,
			      const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex full;

	if (input && input->comp_mask)
		return EINVAL;
	memset(&full, 0, sizeof(full));
	fill_device_attr(to_ctx(context)->dev, &full.orig_attr);
	full.device_cap_flags_ex = full.orig_attr.device_cap_flags;
	memcpy(attr, &full, attr_size < sizeof(full) ? attr_size : sizeof(full));
	return 0;
}

static void fill_port_attr(struct sv_device *d, int p, struct ibv_port_attr *a)
{
	struct sv_port *port = &d->port[p];

	memset(a, 0, sizeof(*a));
	a->state = port->state;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = IBV_MTU_4096;
	a->gid_tbl_len = d->roce ? SV_ROCE_GID_TBL_LEN : SV_IB_GID_TBL_LEN;
	a->port_cap_flags = d->roce ? IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS
				    : IBV_PORT_CM_SUP | IBV_PORT_SM;
	a->max_msg_sz = (uint32_t)sv_max_msg(d->index);
	a->pkey_tbl_len = (uint16_t)sv_pkey_table_len(d);
	a->lid = port->lid;
	a->sm_lid = d->roce ? 0 : 1;
	a->max_vl_num = 4;
	a->active_width = 2;                                    /* 4X */
	a->active_speed = 32;                                   /* EDR: 4X = 100 Gb/s */
	a->phys_state = port->state == IBV_PORT_ACTIVE ? 5 : 3; /* LinkUp / Disabled */
	a->link_layer = port->link_layer;
}

static int sv_query_port_ex(struct ibv_context *context, uint8_t port_num,
			    struct ibv_port_attr *attr, size_t len)
{
	struct sv_device *d = to_ctx(context)->dev;
	struct ibv_port_attr full;

	if (sv_port_check(d, port_num))
		return EINVAL;
	pthread_mutex_lock(&sv_eng.lock);
	fill_port_attr(d, port_num - 1, &full);
	pthread_mutex_unlock(&sv_eng.lock);
	memcpy(attr, &full, len < sizeof(full) ? len : sizeof(full));
	return 0;
}

/* The exported symbol is rdma-core's compat entry: callers compiled against
 * old headers pass the smaller struct _compat_ibv_port_attr, which ends at
 * link_layer. Fill only that much. */
#undef ibv_query_port
SV_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
			     struct _compat_ibv_port_attr *port_attr)
{
	return sv_query_port_ex(context, port_num, (struct ibv_port_attr *)port_attr,
				offsetof(struct ibv_port_attr, link_layer) + 1);
}

SV_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
			    union ibv_gid *gid)
{
	struct sv_device *d = to_ctx(context)->dev;
	int tbl = d->roce ? SV_ROCE_GID_TBL_LEN : SV_IB_GID_TBL_LEN;

	if (sv_port_check(d, port_num) || index < 0 || index >= tbl)
		return -1;
	memset(gid, 0, sizeof(*gid));
	if (index < d->port[port_num - 1].ngids)
		*gid = d->port[port_num - 1].gid[index];
	return 0;
}

static int fill_gid_entry(struct sv_device *d, uint32_t port, uint32_t index,
			  struct ibv_gid_entry *e)
{
	struct sv_port *p = &d->port[port - 1];

	if ((int)index >= p->ngids)
		return ENODATA;
	memset(e, 0, sizeof(*e));
	e->gid = p->gid[index];
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = p->gid_type[index];
	e->ndev_ifindex = d->roce ? (uint32_t)p->ifindex : 0;
	return 0;
}

SV_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
				struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	struct sv_device *d = to_ctx(context)->dev;
	struct ibv_gid_entry e;
	int rc;

	if (flags || port_num > 255 || sv_port_check(d, (uint8_t)port_num))
		return EINVAL;
	if (entry_size < sizeof(e))
		return EINVAL;
	rc = fill_gid_entry(d, port_num, gid_index, &e);
	if (rc)
		return rc;
	*entry = e;
	return 0;
}

SV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
				       size_t max_entries, uint32_t flags, size_t entry_size)
{
	struct sv_device *d = to_ctx(context)->dev;
	size_t n = 0;

	if (flags || entry_size < sizeof(struct ibv_gid_entry))
		return -EINVAL;
	for (int p = 1; p <= d->nports; p++) {
		for (int i = 0; i < d->port[p - 1].ngids; i++) {
			if (n == max_entries)
				return -EINVAL;
			fill_gid_entry(d, (uint32_t)p, (uint32_t)i,
				       (struct ibv_gid_entry *)((char *)entries + n * entry_size));
			n++;
		}
	}
	return (ssize_t)n;
}

SV_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
				 enum ibv_gid_type_sysfs *type)
{
	struct sv_device *d = to_ctx(context)->dev;
	int tbl = d->roce ? SV_ROCE_GID_TBL_LEN : SV_IB_GID_TBL_LEN;

	if (sv_port_check(d, port_num) || index >= (unsigned int)tbl) {
		errno = EINVAL;
		return -1;
	}
	if ((int)index >= d->port[port_num - 1].ngids) {
		errno = ENODATA;
		return -1;
	}
	*type = d->port[port_num - 1].gid_type[index] == IBV_GID_TYPE_ROCE_V2
			? IBV_GID_TYPE_SYSFS_ROCE_V2
			: IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

SV_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	struct sv_device *d = to_ctx(context)->dev;

	if (sv_port_check(d, port_num) || index < 0 || index >= sv_pkey_table_len(d))
		return -1;
	*pkey = htobe16(sv_pkey_at(&d->port[port_num - 1], index));
	return 0;
}

SV_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	struct sv_device *d = to_ctx(context)->dev;

	if (sv_port_check(d, port_num))
		return -EINVAL;
	for (int i = 0; i < d->port[port_num - 1].npkeys; i++)
		if (d->port[port_num - 1].pkey[i] == be16toh(pkey))
			return i;
	return -ENOENT;
}

/* Async events travel through a pipe per context (context->async_fd). */
struct sv_async_msg {
	enum ibv_event_type type;
	void *elem;
	int port;
};

void sv_async_event(struct sv_context *ctx, enum ibv_event_type type, void *elem, int port)
{
	struct sv_async_msg m;

	memset(&m, 0, sizeof(m)); /* no uninitialised padding into the pipe */
	m.type = type;
	m.elem = elem;
	m.port = port;
	if (write(ctx->async_wfd, &m, sizeof(m)) != (ssize_t)sizeof(m))
		sv_log("async event %d lost (pipe full)", (int)type);
}

SV_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct sv_async_msg m;
	ssize_t n = read(context->async_fd, &m, sizeof(m));

	if (n != (ssize_t)sizeof(m))
		return -1;
	memset(event, 0, sizeof(*event));
	event->event_type = m.type;
	switch (m.type) {
	case IBV_EVENT_CQ_ERR: event->element.cq = m.elem; break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED: event->element.qp = m.elem; break;
	default: event->element.port_num = m.port; break;
	}
	return 0;
}

SV_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	(void)event; /* nothing is freed on events; counts are not kept */
}

/* Fault injection: every port of device dev of this process changes state, and each
 * context open on it hears about it. Called with sv_eng.lock held. */
void sv_set_port_state(int dev, enum ibv_port_state state)
{
	int n;
	struct sv_device *devs = sv_devices(&n);

	if (dev < 0 || dev >= n)
		return;
	for (int p = 0; p < devs[dev].nports; p++)
		devs[dev].port[p].state = state;
	for (int i = 0; i < sv_eng.nctx; i++) {
		struct sv_context *ctx = sv_eng.ctxs[i];

		if (ctx->dev != &devs[dev])
			continue;
		for (int p = 1; p <= ctx->dev->nports; p++)
			sv_async_event(ctx,
				       state == IBV_PORT_ACTIVE ? IBV_EVENT_PORT_ACTIVE
								: IBV_EVENT_PORT_ERR,
				       NULL, p);
	}
}
