// SPDX-License-Identifier: Apache-2.0
/*
 * fi_rdm_bench: the raw libfabric baseline for `braid perf`. Two processes (this one
 * forks its peer), FI_EP_RDM tagged messages on the named provider, measured the same
 * way braid perf measures: streaming bandwidth with a window of sends in flight (the
 * receiver pre-posts its window, says "go", acknowledges the last message), and 8-byte
 * ping-pong latency (half round trip). --rma streams with fi_writedata into the
 * receiver's registered buffer instead (the receiver posts nothing and counts the remote
 * CQ data), the shape net_ib has and issue 17 asks net_ofi to weigh; --verify checks
 * that each write's data is in place when its CQ data is read, and that every CQ data
 * comes once. Links -lfabric directly: it is a benchmark, not the plugin.
 */
#include <errno.h>
#include <getopt.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TAG_DATA 1
#define TAG_CTRL 2
#define MAX_WINDOW 64
#define VERIFY_SLOTS 32 /* --verify: message i is written to slot i % VERIFY_SLOTS */
#define TIMEOUT_US (60 * 1e6)

struct bench {
	bool sender;
	int sock; /* socketpair to the peer, for addresses only */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	fi_addr_t peer;
	char *buf;            /* data */
	char *ctrl;           /* 64 bytes: control and latency messages, 2 halves */
	bool rma;             /* stream with fi_writedata (the sender) into the peer's buffer */
	uint64_t rkey, raddr; /* --rma, sender: the receiver's buffer */
	int rdata;            /* --rma, receiver: remote CQ data completions read */
	/* --verify: the slots of the buffer, and the receiver's findings */
	bool verify;
	uint32_t slots;
	uint8_t *seen; /* per message of the stream: its CQ data came */
	int seen_n, in_place, lapped, early, bad_data;
	int len_seen; /* completions whose len is the write's size */
	struct fid_mr *mr;
	void *desc;
	void *ctrl_desc; /* the control buffer's, where the provider wants FI_MR_LOCAL */
	struct fi_context data_ctx[MAX_WINDOW];
	struct fi_context ctrl_send_ctx, ctrl_recv_ctx;
	int data_done[MAX_WINDOW];
	int ctrl_send_done, ctrl_recv_done;
	size_t size;
	int window, iters, warmup, lat_iters;
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static void die(const char *what, long rc)
{
	fprintf(stderr, "fi_rdm_bench: %s: %s (%ld)\n", what,
		rc < 0 ? fi_strerror((int)-rc) : strerror(errno), rc);
	exit(1);
}

/* Message seq's stamp, in the first 8 bytes of every 4 KiB of its slot and in its last 8. */
static void stamp(char *p, size_t size, uint64_t seq)
{
	seq++; /* 0 is no message's */
	for (size_t off = 0; off + sizeof(seq) <= size; off += 4096)
		memcpy(p + off, &seq, sizeof(seq));
	memcpy(p + size - sizeof(seq), &seq, sizeof(seq));
}

/* The smallest and largest of the stamps in a slot. */
static void stamps_read(const char *p, size_t size, uint64_t *lo, uint64_t *hi)
{
	uint64_t v;

	memcpy(&v, p + size - sizeof(v), sizeof(v));
	*lo = *hi = v;
	for (size_t off = 0; off + sizeof(v) <= size; off += 4096) {
		memcpy(&v, p + off, sizeof(v));
		*lo = v < *lo ? v : *lo;
		*hi = v > *hi ? v : *hi;
	}
}

/* --verify, receiver: message seq's CQ data came; its slot holds its stamps (or a later
 * message's, which wrote the slot since: lapped), never an earlier one's (early: the CQ
 * data came before the data). */
static void verify_write(struct bench *b, uint64_t seq, size_t len)
{
	const char *p = b->buf + (seq % b->slots) * b->size;
	uint64_t lo, hi;

	b->len_seen += len == b->size;
	if (seq >= (uint64_t)b->seen_n || b->seen[seq]++) {
		b->bad_data++;
		return;
	}
	stamps_read(p, b->size, &lo, &hi);
	if (lo < seq + 1)
		b->early++;
	else if (hi == seq + 1)
		b->in_place++;
	else
		b->lapped++;
}

/* Read completions; mark what finished. */
static void progress(struct bench *b)
{
	static unsigned long empty;
	struct fi_cq_tagged_entry e[16];
	ssize_t n = fi_cq_read(b->cq, e, 16);

	if (n == -FI_EAGAIN) {
		/* as braid perf: leave the core now and then, both processes poll on few cores */
		if ((++empty & 15) == 0)
			sched_yield();
		return;
	}
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };

