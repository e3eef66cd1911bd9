// SPDX-License-Identifier: Apache-2.0
/*
 * `braid stat`: every braid process of this host from its counters file
 * (/dev/shm/braid-<pid>, layout plugin/counters.h): backend, provider, slow path and why,
 * GPUDirect and why, devices, comms (each NIC of a fused one), QPs, errors; --watch N
 * for rates every N seconds, --json for a program; --serve and --textfile export them to
 * Prometheus (tools/stat_prom.c).
 *
 * Read only, and careful with what it reads: a file is read with pread() into private
 * memory (a file truncated under a mapping would kill the reader with SIGBUS), then its
 * magic, version, record sizes and counts are checked before any other byte is used;
 * a file of another layout version is named with both versions and never read further.
 * Strings from a file are cut to their arrays and shown with unprintable bytes as '?'.
 *
 * Liveness: a process holds a shared flock on its file while it runs (counters.c), so
 * a file whose lock nobody holds belongs to a process that ended without removing it.
 * That works across PID namespaces (containers sharing /dev/shm), where pids do not;
 * the pid is only used to say whether the owner is in this PID namespace.
 */
#include "tools/cmds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plugin/counters.h"
#include "tools/stat.h"

#define STAT_SCHEMA 1 /* the JSON documents' "braid_stat" member */
#define STAT_DEFAULT_DIR "/dev/shm"
/* magic and version: the part every layout version shares */
#define STAT_MIN_HEADER (offsetof(struct braid_ctr_region, version) + sizeof(uint32_t))
#define STAT_HEADER offsetof(struct braid_ctr_region, devs)

static const char *const kind_names[] = { "free", "send", "recv" };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: braid stat [--json] [--watch N [--count K]] [--pid PID] [--dir DIR]\n"
		"       braid stat --serve ADDR:PORT [--pid PID] [--dir DIR]\n"
		"       braid stat --textfile DIR [--watch N [--count K]] [--pid PID] [--dir DIR]\n"
		"\n"
		"Every braid process of this host, from its counters in shared memory\n"
		"(/dev/shm/braid-<pid>): backend and provider, slow path and why, GPUDirect\n"
		"and why, devices, comms (each NIC of a fused device), QPs, errors. Processes\n"
		"on a slow path come first and are marked SLOW PATH. Files of processes that\n"
		"ended, of another counters layout version, damaged or hidden by permissions\n"
		"are named at the end. docs/stat.md says what each field means.\n"
		"\n"
		"  --json         one JSON document (with --watch: one per report and line)\n"
		"  --watch N      every N seconds (decimals allowed), rates over the interval per\n"
		"                 process, device and QP, like iostat, until interrupted\n"
		"  --count K      with --watch: stop after K reports\n"
		"  --pid PID      only the file braid-PID\n"
		"  --dir DIR      where the counters files are (default $BRAID_SHM_DIR, else\n"
		"                 /dev/shm): a host's /dev/shm mounted elsewhere\n"
		"  --serve ADDR:PORT  serve the counters in Prometheus' text format at\n"
		"                 http://ADDR:PORT/metrics (e.g. 127.0.0.1:9464; [::1]:9464;\n"
		"                 port 0: any free one, printed) until SIGINT or SIGTERM\n"
		"  --textfile DIR write them to DIR/braid.prom (a temporary file of DIR renamed\n"
		"                 over it) for node_exporter's textfile collector: once, or\n"
		"                 every N seconds with --watch N\n");
}

double stat_mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t real_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A string array of the file: cut at its end, unprintable bytes shown as '?'. */
static void clean(char *s, size_t len)
{
	s[len - 1] = '\0';
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			*s = '?';
}

#define CLEAN(a) clean((a), sizeof(a))

static void clean_region(struct braid_ctr_region *r)
{
	struct braid_ctr_fallback *fb = &r->fallback;

	CLEAN(fb->backend);
	CLEAN(fb->provider);
	CLEAN(fb->why);
	CLEAN(fb->gpudirect_why);
	CLEAN(fb->link_layer);
	CLEAN(fb->gid_type);
	CLEAN(fb->gpudirect_mode);
	for (int d = 0; d < BRAID_CTR_MAX_DEVS; d++) {
		CLEAN(r->devs[d].name);
		CLEAN(r->devs[d].provider);
	}
	for (int i = 0; i < BRAID_CTR_MAX_COMMS; i++)
		CLEAN(r->comms[i].peer);
}

/* braid-<pid>, pid 1..INT_MAX, digits only. */
static int parse_name(const char *name, int *pid)
{
	long v = 0;
	const char *p = name + 6;

	if (strncmp(name, "braid-", 6) || !*p)
		return -1;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
		if (v > INT_MAX)
			return -1;
	}
	if (v <= 0)
		return -1;
	*pid = (int)v;
	return 0;
}

static size_t read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

