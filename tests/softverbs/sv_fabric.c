// SPDX-License-Identifier: MIT
/*
 * softverbs: the fabric directory and the fabric model.
 *
 * $SOFTVERBS_FABRIC (default /tmp/softverbs-fabric) holds
 *   ep/e<pid>.<n>      one listening Unix socket per process (its endpoint),
 *   qp/<qpn as %06x>   one file per live QP: the endpoint path, then the pid,
 *   stats/<pid>.<n>.stat  per-process counters (see sv_stats.h).
 * Filesystem paths are shared by every network namespace of the host, so
 * processes in different namespaces reach each other. QP numbers are unique
 * fabric-wide (O_EXCL on the qp/ file), so (GID or LID, QPN) names one QP;
 * the responder checks the GID/LID part when the requester says hello.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "tests/softverbs/sv_internal.h"

static int mkdir_shared(const char *path)
{
	if (mkdir(path, 01777) && errno != EEXIST) {
		sv_log("cannot create fabric directory %s: %s", path, strerror(errno));
		return -1;
	}
	chmod(path, 01777); /* whatever the umask: every user shares it */
	return 0;
}

static bool pid_alive(pid_t pid);

/* Remove endpoints and stats files left by processes that died. */
static void sweep_dead(const char *sub, const char *prefix)
{
	char dir[PATH_MAX], path[PATH_MAX + 256];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/%s", sv_eng.cfg.fabric, sub);
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		const char *p = e->d_name;
		long pid;

		if (strncmp(p, prefix, strlen(prefix)))
			continue;
		pid = strtol(p + strlen(prefix), NULL, 10);
		if (pid > 0 && !pid_alive((pid_t)pid)) {
			snprintf(path, sizeof(path), "%s/%s", dir, p);
			unlink(path);
		}
	}
	closedir(d);
}

int sv_fabric_init(void)
{
	char p[PATH_MAX];
	const char *f = sv_eng.cfg.fabric;

	if (mkdir_shared(f))
		return -1;
	snprintf(p, sizeof(p), "%s/ep", f);
	if (mkdir_shared(p))
		return -1;
	snprintf(p, sizeof(p), "%s/qp", f);
	if (mkdir_shared(p))
		return -1;
	snprintf(p, sizeof(p), "%s/stats", f);
	if (mkdir_shared(p))
		return -1;
	sweep_dead("ep", "e");
	sweep_dead("stats", "");
	return 0;
}

