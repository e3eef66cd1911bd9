// SPDX-License-Identifier: MIT
/* softverbs: the per-process stats file (layout in sv_stats.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "tests/softverbs/sv_internal.h"

int sv_stats_open(void)
{
	static int seq;
	size_t len = sizeof(struct sv_stats_file);
	struct sv_device *devs;
	void *p;
	int fd, ndevs;

	snprintf(sv_eng.stats_path, sizeof(sv_eng.stats_path), "%s/stats/%d.%d.stat",
		 sv_eng.cfg.fabric, (int)getpid(), ++seq);
	fd = open(sv_eng.stats_path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
	if (fd < 0) {
		sv_log("cannot create stats file %s: %s", sv_eng.stats_path, strerror(errno));
		return -1;
	}
	if (ftruncate(fd, (off_t)len)) {
		close(fd);
		unlink(sv_eng.stats_path);
		return -1;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		unlink(sv_eng.stats_path);
		return -1;
	}
	sv_eng.stats = p;
	sv_eng.stats_len = len;
	sv_eng.stats->version = SV_STATS_VERSION;
	sv_eng.stats->pid = (int32_t)getpid();
	sv_eng.stats->nuplinks = (uint32_t)sv_eng.cfg.uplinks;
	devs = sv_devices(&ndevs);
	for (int i = 0; i < ndevs; i++) { /* ndevs <= SV_MAX_DEVICES <= SV_STATS_MAX_DEVICES */
		snprintf(sv_eng.stats->device[i].name, sizeof(sv_eng.stats->device[i].name), "%s",
			 devs[i].ibdev.name);
		sv_eng.stats->device[i].rate = sv_eng.cfg.device_rate[i];
	}
	sv_eng.stats->ndevices = (uint32_t)ndevs;
	__atomic_store_n(&sv_eng.stats->magic, SV_STATS_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/*
 * With SOFTVERBS_STATS_KEEP=1 the file stays when the engine stops (the last
 * device closed), so that a test can read a run's final counts once its
 * processes are gone (softverbs-stat -a) instead of sampling them mid-run.
 */
void sv_stats_close(void)
{
	if (!sv_eng.stats)
		return;
	munmap(sv_eng.stats, sv_eng.stats_len);
	if (!sv_eng.cfg.stats_keep)
		unlink(sv_eng.stats_path);
	sv_eng.stats = NULL;
}

/* Called with sv_eng.lock held. NULL when the table is full (no stats). */
struct sv_stats_qp *sv_stats_qp_slot(uint32_t qpn)
{
	if (!sv_eng.stats)
		return NULL;
	for (int i = 0; i < SV_STATS_MAX_QPS; i++) {
		struct sv_stats_qp *s = &sv_eng.stats->qp[i];

		if (s->qpn == 0) {
			memset(s, 0, sizeof(*s));
			s->uplink = -1;
			__atomic_store_n(&s->qpn, qpn, __ATOMIC_RELEASE);
			return s;
		}
	}
	return NULL;
}

/*
 * A destroyed QP's row. Called with sv_eng.lock held. Freed for the next QP,
 * or with SOFTVERBS_STATS_KEEP=1 left with its final counts (the slot is
 * never reused then: a process keeps SV_STATS_MAX_QPS rows in all).
 */
void sv_stats_qp_release(struct sv_stats_qp *slot)
{
	if (slot && !sv_eng.cfg.stats_keep)
		memset(slot, 0, sizeof(*slot));
}

void sv_stats_uplink_add(int uplink, uint64_t bytes)
{
	if (!sv_eng.stats || uplink < 0 || uplink >= SV_STATS_MAX_UPLINKS)
		return;
	__atomic_fetch_add(&sv_eng.stats->uplink[uplink].tx_bytes, bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sv_eng.stats->uplink[uplink].tx_msgs, 1, __ATOMIC_RELAXED);
}

void sv_stats_device_add(int dev, uint64_t bytes)
{
	if (!sv_eng.stats || dev < 0 || dev >= SV_STATS_MAX_DEVICES)
		return;
	__atomic_fetch_add(&sv_eng.stats->device[dev].tx_bytes, bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sv_eng.stats->device[dev].tx_msgs, 1, __ATOMIC_RELAXED);
}
