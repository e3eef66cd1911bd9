// SPDX-License-Identifier: Apache-2.0
/*
 * `braid doctor`'s RDMA checks, each read from files under the root (tools/doctor.h):
 * /dev/infiniband and memlock; per RDMA port its state, link layer and MTU; the RoCE GID
 * braid picks (plugin/gid.c, as net_ib does) against BRAID_IB_GID_INDEX; ECN (sysfs) and PFC (netlink DCB, the real
 * root only). docs/doctor.md has the rules.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <linux/dcbnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "plugin/gid.h"
#include "plugin/params.h"
#include "tools/doctor.h"
#include "topo/topo.h"

/* Paths and messages here are built from names of bounded length into fixed buffers; a
 * cut path only fails to open, a cut message stays one line. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

void doc_scan(struct doctor *d)
{
	char devs[DOC_MAX_NAMES][DOC_NAME_LEN], drv[64], p[512];
	int n = doc_list_dir(d, "/sys/class/infiniband", devs, DOC_MAX_NAMES);

	d->nrdma = n;
	d->nefa = 0;
	for (int i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "/sys/class/infiniband/%s/device/driver", devs[i]);
		doc_link_base(d, p, drv, sizeof(drv));
		if (!strcmp(drv, "efa") || !strncmp(devs[i], "efa_", 4))
			d->nefa++;
	}
}

/* ---- /dev/infiniband, memlock ---- */

static void check_dev(struct doctor *d)
{
	char names[DOC_MAX_NAMES][DOC_NAME_LEN], full[4096];
	int n = doc_list_dir(d, "/dev/infiniband", names, DOC_MAX_NAMES), nuv = 0;
	const char *first = NULL;

	for (int i = 0; i < n; i++)
		if (!strncmp(names[i], "uverbs", 6) && nuv++ == 0)
			first = names[i];
	if (!d->nrdma && !nuv) {
		doc_add(d, DOC_INFO, "dev.infiniband", NULL,
			"no RDMA device in /sys/class/infiniband and no /dev/infiniband: skipped");
		return;
	}
	if (!nuv) {
		doc_add(d, DOC_FAIL, "dev.infiniband",
			"start the container with --device=/dev/infiniband (k8s: the RDMA device "
			"plugin) and --cap-add=IPC_LOCK",
			"%d RDMA device(s) in /sys/class/infiniband but no /dev/infiniband/uverbs*: "
			"verbs cannot open them (a container without the devices?)",
			d->nrdma);
		return;
	}
	snprintf(full, sizeof(full), "/dev/infiniband/%s", first);
	if (!d->root[0] && access(full, R_OK | W_OK)) {
		doc_add(d, DOC_FAIL, "dev.infiniband",
			"add the user to the group of /dev/infiniband/uverbs* (often rdma), or "
			"fix its udev rule",
			"%s is there but not readable and writable by this user: %s", full,
			strerror(errno));
		return;
	}
	doc_add(d, DOC_PASS, "dev.infiniband", NULL,
		"/dev/infiniband has %d uverbs device(s) for %d RDMA device(s)", nuv, d->nrdma);
}

static void check_memlock(struct doctor *d)
{
	char buf[8192], soft[32] = "";
	const char *line;
	unsigned long long v;

	if (doc_read(d, "/proc/self/limits", buf, sizeof(buf)) ||
	    !(line = strstr(buf, "Max locked memory")) ||
	    sscanf(line + strlen("Max locked memory"), " %31s", soft) != 1) {
		doc_add(d, DOC_INFO, "memlock", NULL, "/proc/self/limits has no Max locked memory");
		return;
	}
	if (!strcmp(soft, "unlimited")) {
		doc_add(d, DOC_PASS, "memlock", NULL, "memlock limit is unlimited");
		return;
	}
	v = strtoull(soft, NULL, 10);
	doc_add(d, v < (64ULL << 20) ? DOC_FAIL : DOC_WARN, "memlock",
		"ulimit -l unlimited (limits.conf: * - memlock unlimited; docker: --ulimit "
		"memlock=-1; systemd: LimitMEMLOCK=infinity)",
		"memlock limit is %llu KiB: registering NCCL's buffers %s", v >> 10,
		v < (64ULL << 20) ? "fails (ibv_reg_mr: ENOMEM)" : "can fail on large jobs");
}

/* ---- ports, GIDs ---- */