static bool pid_alive(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

int sv_qpn_alloc(const char *ep_path, uint32_t *qpn, char *file, size_t filelen)
{
	static uint32_t seq;
	uint64_t seed = sv_hash64(((uint64_t)getpid() << 32) ^ sv_now_ns() ^
				  __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
	uint32_t q = (uint32_t)(seed & 0xffffff);

	for (int tries = 0; tries < 4096; tries++, q = (q + 1) & 0xffffff) {
		char buf[256];
		int fd, len;

		if (q < 2)
			continue; /* QP0 and QP1 are special in IB */
		snprintf(file, filelen, "%s/qp/%06x", sv_eng.cfg.fabric, q);
		fd = open(file, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
		if (fd < 0 && errno == EEXIST) {
			FILE *fp = fopen(file, "r");
			long pid = 0;

			/* Left behind by a process that died? Take it over. */
			if (fp) {
				if (!fgets(buf, sizeof(buf), fp) || fscanf(fp, "%ld", &pid) != 1)
					pid = 0;
				fclose(fp);
			}
			if (pid && !pid_alive((pid_t)pid) && unlink(file) == 0) {
				q = (q - 1) & 0xffffff;
				continue;
			}
			continue;
		}
		if (fd < 0) {
			sv_log("cannot create %s: %s", file, strerror(errno));
			return errno;
		}
		len = snprintf(buf, sizeof(buf), "%s\n%ld\n", ep_path, (long)getpid());
		if (write(fd, buf, (size_t)len) != len) {
			close(fd);
			unlink(file);
			return EIO;
		}
		close(fd);
		*qpn = q;
		return 0;
	}
	sv_log("no free QP number in %s/qp", sv_eng.cfg.fabric);
	return ENOSPC;
}

void sv_qpn_free(const char *file)
{
	if (file[0])
		unlink(file);
}

int sv_qpn_endpoint(uint32_t qpn, char *ep, size_t eplen)
{
	char file[PATH_MAX];
	FILE *fp;
	char *nl;

	snprintf(file, sizeof(file), "%s/qp/%06x", sv_eng.cfg.fabric, qpn);
	fp = fopen(file, "r");
	if (!fp)
		return -1;
	if (!fgets(ep, (int)eplen, fp)) {
		fclose(fp);
		return -1;
	}
	fclose(fp);
	nl = strchr(ep, '\n');
	if (nl)
		*nl = 0;
	return 0;
}

/* Linux rdma_calc_flow_label() and rdma_flow_label_to_udp_sport(). */
uint16_t sv_rocev2_sport(uint32_t lqpn, uint32_t rqpn, uint32_t flow_label)
{
	uint32_t fl = flow_label & 0xfffff;

	if (!fl) {
		uint64_t v = (uint64_t)lqpn * rqpn;

		v ^= v >> 20;
		v ^= v >> 40;
		fl = (uint32_t)(v & 0xfffff);
	}
	return (uint16_t)(((fl & 0x3fff) ^ ((fl & 0xfc000) >> 14)) | 0xc000);
}

/*
 * ECMP: an uplink per flow from its 5-tuple (src IP, dst IP, 17, sport, 4791):
 *   h = mix(ntohl(sip) << 32 | ntohl(dip)) ^ mix(17 << 32 | sport << 16 | 4791)
 * with mix = splitmix64's finaliser; uplink = h % nuplinks.
 */
int sv_uplink_of(uint32_t sip, uint32_t dip, uint16_t sport, int nuplinks)
{
	uint64_t h = sv_hash64(((uint64_t)ntohl(sip) << 32) | ntohl(dip)) ^
		     sv_hash64((17ull << 32) | ((uint64_t)sport << 16) | 4791u);

	return (int)(h % (uint64_t)(nuplinks > 0 ? nuplinks : 1));
}

/*
 * Pacing. Each device and each uplink is a link that carries one message at
 * a time: a token bucket with no burst. A message of B bytes reserves the
 * next free slot of every link it crosses that has a limit: its device
 * (SOFTVERBS_DEVICE_RATE_MBPS) and its uplink (SOFTVERBS_UPLINK_RATE_MBPS,
 * SOFTVERBS_UPLINK_DELAY_US); a slot lasts B/R, plus the uplink's delay. The
 * message goes on the wire whole when the later of its slots ends, so a
 * message arrives when its last byte would have, and each link, over time,
 * carries at most its rate. A link freed less than SV_PACE_SLACK_NS ago
 * starts the slot where the last one ended, so that the tx thread's own
 * latency (it reserves a slot only after writing the message before, and
 * maybe other links' messages too) does not eat into the rate; a link idle
 * for longer starts it now. Slots never overlap, so a link never carries
 * more than its rate from the moment it starts being busy; the slack only
 * lets a late tx thread catch up (at most SV_PACE_SLACK_NS * R bytes).
 *
 * The reservation is made, once, when the message is next in line on its QP
 * (or connection) and could otherwise be sent: the caller keeps the ready
 * time and the tx thread sends whatever is ready, sleeping only until the
 * earliest ready time. So a link that has budget never waits for another
 * one. Called with sv_eng.lock held, by the tx thread only.
 */
#define SV_PACE_SLACK_NS 10000000ull

static uint64_t link_reserve(uint64_t *next, uint64_t rate, uint64_t delay_ns, uint64_t bytes,
			     uint64_t now)
{
	uint64_t start = *next + SV_PACE_SLACK_NS >= now ? *next : now;

	*next = start + delay_ns + (rate ? bytes * 1000000000ull / rate : 0);
	return *next;
}

/* When a message of bytes on device dev and uplink uplink may go on the wire
 * (now when neither has a limit). */
uint64_t sv_pace_reserve(int dev, int uplink, uint64_t bytes, uint64_t now)
{
	const struct sv_config *cfg = &sv_eng.cfg;
	uint64_t ready = now, t;

	if (dev >= 0 && dev < SV_MAX_DEVICES && cfg->device_rate[dev]) {
		t = link_reserve(&sv_eng.dev_next_ns[dev], cfg->device_rate[dev], 0, bytes, now);
		if (t > ready)
			ready = t;
	}
	if (uplink >= 0 && uplink < SV_STATS_MAX_UPLINKS &&
	    (cfg->uplink_rate[uplink] || cfg->uplink_delay_us[uplink])) {
		t = link_reserve(&sv_eng.ul_next_ns[uplink], cfg->uplink_rate[uplink],
				 cfg->uplink_delay_us[uplink] * 1000ull, bytes, now);
		if (t > ready)
			ready = t;
	}
	return ready;
}