		fi_cq_readerr(b->cq, &err, 0);
		fprintf(stderr, "fi_rdm_bench: completion error: %s\n", fi_strerror(err.err));
		exit(1);
	}
	if (n < 0)
		die("fi_cq_read", n);
	for (ssize_t i = 0; i < n; i++) {
		struct fi_context *c = e[i].op_context;

		if (e[i].flags & FI_REMOTE_CQ_DATA) {
			b->rdata++;
			if (b->verify)
				verify_write(b, e[i].data, e[i].len);
		} else if (c == &b->ctrl_send_ctx)
			b->ctrl_send_done = 1;
		else if (c == &b->ctrl_recv_ctx)
			b->ctrl_recv_done = 1;
		else
			b->data_done[c - b->data_ctx] = 1;
	}
}

#define RETRY(call, what)                                      \
	do {                                                   \
		double dl_ = now_us() + TIMEOUT_US;            \
		ssize_t rc_;                                   \
		while ((rc_ = (call)) == -FI_EAGAIN) {         \
			progress(b);                           \
			if (now_us() > dl_)                    \
				die(what " (timed out)", rc_); \
		}                                              \
		if (rc_)                                       \
			die(what, rc_);                        \
	} while (0)

static void wait_flag(struct bench *b, int *flag, const char *what)
{
	double deadline = now_us() + TIMEOUT_US;

	while (!*flag) {
		progress(b);
		if (now_us() > deadline) {
			fprintf(stderr, "fi_rdm_bench: %s: timed out\n", what);
			exit(1);
		}
	}
	*flag = 0;
}

static void ctrl_send(struct bench *b, size_t len)
{
	RETRY(fi_tsend(b->ep, b->ctrl, len, b->ctrl_desc, b->peer, TAG_CTRL, &b->ctrl_send_ctx),
	      "fi_tsend(ctrl)");
	wait_flag(b, &b->ctrl_send_done, "control send");
}

static void ctrl_post_recv(struct bench *b, size_t len)
{
	RETRY(fi_trecv(b->ep, b->ctrl + 32, len, b->ctrl_desc, FI_ADDR_UNSPEC, TAG_CTRL, 0,
		       &b->ctrl_recv_ctx),
	      "fi_trecv(ctrl)");
}