/* What sysfs says of a GID beyond the entry braid_gid_choose reads. */
struct gid_shown {
	char type[32]; /* as sysfs says: "RoCE v2", "IB/RoCE v1" */
	char ndev[64];
};

/* sysfs' type of a GID on a RoCE port: "IB/RoCE v1" is RoCE v1 there. */
static int gid_type(const char *sysfs_type)
{
	if (strstr(sysfs_type, "v2"))
		return BRAID_GID_ROCE_V2;
	if (strstr(sysfs_type, "v1"))
		return BRAID_GID_ROCE_V1;
	return BRAID_GID_UNKNOWN;
}

/* The GIDs of a port in table order: every gids/N with a valid, non-zero address. */
static int read_gids(struct doctor *d, const char *dev, const char *port, struct braid_gid_entry *g,
		     struct gid_shown *shown, int max)
{
	static const uint8_t zero[16];
	char names[256][DOC_NAME_LEN], p[512], s[128];
	int n = 0, ne;

	snprintf(p, sizeof(p), "/sys/class/infiniband/%s/ports/%s/gids", dev, port);
	ne = doc_list_dir(d, p, names, 256);
	for (int i = 0; i < ne && n < max; i++) {
		struct braid_gid_entry *e = &g[n];
		struct gid_shown *sh = &shown[n];

		memset(e, 0, sizeof(*e));
		memset(sh, 0, sizeof(*sh));
		e->index = atoi(names[i]);
		snprintf(p, sizeof(p), "/sys/class/infiniband/%s/ports/%s/gids/%s", dev, port,
			 names[i]);
		if (doc_read(d, p, s, sizeof(s)) || inet_pton(AF_INET6, s, e->raw) != 1 ||
		    !memcmp(e->raw, zero, sizeof(zero)))
			continue;
		snprintf(p, sizeof(p), "/sys/class/infiniband/%s/ports/%s/gid_attrs/types/%s", dev,
			 port, names[i]);
		doc_read(d, p, sh->type, sizeof(sh->type));
		e->type = gid_type(sh->type);
		snprintf(p, sizeof(p), "/sys/class/infiniband/%s/ports/%s/gid_attrs/ndevs/%s", dev,
			 port, names[i]);
		doc_read(d, p, sh->ndev, sizeof(sh->ndev));
		n++;
	}
	return n;
}