static void not_read(struct ent *e, enum ent_kind kind, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void not_read(struct ent *e, enum ent_kind kind, const char *reason, const char *fmt, ...)
{
	va_list ap;

	e->kind = kind;
	e->reason = reason;
	va_start(ap, fmt);
	vsnprintf(e->why, sizeof(e->why), fmt, ap);
	va_end(ap);
}

/*
 * Magic, version, record sizes and counts before anything else; 0 when the copy can be
 * read as this braid's layout. n: bytes read.
 */
static int check_layout(struct ent *e, struct braid_ctr_region *r, size_t n)
{
	const size_t want = sizeof(*r);

	if (n == 0) {
		not_read(e, ENT_BAD, "truncated",
			 "empty: a process creating it, or not a counters file");
		return -1;
	}
	if (n < STAT_MIN_HEADER) {
		not_read(e, ENT_BAD, "truncated", "truncated: %zu bytes, too short for a header",
			 n);
		return -1;
	}
	if (r->magic != BRAID_CTR_MAGIC) {
		not_read(e, ENT_BAD, "garbage", "not a braid counters file (magic %#llx)%s",
			 (unsigned long long)r->magic, r->magic ? "" : ": a process creating it?");
		return -1;
	}
	if (r->version != BRAID_CTR_VERSION) {
		e->version = r->version;
		not_read(e, ENT_VERSION, "version",
			 "counters layout version %u, this braid stat reads version %u (%s braid "
			 "wrote it): not read",
			 r->version, (unsigned)BRAID_CTR_VERSION,
			 r->version > BRAID_CTR_VERSION ? "a newer" : "an older");
		return -1;
	}
	if (n < STAT_HEADER) {
		not_read(e, ENT_BAD, "truncated", "truncated: %zu of %zu bytes", n, want);
		return -1;
	}
	if (r->header_size != STAT_HEADER || r->dev_rec_size != sizeof(r->devs[0]) ||
	    r->comm_rec_size != sizeof(r->comms[0]) || r->max_devs != BRAID_CTR_MAX_DEVS ||
	    r->max_comms != BRAID_CTR_MAX_COMMS) {
		not_read(e, ENT_BAD, "layout",
			 "version %u but another layout (header %u, device %u, comm %u bytes, "
			 "%u devices, %u comms; this braid: %zu, %zu, %zu, %d, %d): not read",
			 r->version, r->header_size, r->dev_rec_size, r->comm_rec_size, r->max_devs,
			 r->max_comms, STAT_HEADER, sizeof(r->devs[0]), sizeof(r->comms[0]),
			 BRAID_CTR_MAX_DEVS, BRAID_CTR_MAX_COMMS);
		return -1;
	}
	if (n < want) {
		not_read(e, ENT_BAD, "truncated", "truncated: %zu of %zu bytes", n, want);
		return -1;
	}
	if (r->pid != e->pid || r->ndevs > BRAID_CTR_MAX_DEVS) {
		not_read(e, ENT_BAD, "garbage", "inconsistent: pid %d, %u devices", (int)r->pid,
			 r->ndevs);
		return -1;
	}
	/* QP records: set by the backend that keeps them (net_ib); 0 and 0 otherwise */
	if (!(r->qp_rec_size == 0 && r->max_qps == 0) &&
	    !(r->qp_rec_size == sizeof(r->qps[0]) && r->max_qps == BRAID_CTR_MAX_QPS))
		snprintf(e->qp_note, sizeof(e->qp_note),
			 "QP records not read: %u of %u bytes each, this braid: %d of %zu",
			 r->max_qps, r->qp_rec_size, BRAID_CTR_MAX_QPS, sizeof(r->qps[0]));
	clean_region(r);
	return 0;
}

/* Whether the pid, here, is the process that holds the file open. */
static enum owner_ns owner_ns(int pid, const struct stat *st)
{
	char dir[64];
	struct dirent *de;
	enum owner_ns ns = NS_OTHER;
	DIR *d;

	if (kill(pid, 0) != 0 && errno == ESRCH)
		return NS_OTHER;
	snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
	d = opendir(dir);
	if (!d)
		return NS_UNKNOWN; /* another user's process */
	while ((de = readdir(d)) != NULL) {
		struct stat fs;

		if (de->d_name[0] == '.')
			continue;
		if (fstatat(dirfd(d), de->d_name, &fs, 0) == 0 && fs.st_dev == st->st_dev &&
		    fs.st_ino == st->st_ino) {
			ns = NS_THIS;
			break;
		}
	}
	closedir(d);
	return ns;
}

/*
 * Whether the file's process runs: it holds a shared flock on the file as long as it
 * does, so an exclusive one can be taken (and is dropped at once) only when it ended.
 */
static void liveness(struct ent *e, int fd, const struct stat *st)
{
	bool pid_here;
	int err;

	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		(void)flock(fd, LOCK_UN);
		e->lock_known = true;
		e->lock_held = false;
		pid_here = kill(e->pid, 0) == 0 || errno == EPERM;
		e->kind = ENT_ENDED;
		snprintf(e->why, sizeof(e->why),
			 "no process holds its lock: ended without removing its file%s",
			 pid_here ? " (its pid here is another process now)" : "");
		return;
	}
	err = errno;
	if (err == EWOULDBLOCK) {
		e->lock_known = true;
		e->lock_held = true;
		e->kind = ENT_LIVE;
		e->ns = owner_ns(e->pid, st);
		snprintf(e->why, sizeof(e->why), "live: holds its counters file's lock%s",
			 e->ns == NS_OTHER     ? "; in another PID namespace (a container sharing "
						 "/dev/shm): its pid means nothing here"
			 : e->ns == NS_UNKNOWN ? "; pid here, whether it is the owner cannot be "
						 "told (another user's)"
					       : "");
		return;
	}
	/* no flock on this file system: the pid is all there is */
	if (kill(e->pid, 0) == 0 || errno == EPERM) {
		e->kind = ENT_LIVE;
		snprintf(e->why, sizeof(e->why),
			 "live: pid %d runs in this PID namespace (its lock cannot be tested: %s)",
			 e->pid, strerror(err));
	} else {
		e->kind = ENT_UNKNOWN;
		snprintf(e->why, sizeof(e->why),
			 "liveness unknown (other PID namespace?): pid %d is not here and the "
			 "file's lock cannot be tested",
			 e->pid);
	}
}

