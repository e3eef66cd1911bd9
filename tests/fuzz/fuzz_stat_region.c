// SPDX-License-Identifier: Apache-2.0
/*
 * The counters region reader: `braid stat` (listing and --json) and the Prometheus
 * rendering read /dev/shm/braid-<pid>, which any process of the user can write, or a
 * crashed one leave half written (tools/stat_read.c). Each input becomes one such file.
 *
 * Byte 0 says how: bits 0-1 where the rest of the input lands (the header, the device
 * records, the comm records, the QP records) in a region that is otherwise valid (two
 * devices, a few comms); bit 2 keeps the input's own header words instead of valid ones
 * (magic, version, record sizes, pid) so the layout checks are fuzzed too; bit 3 cuts the
 * file where the input ends; bits 4-5 pick the output: listing, --json, Prometheus; bit 6
 * leaves the file unlocked, as a process that ended leaves it (else the target holds its
 * lock as the live process does, so that its devices and comms are shown).
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "plugin/counters.h"
#include "tests/fuzz/fuzz_common.h"
#include "tools/cmds.h"
#include "tools/stat.h"

/* a pid above the kernel's pid_max: no such process, the same listing on every run */
#define FUZZ_PID 4194999

static char dir[64];
static char path[128];
static struct braid_ctr_region *base, *r;

static void cleanup(void)
{
	unlink(path);
	rmdir(dir);
}

static void fill_base(struct braid_ctr_region *b)
{
	memset(b, 0, sizeof(*b));
	b->magic = BRAID_CTR_MAGIC;
	b->version = BRAID_CTR_VERSION;
	b->header_size = offsetof(struct braid_ctr_region, devs);
	b->dev_rec_size = sizeof(b->devs[0]);
	b->comm_rec_size = sizeof(b->comms[0]);
	b->max_devs = BRAID_CTR_MAX_DEVS;
	b->max_comms = BRAID_CTR_MAX_COMMS;
	b->qp_rec_size = sizeof(b->qps[0]);
	b->max_qps = BRAID_CTR_MAX_QPS;
	b->pid = FUZZ_PID;
	b->ndevs = 2;
	b->start_time_ns = 1700000000ull * 1000000000ull;
	snprintf(b->fallback.backend, sizeof(b->fallback.backend), "ib");
	snprintf(b->fallback.provider, sizeof(b->fallback.provider), "mlx5_0,mlx5_1");
	snprintf(b->fallback.why, sizeof(b->fallback.why), "first choice");
	snprintf(b->fallback.link_layer, sizeof(b->fallback.link_layer), "RoCE");
	for (int d = 0; d < 2; d++) {
		snprintf(b->devs[d].name, sizeof(b->devs[d].name), "mlx5_%d", d);
		b->devs[d].in_use = 1;
		b->devs[d].t.tx_bytes = 1u << 20;
	}
	for (int i = 0; i < 3; i++) {
		struct braid_ctr_comm *c = &b->comms[i];

		c->kind = i == 2 ? BRAID_CTR_COMM_RECV : BRAID_CTR_COMM_SEND;
		c->dev = i % 2;
		c->nlanes = i == 1 ? 2 : 1;
		snprintf(c->peer, sizeof(c->peer), "10.0.0.%d:4242", i + 1);
		for (uint32_t k = 0; k < c->nlanes; k++)
			c->lanes[k].dev = (int32_t)k;
		b->qps[i].in_use = 1;
		b->qps[i].comm = i;
		b->qps[i].dev = i % 2;
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fuzz_quiet_log();
	snprintf(dir, sizeof(dir), "/tmp/braid-fuzz-stat-XXXXXX");
	if (!mkdtemp(dir))
		abort();
	snprintf(path, sizeof(path), "%s/braid-%d", dir, FUZZ_PID);
	atexit(cleanup);
	base = malloc(sizeof(*base));
	r = malloc(sizeof(*r));
	if (!base || !r)
		abort();
	fill_base(base);
	/* braid stat prints to stdout; only whether it reads safely matters here */
	if (!freopen("/dev/null", "w", stdout))
		abort();
	return 0;
}

static void keep_header(struct braid_ctr_region *x)
{
	x->magic = base->magic;
	x->version = base->version;
	x->header_size = base->header_size;
	x->dev_rec_size = base->dev_rec_size;
	x->comm_rec_size = base->comm_rec_size;
	x->max_devs = base->max_devs;
	x->max_comms = base->max_comms;
	x->pid = base->pid;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t where[4] = { 0, offsetof(struct braid_ctr_region, devs),
					 offsetof(struct braid_ctr_region, comms),
					 offsetof(struct braid_ctr_region, qp_rec_size) };
	size_t off, n, flen;
	uint8_t how;
	int fd;

	if (size < 1)
		return 0;
	how = data[0];
	off = where[how & 3];
	n = size - 1 < sizeof(*r) - off ? size - 1 : sizeof(*r) - off;
	memcpy(r, base, sizeof(*r));
	memcpy((char *)r + off, data + 1, n);
	if (!(how & 4))
		keep_header(r);
	flen = (how & 8) ? off + n : sizeof(*r);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		abort();
	if (write(fd, r, flen) != (ssize_t)flen)
		abort();
	if (!(how & 0x40) && flock(fd, LOCK_SH))
		abort();

	switch ((how >> 4) & 3) {
	case 0:
	case 1: {
		char *argv[] = { "stat", "--dir", dir, (how & 0x10) ? "--json" : NULL, NULL };

		braid_cmd_stat((how & 0x10) ? 4 : 3, argv);
		break;
	}
	default: {
		struct stat_opts o = { .dir = dir };
		struct scan s;

		if (stat_scan_dir(&o, &s) == 0) {
			stat_prom_render(stdout, &s);
			stat_scan_free(&s);
		}
		break;
	}
	}
	close(fd);
	return 0;
}
