// SPDX-License-Identifier: Apache-2.0
/*
 * mkregion: writes a braid counters file (plugin/counters.h) for tests/stat, as the plugin
 * would: a whole struct braid_ctr_region, then, with --hold, a shared flock on it held
 * while the counters keep moving (the plugin's "this process is alive").
 *
 *   mkregion --dir DIR [options]     DIR/braid-<this pid>
 *   mkregion --file PATH [options]   PATH, any name (a pid that is not this process's)
 *
 *   --pid N          pid written in the region (default: from the file's name)
 *   --version V      layout version written (default: this braid's)
 *   --backend B      fallback record: backend (default ofi)
 *   --provider P     fallback record and devices: provider (default tcp;ofi_rxm)
 *   --slow           fallback record: slow_path = 1
 *   --gdr            fallback record: GPUDirect on (mode dma-buf)
 *   --regs G,H       fallback record: NCCL's receive buffers registered, G in GPU memory
 *                    and H in host memory (default 0,0)
 *   --ib             a verbs region: link layer, GID, two NICs (NIC 1's port down), a comm
 *                    fused over both (NIC 0 failed and came back twice, NIC 1 failed),
 *                    four QP records
 *   --dev-rec-size N the region's dev_rec_size (another layout under the same version)
 *   --size N         cut the file to N bytes after writing it (not with --hold)
 *   --garbage        4096 bytes of a pattern instead of a region
 *   --hold S         hold the lock S seconds (or until SIGTERM), printing "ready PATH"
 *                    once it is held; meanwhile dev 0 (and QP 0 with --ib) sends
 *                    --rate bytes per second and 50 messages per second, updated every
 *                    20 ms from the clock (a writer that slept late catches up)
 *   --rate B         default 100000000
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "plugin/counters.h"

struct mk_opts {
	const char *dir, *file, *backend, *provider;
	int pid, version, slow, gdr, ib, garbage, dev_rec_size;
	unsigned regs_gpu, regs_host;
	long size;
	double hold, rate;
};

static int die(const char *what)
{
	fprintf(stderr, "mkregion: %s: %s\n", what, strerror(errno));
	return 1;
}

static void fill(struct braid_ctr_region *r, const struct mk_opts *o, int pid)
{
	struct braid_ctr_fallback *fb = &r->fallback;
	struct timespec ts;
	int ndevs = o->ib ? 2 : 1;

	clock_gettime(CLOCK_REALTIME, &ts);
	r->magic = BRAID_CTR_MAGIC;
	r->version = (uint32_t)o->version;
	r->header_size = offsetof(struct braid_ctr_region, devs);
	r->dev_rec_size = o->dev_rec_size ? (uint32_t)o->dev_rec_size
					  : sizeof(struct braid_ctr_dev);
	r->comm_rec_size = sizeof(struct braid_ctr_comm);
	r->max_devs = BRAID_CTR_MAX_DEVS;
	r->max_comms = BRAID_CTR_MAX_COMMS;
	r->pid = pid;
	r->ndevs = (uint32_t)ndevs;
	/* started 10 s ago: averages since the start are bytes / 10 */
	r->start_time_ns = ((uint64_t)ts.tv_sec - 10) * 1000000000ULL + (uint64_t)ts.tv_nsec;
	snprintf(fb->backend, sizeof(fb->backend), "%s", o->backend);
	snprintf(fb->provider, sizeof(fb->provider), "%s", o->provider);
	snprintf(fb->why, sizeof(fb->why), "mkregion: %s provider %s; first choice", o->backend,
		 o->provider);
	fb->slow_path = o->slow;
	fb->gpudirect = o->gdr;
	snprintf(fb->gpudirect_mode, sizeof(fb->gpudirect_mode), "%s", o->gdr ? "dma-buf" : "none");
	snprintf(fb->gpudirect_why, sizeof(fb->gpudirect_why), "%s",
		 o->gdr ? "mkregion: dma-buf on every device" : "mkregion: no GPU");
	fb->recv_regs_gpu = o->regs_gpu;
	fb->recv_regs_host = o->regs_host;
	fb->gid_index = -1;
	for (int d = 0; d < ndevs; d++) {
		struct braid_ctr_dev *v = &r->devs[d];

		snprintf(v->name, sizeof(v->name), o->ib ? "svroce%d:1" : "mkdev%d", d);
		snprintf(v->provider, sizeof(v->provider), "%s", o->provider);
		v->in_use = 1;
		v->t.tx_bytes = 1000000000ULL * (uint64_t)(d + 1);
		v->t.tx_msgs = 1000;
		v->t.rx_bytes = 2000000000ULL;
		v->t.rx_msgs = 2000;
		v->t.completions = 3000;
		v->t.errors = (uint64_t)d;
		v->strangers = 7;
		v->slow_lanes = o->ib && d == 1 ? 3 : 0;
		v->port_down = o->ib && d == 1;
		v->stalls = 5 + (uint64_t)d;
	}
	r->comms[0].kind = BRAID_CTR_COMM_SEND;
	r->comms[0].dev = 0;
	snprintf(r->comms[0].peer, sizeof(r->comms[0].peer), "192.0.2.7:40001");
	r->comms[0].t.tx_bytes = 600000000;
	r->comms[0].t.tx_msgs = 600;
	r->comms[0].nlanes = 1;
	r->comms[2].kind = BRAID_CTR_COMM_RECV;
	r->comms[2].dev = 0;
	snprintf(r->comms[2].peer, sizeof(r->comms[2].peer), "192.0.2.8:40002");
	r->comms[2].t.rx_bytes = 500000000;
	r->comms[2].t.rx_msgs = 500;
	r->comms[2].nlanes = 1;
	if (!o->ib)
		return;
	snprintf(fb->link_layer, sizeof(fb->link_layer), "RoCE");
	fb->gid_index = 3;
	snprintf(fb->gid_type, sizeof(fb->gid_type), "RoCEv2");
	fb->mtu = 4096;
	/* NIC 0 failed twice and came back twice: up. NIC 1 failed and did not come back
	 * (and its port is down): DOWN. The comm counts both NICs' failures and returns. */
	r->comms[0].nlanes = 2;
	r->comms[0].lanes[0] = (struct braid_ctr_lane){ .dev = 0,
							.weight_ppm = 800000,
							.bytes = 480000000,
							.chunks = 480,
							.rate_bps = 12000000000ULL,
							.failovers = 2,
							.recoveries = 2 };
	r->comms[0].lanes[1] = (struct braid_ctr_lane){ .dev = 1,
							.weight_ppm = 200000,
							.bytes = 120000000,
							.chunks = 120,
							.rate_bps = 3000000000ULL,
							.slow = 1,
							.failovers = 1 };
	r->comms[0].failovers = 3;
	r->comms[0].recoveries = 2;
	r->qp_rec_size = sizeof(struct braid_ctr_qp);
	r->max_qps = BRAID_CTR_MAX_QPS;
	for (int q = 0; q < 4; q++) {
		struct braid_ctr_qp *p = &r->qps[q];

		p->in_use = 1;
		p->dev = q % 2;
		p->comm = 0;
		p->qpn = 0x100 + (uint32_t)q;
		p->remote_qpn = 0x200 + (uint32_t)q;
		p->flow_label = 0x1000 + (uint32_t)q;
		p->sport = 49152 + (uint32_t)q;
		p->tx_bytes = 150000000;
		p->tx_msgs = 150;
	}
}