/* One file; 1: leave it out (it went away since the directory was read). */
static int read_ent(struct ent *e, const char *dir, const char *name)
{
	struct stat st;
	size_t n;
	int fd;

	snprintf(e->name, sizeof(e->name), "%s", name);
	snprintf(e->path, sizeof(e->path), "%s/%s", dir, name);
	fd = open(e->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		if (err == ENOENT)
			return 1;
		if (err == EACCES || err == EPERM) {
			if (lstat(e->path, &st) == 0)
				not_read(e, ENT_HIDDEN, "permission",
					 "hidden by permissions (owner uid %u, mode %04o): run "
					 "braid stat as that user or root",
					 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
			else
				not_read(e, ENT_HIDDEN, "permission", "hidden by permissions");
		} else if (err == ELOOP) {
			not_read(e, ENT_BAD, "not_regular", "a symbolic link, not a counters file");
		} else {
			not_read(e, ENT_BAD, "error", "cannot open: %s", strerror(err));
		}
		return 0;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		not_read(e, ENT_BAD, "not_regular", "not a regular file");
		close(fd);
		return 0;
	}
	e->r = calloc(1, sizeof(*e->r));
	if (!e->r) {
		not_read(e, ENT_BAD, "error", "out of memory");
		close(fd);
		return 0;
	}
	e->t_mono = stat_mono_now();
	e->t_real_ns = real_now_ns();
	n = read_full(fd, e->r, sizeof(*e->r));
	if (check_layout(e, e->r, n) == 0) {
		liveness(e, fd, &st);
	} else {
		struct ent probe = *e;

		/* for a file not read, only whether its process still runs */
		liveness(&probe, fd, &st);
		e->lock_known = probe.lock_known;
		e->lock_held = probe.lock_held;
		free(e->r);
		e->r = NULL;
	}
	close(fd);
	return 0;
}

static int rank(const struct ent *e)
{
	switch (e->kind) {
	case ENT_LIVE:
	case ENT_UNKNOWN: return e->r->fallback.slow_path ? 0 : 1;
	case ENT_ENDED: return 2;
	case ENT_VERSION: return 3;
	case ENT_BAD: return 4;
	case ENT_HIDDEN: return 5;
	}
	return 6;
}

static int ent_cmp(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	int rx = rank(x), ry = rank(y);

	if (rx != ry)
		return rx - ry;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return strcmp(x->name, y->name);
}

void stat_scan_free(struct scan *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->e[i].r);
	free(s->e);
	memset(s, 0, sizeof(*s));
}

int stat_scan_dir(const struct stat_opts *o, struct scan *s)
{
	struct dirent *de;
	DIR *d = opendir(o->dir);

	memset(s, 0, sizeof(*s));
	if (!d) {
		fprintf(stderr, "braid stat: %s: %s\n", o->dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		int pid;

		if (parse_name(de->d_name, &pid) || (o->pid && pid != o->pid))
			continue;
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 16;
			struct ent *ne = realloc(s->e, cap * sizeof(*ne));

			if (!ne) {
				fprintf(stderr, "braid stat: out of memory\n");
				closedir(d);
				return -1;
			}
			s->e = ne;
			s->cap = cap;
		}
		memset(&s->e[s->n], 0, sizeof(s->e[0]));
		s->e[s->n].pid = pid;
		if (read_ent(&s->e[s->n], o->dir, de->d_name) == 0)
			s->n++;
	}
	closedir(d);
	if (s->n)
		qsort(s->e, s->n, sizeof(s->e[0]), ent_cmp);
	for (size_t i = 0; i < s->n; i++) {
		const struct ent *e = &s->e[i];

		switch (e->kind) {
		case ENT_LIVE: s->nlive++; break;
		case ENT_UNKNOWN: s->nunknown++; break;
		case ENT_ENDED: s->nended++; break;
		default: s->nnotread++; break;
		}
		if ((e->kind == ENT_LIVE || e->kind == ENT_UNKNOWN) && e->r->fallback.slow_path)
			s->nslow++;
	}
	return 0;
}

bool stat_ent_running(const struct ent *e)
{
	return e->kind == ENT_LIVE || e->kind == ENT_UNKNOWN;
}

/* Seconds since the process started, -1 when its start time makes no sense. */
static double uptime_s(const struct ent *e)
{
	uint64_t start = e->r->start_time_ns;

	if (start == 0 || start > e->t_real_ns)
		return -1;
	return (double)(e->t_real_ns - start) * 1e-9;
}

static void fmt_duration(double s, char *buf, size_t len)
{
	long v = (long)s;

	if (s < 0)
		snprintf(buf, len, "?");
	else if (v >= 86400)
		snprintf(buf, len, "%ldd%02ldh", v / 86400, v % 86400 / 3600);
	else if (v >= 3600)
		snprintf(buf, len, "%ldh%02ldm", v / 3600, v % 3600 / 60);
	else if (v >= 60)
		snprintf(buf, len, "%ldm%02lds", v / 60, v % 60);
	else
		snprintf(buf, len, "%lds", v);
}

static void fmt_time(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000ULL);
	struct tm tm;

	if (!ns || !localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm))
		snprintf(buf, len, "?");
}

const char *stat_dev_name(const struct braid_ctr_region *r, int32_t dev)
{
	if (dev < 0 || dev >= BRAID_CTR_MAX_DEVS)
		return "?";
	return r->devs[dev].name[0] ? r->devs[dev].name : "?";
}

uint32_t stat_comm_nlanes(const struct braid_ctr_comm *c)
{
	return c->nlanes < BRAID_CTR_MAX_LANES ? c->nlanes : BRAID_CTR_MAX_LANES;
}

bool stat_comm_used(const struct braid_ctr_comm *c)
{
	return c->kind == BRAID_CTR_COMM_SEND || c->kind == BRAID_CTR_COMM_RECV;
}

bool stat_qps_readable(const struct ent *e)
{
	return !e->qp_note[0] && e->r->qp_rec_size == sizeof(e->r->qps[0]);
}

static double avg_mbps(uint64_t bytes, double secs)
{
	return secs > 0 ? (double)bytes / secs / 1e6 : 0;
}

static const char *backend_str(const struct braid_ctr_fallback *fb)
{
	return fb->backend[0] ? fb->backend : "none (init failed)";
}

/* ---- the listing, for people */