static void setup(struct bench *b, const char *prov)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_TAGGED, .size = 1024 };
	struct fi_av_attr ava = { .type = FI_AV_TABLE };
	char name[256], peer[256];
	size_t len = sizeof(name);
	long rc;

	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED | (b->rma ? FI_RMA : 0);
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(prov);
	rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &b->info);
	if (rc)
		die("fi_getinfo", rc);
	fi_freeinfo(hints);
	if ((rc = fi_fabric(b->info->fabric_attr, &b->fabric, NULL)) ||
	    (rc = fi_domain(b->fabric, b->info, &b->domain, NULL)) ||
	    (rc = fi_cq_open(b->domain, &cqa, &b->cq, NULL)) ||
	    (rc = fi_av_open(b->domain, &ava, &b->av, NULL)) ||
	    (rc = fi_endpoint(b->domain, b->info, &b->ep, NULL)) ||
	    (rc = fi_ep_bind(b->ep, &b->cq->fid, FI_TRANSMIT | FI_RECV)) ||
	    (rc = fi_ep_bind(b->ep, &b->av->fid, 0)) || (rc = fi_enable(b->ep)) ||
	    (rc = fi_getname(&b->ep->fid, name, &len)))
		die("endpoint set-up", rc);
	if (write(b->sock, &len, sizeof(len)) != sizeof(len) ||
	    write(b->sock, name, len) != (ssize_t)len ||
	    read(b->sock, &len, sizeof(len)) != sizeof(len) || len > sizeof(peer) ||
	    read(b->sock, peer, len) != (ssize_t)len)
		die("address exchange", 0);
	if (fi_av_insert(b->av, peer, 1, &b->peer, 0, NULL) != 1)
		die("fi_av_insert", 0);
	b->slots = b->verify ? VERIFY_SLOTS : 1;
	b->buf = aligned_alloc(4096, (b->size * b->slots + 4095) & ~(size_t)4095);
	b->ctrl = aligned_alloc(64, 64 + 4096);
	if (!b->buf || !b->ctrl)
		die("malloc", 0);
	memset(b->buf, b->verify ? 0 : 0x5a, b->size * b->slots);
	memset(b->ctrl, 0, 64);
	if (b->rma) {
		/* the receiver's buffer for the sender's writes: its key and address over
		 * the socket pair */
		uint64_t ka[2];

		rc = fi_mr_reg(b->domain, b->buf, b->size * b->slots,
			       FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE, 0, 2, 0, &b->mr,
			       NULL);
		if (rc)
			die("fi_mr_reg(rma)", rc);
		b->desc = fi_mr_desc(b->mr);
		ka[0] = fi_mr_key(b->mr);
		ka[1] = b->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR
				? (uint64_t)(uintptr_t)b->buf
				: 0;
		if (write(b->sock, ka, sizeof(ka)) != sizeof(ka) ||
		    read(b->sock, ka, sizeof(ka)) != sizeof(ka))
			die("key exchange", 0);
		b->rkey = ka[0];
		b->raddr = ka[1];
		/* the CQ data carries the message's number (hints ask for no FI_RX_CQ_DATA
		 * mode: no receive is posted for it) */
		if (b->info->domain_attr->cq_data_size < 4)
			die("the provider's remote CQ data is under 4 bytes", 0);
	} else if (b->info->domain_attr->mr_mode & FI_MR_LOCAL) {
		if ((rc = fi_mr_reg(b->domain, b->buf, b->size, FI_SEND | FI_RECV, 0, 0, 0, &b->mr,
				    NULL)))
			die("fi_mr_reg", rc);
		b->desc = fi_mr_desc(b->mr);
	}
	if (b->info->domain_attr->mr_mode & FI_MR_LOCAL) {
		/* the control buffer's own registration, for its own descriptor */
		struct fid_mr *cmr;

		if ((rc = fi_mr_reg(b->domain, b->ctrl, 64, FI_SEND | FI_RECV, 0, 1, 0, &cmr,
				    NULL)))
			die("fi_mr_reg(ctrl)", rc);
		b->ctrl_desc = fi_mr_desc(cmr);
	}
}

