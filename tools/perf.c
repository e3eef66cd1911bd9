// SPDX-License-Identifier: Apache-2.0
/*
 * `braid perf`: streaming bandwidth and ping-pong latency between two processes through
 * the plugin's exported API, driven as NCCL drives it (listen/connect/accept polled,
 * registered buffers, a window of isend/irecv requests, test() until done).
 *
 * The server side streams and prints; the client side receives and verifies. Data are
 * checked byte by byte on the first and last timed iteration of every size.
 */
#include "tools/cmds.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin/counters.h"
#include "tools/bootstrap.h"
#include "tools/netapi.h"
#include "tools/pattern.h"

#define PERF_DEFAULT_PORT 18515
#define PERF_WIRE_MAGIC 0x62726166u /* "braf" */
#define PERF_WIRE_PROTO 1
#define PERF_PHASE_TIMEOUT_S 120.0 /* one size, one phase; far above any real run */
#define PERF_CONNECT_TIMEOUT_S 30.0
#define PERF_MAX_WINDOW NCCL_NET_MAX_REQUESTS
#define PERF_CTRL_BYTES 16
#define PERF_SEED 0x627261696450ULL

enum perf_mode { MODE_LOCAL, MODE_SERVER, MODE_CLIENT };

struct perf_opts {
	int api;
	const char *plugin;
	const char *backend;
	const char *provider;
	int dev;
	size_t min, max;
	int window;
	int iters;  /* 0: by size */
	int warmup; /* -1: by iterations */
	size_t lat_size;
	int lat_iters;
	bool bw, lat;
	enum perf_mode mode;
	const char *host;
	int port;
	double timeout;   /* waiting for the peer to show up */
	bool local_child; /* the peer process `braid perf` started for itself */
};

/*
 * What both sides must agree on; sent over the bootstrap socket and compared with memcmp,
 * so without implicit padding (pad: 0 through the initializer; the compiler's padding
 * bytes are whatever was on the stack, at -O0 at least).
 */
struct perf_wire {
	uint32_t magic, proto;
	int32_t api, window, iters, warmup, lat_iters, bw, lat, pad;
	uint64_t min, max, lat_size;
};

/* A control message: "go" (receiver ready) or "ack" (all received, verification). */
struct perf_ctrl {
	uint32_t kind;
	uint32_t ok;
	uint64_t seq;
};

struct perf {
	struct perf_opts o;
	struct net_api api;
	void *ctx;
	struct net_props props;
	void *lc, *sc, *rc;
	bool streamer; /* server: sends the stream and prints */
	int boot;
	/* streaming: check[0], check[1], bulk, each max bytes, on sc (streamer) or rc */
	char *big;
	void *big_mh;
	/* small messages: control and latency, one buffer on each comm */
	char *ssmall, *rsmall;
	size_t small_len;
	void *ssmall_mh, *rsmall_mh;
	char who[32];
};

static int perr(const struct perf *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int perr(const struct perf *p, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "braid perf%s: %s\n", p ? p->who : "", msg);
	return -1;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* usleep() is obsolescent (POSIX.1-2008 removed it). */
static void sleep_us(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = us % 1000000 * 1000 };

	nanosleep(&ts, NULL);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: braid perf [options]\n"
		"\n"
		"Streaming bandwidth (a window of requests in flight, one row per size) and\n"
		"ping-pong latency between two processes through the plugin's exported API, as\n"
		"NCCL drives it. By default it starts its own peer on this host; --server and\n"
		"--client run it between two hosts or network namespaces (start both with the\n"
		"same options). The first and last timed iteration of every size are verified.\n"
		"\n"
		"  --api 8|9|10|11     ABI version to drive (ncclNetPlugin_vN), default 11\n"
		"  --backend B         ofi|ib|auto: sets BRAID_BACKEND\n"
		"  --provider NAME     libfabric provider, e.g. 'tcp;ofi_rxm', shm: sets\n"
		"                      BRAID_OFI_PROVIDER\n"
		"  --dev N             plugin device, default 0\n"
		"  --plugin PATH       the .so (or NAME, as NCCL_NET_PLUGIN); default: the\n"
		"                      libnccl-net-braid.so next to braid or in ../lib, else by name\n"
		"  --min SIZE          smallest size, default 8 (suffixes K, M, G)\n"
		"  --max SIZE          largest size, default 64M; sizes go by powers of 2\n"
		"  --window N          requests in flight, 1..%d, default 16\n"
		"  --iters N           timed iterations per size (default: 512 MiB worth,\n"
		"                      16 to 2000)\n"
		"  --warmup N          untimed iterations first (default: iters / 10, >= 2)\n"
		"  --lat-size SIZE     ping-pong message size, default 8\n"
		"  --lat-iters N       ping-pong iterations, default 1000\n"
		"  --bw-only, --lat-only   run one of the two measurements\n"
		"  --server            wait for a --client (prints the results)\n"
		"  --client HOST       connect to a --server on HOST\n"
		"  --port P            bootstrap TCP port, default %d\n"
		"  --timeout S         how long to wait for the peer, default 60\n",
		PERF_MAX_WINDOW, PERF_DEFAULT_PORT);
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	default: break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || end == s)
		return -1;
	*out = v;
	return 0;
}

