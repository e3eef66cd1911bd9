/* Spike S1: does fi_av_remove (with FI_AV_REMOVE_CLEANUP=1 in the environment) make every
 * operation outstanding to a peer behind a dead path come back on tcp;ofi_rxm (1.17)?
 * Results: the addendum "spike 1" in ofi-failover.md.
 *
 * Two processes in two netns joined by one veth pair, shaped so that transfers are slow:
 *   ip netns add s1na; ip netns add s1nb
 *   ip link add s1a netns s1na type veth peer name s1b netns s1nb
 *   ip -n s1na addr add 198.19.1.1/24 dev s1a; ip -n s1nb addr add 198.19.1.2/24 dev s1b
 *   ip -n s1na link set s1a up; ip -n s1nb link set s1b up   (wait for LOWER_UP on both)
 *   ip netns exec s1na tc qdisc add dev s1a root tbf rate 10mbit burst 32kbit latency 400ms
 *   (the same on s1b), then, with an empty directory DIR for each run:
 *   ip netns exec s1nb ./s1 r DIR MODE DOWN_MS TC & ip netns exec s1na ./s1 s DIR MODE DOWN_MS TC
 * MODE: av (fi_av_remove), close (fi_close the endpoint), cancelclose (fi_cancel every
 * operation, 1 s of progress, then fi_close), none. TC 1: hints tx op_flags
 * FI_TRANSMIT_COMPLETE. The two processes meet through files in DIR.
 *
 * The sender posts 4 eager (64 B), 4 SAR (64 KiB), 4 rendezvous (1 MiB) tagged sends, takes
 * its veth down after DOWN_MS, posts 2 more of each ("+"), and 1 s later both sides do MODE.
 * The receiver has a matched receive posted for every send; both sides have 2 unmatched
 * ones; all receives are FI_ADDR_UNSPEC, as braid posts them. Then: 5 s of CQ progress, link
 * up, 3 s more, and every receive buffer is compared with its copy taken when MODE returned.
 * Then both sides re-insert the peer's name and exchange all three sizes again, plus 64 B to
 * the old unmatched receive; what is still posted is cancelled.
 * build: cc -std=c11 -D_GNU_SOURCE -Wall -O1 -g -o /tmp/s1 docs/design/ofi-spike-av-remove.c \
 *        -lfabric   (add -fsanitize=address for the close cases) */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}