static void print_devices(const struct ent *e, double up)
{
	const struct braid_ctr_region *r = e->r;

	printf("  devices: %u\n", r->ndevs);
	if (!r->ndevs)
		return;
	printf("    %-3s %-16s %14s %14s %10s %10s %7s %7s %9s %10s %8s %8s\n", "dev", "name",
	       "tx_bytes", "rx_bytes", "tx_msgs", "rx_msgs", "errors", "stalls", "strangers",
	       "slow_lanes", "avg_tx", "avg_rx");
	for (uint32_t d = 0; d < r->ndevs; d++) {
		const struct braid_ctr_dev *v = &r->devs[d];

		printf("    %-3u %-16s %14llu %14llu %10llu %10llu %7llu %7llu %9llu %10llu %8.1f "
		       "%8.1f\n",
		       d, v->name, (unsigned long long)v->t.tx_bytes,
		       (unsigned long long)v->t.rx_bytes, (unsigned long long)v->t.tx_msgs,
		       (unsigned long long)v->t.rx_msgs, (unsigned long long)v->t.errors,
		       (unsigned long long)v->stalls, (unsigned long long)v->strangers,
		       (unsigned long long)v->slow_lanes, avg_mbps(v->t.tx_bytes, up),
		       avg_mbps(v->t.rx_bytes, up));
	}
	for (uint32_t d = 0; d < r->ndevs; d++)
		if (r->devs[d].provider[0] && strcmp(r->devs[d].provider, r->fallback.provider))
			printf("    dev %u provider: %s\n", d, r->devs[d].provider);
}

static void print_lanes(const struct braid_ctr_region *r, const struct braid_ctr_comm *c)
{
	uint32_t n = stat_comm_nlanes(c);
	uint64_t total = 0;

	for (uint32_t k = 0; k < n; k++)
		total += c->lanes[k].bytes;
	printf("         %-16s %14s %7s %7s %10s  %s\n", "NIC", "bytes", "share", "weight",
	       "rate_MB/s", "slow");
	for (uint32_t k = 0; k < n; k++) {
		const struct braid_ctr_lane *l = &c->lanes[k];

		printf("         %-16s %14llu %6.1f%% %6.1f%% %10.1f  %s\n",
		       stat_dev_name(r, l->dev), (unsigned long long)l->bytes,
		       total ? 100.0 * (double)l->bytes / (double)total : 0.0,
		       (double)l->weight_ppm / 1e4, (double)l->rate_bps / 1e6,
		       l->slow ? "SLOW" : "no");
	}
}

static void print_comms(const struct ent *e)
{
	const struct braid_ctr_region *r = e->r;
	int nsend = 0, nrecv = 0;

	for (int i = 0; i < BRAID_CTR_MAX_COMMS; i++) {
		nsend += r->comms[i].kind == BRAID_CTR_COMM_SEND;
		nrecv += r->comms[i].kind == BRAID_CTR_COMM_RECV;
	}
	printf("  comms: %d (%d send, %d recv)\n", nsend + nrecv, nsend, nrecv);
	if (!nsend && !nrecv)
		return;
	printf("    %-4s %-4s %-3s %-24s %14s %14s %10s %7s %5s\n", "slot", "kind", "dev", "peer",
	       "tx_bytes", "rx_bytes", "msgs", "errors", "nics");
	for (int i = 0; i < BRAID_CTR_MAX_COMMS; i++) {
		const struct braid_ctr_comm *c = &r->comms[i];

		if (!stat_comm_used(c))
			continue;
		printf("    %-4d %-4s %-3d %-24s %14llu %14llu %10llu %7llu %5u\n", i,
		       kind_names[c->kind], (int)c->dev, c->peer[0] ? c->peer : "?",
		       (unsigned long long)c->t.tx_bytes, (unsigned long long)c->t.rx_bytes,
		       (unsigned long long)(c->t.tx_msgs + c->t.rx_msgs),
		       (unsigned long long)c->t.errors, c->nlanes);
		if (stat_comm_nlanes(c) >= 2)
			print_lanes(r, c);
	}
}

static void print_qps(const struct ent *e, double up)
{
	const struct braid_ctr_region *r = e->r;
	int n = 0;

	if (e->qp_note[0]) {
		printf("  qps: %s\n", e->qp_note);
		return;
	}
	if (!stat_qps_readable(e)) {
		printf("  qps: none (the %s backend keeps no per-QP records)\n",
		       r->fallback.backend[0] ? r->fallback.backend : "chosen");
		return;
	}
	for (int q = 0; q < BRAID_CTR_MAX_QPS; q++)
		n += r->qps[q].in_use != 0;
	printf("  qps: %d\n", n);
	if (!n)
		return;
	printf("    %-4s %-3s %-16s %8s %8s %7s %5s %4s %14s %14s %7s %8s %8s\n", "slot", "dev",
	       "nic", "qpn", "remote", "flow", "sport", "comm", "tx_bytes", "rx_bytes", "errors",
	       "avg_tx", "avg_rx");
	for (int q = 0; q < BRAID_CTR_MAX_QPS; q++) {
		const struct braid_ctr_qp *p = &r->qps[q];

		if (!p->in_use)
			continue;
		printf("    %-4d %-3d %-16s %#8x %#8x %#7x %5u %4d %14llu %14llu %7llu %8.1f %8.1f\n",
		       q, (int)p->dev, stat_dev_name(r, p->dev), p->qpn, p->remote_qpn,
		       p->flow_label, p->sport, (int)p->comm, (unsigned long long)p->tx_bytes,
		       (unsigned long long)p->rx_bytes, (unsigned long long)p->errors,
		       avg_mbps(p->tx_bytes, up), avg_mbps(p->rx_bytes, up));
	}
}