/* Streaming: n messages, window in flight; returns microseconds (sender). */
static double stream(struct bench *b, int n)
{
	int posted = 0, done = 0, w = b->window;
	double t0 = 0;

	memset(b->data_done, 0, sizeof(b->data_done));
	if (b->sender) {
		ctrl_post_recv(b, 8);
		wait_flag(b, &b->ctrl_recv_done, "go");
		ctrl_post_recv(b, 8); /* the ack */
		t0 = now_us();
		while (done < n) {
			while (posted < n && posted - done < w) {
				int slot = posted % w;

				size_t off = (size_t)posted % b->slots * b->size;

				if (b->verify)
					stamp(b->buf + off, b->size, (uint64_t)posted);
				if (b->rma)
					RETRY(fi_writedata(b->ep, b->buf + off, b->size, b->desc,
							   (uint64_t)posted, b->peer,
							   b->raddr + off, b->rkey,
							   &b->data_ctx[slot]),
					      "fi_writedata(data)");
				else
					RETRY(fi_tsend(b->ep, b->buf, b->size, b->desc, b->peer,
						       TAG_DATA, &b->data_ctx[slot]),
					      "fi_tsend(data)");
				posted++;
			}
			progress(b);
			/* sends complete in order on one endpoint+peer: count them in order */
			while (done < posted && b->data_done[done % w]) {
				b->data_done[done % w] = 0;
				done++;
			}
		}
		wait_flag(b, &b->ctrl_recv_done, "ack");
		return now_us() - t0;
	}
	if (b->rma) {          /* nothing to post: count the writes' remote CQ data */
		if (b->verify) /* no stamp of an earlier stream (the warm-up) passes for one */
			memset(b->buf, 0, b->size * b->slots);
		b->rdata = 0;
		b->seen_n = n;
		b->seen = calloc((size_t)n, 1);
		b->in_place = b->lapped = b->early = b->bad_data = b->len_seen = 0;
		if (!b->seen)
			die("malloc", 0);
		ctrl_send(b, 8);
		while (b->rdata < n)
			progress(b);
		ctrl_send(b, 8);
		free(b->seen);
		if (b->verify) {
			printf("# verify: %d writes: %d in place at their CQ data, %d overwritten by "
			       "a later write since, %d before their data (early), %d CQ data "
			       "twice or unknown; %d completions give the write's length\n",
			       n, b->in_place, b->lapped, b->early, b->bad_data, b->len_seen);
			fflush(stdout);
			if (b->early || b->bad_data || b->in_place + b->lapped != n)
				exit(1);
		}
		return 0;
	}
	for (; posted < w && posted < n; posted++)
		RETRY(fi_trecv(b->ep, b->buf, b->size, NULL, FI_ADDR_UNSPEC, TAG_DATA, 0,
			       &b->data_ctx[posted % w]),
		      "fi_trecv(data)");
	ctrl_send(b, 8);
	while (done < n) {
		progress(b);
		while (done < posted && b->data_done[done % w]) {
			b->data_done[done % w] = 0;
			done++;
			if (posted < n) {
				RETRY(fi_trecv(b->ep, b->buf, b->size, b->desc, FI_ADDR_UNSPEC,
					       TAG_DATA, 0, &b->data_ctx[posted % w]),
				      "fi_trecv(data)");
				posted++;
			}
		}
	}
	ctrl_send(b, 8);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void latency(struct bench *b, size_t size)
{
	int wu = b->lat_iters / 10 < 10 ? 10 : b->lat_iters / 10, total = wu + b->lat_iters;
	double *half = calloc(b->lat_iters, sizeof(double)), sum = 0;

	ctrl_post_recv(b, size);
	for (int i = 0; i < total; i++) {
		double t0 = now_us();

		if (b->sender) {
			RETRY(fi_tsend(b->ep, b->ctrl, size, b->ctrl_desc, b->peer, TAG_CTRL,
				       &b->ctrl_send_ctx),
			      "fi_tsend(ping)");
			wait_flag(b, &b->ctrl_send_done, "ping sent");
			wait_flag(b, &b->ctrl_recv_done, "pong");
			if (i >= wu)
				half[i - wu] = (now_us() - t0) / 2;
			if (i + 1 < total)
				ctrl_post_recv(b, size);
		} else {
			wait_flag(b, &b->ctrl_recv_done, "ping");
			if (i + 1 < total)
				ctrl_post_recv(b, size);
			RETRY(fi_tsend(b->ep, b->ctrl, size, b->ctrl_desc, b->peer, TAG_CTRL,
				       &b->ctrl_send_ctx),
			      "fi_tsend(pong)");
			wait_flag(b, &b->ctrl_send_done, "pong sent");
		}
	}
	if (b->sender) {
		int n = b->lat_iters;

		qsort(half, n, sizeof(double), cmp_double);
		for (int i = 0; i < n; i++)
			sum += half[i];
		printf("# latency: %zu-byte ping-pong, %d iterations (+%d warm-up), half round "
		       "trip:\n",
		       size, n, wu);
		printf("#   avg %.2f us   p50 %.2f us   p99 %.2f us   min %.2f us   max %.2f us\n",
		       sum / n, half[n / 2], half[n * 99 / 100], half[0], half[n - 1]);
	}
	free(half);
}

static int run(struct bench *b, const char *prov, size_t lat_size)
{
	setup(b, prov);
	if (b->sender)
		printf("# fi_rdm_bench: provider %s (fabric %s, domain %s), FI_EP_RDM %s, "
		       "window %d\n#%12s %8s %12s %10s %10s %12s\n",
		       b->info->fabric_attr->prov_name, b->info->fabric_attr->name,
		       b->info->domain_attr->name, b->rma ? "fi_writedata" : "tagged", b->window,
		       "bytes", "iters", "time(us)", "GB/s", "Gbit/s", "msg/s");
	stream(b, b->warmup);
	double usec = stream(b, b->iters);

	if (b->sender) {
		double sec = usec * 1e-6, bytes = (double)b->size * b->iters;

		printf("%13zu %8d %12.2f %10.3f %10.3f %12.0f\n", b->size, b->iters,
		       usec / b->iters, bytes / sec / 1e9, bytes * 8 / sec / 1e9, b->iters / sec);
	}
	if (b->lat_iters > 0)
		latency(b, lat_size);
	fflush(stdout);
	/* a last handshake so that neither closes while the other still needs it */
	char c = 0;

	if (write(b->sock, &c, 1) != 1 || read(b->sock, &c, 1) != 1)
		return 1;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "size", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "window", required_argument, NULL, 'W' },
		{ "lat-size", required_argument, NULL, 'l' },
		{ "lat-iters", required_argument, NULL, 'L' },
		{ "rma", no_argument, NULL, 'r' },
		{ "verify", no_argument, NULL, 'V' },
		{ 0 },
	};
	struct bench b = { .size = 4 << 20,
			   .window = 16,
			   .iters = 256,
			   .warmup = 16,
			   .lat_iters = 1000 };
	const char *prov = "tcp;ofi_rxm";
	size_t lat_size = 8;
	int sv[2], c, status;
	pid_t pid;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p': prov = optarg; break;
		case 's': b.size = strtoull(optarg, NULL, 0); break;
		case 'n': b.iters = atoi(optarg); break;
		case 'w': b.warmup = atoi(optarg); break;
		case 'W': b.window = atoi(optarg); break;
		case 'l': lat_size = strtoull(optarg, NULL, 0); break;
		case 'L': b.lat_iters = atoi(optarg); break;
		case 'r': b.rma = true; break;
		case 'V': b.verify = true; break;
		default:
			fprintf(stderr,
				"usage: fi_rdm_bench [--provider P] [--size B] [--iters N] "
				"[--warmup N] [--window W] [--lat-size B (<= 32)] [--lat-iters N] "
				"[--rma [--verify]]\n");
			return 2;
		}
	}
	if (b.verify && (!b.rma || b.size < 16 || b.window > VERIFY_SLOTS / 2)) {
		fprintf(stderr,
			"fi_rdm_bench: --verify needs --rma, --size >= 16 and --window "
			"<= %d\n",
			VERIFY_SLOTS / 2);
		return 2;
	}
	if (b.window < 1 || b.window > MAX_WINDOW || lat_size > 32 || b.iters < 1) {
		fprintf(stderr, "fi_rdm_bench: window 1..%d, lat-size <= 32, iters >= 1\n",
			MAX_WINDOW);
		return 2;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		die("socketpair", 0);
	alarm(300); /* a benchmark that hangs is killed, not waited for */
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork", 0);
	b.sender = pid > 0;
	b.sock = sv[b.sender ? 0 : 1];
	close(sv[b.sender ? 1 : 0]);
	int rc = run(&b, prov, lat_size);

	if (!b.sender)
		_exit(rc);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		rc = 1;
	return rc;
}