static int parse_opts(int argc, char **argv, struct perf_opts *o)
{
	enum {
		O_API = 256,
		O_BACKEND,
		O_PROVIDER,
		O_DEV,
		O_PLUGIN,
		O_MIN,
		O_MAX,
		O_WINDOW,
		O_ITERS,
		O_WARMUP,
		O_LATSIZE,
		O_LATITERS,
		O_BWONLY,
		O_LATONLY,
		O_SERVER,
		O_CLIENT,
		O_PORT,
		O_TIMEOUT,
		O_CHILD
	};
	static const struct option longopts[] = {
		{ "api", required_argument, NULL, O_API },
		{ "backend", required_argument, NULL, O_BACKEND },
		{ "provider", required_argument, NULL, O_PROVIDER },
		{ "dev", required_argument, NULL, O_DEV },
		{ "plugin", required_argument, NULL, O_PLUGIN },
		{ "min", required_argument, NULL, O_MIN },
		{ "max", required_argument, NULL, O_MAX },
		{ "window", required_argument, NULL, O_WINDOW },
		{ "iters", required_argument, NULL, O_ITERS },
		{ "warmup", required_argument, NULL, O_WARMUP },
		{ "lat-size", required_argument, NULL, O_LATSIZE },
		{ "lat-iters", required_argument, NULL, O_LATITERS },
		{ "bw-only", no_argument, NULL, O_BWONLY },
		{ "lat-only", no_argument, NULL, O_LATONLY },
		{ "server", no_argument, NULL, O_SERVER },
		{ "client", required_argument, NULL, O_CLIENT },
		{ "port", required_argument, NULL, O_PORT },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "local-child", no_argument, NULL, O_CHILD }, /* internal */
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	*o = (struct perf_opts){ .api = 11,
				 .min = 8,
				 .max = 64 << 20,
				 .window = 16,
				 .warmup = -1,
				 .lat_size = 8,
				 .lat_iters = 1000,
				 .bw = true,
				 .lat = true,
				 .port = PERF_DEFAULT_PORT,
				 .timeout = 60 };
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_API: o->api = atoi(optarg); break;
		case O_BACKEND: o->backend = optarg; break;
		case O_PROVIDER: o->provider = optarg; break;
		case O_DEV: o->dev = atoi(optarg); break;
		case O_PLUGIN: o->plugin = optarg; break;
		case O_MIN:
			if (parse_size(optarg, &o->min))
				return perr(NULL, "--min: bad size '%s'", optarg);
			break;
		case O_MAX:
			if (parse_size(optarg, &o->max))
				return perr(NULL, "--max: bad size '%s'", optarg);
			break;
		case O_WINDOW: o->window = atoi(optarg); break;
		case O_ITERS: o->iters = atoi(optarg); break;
		case O_WARMUP: o->warmup = atoi(optarg); break;
		case O_LATSIZE:
			if (parse_size(optarg, &o->lat_size))
				return perr(NULL, "--lat-size: bad size '%s'", optarg);
			break;
		case O_LATITERS: o->lat_iters = atoi(optarg); break;
		case O_BWONLY: o->lat = false; break;
		case O_LATONLY: o->bw = false; break;
		case O_SERVER: o->mode = MODE_SERVER; break;
		case O_CLIENT:
			o->mode = MODE_CLIENT;
			o->host = optarg;
			break;
		case O_PORT: o->port = atoi(optarg); break;
		case O_TIMEOUT: o->timeout = atof(optarg); break;
		case O_CHILD: o->local_child = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (optind < argc)
		return perr(NULL, "unexpected argument '%s' (see braid perf --help)", argv[optind]);
	if (o->api < NETAPI_MIN_VERSION || o->api > NETAPI_MAX_VERSION)
		return perr(NULL, "--api %d: braid perf drives versions %d..%d", o->api,
			    NETAPI_MIN_VERSION, NETAPI_MAX_VERSION);
	if (o->window < 1 || o->window > PERF_MAX_WINDOW)
		return perr(NULL, "--window %d: NCCL allows 1..%d requests in flight per comm",
			    o->window, PERF_MAX_WINDOW);
	if (o->min > o->max)
		return perr(NULL, "--min %zu is above --max %zu", o->min, o->max);
	if (o->max > (size_t)1 << 30 || (o->api == 8 && o->max > INT_MAX))
		return perr(NULL, "--max %zu: at most 1 GiB", o->max);
	if (o->iters < 0 || o->lat_iters < 1 || o->lat_size > ((size_t)64 << 20))
		return perr(NULL, "bad --iters, --lat-iters or --lat-size");
	if (!o->bw && !o->lat)
		return perr(NULL, "--bw-only and --lat-only leave nothing to run");
	if (o->port <= 0 || o->port > 65535)
		return perr(NULL, "--port %d: not a TCP port", o->port);
	return 0;
}

