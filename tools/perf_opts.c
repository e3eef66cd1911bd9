// SPDX-License-Identifier: Apache-2.0
/*
 * `braid perf`'s options (docs/perf.md) and the helpers every part of it uses: error
 * messages and the monotonic clock.
 */
#include "tools/perf.h"

#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int perf_err(const struct perf *p, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "braid perf%s: %s\n", p ? p->who : "", msg);
	return -1;
}

double perf_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* usleep() is obsolescent (POSIX.1-2008 removed it). */
void perf_sleep_us(long us)
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
		"  --api 8..12         ABI version to drive (ncclNetPlugin_vN), default 11\n"
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

int perf_parse_opts(int argc, char **argv, struct perf_opts *o)
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
				return perf_err(NULL, "--min: bad size '%s'", optarg);
			break;
		case O_MAX:
			if (parse_size(optarg, &o->max))
				return perf_err(NULL, "--max: bad size '%s'", optarg);
			break;
		case O_WINDOW: o->window = atoi(optarg); break;
		case O_ITERS: o->iters = atoi(optarg); break;
		case O_WARMUP: o->warmup = atoi(optarg); break;
		case O_LATSIZE:
			if (parse_size(optarg, &o->lat_size))
				return perf_err(NULL, "--lat-size: bad size '%s'", optarg);
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
		return perf_err(NULL, "unexpected argument '%s' (see braid perf --help)",
				argv[optind]);
	if (o->api < NETAPI_MIN_VERSION || o->api > NETAPI_MAX_VERSION)
		return perf_err(NULL, "--api %d: braid perf drives versions %d..%d", o->api,
				NETAPI_MIN_VERSION, NETAPI_MAX_VERSION);
	if (o->window < 1 || o->window > PERF_MAX_WINDOW)
		return perf_err(NULL, "--window %d: NCCL allows 1..%d requests in flight per comm",
				o->window, PERF_MAX_WINDOW);
	if (o->min > o->max)
		return perf_err(NULL, "--min %zu is above --max %zu", o->min, o->max);
	if (o->max > (size_t)1 << 30 || (o->api == 8 && o->max > INT_MAX))
		return perf_err(NULL, "--max %zu: at most 1 GiB", o->max);
	if (o->iters < 0 || o->lat_iters < 1 || o->lat_size > ((size_t)64 << 20))
		return perf_err(NULL, "bad --iters, --lat-iters or --lat-size");
	if (!o->bw && !o->lat)
		return perf_err(NULL, "--bw-only and --lat-only leave nothing to run");
	if (o->port <= 0 || o->port > 65535)
		return perf_err(NULL, "--port %d: not a TCP port", o->port);
	return 0;
}

int perf_iters_for(const struct perf_opts *o, size_t size)
{
	size_t n;

	if (o->iters > 0)
		return o->iters;
	n = ((size_t)512 << 20) / (size ? size : 1);
	return n < 16 ? 16 : n > 2000 ? 2000 : (int)n;
}

int perf_warmup_for(const struct perf_opts *o, int iters)
{
	if (o->warmup >= 0)
		return o->warmup;
	return iters / 10 < 2 ? 2 : iters / 10;
}