#define CK(x)                                                                     \
	do {                                                                      \
		int _r = (x);                                                     \
		if (_r) {                                                         \
			fprintf(stderr, "%s: %d %s\n", #x, _r, fi_strerror(-_r)); \
			exit(1);                                                  \
		}                                                                 \
	} while (0)
struct op {
	struct fi_context2 ctx; /* first: the CQ entry's op_context is &op->ctx */
	char name[24];
	int recv, state, err, prov_errno, phase; /* state 1 posted, 2 ok, 3 error */
	size_t size, len;
	uint64_t tag;
	char *buf, *snap;
	double t;
};
static struct op ops[96];
static int nops, phase, role_s;
static double t0, t_rm = -1;
static struct fid_ep *ep;
static struct fid_cq *cq;
static const char *dir, *pname[] = { "run", "down", "removed", "up", "recovery" };
static void fill(char *b, size_t n, uint64_t tag)
{
	for (size_t j = 0; j < n; j++)
		b[j] = (char)(((tag * 31 + j * 7) & 0xff) | 1);
}
static double rel(double t)
{
	return t_rm < 0 ? t - t0 : t - t_rm;
}
static void record(struct op *o, int err, int perr, size_t len)
{
	o->state = err ? 3 : 2, o->err = err, o->prov_errno = perr, o->len = len;
	o->t = now(), o->phase = phase;
	printf("[%c] %7.3f %-8s %-12s %s len=%zu", role_s ? 's' : 'r', rel(o->t), pname[phase],
	       o->name, err ? "ERROR" : "ok", len);
	if (err)
		printf(" err=%d (%s) prov_errno=%d", err, fi_strerror(err), perr);
	printf("\n");
}
static void poll_cq(void)
{
	struct fi_cq_tagged_entry e[8];
	ssize_t n = fi_cq_read(cq, e, 8);
	for (ssize_t i = 0; i < n; i++)
		if (e[i].op_context)
			record((struct op *)e[i].op_context, 0, 0, e[i].len);
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry ee = { 0 };
		if (fi_cq_readerr(cq, &ee, 0) == 1 && ee.op_context)
			record((struct op *)ee.op_context, ee.err, ee.prov_errno, ee.len);
		else if (ee.err)
			printf("error entry without context: err=%d prov_errno=%d\n", ee.err,
			       ee.prov_errno);
	}
}
static void progress(double secs)
{
	double end = now() + secs;
	while (now() < end)
		poll_cq();
}
static void mark(const char *what)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, what);
	fclose(fopen(p, "w"));
}
static void wait_mark(const char *what) /* progressing meanwhile; 15 s: the peer died */
{
	char p[256];
	double end = now() + 15;
	snprintf(p, sizeof(p), "%s/%s", dir, what);
	while (access(p, F_OK))
		if (progress(0.005), now() > end) {
			printf("[%c] no %s from the peer in 15 s: stop\n", role_s ? 's' : 'r',
			       what);
			exit(4);
		}
}
static struct op *post(int recv, const char *name, size_t size, uint64_t tag, fi_addr_t to)
{
	struct op *o = &ops[nops++];
	ssize_t r;
	snprintf(o->name, sizeof(o->name), "%s", name);
	o->recv = recv, o->size = size, o->tag = tag, o->state = 1;
	o->buf = calloc(1, size);
	if (!recv)
		fill(o->buf, size, tag);
	do {
		r = recv ? fi_trecv(ep, o->buf, size, NULL, FI_ADDR_UNSPEC, tag, 0, &o->ctx)
			 : fi_tsend(ep, o->buf, size, NULL, to, tag, &o->ctx);
		if (r == -FI_EAGAIN)
			poll_cq();
	} while (r == -FI_EAGAIN);
	if (r) {
		printf("post %s: %zd %s\n", name, r, fi_strerror((int)-r));
		o->state = 3, o->err = (int)-r;
	}
	return o;
}
static const char *szname[] = { "eager", "sar", "rndv" };
static const size_t sizes[] = { 64, 65536, 1 << 20 };
/* the data set: 4 of each before the link goes down (set 0), 2 more after (set 1) */
static void post_data(int recv, int set, fi_addr_t peer)
{
	char n[24];
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < (set ? 2 : 4); i++) {
			snprintf(n, sizeof(n), "%s-%s%d%c", recv ? "rx" : "tx", szname[k], i,
				 set ? '+' : ' ');
			post(recv, n, sizes[k], 0x100 * (k + 1) + 0x10 * set + i, peer);
		}
}
int main(int argc, char **argv)
{
	if (argc < 6)
		return 2;
	role_s = !strcmp(argv[1], "s"), dir = argv[2];
	const char *mode = argv[3];
	int down_ms = atoi(argv[4]), tc = atoi(argv[5]);
	struct fi_info *hints = fi_allocinfo(), *info;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr ava = { .type = FI_AV_TABLE };
	char addr[128], paddr[128], p[256];
	size_t alen = sizeof(addr), plen;
	fi_addr_t peer = FI_ADDR_NOTAVAIL, peer2 = FI_ADDR_NOTAVAIL;
	alarm(45);
	setvbuf(stdout, NULL, _IOLBF, 0);
	t0 = now();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED | FI_MSG;
	hints->addr_format = FI_SOCKADDR_IN; /* not the veth's IPv6 link-local address */
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->fabric_attr->prov_name = strdup("tcp;ofi_rxm");
	hints->domain_attr->name = strdup(role_s ? "s1a" : "s1b");
	hints->tx_attr->op_flags = tc ? FI_TRANSMIT_COMPLETE : 0;
	CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	if (strcmp(info->domain_attr->name, hints->domain_attr->name)) {
		printf("fi_getinfo gave domain %s: the veth is not up yet\n",
		       info->domain_attr->name);
		exit(5);
	}
	CK(fi_fabric(info->fabric_attr, &fab, NULL));
	CK(fi_domain(fab, info, &dom, NULL));
	CK(fi_endpoint(dom, info, &ep, NULL));
	CK(fi_cq_open(dom, &cqa, &cq, NULL));
	CK(fi_av_open(dom, &ava, &av, NULL));
	CK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CK(fi_ep_bind(ep, &av->fid, 0));
	CK(fi_enable(ep));
	CK(fi_getname(&ep->fid, addr, &alen));
	snprintf(p, sizeof(p), "%s/%s.addr", dir, role_s ? "s" : "r");
	FILE *f = fopen(p, "w");
	fwrite(addr, 1, alen, f);
	fclose(f);
	mark(role_s ? "s.ready" : "r.ready");
	wait_mark(role_s ? "r.ready" : "s.ready");
	snprintf(p, sizeof(p), "%s/%s.addr", dir, role_s ? "r" : "s");
	f = fopen(p, "r");
	plen = fread(paddr, 1, sizeof(paddr), f);
	fclose(f);
	if (!plen || fi_av_insert(av, paddr, 1, &peer, 0, NULL) != 1)
		exit(3);
	/* warm-up, both ways: the rxm connection is up */
	struct op *w = post(1, "warm-rx", 64, 0x99, 0);
	mark(role_s ? "s.warm" : "r.warm");
	wait_mark(role_s ? "r.warm" : "s.warm");
	struct op *ws = post(0, "warm-tx", 64, 0x99, peer);
	while (w->state == 1 || ws->state == 1)
		poll_cq();
	/* the unmatched receives, both sides */
	struct op *un0 = post(1, "rx-unmatched0", 65536, 0x500, 0);
	post(1, "rx-unmatched1", 65536, 0x501, 0);
	if (!role_s) {
		post_data(1, 0, 0);
		post_data(1, 1, 0);
		mark("r.posted");
		wait_mark("s.down");
	} else {
		wait_mark("r.posted");
		post_data(0, 0, peer);
		progress(down_ms / 1000.0);
		if (system("ip link set s1a down"))
			printf("ip link set s1a down failed\n");
		phase = 1;
		printf("[s] %7.3f link s1a down\n", now() - t0);
		post_data(0, 1, peer);
		mark("s.down");
	}
	phase = 1;
	progress(1.0);
	/* step K */
	double a = now();
	int rc = 0;
	printf("[%c] %7.3f calling %s\n", role_s ? 's' : 'r', now() - t0, mode);
	if (!strcmp(mode, "cancelclose")) { /* K2 as ofi_dev_close_ep: cancel, reap, close */
		for (int i = 0; i < nops; i++)
			if (ops[i].state == 1)
				fi_cancel(&ep->fid, &ops[i].ctx);
		progress(1.0);
		a = now();
	}
	if (!strcmp(mode, "av"))
		rc = fi_av_remove(av, &peer, 1, 0);
	else if (strstr(mode, "close"))
		rc = fi_close(&ep->fid);
	t_rm = now();
	phase = 2;
	printf("[%c] %s: rc %d (%s), took %.3f s\n", role_s ? 's' : 'r', mode, rc, fi_strerror(-rc),
	       t_rm - a);
	for (int i = 0; i < nops; i++)
		if (ops[i].recv) {
			ops[i].snap = malloc(ops[i].size);
			memcpy(ops[i].snap, ops[i].buf, ops[i].size);
		}
	if (strstr(mode, "close")) {
		/* the endpoint is gone: no more progress on it; read the CQ a little */
		progress(1.0);
		for (int i = 0; i < nops; i++)
			if (ops[i].state == 1)
				printf("[%c] outstanding at endpoint close: %s\n",
				       role_s ? 's' : 'r', ops[i].name);
		int r1 = fi_close(&cq->fid), r2 = fi_close(&av->fid), r3 = fi_close(&dom->fid);
		int r4 = fi_close(&fab->fid);
		printf("[%c] closed cq %d av %d domain %d fabric %d, no crash\n",
		       role_s ? 's' : 'r', r1, r2, r3, r4);
		return 0;
	}
	progress(5.0);
	if (role_s) {
		if (system("ip link set s1a up"))
			printf("ip link set s1a up failed\n");
		printf("[s] %7.3f link s1a up\n", rel(now()));
		mark("s.up");
	}
	wait_mark("s.up");
	phase = 3;
	progress(3.0);
	printf("[%c] summary after av_remove (t relative to its return):\n", role_s ? 's' : 'r');
	for (int i = 0; i < nops; i++) {
		struct op *o = &ops[i];
		size_t landed = 0, changed = 0;
		if (o->recv)
			for (size_t j = 0; j < o->size; j++)
				landed += o->snap[j] != 0, changed += o->snap[j] != o->buf[j];
		printf("[%c] %-14s %-10s", role_s ? 's' : 'r', o->name,
		       o->state == 1   ? "OUTSTANDING"
		       : o->state == 2 ? "ok"
				       : fi_strerror(o->err));
		if (o->state > 1)
			printf(" in %-8s at %7.3f", pname[o->phase], o->t - t_rm);
		if (o->recv)
			printf("  bytes landed at remove %zu/%zu, written after remove %zu", landed,
			       o->size, changed);
		printf("\n");
	}
	/* recovery: re-insert the same name, exchange all three sizes both ways again */
	phase = 4;
	double ta = now();
	rc = fi_av_insert(av, paddr, 1, &peer2, 0, NULL);
	printf("[%c] re-insert: rc %d, fi_addr %llu (old %llu), took %.3f s\n", role_s ? 's' : 'r',
	       rc, (unsigned long long)peer2, (unsigned long long)peer, now() - ta);
	struct op *rr[3], *rs[4];
	for (int k = 0; k < 3; k++) {
		snprintf(p, sizeof(p), "rx2-%s", szname[k]);
		rr[k] = post(1, p, sizes[k], 0x700 + k, 0);
	}
	mark(role_s ? "s.r2" : "r.r2");
	wait_mark(role_s ? "r.r2" : "s.r2");
	double ts = now(), first = -1;
	for (int k = 0; k < 3; k++) {
		snprintf(p, sizeof(p), "tx2-%s", szname[k]);
		rs[k] = post(0, p, sizes[k], 0x700 + k, peer2);
	}
	rs[3] = post(0, "tx2-to-unm0", 64, 0x500, peer2);
	int left = 1;
	while (left && now() - ts < 10) {
		poll_cq();
		left = un0->state == 1;
		for (int k = 0; k < 4; k++) {
			if (rs[k]->state > 1 && first < 0)
				first = rs[k]->t - ts;
			left |= rs[k]->state == 1 || (k < 3 && rr[k]->state == 1);
		}
	}
	printf("[%c] recovery: first send completion %.3f s after posting; %s\n",
	       role_s ? 's' : 'r', first, left ? "SOMETHING OUTSTANDING after 10 s" : "all done");
	for (int k = 0; k < 3; k++) {
		char *x = malloc(sizes[k]);
		fill(x, sizes[k], 0x700 + k);
		printf("[%c] rx2-%s: data %s\n", role_s ? 's' : 'r', szname[k],
		       rr[k]->state == 2 && !memcmp(x, rr[k]->buf, sizes[k]) ? "right" : "WRONG");
		free(x);
	}
	/* other receives still posted: cancel them, they should come back FI_ECANCELED */
	for (int i = 0; i < nops; i++)
		if (ops[i].state == 1)
			fi_cancel(&ep->fid, &ops[i].ctx);
	mark(role_s ? "s.end" : "r.end");
	wait_mark(role_s ? "r.end" : "s.end");
	progress(0.5);
	for (int i = 0; i < nops; i++)
		if (ops[i].state == 1)
			printf("[%c] still outstanding after cancel: %s\n", role_s ? 's' : 'r',
			       ops[i].name);
	CK(fi_close(&ep->fid));
	CK(fi_close(&cq->fid));
	CK(fi_close(&av->fid));
	CK(fi_close(&dom->fid));
	CK(fi_close(&fab->fid));
	printf("[%c] closed\n", role_s ? 's' : 'r');
	return 0;
}