static int iters_for(const struct perf_opts *o, size_t size)
{
	size_t n;

	if (o->iters > 0)
		return o->iters;
	n = ((size_t)512 << 20) / (size ? size : 1);
	return n < 16 ? 16 : n > 2000 ? 2000 : (int)n;
}

static int warmup_for(const struct perf_opts *o, int iters)
{
	if (o->warmup >= 0)
		return o->warmup;
	return iters / 10 < 2 ? 2 : iters / 10;
}

/* ---- plugin calls, polled with a bound ---- */

static int check_call(const struct perf *p, ncclResult_t r, const char *what)
{
	if (r == ncclSuccess)
		return 0;
	return perr(p, "%s returned %s (%d)", what, netapi_result_str(r), r);
}

/* Post a send or receive of one buffer, calling again while the plugin says "not now". */
static int post_one(struct perf *p, bool send, void *buf, size_t size, void *mh, void **req,
		    const char *what)
{
	double deadline = now_us() + PERF_PHASE_TIMEOUT_S * 1e6;
	unsigned long polls = 0;
	int tag = 1;
	ncclResult_t r;

	for (;;) {
		*req = NULL;
		r = send ? p->api.isend(&p->api, p->sc, buf, size, tag, mh, req)
			 : p->api.irecv(&p->api, p->rc, 1, &buf, &size, &tag, &mh, req);
		if (check_call(p, r, what))
			return -1;
		if (*req)
			return 0;
		if ((++polls & 255) == 0 && now_us() > deadline)
			return perr(p, "%s: not accepted within %.0f s", what,
				    PERF_PHASE_TIMEOUT_S);
		sched_yield();
	}
}

static int wait_one(struct perf *p, void *req, int *size, const char *what)
{
	double deadline = now_us() + PERF_PHASE_TIMEOUT_S * 1e6;
	unsigned long polls = 0;
	int done = 0, sizes[8] = { -1 };

	for (;;) {
		if (check_call(p, p->api.test(&p->api, req, &done, sizes), what))
			return -1;
		if (done) {
			if (size)
				*size = sizes[0];
			return 0;
		}
		if ((++polls & 255) == 0 && now_us() > deadline)
			return perr(p, "%s: not done within %.0f s", what, PERF_PHASE_TIMEOUT_S);
		if ((polls & 15) == 0)
			sched_yield(); /* 2 processes and provider threads may share few cores */
	}
}

static int send_ctrl(struct perf *p, uint32_t kind, uint32_t ok, uint64_t seq)
{
	struct perf_ctrl c = { kind, ok, seq };
	void *req;

	memcpy(p->ssmall, &c, sizeof(c));
	if (post_one(p, true, p->ssmall, sizeof(c), p->ssmall_mh, &req, "isend(control)"))
		return -1;
	return wait_one(p, req, NULL, "test(isend control)");
}

static int recv_ctrl(struct perf *p, struct perf_ctrl *c, void *req)
{
	int size = -1;

	if (wait_one(p, req, &size, "test(irecv control)"))
		return -1;
	if (size != sizeof(*c))
		return perr(p, "control message of %d bytes, expected %zu", size, sizeof(*c));
	memcpy(c, p->rsmall, sizeof(*c));
	return 0;
}

/* ---- streaming ---- */

/* Buffer of iteration i of n: the two checked ones apart, the rest share one. */
static char *stream_buf(struct perf *p, bool verify, int i, int n)
{
	if (verify && i == 0)
		return p->big;
	if (verify && i == n - 1)
		return p->big + p->o.max;
	return p->big + 2 * p->o.max;
}

static uint64_t check_id(size_t size, int first_or_last)
{
	return (uint64_t)size * 2 + first_or_last;
}