static void print_process(const struct ent *e)
{
	const struct braid_ctr_fallback *fb = &e->r->fallback;
	double up = uptime_s(e);
	char dur[32];

	fmt_duration(up, dur, sizeof(dur));
	printf("pid %d%s  %s, up %s  (%s)\n", e->pid, fb->slow_path ? "  SLOW PATH" : "",
	       e->kind == ENT_LIVE ? "live" : "liveness unknown (other PID namespace?)", dur,
	       e->path);
	printf("  liveness: %s\n", e->why);
	printf("  backend %s, provider %s%s\n", backend_str(fb),
	       fb->provider[0] ? fb->provider : "-", fb->slow_path ? ": SLOW PATH" : "");
	printf("  why: %s\n", fb->why[0] ? fb->why : "-");
	printf("  GPUDirect RDMA %s (mode %s)%s%s\n", fb->gpudirect ? "on" : "off",
	       fb->gpudirect_mode[0] ? fb->gpudirect_mode : "?", fb->gpudirect_why[0] ? ": " : "",
	       fb->gpudirect_why);
	if (fb->link_layer[0])
		printf("  link: %s, GID index %d (%s), MTU %d\n", fb->link_layer,
		       (int)fb->gid_index, fb->gid_type[0] ? fb->gid_type : "?", (int)fb->mtu);
	print_devices(e, up);
	print_comms(e);
	print_qps(e, up);
	printf("  (avg_tx, avg_rx: MB/s since the process started; --watch N for current rates)\n");
}

static void print_listing(const struct stat_opts *o, const struct scan *s)
{
	bool header = false;

	printf("braid stat: %s: %d running braid process(es) (%d on a slow path%s), %d ended, "
	       "%d file(s) not read\n",
	       o->dir, s->nlive + s->nunknown, s->nslow,
	       s->nunknown ? ", some of unknown liveness" : "", s->nended, s->nnotread);
	for (size_t i = 0; i < s->n; i++)
		if (stat_ent_running(&s->e[i])) {
			printf("\n");
			print_process(&s->e[i]);
		}
	for (size_t i = 0; i < s->n; i++) {
		const struct ent *e = &s->e[i];
		const struct braid_ctr_fallback *fb;
		char t[32];

		if (e->kind != ENT_ENDED)
			continue;
		if (!header)
			printf("\nended (the next braid process of the same user removes these):\n");
		header = true;
		fb = &e->r->fallback;
		fmt_time(e->r->start_time_ns, t, sizeof(t));
		printf("  %s: pid %d, backend %s, provider %s, started %s: %s\n", e->path, e->pid,
		       backend_str(fb), fb->provider[0] ? fb->provider : "-", t, e->why);
	}
	header = false;
	for (size_t i = 0; i < s->n; i++) {
		const struct ent *e = &s->e[i];

		if (e->kind != ENT_VERSION && e->kind != ENT_BAD && e->kind != ENT_HIDDEN)
			continue;
		if (!header)
			printf("\nnot read:\n");
		header = true;
		printf("  %s: %s%s\n", e->path, e->why,
		       !e->lock_known ? ""
		       : e->lock_held ? " (its process runs)"
				      : " (no process holds it)");
	}
}

/* ---- JSON */

