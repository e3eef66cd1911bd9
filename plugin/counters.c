// SPDX-License-Identifier: Apache-2.0
#include "plugin/counters.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plugin/clock.h"
#include "plugin/log.h"
#include "plugin/params.h"

/*
 * open/close run under init's lock; comm slots are claimed with a compare-and-swap, so
 * connect/accept on several threads need no lock here.
 */
static struct braid_ctr_region *region;
static int region_shared;
static int region_fd = -1; /* kept open: its shared flock says "this process is alive" */
static char region_path[64];
static struct braid_ctr_comm overflow_comm;
static pthread_once_t atexit_once = PTHREAD_ONCE_INIT;

static void counters_at_exit(void)
{
	braid_counters_close();
}

static void register_at_exit(void)
{
	atexit(counters_at_exit);
}

static void fill_header(struct braid_ctr_region *r)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	r->version = BRAID_CTR_VERSION;
	r->header_size = offsetof(struct braid_ctr_region, devs);
	r->dev_rec_size = sizeof(struct braid_ctr_dev);
	r->comm_rec_size = sizeof(struct braid_ctr_comm);
	r->max_devs = BRAID_CTR_MAX_DEVS;
	r->max_comms = BRAID_CTR_MAX_COMMS;
	r->pid = (int32_t)getpid();
	r->start_time_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	/* Readers take the magic as "the rest is valid". */
	__atomic_store_n(&r->magic, BRAID_CTR_MAGIC, __ATOMIC_RELEASE);
}

/*
 * Files of processes that died without cleaning up (SIGKILL, _exit, a crash) would pile
 * up in /dev/shm, which is memory. A live process holds a shared flock on its file, so a
 * file whose exclusive lock can be taken has no owner left. Locks, not pids: processes in
 * other pid namespaces may share this /dev/shm (containers of one pod), and their pids
 * mean nothing here. Files younger than a few seconds are left alone: their owner may be
 * between creating and locking them.
 */
static void sweep_orphans(void)
{
	const char *dir = "/dev/shm";
	time_t now = time(NULL);
	struct dirent *e;
	DIR *d = opendir(dir);
	int removed = 0;

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		char path[300];
		struct stat st;
		int fd;

		if (strncmp(e->d_name, "braid-", 6) || e->d_name[6] < '0' || e->d_name[6] > '9' ||
		    strspn(e->d_name + 6, "0123456789") != strlen(e->d_name + 6))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
		    now - st.st_mtime > 10 && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
		    unlink(path) == 0)
			removed++;
		close(fd);
	}
	closedir(d);
	if (removed)
		BRAID_INFO(NCCL_INIT,
			   "counters: removed %d file(s) of processes that ended without "
			   "cleaning up",
			   removed);
}

static struct braid_ctr_region *map_shared(void)
{
	struct braid_ctr_region *r;
	int fd, err;

	sweep_orphans();
	snprintf(region_path, sizeof(region_path), BRAID_CTR_PATH_FMT, (int)getpid());
	fd = open(region_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0)
		(void)flock(fd, LOCK_SH);
	if (fd < 0) {
		BRAID_INFO(NCCL_INIT, "counters: cannot create %s: %s; counting in private memory",
			   region_path, strerror(errno));
		region_path[0] = '\0';
		return NULL;
	}
	/*
	 * Reserve the pages now: on a tmpfs with no room left (a container's small
	 * --shm-size) a file only ftruncate()d maps fine and then kills the process with
	 * SIGBUS at the first counter it touches, NCCL's process included.
	 */
	err = posix_fallocate(fd, 0, sizeof(*r));
	if (err) {
		BRAID_WARN("counters: no room for %zu KiB in %s: %s; counting in private "
			   "memory, so `braid stat` cannot see this process. /dev/shm is too "
			   "small (a container's --shm-size): NCCL needs it too",
			   sizeof(*r) / 1024, region_path, strerror(err));
		goto fail;
	}
	r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED) {
		BRAID_INFO(NCCL_INIT, "counters: cannot map %s: %s", region_path, strerror(errno));
		goto fail;
	}
	region_fd = fd;
	return r;
fail:
	close(fd);
	unlink(region_path);
	region_path[0] = '\0';
	return NULL;
}

int braid_counters_open(void)
{
	if (region)
		return 0;
	if (braid_param_int(BRAID_P_COUNTERS))
		region = map_shared();
	region_shared = region != NULL;
	if (!region) {
		region = calloc(1, sizeof(*region));
		if (!region)
			return -ENOMEM;
	}
	fill_header(region);
	pthread_once(&atexit_once, register_at_exit);
	return 0;
}