/* One phase: n messages of `size`, window in flight. Returns 0, sets *ok, *usec. */
static int stream_phase(struct perf *p, size_t size, int n, bool verify, uint64_t seq, bool *ok,
			double *usec)
{
	void *reqs[PERF_MAX_WINDOW] = { 0 };
	int idx[PERF_MAX_WINDOW];
	int posted = 0, done = 0, inflight = 0, w = p->o.window;
	double deadline = now_us() + PERF_PHASE_TIMEOUT_S * 1e6, t0;
	struct perf_ctrl c;
	void *ctrl_req;
	unsigned long polls = 0;
	char what[96];

	*ok = true;
	if (p->streamer) {
		if (verify) {
			pattern_fill(stream_buf(p, true, 0, n), size, PERF_SEED, check_id(size, 0));
			if (n > 1)
				pattern_fill(stream_buf(p, true, n - 1, n), size, PERF_SEED,
					     check_id(size, 1));
		}
		/* wait for "go": the receiver has its window posted */
		if (post_one(p, false, p->rsmall, PERF_CTRL_BYTES, p->rsmall_mh, &ctrl_req,
			     "irecv(go)") ||
		    recv_ctrl(p, &c, ctrl_req))
			return -1;
		if (c.kind != 1 || c.seq != seq)
			return perr(p, "out of step: control %u/%llu, expected go/%llu", c.kind,
				    (unsigned long long)c.seq, (unsigned long long)seq);
		/* post the "ack" receive before streaming, as NCCL keeps receives posted */
		if (post_one(p, false, p->rsmall, PERF_CTRL_BYTES, p->rsmall_mh, &ctrl_req,
			     "irecv(ack)"))
			return -1;
	}
	t0 = now_us();
	while (done < n) {
		bool progress = false;

		while (posted < n && inflight < w) {
			int slot;
			ncclResult_t r;
			char *buf = stream_buf(p, verify, posted, n);
			int tag = 1;

			for (slot = 0; reqs[slot]; slot++)
				;
			if (p->streamer) {
				r = p->api.isend(&p->api, p->sc, buf, size, tag, p->big_mh,
						 &reqs[slot]);
			} else {
				size_t sz = size;
				void *b = buf;

				r = p->api.irecv(&p->api, p->rc, 1, &b, &sz, &tag, &p->big_mh,
						 &reqs[slot]);
			}
			if (r != ncclSuccess) {
				snprintf(what, sizeof(what), "%s(%zu bytes, iteration %d)",
					 p->streamer ? "isend" : "irecv", size, posted);
				return check_call(p, r, what);
			}
			if (!reqs[slot])
				break;
			idx[slot] = posted++;
			inflight++;
			progress = true;
		}
		if (!p->streamer && seq != UINT64_MAX && posted >= (n < w ? n : w)) {
			/* the window is posted: tell the streamer to go (once) */
			if (send_ctrl(p, 1, 1, seq))
				return -1;
			seq = UINT64_MAX;
			t0 = now_us();
		}
		for (int s = 0; s < w; s++) {
			int fin = 0, sizes[8] = { -1 };

			if (!reqs[s])
				continue;
			ncclResult_t r = p->api.test(&p->api, reqs[s], &fin, sizes);

			if (r != ncclSuccess) {
				snprintf(what, sizeof(what), "test(%s of %zu bytes, iteration %d)",
					 p->streamer ? "isend" : "irecv", size, idx[s]);
				return check_call(p, r, what);
			}
			if (!fin)
				continue;
			reqs[s] = NULL;
			inflight--;
			done++;
			progress = true;
			if (p->streamer)
				continue;
			if ((size_t)sizes[0] != size) {
				if (*ok) /* the first one says enough */
					perr(p,
					     "iteration %d of %zu bytes: test() reported %d bytes",
					     idx[s], size, sizes[0]);
				*ok = false;
			}
			if (verify && (idx[s] == 0 || idx[s] == n - 1)) {
				int which = idx[s] == 0 ? 0 : 1;
				size_t bad = pattern_check(stream_buf(p, true, idx[s], n), size,
							   PERF_SEED, check_id(size, which));

				if (bad != (size_t)-1) {
					perr(p, "%zu bytes, %s iteration: byte %zu is wrong", size,
					     which ? "last" : "first", bad);
					*ok = false;
				}
			}
		}
		if (!progress) {
			if ((++polls & 255) == 0 && now_us() > deadline)
				return perr(p, "%zu-byte stream: %d of %d done after %.0f s", size,
					    done, n, PERF_PHASE_TIMEOUT_S);
			if ((polls & 15) == 0)
				sched_yield();
		}
	}
	if (p->streamer) {
		if (recv_ctrl(p, &c, ctrl_req))
			return -1;
		*usec = now_us() - t0;
		if (c.kind != 2)
			return perr(p, "out of step: control %u, expected ack", c.kind);
		*ok = c.ok != 0;
	} else {
		*usec = now_us() - t0;
		if (send_ctrl(p, 2, *ok, 0))
			return -1;
	}
	return 0;
}