static const char *gid_str(const struct braid_gid_entry *e, char *buf, size_t len)
{
	if (!inet_ntop(AF_INET6, e->raw, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

static const char *shown_type(const struct gid_shown *sh)
{
	return sh->type[0] ? sh->type : "type unknown";
}

/* BRAID_IB_GID_INDEX (or NCCL_IB_GID_INDEX) set: the index against braid's own pick. */
static void check_gid_index(struct doctor *d, const char *id, const char *dev, const char *port,
			    const struct braid_gid_entry *g, const struct gid_shown *sh, int n,
			    const struct braid_gid_rule *rule, const struct braid_gid_pick *own)
{
	const char *src = braid_param_source(BRAID_P_IB_GID_INDEX);
	int want = rule->want_index, k;
	char s[64], s2[64], fix[128], v2idx[16] = "none";
	struct braid_gid_pick set;

	braid_gid_choose(g, n, rule, &set);
	k = set.pos;
	if (own->pos >= 0 && !own->version_fallback)
		snprintf(v2idx, sizeof(v2idx), "%d", g[own->pos].index);
	if (k < 0) {
		snprintf(fix, sizeof(fix), "unset %s (braid then picks the RoCE v2 GID)", src);
		if (own->pos >= 0)
			snprintf(s, sizeof(s), "index %d", g[own->pos].index);
		else
			snprintf(s, sizeof(s), "none");
		doc_add(d, DOC_FAIL, id, fix,
			"%s=%d: %s:%s has no GID at that index (braid's own pick would be %s): "
			"braid skips the port",
			src, want, dev, port, s);
	} else if (g[k].type == BRAID_GID_ROCE_V1) {
		snprintf(fix, sizeof(fix), "unset %s, or set it to the RoCE v2 index", src);
		doc_add(d, DOC_FAIL, id, fix,
			"%s=%d is %s (%s) on %s:%s: RoCE v1 is not routable; RoCE v2 is at index %s",
			src, want, shown_type(&sh[k]), gid_str(&g[k], s, sizeof(s)), dev, port,
			v2idx);
	} else if (own->pos >= 0 && own->pos != k) {
		snprintf(fix, sizeof(fix), "unset %s unless the index is meant", src);
		doc_add(d, DOC_WARN, id, fix,
			"%s=%d (%s, %s) differs from braid's own pick %d (%s)", src, want,
			gid_str(&g[k], s, sizeof(s)), shown_type(&sh[k]), g[own->pos].index,
			gid_str(&g[own->pos], s2, sizeof(s2)));
	} else {
		doc_add(d, DOC_PASS, id, NULL, "%s=%d: %s, %s on %s", src, want,
			gid_str(&g[k], s, sizeof(s)), shown_type(&sh[k]),
			sh[k].ndev[0] ? sh[k].ndev : "?");
	}
}

/* The GID net_ib picks on this port (plugin/gid.c: the same rule, the same table). */
static void check_gid(struct doctor *d, const char *dev, const char *port)
{
	struct braid_gid_entry g[128];
	struct gid_shown sh[128];
	struct braid_gid_rule rule, own_rule;
	struct braid_gid_pick own;
	int n = read_gids(d, dev, port, g, sh, 128);
	char id[96], s[64];
	const struct braid_gid_entry *e;

	snprintf(id, sizeof(id), "gid %s:%s", dev, port);
	braid_gid_rule_from_params(&rule);
	own_rule = rule;
	own_rule.want_index = -1;
	braid_gid_choose(g, n, &own_rule, &own);
	if (own.range_bad)
		doc_add(d, DOC_WARN, id, "write it as address/prefix (10.0.0.0/8, fd00::/64)",
			"%s=\"%s\" is not an address/prefix: braid ignores it",
			braid_param_source(BRAID_P_IB_ADDR_RANGE), rule.range);
	if (rule.want_index >= 0) {
		check_gid_index(d, id, dev, port, g, sh, n, &rule, &own);
		return;
	}
	if (own.pos < 0) {
		doc_add(d, DOC_FAIL, id,
			rule.range && rule.range[0]
				? "give the port's netdev an address in the range, or widen the range"
				: "give the port's netdev an IP address (ip addr add ... dev NETDEV)",
			"%s:%s has %s (%d GIDs): braid cannot use it", dev, port, own.why, n);
		return;
	}
	e = &g[own.pos];
	doc_add(d, own.version_fallback ? DOC_WARN : DOC_PASS, id,
		own.version_fallback
			? "give the port's netdev an address with a RoCE v2 GID (or check "
			  "the range)"
			: NULL,
		"braid would pick GID index %d: %s, %s on %s (%s)%s", e->index,
		gid_str(e, s, sizeof(s)), shown_type(&sh[own.pos]),
		sh[own.pos].ndev[0] ? sh[own.pos].ndev : "?", own.why,
		own.version_fallback ? ": RoCE v1 is not routable across subnets" : "");
}

/* The RoCE MTU the kernel derives from a netdev MTU (iboe_get_mtu: minus the RoCE v2
 * headers, 96 bytes, rounded down to 256..4096). */
static int roce_mtu(int mtu)
{
	int m = 4096;

	mtu -= 96;
	while (m > 256 && m > mtu)
		m /= 2;
	return m;
}

/* ---- ECN (sysfs, mlx5) and PFC (netlink DCB) ---- */

static void check_ecn(struct doctor *d, const char *nd)
{
	char id[96], p[512], v[16], on[64] = "";
	int np = 0, rp = 0, any = 0;

	snprintf(id, sizeof(id), "ecn %s", nd);
	snprintf(p, sizeof(p), "/sys/class/net/%s/ecn/roce_np/enable", nd);
	if (!doc_exists(d, p)) {
		doc_add(d, DOC_INFO, id, NULL,
			"ECN not exposed by the driver (no /sys/class/net/%s/ecn): not checked",
			nd);
		return;
	}
	for (int prio = 0; prio < 8; prio++) {
		int a = 0, b = 0;

		snprintf(p, sizeof(p), "/sys/class/net/%s/ecn/roce_np/enable/%d", nd, prio);
		if (!doc_read(d, p, v, sizeof(v)))
			a = atoi(v) == 1;
		snprintf(p, sizeof(p), "/sys/class/net/%s/ecn/roce_rp/enable/%d", nd, prio);
		if (!doc_read(d, p, v, sizeof(v)))
			b = atoi(v) == 1;
		np += a;
		rp += b;
		if (a && b) {
			snprintf(on + strlen(on), sizeof(on) - strlen(on), "%s%d", any ? "," : "",
				 prio);
			any++;
		}
	}
	if (any)
		doc_add(d, DOC_PASS, id, NULL,
			"ECN (DCQCN) on for priority %s, as notification and reaction point", on);
	else
		doc_add(d, DOC_WARN, id,
			"echo 1 into /sys/class/net/NETDEV/ecn/roce_np/enable/3 and roce_rp/enable/3 "
			"(the RoCE priority)",
			"ECN (DCQCN) is off on every priority of %s (np %d, rp %d enabled): congestion "
			"drops instead of slowing senders",
			nd, np, rp);
}

/* PFC enabled priorities of a netdev from rtnetlink DCB (IEEE). 0 and *en, else -errno. */
static int dcb_pfc(const char *ifname, int *en)
{
	struct {
		struct nlmsghdr nh;
		struct dcbmsg dcb;
		char buf[64];
	} req;
	char resp[8192];
	struct rtattr *rta;
	struct timeval tv = { .tv_sec = 2 };
	int fd, len, rc = -ENODATA;
	ssize_t n;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_type = RTM_GETDCB;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.nh.nlmsg_seq = 1;
	req.dcb.dcb_family = AF_UNSPEC;
	req.dcb.cmd = DCB_CMD_IEEE_GET;
	rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(NLMSG_LENGTH(sizeof(req.dcb))));
	rta->rta_type = DCB_ATTR_IFNAME;
	rta->rta_len = (unsigned short)RTA_LENGTH(strlen(ifname) + 1);
	if (strlen(ifname) + 1 > sizeof(req.buf) - RTA_LENGTH(0)) {
		close(fd);
		return -EINVAL;
	}
	memcpy(RTA_DATA(rta), ifname, strlen(ifname) + 1);
	req.nh.nlmsg_len = NLMSG_ALIGN(NLMSG_LENGTH(sizeof(req.dcb))) + RTA_ALIGN(rta->rta_len);
	if (send(fd, &req, req.nh.nlmsg_len, 0) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	n = recv(fd, resp, sizeof(resp), 0);
	close(fd);
	if (n < 0)
		return -errno;
	for (struct nlmsghdr *h = (struct nlmsghdr *)resp; NLMSG_OK(h, (unsigned int)n);
	     h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(h);

			return e->error ? e->error : -ENODATA;
		}
		if (h->nlmsg_type != RTM_GETDCB)
			continue;
		len = (int)h->nlmsg_len - NLMSG_LENGTH(sizeof(struct dcbmsg));
		rta = (struct rtattr *)((char *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct dcbmsg)));
		for (; RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
			struct rtattr *in;
			int ilen;

			if (rta->rta_type != DCB_ATTR_IEEE)
				continue;
			ilen = (int)RTA_PAYLOAD(rta);
			for (in = RTA_DATA(rta); RTA_OK(in, ilen); in = RTA_NEXT(in, ilen)) {
				if (in->rta_type == DCB_ATTR_IEEE_PFC &&
				    RTA_PAYLOAD(in) >= sizeof(struct ieee_pfc)) {
					const struct ieee_pfc *pfc = RTA_DATA(in);

					*en = pfc->pfc_en;
					return 0;
				}
			}
		}
	}
	return rc;
}

static void check_pfc(struct doctor *d, const char *nd)
{
	char id[96], on[32] = "";
	int en = 0, rc;

	snprintf(id, sizeof(id), "pfc %s", nd);
	if (d->root[0]) {
		doc_add(d, DOC_INFO, id, NULL,
			"PFC is only exposed through netlink DCB of the running host, not as a file "
			"under --root: not checked");
		return;
	}
	rc = dcb_pfc(nd, &en);
	if (rc) {
		doc_add(d, DOC_INFO, id, NULL,
			"PFC not exposed by the driver of %s (netlink DCB IEEE: %s): not checked",
			nd, strerror(-rc));
		return;
	}
	for (int prio = 0; prio < 8; prio++)
		if (en & (1 << prio))
			snprintf(on + strlen(on), sizeof(on) - strlen(on), "%s%d", on[0] ? "," : "",
				 prio);
	if (en)
		doc_add(d, DOC_PASS, id, NULL, "PFC on for priority %s of %s", on, nd);
	else
		doc_add(d, DOC_WARN, id,
			"mlnx_qos -i NETDEV --pfc 0,0,0,1,0,0,0,0 (and on the switch), or rely on "
			"ECN alone if the fabric is built for lossy RoCE",
			"PFC is off on every priority of %s: RoCE runs lossy", nd);
}

static void check_ports(struct doctor *d)
{
	char devs[DOC_MAX_NAMES][DOC_NAME_LEN], ports[16][DOC_NAME_LEN], p[512];
	char state[64], ll[32], rate[64], nd[64], mtu_s[32], id[96];
	int nactive = 0, nports = 0;
	int ndev = doc_list_dir(d, "/sys/class/infiniband", devs, DOC_MAX_NAMES);

	for (int i = 0; i < ndev; i++) {
		snprintf(p, sizeof(p), "/sys/class/infiniband/%s/ports", devs[i]);
		int np = doc_list_dir(d, p, ports, 16);

		for (int k = 0; k < np; k++) {
			const char *dv = devs[i], *pt = ports[k];
			int active, roce, mtu = 0;

#define PORTF(f, buf)                                                            \
	(snprintf(p, sizeof(p), "/sys/class/infiniband/%s/ports/%s/" f, dv, pt), \
	 doc_read(d, p, buf, sizeof(buf)))
			if (PORTF("state", state))
				snprintf(state, sizeof(state), "?");
			if (PORTF("link_layer", ll))
				snprintf(ll, sizeof(ll), "InfiniBand");
			if (PORTF("rate", rate))
				rate[0] = '\0';
			if (PORTF("gid_attrs/ndevs/0", nd))
				nd[0] = '\0';
#undef PORTF
			nports++;
			active = strstr(state, "ACTIVE") != NULL;
			nactive += active;
			roce = !strcmp(ll, "Ethernet");
			snprintf(id, sizeof(id), "port %s:%s", dv, pt);
			if (roce && nd[0]) {
				snprintf(p, sizeof(p), "/sys/class/net/%s/mtu", nd);
				if (!doc_read(d, p, mtu_s, sizeof(mtu_s)))
					mtu = atoi(mtu_s);
			}
			if (doc_want(d, "port")) {
				char mtxt[128];

				if (!roce)
					snprintf(mtxt, sizeof(mtxt),
						 "MTU not checked (InfiniBand: ibv_query_port)");
				else if (mtu)
					snprintf(mtxt, sizeof(mtxt), "RoCE MTU %d (%s mtu %d)",
						 roce_mtu(mtu), nd, mtu);
				else
					snprintf(mtxt, sizeof(mtxt), "no netdev MTU");
				if (!active)
					doc_add(d, DOC_WARN, id,
						"check the cable and switch port (ibstat; ip link set "
						"NETDEV up; an IB port needs a subnet manager)",
						"%s, %s%s%s: not ACTIVE, NCCL skips it", state, ll,
						rate[0] ? ", " : "", rate);
				else if (roce && mtu && roce_mtu(mtu) < 4096)
					doc_add(d, DOC_WARN, id,
						"ip link set NETDEV mtu 9000 (and jumbo frames on the "
						"switch)",
						"%s, %s, %s%s%s: small packets cost bandwidth",
						state, ll, mtxt, rate[0] ? ", " : "", rate);
				else
					doc_add(d, DOC_PASS, id, NULL, "%s, %s, %s%s%s", state, ll,
						mtxt, rate[0] ? ", " : "", rate);
			}
			if (!roce)
				continue;
			if (doc_want(d, "gid"))
				check_gid(d, dv, pt);
			if (nd[0] && doc_want(d, "ecn"))
				check_ecn(d, nd);
			if (nd[0] && doc_want(d, "pfc"))
				check_pfc(d, nd);
		}
	}
	if (doc_want(d, "port")) {
		if (!ndev)
			doc_add(d, DOC_INFO, "port", NULL,
				"no RDMA device in /sys/class/infiniband: braid will use libfabric "
				"or TCP");
		else if (!nactive)
			doc_add(d, DOC_FAIL, "port",
				"bring a port up (ibstat, ip link, the switch, a subnet manager on IB)",
				"none of the %d RDMA port(s) is ACTIVE", nports);
	}
}

void doc_check_rdma(struct doctor *d)
{
	if (doc_want(d, "dev"))
		check_dev(d);
	if (doc_want(d, "memlock"))
		check_memlock(d);
	if (doc_want(d, "port") || doc_want(d, "gid") || doc_want(d, "ecn") || doc_want(d, "pfc"))
		check_ports(d);
}