static json_t *jint(uint64_t v)
{
	return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

static void jset(json_t *o, const char *key, json_t *v)
{
	(void)json_object_set_new(o, key, v); /* takes v, frees it on failure */
}

static void jtraffic(json_t *o, const struct braid_ctr_traffic *t)
{
	jset(o, "tx_bytes", jint(t->tx_bytes));
	jset(o, "tx_msgs", jint(t->tx_msgs));
	jset(o, "rx_bytes", jint(t->rx_bytes));
	jset(o, "rx_msgs", jint(t->rx_msgs));
	jset(o, "completions", jint(t->completions));
	jset(o, "errors", jint(t->errors));
}

static json_t *json_not_read(const struct ent *e)
{
	json_t *o = json_object();

	jset(o, "file", json_string(e->name));
	jset(o, "path", json_string(e->path));
	jset(o, "pid", json_integer(e->pid));
	jset(o, "reason", json_string(e->reason));
	if (e->kind == ENT_VERSION) {
		jset(o, "version", json_integer(e->version));
		jset(o, "reads_version", json_integer(BRAID_CTR_VERSION));
	}
	jset(o, "running", e->lock_known ? json_boolean(e->lock_held) : json_null());
	jset(o, "message", json_string(e->why));
	return o;
}

static json_t *json_devices(const struct braid_ctr_region *r)
{
	json_t *a = json_array();

	for (uint32_t d = 0; d < r->ndevs; d++) {
		const struct braid_ctr_dev *v = &r->devs[d];
		json_t *o = json_object();

		jset(o, "index", json_integer(d));
		jset(o, "name", json_string(v->name));
		jset(o, "provider", json_string(v->provider));
		jset(o, "in_use", json_integer(v->in_use));
		jtraffic(o, &v->t);
		jset(o, "av_entries", jint(v->av_entries));
		jset(o, "strangers", jint(v->strangers));
		jset(o, "slow_lanes", jint(v->slow_lanes));
		jset(o, "stalls", jint(v->stalls));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *json_comms(const struct braid_ctr_region *r)
{
	json_t *a = json_array();

	for (int i = 0; i < BRAID_CTR_MAX_COMMS; i++) {
		const struct braid_ctr_comm *c = &r->comms[i];
		json_t *o, *lanes;
		uint64_t total = 0;

		if (!stat_comm_used(c))
			continue;
		o = json_object();
		lanes = json_array();
		jset(o, "slot", json_integer(i));
		jset(o, "kind", json_string(kind_names[c->kind]));
		jset(o, "dev", json_integer(c->dev));
		jset(o, "peer", json_string(c->peer));
		jtraffic(o, &c->t);
		jset(o, "nlanes", json_integer(c->nlanes));
		for (uint32_t k = 0; k < stat_comm_nlanes(c); k++)
			total += c->lanes[k].bytes;
		for (uint32_t k = 0; k < stat_comm_nlanes(c) && c->nlanes >= 2; k++) {
			const struct braid_ctr_lane *l = &c->lanes[k];
			json_t *lo = json_object();

			jset(lo, "dev", json_integer(l->dev));
			jset(lo, "name", json_string(stat_dev_name(r, l->dev)));
			jset(lo, "bytes", jint(l->bytes));
			jset(lo, "chunks", jint(l->chunks));
			jset(lo, "share",
			     json_real(total ? (double)l->bytes / (double)total : 0.0));
			jset(lo, "weight", json_real((double)l->weight_ppm / 1e6));
			jset(lo, "rate_Bps", jint(l->rate_bps));
			jset(lo, "slow", json_boolean(l->slow));
			json_array_append_new(lanes, lo);
		}
		jset(o, "lanes", lanes);
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *json_qps(const struct ent *e)
{
	const struct braid_ctr_region *r = e->r;
	json_t *a;

	if (!stat_qps_readable(e))
		return json_null();
	a = json_array();
	for (int q = 0; q < BRAID_CTR_MAX_QPS; q++) {
		const struct braid_ctr_qp *p = &r->qps[q];
		json_t *o;

		if (!p->in_use)
			continue;
		o = json_object();
		jset(o, "slot", json_integer(q));
		jset(o, "dev", json_integer(p->dev));
		jset(o, "comm", json_integer(p->comm));
		jset(o, "qpn", json_integer(p->qpn));
		jset(o, "remote_qpn", json_integer(p->remote_qpn));
		jset(o, "flow_label", json_integer(p->flow_label));
		jset(o, "sport", json_integer(p->sport));
		jset(o, "tx_bytes", jint(p->tx_bytes));
		jset(o, "tx_msgs", jint(p->tx_msgs));
		jset(o, "rx_bytes", jint(p->rx_bytes));
		jset(o, "rx_msgs", jint(p->rx_msgs));
		jset(o, "errors", jint(p->errors));
		json_array_append_new(a, o);
	}
	return a;
}

static const char *ns_name(enum owner_ns ns)
{
	return ns == NS_THIS ? "this" : ns == NS_OTHER ? "other" : "unknown";
}

static json_t *json_process(const struct ent *e)
{
	const struct braid_ctr_region *r = e->r;
	const struct braid_ctr_fallback *fb = &r->fallback;
	json_t *o = json_object(), *g = json_object();
	double up = uptime_s(e);

	jset(o, "file", json_string(e->name));
	jset(o, "path", json_string(e->path));
	jset(o, "pid", json_integer(e->pid));
	jset(o, "live", e->kind == ENT_UNKNOWN ? json_null() : json_boolean(e->kind == ENT_LIVE));
	jset(o, "liveness", json_string(e->why));
	jset(o, "pid_namespace", json_string(ns_name(e->ns)));
	jset(o, "start_time_ns", jint(r->start_time_ns));
	jset(o, "uptime_s", up < 0 ? json_null() : json_real(up));
	jset(o, "backend", json_string(fb->backend));
	jset(o, "provider", json_string(fb->provider));
	jset(o, "slow_path", json_boolean(fb->slow_path));
	jset(o, "why", json_string(fb->why));
	jset(g, "on", json_boolean(fb->gpudirect));
	jset(g, "mode", json_string(fb->gpudirect_mode));
	jset(g, "why", json_string(fb->gpudirect_why));
	jset(o, "gpudirect", g);
	jset(o, "link_layer", json_string(fb->link_layer));
	jset(o, "gid_index", json_integer(fb->gid_index));
	jset(o, "gid_type", json_string(fb->gid_type));
	jset(o, "mtu", json_integer(fb->mtu));
	jset(o, "devices", json_devices(r));
	jset(o, "comms", json_comms(r));
	jset(o, "qps", json_qps(e));
	if (e->qp_note[0])
		jset(o, "qps_note", json_string(e->qp_note));
	return o;
}

static json_t *json_head(const struct stat_opts *o)
{
	json_t *root = json_object();

	jset(root, "braid_stat", json_integer(STAT_SCHEMA));
	jset(root, "layout_version", json_integer(BRAID_CTR_VERSION));
	jset(root, "dir", json_string(o->dir));
	jset(root, "time_ns", jint(real_now_ns()));
	return root;
}

static void json_tail(json_t *root, const struct scan *s)
{
	json_t *ended = json_array(), *nr = json_array();

	for (size_t i = 0; i < s->n; i++) {
		const struct ent *e = &s->e[i];

		if (e->kind == ENT_ENDED) {
			json_t *x = json_object();

			jset(x, "file", json_string(e->name));
			jset(x, "path", json_string(e->path));
			jset(x, "pid", json_integer(e->pid));
			jset(x, "start_time_ns", jint(e->r->start_time_ns));
			jset(x, "backend", json_string(e->r->fallback.backend));
			jset(x, "provider", json_string(e->r->fallback.provider));
			jset(x, "message", json_string(e->why));
			json_array_append_new(ended, x);
		} else if (!stat_ent_running(e)) {
			json_array_append_new(nr, json_not_read(e));
		}
	}
	jset(root, "ended", ended);
	jset(root, "not_read", nr);
}

static int json_print(json_t *root, size_t flags)
{
	int rc = json_dumpf(root, stdout, flags);

	json_decref(root);
	putchar('\n');
	fflush(stdout);
	return rc;
}

static int json_listing(const struct stat_opts *o, const struct scan *s)
{
	json_t *root = json_head(o), *procs = json_array();

	for (size_t i = 0; i < s->n; i++)
		if (stat_ent_running(&s->e[i]))
			json_array_append_new(procs, json_process(&s->e[i]));
	jset(root, "processes", procs);
	json_tail(root, s);
	return json_print(root, JSON_INDENT(2));
}

/* ---- --watch: rates over each interval */

struct rate {
	double secs;
	bool since_start; /* a process new since the last report: from its start */
};

/* The same process in the previous scan (same file, same start), or NULL. */
static const struct ent *find_prev(const struct scan *prev, const struct ent *e)
{
	for (size_t i = 0; prev && i < prev->n; i++) {
		const struct ent *p = &prev->e[i];

		if (p->r && stat_ent_running(p) && !strcmp(p->name, e->name) &&
		    p->r->start_time_ns == e->r->start_time_ns)
			return p;
	}
	return NULL;
}

/* Per second; < 0 when the counter went back (a record reused): no rate. */
static double per_s(uint64_t cur, uint64_t prev, double secs)
{
	if (cur < prev || secs <= 0)
		return -1;
	return (double)(cur - prev) / secs;
}

static void print_rate(double v, double scale, int width)
{
	if (v < 0)
		printf(" %*s", width, "-");
	else
		printf(" %*.1f", width, v / scale);
}

static json_t *jrate(double v)
{
	return v < 0 ? json_null() : json_real(v);
}

static uint64_t delta(uint64_t cur, uint64_t prev)
{
	return cur >= prev ? cur - prev : 0;
}

static const struct braid_ctr_dev zero_dev;
static const struct braid_ctr_qp zero_qp;

static void watch_process(const struct ent *e, const struct ent *p, json_t *jprocs)
{
	const struct braid_ctr_region *r = e->r;
	const struct braid_ctr_fallback *fb = &r->fallback;
	struct rate rt = { .secs = p ? e->t_mono - p->t_mono : uptime_s(e), .since_start = !p };
	json_t *jo = NULL, *jdevs = NULL, *jqps = NULL;
	int idle = 0;

	if (jprocs) {
		jo = json_object();
		jdevs = json_array();
		jset(jo, "file", json_string(e->name));
		jset(jo, "pid", json_integer(e->pid));
		jset(jo, "live", e->kind == ENT_LIVE ? json_true() : json_null());
		jset(jo, "backend", json_string(fb->backend));
		jset(jo, "provider", json_string(fb->provider));
		jset(jo, "slow_path", json_boolean(fb->slow_path));
		jset(jo, "since", json_string(rt.since_start ? "start" : "interval"));
		jset(jo, "seconds", rt.secs > 0 ? json_real(rt.secs) : json_null());
	} else {
		printf("pid %d%s  %s %s%s\n", e->pid, fb->slow_path ? "  SLOW PATH" : "",
		       backend_str(fb), fb->provider[0] ? fb->provider : "-",
		       rt.since_start ? "  (new: rates since it started)" : "");
		printf("  %-3s %-16s %10s %10s %10s %10s %7s %7s %9s %10s\n", "dev", "name",
		       "tx_MB/s", "rx_MB/s", "tx_msgs/s", "rx_msgs/s", "errors", "stalls",
		       "strangers", "slow_lanes");
	}
	for (uint32_t d = 0; d < r->ndevs; d++) {
		const struct braid_ctr_dev *c = &r->devs[d];
		const struct braid_ctr_dev *q = p && d < p->r->ndevs ? &p->r->devs[d] : &zero_dev;
		double tx = per_s(c->t.tx_bytes, q->t.tx_bytes, rt.secs);
		double rx = per_s(c->t.rx_bytes, q->t.rx_bytes, rt.secs);
		double txm = per_s(c->t.tx_msgs, q->t.tx_msgs, rt.secs);
		double rxm = per_s(c->t.rx_msgs, q->t.rx_msgs, rt.secs);

		if (jdevs) {
			json_t *o = json_object();

			jset(o, "index", json_integer(d));
			jset(o, "name", json_string(c->name));
			jset(o, "tx_Bps", jrate(tx));
			jset(o, "rx_Bps", jrate(rx));
			jset(o, "tx_msgs_ps", jrate(txm));
			jset(o, "rx_msgs_ps", jrate(rxm));
			jset(o, "errors", jint(delta(c->t.errors, q->t.errors)));
			jset(o, "strangers", jint(delta(c->strangers, q->strangers)));
			jset(o, "slow_lanes", jint(delta(c->slow_lanes, q->slow_lanes)));
			jset(o, "stalls", jint(delta(c->stalls, q->stalls)));
			json_array_append_new(jdevs, o);
			continue;
		}
		printf("  %-3u %-16s", d, c->name);
		print_rate(tx, 1e6, 10);
		print_rate(rx, 1e6, 10);
		print_rate(txm, 1, 10);
		print_rate(rxm, 1, 10);
		printf(" %7llu %7llu %9llu %10llu\n",
		       (unsigned long long)delta(c->t.errors, q->t.errors),
		       (unsigned long long)delta(c->stalls, q->stalls),
		       (unsigned long long)delta(c->strangers, q->strangers),
		       (unsigned long long)delta(c->slow_lanes, q->slow_lanes));
	}
	if (stat_qps_readable(e)) {
		bool header = false;

		if (jo)
			jqps = json_array();
		for (int k = 0; k < BRAID_CTR_MAX_QPS; k++) {
			const struct braid_ctr_qp *c = &r->qps[k];
			const struct braid_ctr_qp *q = &zero_qp;
			double tx, rx;

			if (!c->in_use)
				continue;
			/* the same QP in the last report; a new one counted from 0 */
			if (p && stat_qps_readable(p) && p->r->qps[k].in_use &&
			    p->r->qps[k].qpn == c->qpn && p->r->qps[k].dev == c->dev)
				q = &p->r->qps[k];
			tx = per_s(c->tx_bytes, q->tx_bytes, rt.secs);
			rx = per_s(c->rx_bytes, q->rx_bytes, rt.secs);
			if (tx == 0 && rx == 0 && c->errors == q->errors) {
				idle++;
				continue;
			}
			if (jqps) {
				json_t *o = json_object();

				jset(o, "slot", json_integer(k));
				jset(o, "dev", json_integer(c->dev));
				jset(o, "qpn", json_integer(c->qpn));
				jset(o, "tx_Bps", jrate(tx));
				jset(o, "rx_Bps", jrate(rx));
				jset(o, "errors", jint(delta(c->errors, q->errors)));
				json_array_append_new(jqps, o);
				continue;
			}
			if (!header)
				printf("  %-4s %-3s %8s %10s %10s %7s\n", "qp", "dev", "qpn",
				       "tx_MB/s", "rx_MB/s", "errors");
			header = true;
			printf("  %-4d %-3d %#8x", k, (int)c->dev, c->qpn);
			print_rate(tx, 1e6, 10);
			print_rate(rx, 1e6, 10);
			printf(" %7llu\n", (unsigned long long)delta(c->errors, q->errors));
		}
		if (!jo && idle)
			printf("  (%d idle QP(s) not shown)\n", idle);
	}
	if (jo) {
		jset(jo, "devices", jdevs);
		jset(jo, "qps", jqps ? jqps : json_null());
		jset(jo, "idle_qps", json_integer(idle));
		json_array_append_new(jprocs, jo);
	}
}

static void watch_report(const struct stat_opts *o, const struct scan *cur, const struct scan *prev,
			 long n, double interval)
{
	json_t *root = NULL, *procs = NULL;
	char t[32];
	int gone = 0;

	/* processes of the last report that are no longer running */
	for (size_t i = 0; i < prev->n; i++) {
		const struct ent *p = &prev->e[i];
		bool still = false;

		if (!stat_ent_running(p))
			continue;
		for (size_t j = 0; j < cur->n && !still; j++)
			still = stat_ent_running(&cur->e[j]) && find_prev(prev, &cur->e[j]) == p;
		gone += !still;
	}
	if (o->json) {
		root = json_head(o);
		procs = json_array();
		jset(root, "report", json_integer(n));
		jset(root, "interval_s", json_real(interval));
	} else {
		fmt_time(real_now_ns(), t, sizeof(t));
		printf("report %ld  %s  interval %.2f s: %d running (%d on a slow path), %d "
		       "ended since the last report\n",
		       n, t, interval, cur->nlive + cur->nunknown, cur->nslow, gone);
	}
	for (size_t i = 0; i < cur->n; i++)
		if (stat_ent_running(&cur->e[i]))
			watch_process(&cur->e[i], find_prev(prev, &cur->e[i]), procs);
	if (root) {
		jset(root, "processes", procs);
		jset(root, "ended_since_last", json_integer(gone));
		json_tail(root, cur);
		json_print(root, JSON_COMPACT);
		return;
	}
	if (cur->nended || cur->nnotread)
		printf("(%d ended, %d file(s) not read: braid stat without --watch names them)\n",
		       cur->nended, cur->nnotread);
	printf("\n");
	fflush(stdout);
}

static void sleep_until(double t)
{
	for (;;) {
		double left = t - stat_mono_now();
		struct timespec ts;

		if (left <= 0)
			return;
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
	}
}

static int watch(const struct stat_opts *o)
{
	struct scan prev, cur;
	double next = stat_mono_now();

	if (stat_scan_dir(o, &prev))
		return 1;
	for (long n = 1; !o->count || n <= o->count; n++) {
		next += o->watch;
		sleep_until(next);
		if (stat_scan_dir(o, &cur)) {
			stat_scan_free(&prev);
			return 1;
		}
		watch_report(o, &cur, &prev, n, o->watch);
		stat_scan_free(&prev);
		prev = cur;
	}
	stat_scan_free(&prev);
	return 0;
}

int braid_cmd_stat(int argc, char **argv)
{
	enum { O_JSON = 1, O_WATCH, O_COUNT, O_PID, O_DIR, O_SERVE, O_TEXTFILE };
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, O_JSON },
		{ "watch", required_argument, NULL, O_WATCH },
		{ "count", required_argument, NULL, O_COUNT },
		{ "pid", required_argument, NULL, O_PID },
		{ "dir", required_argument, NULL, O_DIR },
		{ "serve", required_argument, NULL, O_SERVE },
		{ "textfile", required_argument, NULL, O_TEXTFILE },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct stat_opts o = { .dir = getenv("BRAID_SHM_DIR") };
	struct scan s;
	char *end;
	int c, rc = 0;

	if (!o.dir || !o.dir[0])
		o.dir = STAT_DEFAULT_DIR;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_JSON: o.json = true; break;
		case O_WATCH:
			o.watch = strtod(optarg, &end);
			if (*end || !(o.watch >= 0.01 && o.watch <= 86400)) {
				fprintf(stderr, "braid stat: --watch %s: seconds, 0.01 to 86400\n",
					optarg);
				return 2;
			}
			break;
		case O_COUNT:
			o.count = strtol(optarg, &end, 10);
			if (*end || o.count < 1) {
				fprintf(stderr,
					"braid stat: --count %s: a number of reports >= 1\n",
					optarg);
				return 2;
			}
			break;
		case O_PID:
			o.pid = (int)strtol(optarg, &end, 10);
			if (*end || o.pid < 1) {
				fprintf(stderr, "braid stat: --pid %s: a pid\n", optarg);
				return 2;
			}
			break;
		case O_DIR: o.dir = optarg; break;
		case O_SERVE: o.serve = optarg; break;
		case O_TEXTFILE: o.textfile = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "braid stat: unexpected argument '%s' (see braid stat --help)\n",
			argv[optind]);
		return 2;
	}
	if (o.count && !o.watch) {
		fprintf(stderr, "braid stat: --count goes with --watch\n");
		return 2;
	}
	if (o.serve && (o.textfile || o.json || o.watch)) {
		fprintf(stderr, "braid stat: --serve goes with none of --textfile, --json, "
				"--watch (each scrape reads the counters)\n");
		return 2;
	}
	if (o.textfile && o.json) {
		fprintf(stderr, "braid stat: --textfile writes Prometheus' format, not --json\n");
		return 2;
	}
	if (o.serve)
		return stat_prom_serve(&o);
	if (o.textfile)
		return stat_prom_textfile(&o);
	if (o.watch)
		return watch(&o);
	if (stat_scan_dir(&o, &s))
		return 1;
	if (o.json)
		rc = json_listing(&o, &s) ? 1 : 0;
	else
		print_listing(&o, &s);
	stat_scan_free(&s);
	return rc;
}