static int run_bandwidth(struct perf *p, bool *all_ok)
{
	uint64_t seq = 0;

	if (p->streamer)
		printf("#%12s %8s %12s %10s %10s %12s  %s\n", "bytes", "iters", "time(us)", "GB/s",
		       "Gbit/s", "msg/s", "check");
	for (size_t size = p->o.min;; size = size ? size * 2 : 1) {
		int n = iters_for(&p->o, size), wu = warmup_for(&p->o, n);
		double usec = 0;
		bool ok = true;

		if (wu > 0 && stream_phase(p, size, wu, false, seq++, &ok, &usec))
			return -1;
		if (stream_phase(p, size, n, true, seq++, &ok, &usec))
			return -1;
		if (!ok)
			*all_ok = false;
		if (p->streamer) {
			double sec = usec * 1e-6, bytes = (double)size * n;

			printf("%13zu %8d %12.2f %10.3f %10.3f %12.0f  %s\n", size, n, usec / n,
			       bytes / sec / 1e9, bytes * 8 / sec / 1e9, n / sec,
			       ok ? "ok" : "WRONG DATA");
			fflush(stdout);
		}
		if (size >= p->o.max)
			break;
		if (size && size * 2 > p->o.max)
			size = p->o.max / 2; /* end exactly on --max */
	}
	return 0;
}

/* ---- latency ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int run_latency(struct perf *p, bool *all_ok)
{
	int n = p->o.lat_iters, wu = n / 10 < 10 ? 10 : n / 10, total = n + wu;
	size_t size = p->o.lat_size;
	double *half = calloc(n, sizeof(double));
	void *rreq = NULL, *sreq = NULL;
	bool ok = true;
	int rc = -1, got;

	if (!half)
		return perr(p, "calloc(%d)", n);
	if (post_one(p, false, p->rsmall, size, p->rsmall_mh, &rreq, "irecv(ping-pong)"))
		goto out;
	for (int i = 0; i < total; i++) {
		bool check = i == wu || i == total - 1;
		double t0;

		if (p->streamer) {
			/* ping, wait for the pong */
			if (check)
				pattern_fill(p->ssmall, size, PERF_SEED, 1000 + i);
			t0 = now_us();
			if (post_one(p, true, p->ssmall, size, p->ssmall_mh, &sreq,
				     "isend(ping)") ||
			    wait_one(p, sreq, NULL, "test(isend ping)") ||
			    wait_one(p, rreq, &got, "test(irecv pong)"))
				goto out;
			if (i >= wu)
				half[i - wu] = (now_us() - t0) / 2;
		} else {
			if (wait_one(p, rreq, &got, "test(irecv ping)"))
				goto out;
		}
		if ((size_t)got != size) {
			perr(p, "ping-pong %d: received %d bytes, sent %zu", i, got, size);
			ok = false;
		} else if (check && pattern_check(p->rsmall, size, PERF_SEED,
						  (p->streamer ? 2000 : 1000) + i) != (size_t)-1) {
			perr(p, "ping-pong %d: wrong data", i);
			ok = false;
		}
		/* the next receive goes up before the reply, as a ping may follow it at once */
		if (i + 1 < total &&
		    post_one(p, false, p->rsmall, size, p->rsmall_mh, &rreq, "irecv(ping-pong)"))
			goto out;
		if (!p->streamer) {
			if (check)
				pattern_fill(p->ssmall, size, PERF_SEED, 2000 + i);
			if (post_one(p, true, p->ssmall, size, p->ssmall_mh, &sreq,
				     "isend(pong)") ||
			    wait_one(p, sreq, NULL, "test(isend pong)"))
				goto out;
		}
	}
	if (p->streamer) {
		double sum = 0;

		qsort(half, n, sizeof(double), cmp_double);
		for (int i = 0; i < n; i++)
			sum += half[i];
		printf("# latency: %zu-byte ping-pong, %d iterations (+%d warm-up), half round "
		       "trip:\n",
		       size, n, wu);
		printf("#   avg %.2f us   p50 %.2f us   p99 %.2f us   min %.2f us   max %.2f us"
		       "   check %s\n",
		       sum / n, half[n / 2],
		       half[(size_t)n * 99 / 100 < (size_t)n ? (size_t)n * 99 / 100 : (size_t)n - 1],
		       half[0], half[n - 1], ok ? "ok" : "WRONG DATA");
	}
	if (!ok)
		*all_ok = false;
	rc = 0;
out:
	free(half);
	return rc;
}

/* ---- set-up and tear-down ---- */