void braid_counters_close(void)
{
	if (!region)
		return;
	if (region_shared) {
		munmap(region, sizeof(*region));
		unlink(region_path);
		close(region_fd);
		region_fd = -1;
	} else {
		free(region);
	}
	region = NULL;
	region_path[0] = '\0';
}

struct braid_ctr_region *braid_counters(void)
{
	return region;
}

const char *braid_counters_path(void)
{
	return region_path;
}

struct braid_ctr_dev *braid_counters_dev(int dev)
{
	static struct braid_ctr_dev overflow_dev;

	if (!region || dev < 0 || dev >= BRAID_CTR_MAX_DEVS)
		return &overflow_dev;
	return &region->devs[dev];
}

struct braid_ctr_comm *braid_counters_comm_get(int dev, enum braid_ctr_comm_kind kind,
					       const char *peer)
{
	if (!region)
		return &overflow_comm;
	for (int i = 0; i < BRAID_CTR_MAX_COMMS; i++) {
		struct braid_ctr_comm *c = &region->comms[i];
		uint32_t expect = BRAID_CTR_COMM_FREE;

		if (!__atomic_compare_exchange_n(&c->kind, &expect, (uint32_t)kind, 0,
						 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		memset(&c->t, 0, sizeof(c->t));
		c->nlanes = 1;
		c->failovers = 0;
		c->recoveries = 0;
		memset(c->lanes, 0, sizeof(c->lanes));
		c->dev = dev;
		snprintf(c->peer, sizeof(c->peer), "%s", peer ? peer : "");
		return c;
	}
	return &overflow_comm;
}

void braid_counters_comm_put(struct braid_ctr_comm *rec)
{
	if (!rec || rec == &overflow_comm)
		return;
	__atomic_store_n(&rec->kind, BRAID_CTR_COMM_FREE, __ATOMIC_RELEASE);
}

void braid_counters_print_summary(void)
{
	const struct braid_ctr_fallback *fb;
	unsigned gpu, host;

	if (!region || braid_log_level() < BRAID_LOG_INFO)
		return;
	fb = &region->fallback;
	BRAID_INFO(NCCL_NET, "summary: backend %s, provider %s%s",
		   fb->backend[0] ? fb->backend : "none", fb->provider[0] ? fb->provider : "-",
		   fb->slow_path ? " (SLOW PATH)" : "");
	if (fb->why[0])
		BRAID_INFO(NCCL_NET, "summary: why: %s", fb->why);
	gpu = __atomic_load_n(&fb->recv_regs_gpu, __ATOMIC_RELAXED);
	host = __atomic_load_n(&fb->recv_regs_host, __ATOMIC_RELAXED);
	BRAID_INFO(NCCL_NET,
		   "summary: GPUDirect RDMA %s%s%s; NCCL's receive comms registered %u buffers "
		   "of GPU memory, %u of host memory",
		   fb->gpudirect ? "offered" : "off", fb->gpudirect_why[0] ? ": " : "",
		   fb->gpudirect_why, gpu, host);
	for (uint32_t d = 0; d < region->ndevs && d < BRAID_CTR_MAX_DEVS; d++) {
		const struct braid_ctr_traffic *t = &region->devs[d].t;

		BRAID_INFO(NCCL_NET,
			   "summary: dev %u %-12s tx %llu B in %llu msgs, rx %llu B in %llu msgs, "
			   "%llu completions, %llu errors",
			   d, region->devs[d].name, (unsigned long long)t->tx_bytes,
			   (unsigned long long)t->tx_msgs, (unsigned long long)t->rx_bytes,
			   (unsigned long long)t->rx_msgs, (unsigned long long)t->completions,
			   (unsigned long long)t->errors);
	}
}

int braid_ctr_stall_due(uint64_t *since_ns, uint64_t now, uint8_t *stalled)
{
	if (*stalled)
		return 0;
	if (!*since_ns) {
		*since_ns = now;
		return 0;
	}
	if (now - *since_ns <= (uint64_t)braid_param_int(BRAID_P_STALL_MS) * 1000000ULL)
		return 0;
	*stalled = 1;
	return 1;
}

void braid_ctr_note_stall(struct braid_ctr_dev *dev, uint64_t *since_ns, uint64_t now,
			  uint8_t *stalled)
{
	if (braid_ctr_stall_due(since_ns, now, stalled))
		braid_ctr_add(&dev->stalls, 1);
}
