// SPDX-License-Identifier: Apache-2.0
/*
 * braid stat's reading of the counters files (/dev/shm/braid-<pid>, layout
 * plugin/counters.h) into a scan (tools/stat.h), and the facts every view derives from
 * one entry. The fuzzer links this part (tests/fuzz/fuzz_stat_region.c).
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
#include "tools/stat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plugin/counters.h"

/* magic and version: the part every layout version shares */
#define STAT_MIN_HEADER (offsetof(struct braid_ctr_region, version) + sizeof(uint32_t))
#define STAT_HEADER offsetof(struct braid_ctr_region, devs)

const char *stat_kind_name(uint32_t kind)
{
	static const char *const names[] = { "free", "send", "recv" };

	return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

double stat_mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t stat_real_now_ns(void)
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
	e->t_real_ns = stat_real_now_ns();
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
double stat_uptime_s(const struct ent *e)
{
	uint64_t start = e->r->start_time_ns;

	if (start == 0 || start > e->t_real_ns)
		return -1;
	return (double)(e->t_real_ns - start) * 1e-9;
}

const char *stat_dev_name(const struct braid_ctr_region *r, int32_t dev)
{
	if (dev < 0 || dev >= BRAID_CTR_MAX_DEVS)
		return "?";
	return r->devs[dev].name[0] ? r->devs[dev].name : "?";
}

bool stat_lane_up(const struct braid_ctr_region *r, const struct braid_ctr_lane *l)
{
	/* recoveries first: a failure between the two reads then shows DOWN, not up */
	uint32_t recoveries = __atomic_load_n(&l->recoveries, __ATOMIC_RELAXED);
	uint32_t failovers = __atomic_load_n(&l->failovers, __ATOMIC_RELAXED);

	if (recoveries < failovers)
		return false;
	if (l->dev < 0 || l->dev >= BRAID_CTR_MAX_DEVS || (uint32_t)l->dev >= r->ndevs)
		return true;
	return !__atomic_load_n(&r->devs[l->dev].port_down, __ATOMIC_RELAXED);
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

const char *stat_backend_str(const struct braid_ctr_fallback *fb)
{
	return fb->backend[0] ? fb->backend : "none (init failed)";
}