static int exchange_opts(struct perf *p, char *err, size_t errlen)
{
	struct perf_wire mine = {
		.magic = PERF_WIRE_MAGIC, .proto = PERF_WIRE_PROTO, .api = p->o.api,
		.window = p->o.window, .iters = p->o.iters, .warmup = p->o.warmup,
		.lat_iters = p->o.lat_iters, .bw = p->o.bw, .lat = p->o.lat, .min = p->o.min,
		.max = p->o.max, .lat_size = p->o.lat_size,
	}, peer;

	if (boot_send(p->boot, &mine, sizeof(mine), p->o.timeout, err, errlen) ||
	    boot_recv(p->boot, &peer, sizeof(peer), p->o.timeout, err, errlen))
		return -1;
	if (peer.magic != PERF_WIRE_MAGIC || peer.proto != PERF_WIRE_PROTO) {
		snprintf(err, errlen, "the peer is not braid perf (or another version of it)");
		return -1;
	}
	if (memcmp(&mine, &peer, sizeof(mine))) {
		snprintf(err, errlen,
			 "the two sides were given different options (api, sizes, "
			 "window, iterations or --bw-only/--lat-only must match)");
		return -1;
	}
	return 0;
}

static int setup_plugin(struct perf *p, char *loaded, size_t loaded_len)
{
	char plugin[PATH_MAX], err[2048];
	void *dl;
	int ndev = 0;

	if (p->o.plugin)
		snprintf(plugin, sizeof(plugin), "%s", p->o.plugin);
	else
		braid_default_plugin(plugin, sizeof(plugin));
	dl = netapi_open(plugin, loaded, loaded_len, err, sizeof(err));
	if (!dl)
		return perr(p, "cannot load the plugin: %s", err);
	if (netapi_bind(dl, p->o.api, &p->api))
		return perr(p, "%s exports no ncclNetPlugin_v%d", loaded, p->o.api);
	if (check_call(p, p->api.init(&p->api, &p->ctx, (uint64_t)getpid()), "init") ||
	    check_call(p, p->api.devices(&p->api, &ndev), "devices"))
		return -1;
	if (p->o.dev < 0 || p->o.dev >= ndev)
		return perr(p, "--dev %d: the plugin has %d device%s", p->o.dev, ndev,
			    ndev == 1 ? "" : "s");
	return check_call(p, p->api.get_props(&p->api, p->o.dev, &p->props), "getProperties");
}

static int connect_peer(struct perf *p)
{
	char mine[NCCL_NET_HANDLE_MAXSIZE] = { 0 }, peer[NCCL_NET_HANDLE_MAXSIZE], err[512];
	double deadline;

	if (check_call(p, p->api.listen(&p->api, p->ctx, p->o.dev, mine, &p->lc), "listen"))
		return -1;
	if (boot_send(p->boot, mine, sizeof(mine), p->o.timeout, err, sizeof(err)) ||
	    boot_recv(p->boot, peer, sizeof(peer), p->o.timeout, err, sizeof(err)))
		return perr(p, "handle exchange: %s", err);
	deadline = now_us() + PERF_CONNECT_TIMEOUT_S * 1e6;
	while (!p->sc || !p->rc) {
		if (!p->sc && check_call(p, p->api.connect(&p->api, p->ctx, p->o.dev, peer, &p->sc),
					 "connect"))
			return -1;
		if (!p->rc && check_call(p, p->api.accept(&p->api, p->lc, &p->rc), "accept"))
			return -1;
		if (now_us() > deadline)
			return perr(p,
				    "connect/accept not ready after %.0f s (send comm %s, "
				    "receive comm %s)",
				    PERF_CONNECT_TIMEOUT_S, p->sc ? "up" : "pending",
				    p->rc ? "up" : "pending");
		sleep_us(100);
	}
	return 0;
}

static int setup_buffers(struct perf *p)
{
	size_t big = 3 * (p->o.bw ? p->o.max : 0) + 64;

	p->small_len = (p->o.lat_size > PERF_CTRL_BYTES ? p->o.lat_size : PERF_CTRL_BYTES) + 64;
	p->big = aligned_alloc(4096, (big + 4095) & ~(size_t)4095);
	p->ssmall = aligned_alloc(64, (p->small_len + 63) & ~(size_t)63);
	p->rsmall = aligned_alloc(64, (p->small_len + 63) & ~(size_t)63);
	if (!p->big || !p->ssmall || !p->rsmall)
		return perr(p, "out of memory for %zu-byte buffers", big);
	memset(p->big, 0, big);
	memset(p->ssmall, 0, p->small_len);
	memset(p->rsmall, 0, p->small_len);
	/* registered once, as NCCL does with its buffers */
	if (check_call(p,
		       p->api.reg_mr(&p->api, p->streamer ? p->sc : p->rc, p->big, big, &p->big_mh),
		       "regMr(stream buffers)") ||
	    check_call(p, p->api.reg_mr(&p->api, p->sc, p->ssmall, p->small_len, &p->ssmall_mh),
		       "regMr(small send buffer)") ||
	    check_call(p, p->api.reg_mr(&p->api, p->rc, p->rsmall, p->small_len, &p->rsmall_mh),
		       "regMr(small receive buffer)"))
		return -1;
	return 0;
}