static int pid_of(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	return strncmp(b, "braid-", 6) ? 0 : atoi(b + 6);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Dev 0 (and QP 0 with --ib) sends o->rate bytes/s for o->hold seconds. The counters
 * follow the clock, not the number of 20 ms sleeps: on a loaded machine a sleep ends
 * late (steps of 36 ms seen at load 9 on 2 cores), and counting steps made the rate
 * braid stat measures fall to 28 MB/s of 50. Now a late step adds what is due.
 */
static void send_for(struct braid_ctr_region *r, const struct mk_opts *o)
{
	const struct timespec step = { .tv_sec = 0, .tv_nsec = 20000000 };
	uint64_t bytes = 0, msgs = 0;
	double t0 = mono_s(), t;

	do {
		uint64_t due_bytes, due_msgs;

		nanosleep(&step, NULL);
		t = mono_s() - t0;
		due_bytes = (uint64_t)(o->rate * t);
		due_msgs = (uint64_t)(t / 0.02);
		__atomic_fetch_add(&r->devs[0].t.tx_bytes, due_bytes - bytes, __ATOMIC_RELAXED);
		__atomic_fetch_add(&r->devs[0].t.tx_msgs, due_msgs - msgs, __ATOMIC_RELAXED);
		if (o->ib)
			__atomic_fetch_add(&r->qps[0].tx_bytes, due_bytes - bytes,
					   __ATOMIC_RELAXED);
		bytes = due_bytes;
		msgs = due_msgs;
	} while (t < o->hold);
}

int main(int argc, char **argv)
{
	enum {
		O_DIR = 1,
		O_FILE,
		O_PID,
		O_VERSION,
		O_BACKEND,
		O_PROVIDER,
		O_SLOW,
		O_GDR,
		O_IB,
		O_SIZE,
		O_GARBAGE,
		O_HOLD,
		O_RATE,
		O_DEVREC,
		O_REGS
	};
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, O_DIR },
		{ "file", required_argument, NULL, O_FILE },
		{ "pid", required_argument, NULL, O_PID },
		{ "version", required_argument, NULL, O_VERSION },
		{ "backend", required_argument, NULL, O_BACKEND },
		{ "provider", required_argument, NULL, O_PROVIDER },
		{ "slow", no_argument, NULL, O_SLOW },
		{ "gdr", no_argument, NULL, O_GDR },
		{ "ib", no_argument, NULL, O_IB },
		{ "size", required_argument, NULL, O_SIZE },
		{ "garbage", no_argument, NULL, O_GARBAGE },
		{ "hold", required_argument, NULL, O_HOLD },
		{ "rate", required_argument, NULL, O_RATE },
		{ "dev-rec-size", required_argument, NULL, O_DEVREC },
		{ "regs", required_argument, NULL, O_REGS },
		{ 0 },
	};
	struct mk_opts o = { .backend = "ofi",
			     .provider = "tcp;ofi_rxm",
			     .version = BRAID_CTR_VERSION,
			     .size = -1,
			     .rate = 1e8 };
	char path[4096];
	struct braid_ctr_region *r;
	int c, fd, pid;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_DIR: o.dir = optarg; break;
		case O_FILE: o.file = optarg; break;
		case O_PID: o.pid = atoi(optarg); break;
		case O_VERSION: o.version = atoi(optarg); break;
		case O_BACKEND: o.backend = optarg; break;
		case O_PROVIDER: o.provider = optarg; break;
		case O_SLOW: o.slow = 1; break;
		case O_GDR: o.gdr = 1; break;
		case O_IB: o.ib = 1; break;
		case O_SIZE: o.size = atol(optarg); break;
		case O_GARBAGE: o.garbage = 1; break;
		case O_HOLD: o.hold = atof(optarg); break;
		case O_RATE: o.rate = atof(optarg); break;
		case O_DEVREC: o.dev_rec_size = atoi(optarg); break;
		case O_REGS:
			if (sscanf(optarg, "%u,%u", &o.regs_gpu, &o.regs_host) != 2) {
				fprintf(stderr, "mkregion: --regs G,H\n");
				return 2;
			}
			break;
		default:
			fprintf(stderr, "mkregion: bad option (see the comment in mkregion.c)\n");
			return 2;
		}
	}
	if (!o.dir == !o.file) {
		fprintf(stderr, "mkregion: one of --dir DIR and --file PATH\n");
		return 2;
	}
	if (o.file)
		snprintf(path, sizeof(path), "%s", o.file);
	else
		snprintf(path, sizeof(path), "%s/braid-%d", o.dir, (int)getpid());
	pid = o.pid ? o.pid : o.file ? pid_of(path) : (int)getpid();
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return die(path);
	if (o.garbage) {
		char junk[4096];

		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = (char)(i * 37 + 11);
		if (write(fd, junk, sizeof(junk)) != (ssize_t)sizeof(junk))
			return die("write");
		close(fd);
		return 0;
	}
	if (ftruncate(fd, sizeof(*r)))
		return die("ftruncate");
	r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED)
		return die("mmap");
	fill(r, &o, pid);
	if (o.size >= 0 && ftruncate(fd, o.size))
		return die("ftruncate --size");
	if (o.hold > 0) {
		if (flock(fd, LOCK_SH))
			return die("flock");
		printf("ready %s\n", path);
		fflush(stdout);
		send_for(r, &o);
	}
	munmap(r, sizeof(*r));
	close(fd);
	return 0;
}