static void teardown(struct perf *p)
{
	if (p->big_mh)
		p->api.dereg_mr(&p->api, p->streamer ? p->sc : p->rc, p->big_mh);
	if (p->ssmall_mh)
		p->api.dereg_mr(&p->api, p->sc, p->ssmall_mh);
	if (p->rsmall_mh)
		p->api.dereg_mr(&p->api, p->rc, p->rsmall_mh);
	if (p->sc)
		p->api.close_send(&p->api, p->sc);
	if (p->rc)
		p->api.close_recv(&p->api, p->rc);
	if (p->lc)
		p->api.close_listen(&p->api, p->lc);
	if (p->api.finalize)
		p->api.finalize(&p->api, p->ctx);
	free(p->big);
	free(p->ssmall);
	free(p->rsmall);
}

static void print_header(const struct perf *p, const char *loaded)
{
	const char *backend = getenv("BRAID_BACKEND"), *prov = getenv("BRAID_OFI_PROVIDER");

	printf("# braid perf %s: plugin %s (name \"%s\", ncclNetPlugin_v%d)\n", BRAID_VERSION,
	       loaded, p->api.name, p->o.api);
	printf("# device %d: %s, %d Mbps; BRAID_BACKEND=%s BRAID_OFI_PROVIDER=%s\n", p->o.dev,
	       p->props.name, p->props.speed, backend ? backend : "(unset)",
	       prov ? prov : "(unset)");
	printf("# peer: %s; window %d requests; first and last timed iteration of each size "
	       "verified\n",
	       p->o.mode == MODE_LOCAL ? "a second local process" : "remote", p->o.window);
	fflush(stdout);
}

/*
 * What striping did, from the plugin's own counters (/dev/shm/braid-<pid>, this process):
 * for each NIC of the send comm of a fused device, the bytes and chunks it carried, its
 * share and its measured rate. Nothing when the device is one NIC or counters are off.
 */
static void print_lanes(void)
{
	char path[64];
	struct braid_ctr_region *r;
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), BRAID_CTR_PATH_FMT, (int)getpid());
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	if (fstat(fd, &st) || (size_t)st.st_size < sizeof(*r)) {
		close(fd);
		return;
	}
	r = mmap(NULL, sizeof(*r), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (r == MAP_FAILED)
		return;
	if (r->magic != BRAID_CTR_MAGIC || r->version != BRAID_CTR_VERSION) {
		printf("# per-NIC counters: %s has layout version %u, this braid reads %u\n", path,
		       r->version, (unsigned)BRAID_CTR_VERSION);
		munmap(r, sizeof(*r));
		return;
	}
	for (int i = 0; i < BRAID_CTR_MAX_COMMS; i++) {
		const struct braid_ctr_comm *c = &r->comms[i];

		if (c->kind != BRAID_CTR_COMM_SEND || c->nlanes < 2)
			continue;
		printf("# send comm to %s: %u NICs\n", c->peer, c->nlanes);
		printf("#   %-16s %14s %10s %8s %12s  %s\n", "NIC", "bytes", "chunks", "share",
		       "rate(GB/s)", "slow");
		for (uint32_t k = 0; k < c->nlanes && k < BRAID_CTR_MAX_LANES; k++) {
			const struct braid_ctr_lane *l = &c->lanes[k];
			const char *name = l->dev >= 0 && l->dev < BRAID_CTR_MAX_DEVS
						   ? r->devs[l->dev].name
						   : "?";

			printf("#   %-16s %14llu %10llu %7.1f%% %12.3f  %s\n", name,
			       (unsigned long long)l->bytes, (unsigned long long)l->chunks,
			       l->weight_ppm / 1e4, (double)l->rate_bps / 1e9,
			       l->slow ? "yes" : "no");
		}
	}
	munmap(r, sizeof(*r));
}

/* The whole measurement on an established bootstrap socket. */
static int run_session(struct perf *p)
{
	char loaded[PATH_MAX], err[512];
	bool all_ok = true;
	int rc = -1;
	char done = 0;

	if (exchange_opts(p, err, sizeof(err)))
		return perr(p, "%s", err);
	if (setup_plugin(p, loaded, sizeof(loaded)) || connect_peer(p) || setup_buffers(p))
		goto out;
	if (p->streamer)
		print_header(p, loaded);
	if (p->o.bw && run_bandwidth(p, &all_ok))
		goto out;
	if (p->streamer && p->o.bw)
		print_lanes();
	if (p->o.lat && run_latency(p, &all_ok))
		goto out;
	/* both sides are done with the comms before either closes them */
	if (boot_send(p->boot, &done, 1, 30, err, sizeof(err)) ||
	    boot_recv(p->boot, &done, 1, 30, err, sizeof(err))) {
		perr(p, "final handshake: %s", err);
		goto out;
	}
	if (p->streamer)
		printf("# data check: %s\n", all_ok ? "every verified iteration was right"
						    : "WRONG DATA (see the errors above)");
	rc = all_ok ? 0 : -1;
out:
	teardown(p);
	return rc;
}

static pid_t spawn_local_peer(int argc, char **argv, int port)
{
	char self[PATH_MAX], portstr[16];
	char **args = calloc(argc + 8, sizeof(char *));
	pid_t pid;
	int n = 0;

	if (!args || braid_self_path(self, sizeof(self))) {
		free(args);
		return -1;
	}
	snprintf(portstr, sizeof(portstr), "%d", port);
	args[n++] = self;
	for (int i = 0; i < argc; i++)
		args[n++] = argv[i]; /* argv[0] is "perf" */
	args[n++] = "--client";
	args[n++] = "127.0.0.1";
	args[n++] = "--port";
	args[n++] = portstr;
	args[n++] = "--local-child";
	args[n] = NULL;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		execv(self, args);
		fprintf(stderr, "braid perf: exec(%s): %s\n", self, strerror(errno));
		_exit(127);
	}
	free(args);
	return pid;
}

/* Wait for the local peer with a bound; a peer that outlives us is killed. */
static int reap(pid_t pid, double timeout_s)
{
	double deadline = now_us() + timeout_s * 1e6;
	int status;

	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (w < 0)
			return -1;
		if (now_us() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		sleep_us(10000);
	}
}

int braid_cmd_perf(int argc, char **argv)
{
	struct perf p;
	char err[512];
	pid_t child = -1;
	int rc, lfd;

	memset(&p, 0, sizeof(p));
	p.boot = -1;
	if (parse_opts(argc, argv, &p.o))
		return 2;
	/* the plugin reads these at init; the local peer inherits them */
	if (p.o.backend)
		setenv("BRAID_BACKEND", p.o.backend, 1);
	if (p.o.provider)
		setenv("BRAID_OFI_PROVIDER", p.o.provider, 1);
	signal(SIGPIPE, SIG_IGN);

	snprintf(netapi_log_prefix, sizeof(netapi_log_prefix), "braid-perf%s",
		 p.o.mode != MODE_CLIENT ? ""
		 : p.o.local_child       ? "(peer)"
					 : "(client)");
	switch (p.o.mode) {
	case MODE_LOCAL:
	case MODE_SERVER: {
		int port = 0;

		p.streamer = true;
		lfd = boot_listen(p.o.mode == MODE_LOCAL ? "127.0.0.1" : NULL,
				  p.o.mode == MODE_LOCAL ? 0 : p.o.port, &port, err, sizeof(err));
		if (lfd < 0)
			return perr(&p, "bootstrap: %s", err), 1;
		if (p.o.mode == MODE_LOCAL) {
			child = spawn_local_peer(argc, argv, port);
			if (child < 0) {
				close(lfd);
				return perr(&p, "cannot start the local peer process"), 1;
			}
		} else {
			fprintf(stderr, "braid perf: waiting for a client on port %d (%.0f s)\n",
				port, p.o.timeout);
		}
		p.boot = boot_accept(lfd, p.o.timeout, err, sizeof(err));
		close(lfd);
		if (p.boot < 0) {
			perr(&p, "bootstrap: %s", err);
			if (child > 0)
				reap(child, 0);
			return 1;
		}
		break;
	}
	case MODE_CLIENT:
		snprintf(p.who, sizeof(p.who), p.o.local_child ? " (peer)" : " (client)");
		p.boot = boot_connect(p.o.host, p.o.port, p.o.timeout, err, sizeof(err));
		if (p.boot < 0)
			return perr(&p, "bootstrap to %s:%d: %s", p.o.host, p.o.port, err), 1;
		break;
	}
	rc = run_session(&p);
	close(p.boot);
	if (child > 0) {
		/* the peer has finished too, or fails on its own; wait for it, bounded */
		int prc = reap(child, rc ? 5 : 30);

		if (prc != 0) {
			perr(&p, "the local peer process ended with status %d", prc);
			rc = -1;
		}
	}
	if (p.o.mode == MODE_CLIENT && !p.o.local_child && rc == 0)
		printf("braid perf: client done; the server printed the results\n");
	return rc ? 1 : 0;
}
