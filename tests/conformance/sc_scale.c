// SPDX-License-Identifier: Apache-2.0
/*
 * Many comms in one process, as NCCL opens them (a comm per peer per channel: hundreds
 * per process). 1,024 comms are opened, each moves one verified message, all are closed,
 * ten times over. File descriptors must come back exactly, the provider's address vector
 * entries (from the counter region, plugin/counters.h) must return to zero, and resident
 * memory must not grow from round to round. Each round's figures are printed.
 * CONF_MANY_COMMS and CONF_MANY_ROUNDS change the counts (e.g. for slow transports);
 * CONF_MANY_WARMUP the round after which memory must stay flat (default 2: the provider's
 * pools fill up in the first; fused comms, two lane comms each, take one more).
 */
#include "tests/conformance/conf.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "plugin/counters.h"
#include "tools/ctr_self.h"
#include "tools/pattern.h"

#define MC_COMMS 1024
#define MC_ROUNDS 10
#define MC_CONNECTING 32 /* connects in progress at once */
#define MC_SIZE 4096
/* Allowed from the warm-up round to the last: the heap (malloc's bytes in use, where a
 * leak of the comms shows) by 8 MiB; resident memory by 32 MiB, since glibc can map a
 * new arena for a thread at any round (a one-off step of 16 MiB was seen under load with
 * the heap flat), while a leak of mmaps would still show. */
#define MC_HEAP_GROWTH (8 << 20)
#define MC_RSS_GROWTH (32 << 20)

/* AddressSanitizer keeps freed memory in quarantine: resident memory grows by design. */
#ifdef __SANITIZE_ADDRESS__
#define RSS_UNRELIABLE 1
#else
#define RSS_UNRELIABLE 0
#endif

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);

	return v && atoi(v) > 0 ? atoi(v) : def;
}

/* Inodes of this process's AF_UNIX sockets: the verbs library's (softverbs), not braid's. */
static int unix_inodes(unsigned long *ino, int max)
{
	FILE *f = fopen("/proc/self/net/unix", "r");
	char line[512];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f) && n < max)
		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu", &ino[n]) == 1)
			n++;
	fclose(f);
	return n;
}

/* Open descriptors: all of them, and those that are not AF_UNIX sockets (*own). */
static int count_fds(int *own)
{
	static unsigned long ux[65536];
	int nux = unix_inodes(ux, 65536), n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	*own = 0;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300], link[64];
		unsigned long ino;
		bool is_unix = false;
		ssize_t len;

		if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
			continue;
		n++;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len > 0) {
			link[len] = '\0';
			if (sscanf(link, "socket:[%lu]", &ino) == 1)
				for (int i = 0; i < nux && !is_unix; i++)
					is_unix = ux[i] == ino;
		}
		*own += !is_unix;
	}
	closedir(d);
	return n;
}

static void list_fds(struct side *s)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char path[300], link[128];
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len > 0) {
			link[len] = '\0';
			conf_log(s, "  fd %s -> %s", e->d_name, link);
		}
	}
	if (d)
		closedir(d);
}

/* malloc's bytes in use, small and mmapped chunks, KiB. */
static long heap_kib(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (long)((mi.uordblks + mi.hblkhd) / 1024);
}

static long rss_kib(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
		resident = -1;
	fclose(f);
	return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A device's counter in this process's region (plugin/counters.h); -1 when unreadable. */
static long dev_counter(int dev, size_t offset)
{
	const struct braid_ctr_region *r;
	char why[160];
	long n = -1;

	ctr_self_map(&r, why, sizeof(why));
	if (r && dev < (int)r->max_devs)
		n = (long)*(const uint64_t *)((const char *)&r->devs[dev] + offset);
	ctr_self_unmap(r);
	return n;
}

/* Address vector entries of device `dev`, as the plugin publishes them; -1 unknown. */
static long av_entries(int dev)
{
	return dev_counter(dev, offsetof(struct braid_ctr_dev, av_entries));
}

static void raise_fd_limit(struct side *s, int want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= (rlim_t)want)
		return;
	rl.rlim_cur = rl.rlim_max < (rlim_t)want ? rl.rlim_max : (rlim_t)want;
	if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
		conf_log(s, "descriptor limit raised to %lu", (unsigned long)rl.rlim_cur);
}

/* All n comms connected (b) or accepted (a). */
static int mc_open(struct side *s, int n, void *lc, const char *handle, void **comm)
{
	static char h[MC_CONNECTING][NCCL_NET_HANDLE_MAXSIZE];
	int slot_of[MC_CONNECTING], next = 0, ready = 0;
	bool receiver = s->role == 'a';
	double t0 = now_s(), last = t0;

	for (int k = 0; k < MC_CONNECTING; k++)
		slot_of[k] = -1;
	while (ready < n) {
		bool progress = false;
		ncclResult_t r;

		if (receiver) {
			r = s->api->accept(s->api, lc, &comm[ready]);
			if (r != ncclSuccess)
				return conf_fail(s, "accept #%d returned %s (%d)", ready,
						 netapi_result_str(r), r);
			if (comm[ready]) {
				ready++;
				progress = true;
			}
		} else {
			for (int k = 0; k < MC_CONNECTING; k++) {
				int i = slot_of[k];

				if (i < 0 && next < n) {
					i = slot_of[k] = next++;
					/* each connection its own copy of the handle */
					memcpy(h[k], handle, NCCL_NET_HANDLE_MAXSIZE);
				}
				if (i < 0)
					continue;
				r = s->api->connect(s->api, s->ctx, s->dev, h[k], &comm[i]);
				if (r != ncclSuccess)
					return conf_fail(s,
							 "connect #%d returned %s (%d) (%d open)",
							 i, netapi_result_str(r), r, ready);
				if (comm[i]) {
					slot_of[k] = -1;
					ready++;
					progress = true;
				}
			}
		}
		if (progress)
			last = now_s();
		else if (now_s() - last > CONF_CONNECT_TIMEOUT_S)
			return conf_fail(s, "%d of %d comms open, none more for %.0f s", ready, n,
					 CONF_CONNECT_TIMEOUT_S);
		else
			idle_wait();
	}
	return 0;
}

/*
 * One verified message on every comm. Comms are accepted in the order their set-ups
 * finish, not the order of the connects, so message i says who it is by its size, 1 + i.
 */
/* Close every comm still open of a round's n, whatever happened to the others. */
static void mc_close_all(struct side *s, bool receiver, void **comm, int n)
{
	for (int i = 0; i < n; i++)
		if (comm[i])
			close_comms(s, receiver ? NULL : comm[i], receiver ? comm[i] : NULL, NULL);
}

static int mc_traffic(struct side *s, int n, void **comm, int round)
{
	bool receiver = s->role == 'a';
	char *buf = malloc((size_t)n * MC_SIZE);
	void **mh = calloc(n, sizeof(void *)), **req = calloc(n, sizeof(void *));
	bool *fin = calloc(n, sizeof(bool)), *seen = calloc(n, sizeof(bool));
	int left = n, ret = -1;
	double last = now_s();

	if (!buf || !mh || !req || !fin || !seen || n > MC_SIZE) {
		conf_fail(s, "malloc");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		ncclResult_t r = s->api->reg_mr(s->api, comm[i], buf + (size_t)i * MC_SIZE, MC_SIZE,
						&mh[i]);

		if (r != ncclSuccess) {
			conf_fail(s, "regMr on comm %d returned %s (%d)", i, netapi_result_str(r),
				  r);
			goto out;
		}
		if (!receiver)
			pattern_fill(buf + (size_t)i * MC_SIZE, 1 + i % MC_SIZE, s->seed,
				     (uint64_t)round * MC_COMMS * 4 + i);
	}
	while (left) {
		bool progress = false;

		for (int i = 0; i < n; i++) {
			void *data = buf + (size_t)i * MC_SIZE;
			size_t size = receiver ? MC_SIZE : 1 + i % MC_SIZE;
			int tag = 1, done = 0, got = -1;
			ncclResult_t r;

			if (fin[i])
				continue;
			if (!req[i]) {
				r = receiver ? s->api->irecv(s->api, comm[i], 1, &data, &size, &tag,
							     &mh[i], &req[i])
					     : s->api->isend(s->api, comm[i], data, size, tag,
							     mh[i], &req[i]);
				if (r != ncclSuccess) {
					conf_fail(s, "comm %d: %s returned %s (%d)", i,
						  receiver ? "irecv" : "isend",
						  netapi_result_str(r), r);
					goto out;
				}
				if (!req[i])
					continue;
				progress = true;
			}
			r = s->api->test(s->api, req[i], &done, &got);
			if (r != ncclSuccess) {
				conf_fail(s, "comm %d: test returned %s (%d)", i,
					  netapi_result_str(r), r);
				goto out;
			}
			if (!done)
				continue;
			if (receiver && (got < 1 || got > n || seen[got - 1] ||
					 pattern_check(data, (size_t)got, s->seed,
						       (uint64_t)round * MC_COMMS * 4 + got - 1) !=
						 (size_t)-1)) {
				conf_fail(s,
					  "comm %d: a message of %d bytes, twice or with wrong data",
					  i, got);
				goto out;
			}
			if (receiver)
				seen[got - 1] = true;
			fin[i] = true;
			left--;
			progress = true;
		}
		if (progress)
			last = now_s();
		else if (now_s() - last > CONF_XFER_TIMEOUT_S) {
			conf_fail(s, "%d messages not done", left);
			goto out;
		} else {
			idle_wait();
		}
	}
	ret = 0;
out:
	for (int i = 0; mh && i < n; i++)
		if (mh[i])
			s->api->dereg_mr(s->api, comm[i], mh[i]);
	free(buf);
	free(mh);
	free(req);
	free(fin);
	free(seen);
	return ret;
}

int sc_many_comms(struct side *s)
{
	int ncomms = env_int("CONF_MANY_COMMS", MC_COMMS),
	    rounds = env_int("CONF_MANY_ROUNDS", MC_ROUNDS),
	    warmup = env_int("CONF_MANY_WARMUP", 2);
	bool receiver = s->role == 'a';
	char handle[NCCL_NET_HANDLE_MAXSIZE], name[32];
	void **comm = calloc(ncomms, sizeof(void *)), *lc = NULL;
	long rss2 = -1, rss, heap2 = -1, heap;
	int fd0 = -1, own0 = -1, fds, own, ret = -1;

	if (!comm)
		return conf_fail(s, "calloc");
	raise_fd_limit(s, 4 * ncomms + 256);
	if (link_share_listener(s, receiver, "mc", handle, &lc))
		goto out;
	fd0 = count_fds(&own0);
	conf_log(s, "before: %d descriptors (%d not AF_UNIX), %ld KiB resident, %ld AV entries",
		 fd0, own0, rss_kib(), av_entries(s->dev));
	for (int round = 1; round <= rounds; round++) {
		double t0 = now_s();
		int peak;

		conf_step(s, "round %d: opening %d comms", round, ncomms);
		memset(comm, 0, ncomms * sizeof(void *));
		if (mc_open(s, ncomms, lc, handle, comm))
			goto close;
		peak = count_fds(&own);
		conf_step(s, "round %d: one message on each of %d comms", round, ncomms);
		if (mc_traffic(s, ncomms, comm, round))
			goto close;
		snprintf(name, sizeof(name), "mc%d", round);
		if (rdv_sync(s, name))
			goto close;
		conf_step(s, "round %d: closing %d comms", round, ncomms);
		for (int i = 0; i < ncomms; i++) {
			ncclResult_t r = receiver ? s->api->close_recv(s->api, comm[i])
						  : s->api->close_send(s->api, comm[i]);

			comm[i] = NULL;
			if (r != ncclSuccess) {
				conf_fail(s, "close #%d returned %s (%d)", i, netapi_result_str(r),
					  r);
				goto close;
			}
		}
		/* a verbs library may close its connections in the background: give it a
		 * moment before counting */
		for (int tries = 0; tries < 40; tries++) {
			fds = count_fds(&own);
			if (own == own0 && fds <= fd0 + 8)
				break;
			usleep(25000);
		}
		rss = rss_kib();
		heap = heap_kib();
		conf_log(s,
			 "round %2d: %d comms in %.2f s; open: %d descriptors; closed: %d "
			 "descriptors (%d not AF_UNIX), %ld KiB resident, %ld KiB heap, %ld AV "
			 "entries",
			 round, ncomms, now_s() - t0, peak, fds, own, rss, heap,
			 av_entries(s->dev));
		/* braid's own (TCP sockets, files) exactly; a verbs library's AF_UNIX sockets
		 * (softverbs closes connections in the background) within a few */
		if (own != own0 || fds > fd0 + 8) {
			conf_fail(s,
				  "round %d: %d descriptors (%d not AF_UNIX) after closing every "
				  "comm, %d (%d) before",
				  round, fds, own, fd0, own0);
			list_fds(s);
			goto close;
		}
		if (av_entries(s->dev) > 0) {
			conf_fail(s,
				  "round %d: %ld address vector entries left with every comm "
				  "closed",
				  round, av_entries(s->dev));
			goto close;
		}
		if (round == warmup) {
			rss2 = rss;
			heap2 = heap;
		}
		if (heap2 > 0 && heap > heap2 + MC_HEAP_GROWTH / 1024 && !RSS_UNRELIABLE) {
			conf_fail(s,
				  "round %d: %ld KiB of heap in use, %ld KiB more than after round %d",
				  round, heap, heap - heap2, warmup);
			goto close;
		}
		if (rss2 > 0 && rss > rss2 + MC_RSS_GROWTH / 1024 && !RSS_UNRELIABLE) {
			conf_fail(s,
				  "round %d: resident memory %ld KiB, %ld KiB more than after "
				  "round %d",
				  round, rss, rss - rss2, warmup);
			goto close;
		}
		snprintf(name, sizeof(name), "mc%d-closed", round);
		if (rdv_sync(s, name))
			goto close;
	}
	ret = 0;
close:
	mc_close_all(s, receiver, comm, ncomms);
out:
	if (lc && close_comms(s, NULL, NULL, lc))
		ret = -1;
	free(comm);
	return ret;
}

/*
 * The stall counter: a receive that waits 900 ms for its sender, tested all the while, is
 * one stall with BRAID_STALL_MS=300 (once, not once per test()); the send, done at once
 * when it is made, is none.
 */
#define STALL_WAIT_MS 900
int sc_stall(struct side *s)
{
	bool receiver = s->role == 'a';
	void *lc = NULL, *rc = NULL, *sc = NULL, *req = NULL, *mh = NULL;
	char buf[64] = "stall";
	long before, after;
	int ret = -1, done = 0, sizes[8];
	ncclResult_t r;

	setenv("BRAID_STALL_MS", "300", 0);
	conf_step(s, "init");
	r = s->api->init(s->api, &s->ctx, s->seed);
	if (r != ncclSuccess)
		return conf_fail(s, "init returned %s (%d)", netapi_result_str(r), r);
	if (receiver ? link_accept(s, s->ctx, "stall", &lc, &rc)
		     : link_connect(s, s->ctx, "stall", &sc))
		goto out;
	before = dev_counter(s->dev, offsetof(struct braid_ctr_dev, stalls));
	if (s->api->reg_mr(s->api, receiver ? rc : sc, buf, sizeof(buf), &mh) != ncclSuccess) {
		conf_fail(s, "regMr failed");
		goto out;
	}
	if (receiver) {
		int tag = 1;
		size_t size = sizeof(buf);
		void *data = buf;
		double t0 = now_s();

		conf_step(s, "a receive that waits %d ms", STALL_WAIT_MS);
		while (!req) {
			r = s->api->irecv(s->api, rc, 1, &data, &size, &tag, &mh, &req);
			if (r != ncclSuccess || now_s() - t0 > CONF_XFER_TIMEOUT_S) {
				conf_fail(s, "irecv returned %s (%d)", netapi_result_str(r), r);
				goto out;
			}
		}
		if (rdv_put(s, "posted", "", 0))
			goto out;
		while (!done) {
			r = s->api->test(s->api, req, &done, sizes);
			if (r != ncclSuccess || now_s() - t0 > CONF_XFER_TIMEOUT_S) {
				conf_fail(s, "test returned %s (%d) after %.1f s",
					  netapi_result_str(r), r, now_s() - t0);
				goto out;
			}
		}
	} else {
		double t0;

		if (rdv_get(s, "posted", NULL, 0, CONF_RDV_TIMEOUT_S))
			goto out;
		usleep(STALL_WAIT_MS * 1000);
		conf_step(s, "the send, late");
		t0 = now_s();
		while (!req) {
			r = s->api->isend(s->api, sc, buf, sizeof(buf), 1, mh, &req);
			if (r != ncclSuccess || now_s() - t0 > CONF_XFER_TIMEOUT_S) {
				conf_fail(s, "isend returned %s (%d)", netapi_result_str(r), r);
				goto out;
			}
		}
		while (!done) {
			r = s->api->test(s->api, req, &done, sizes);
			if (r != ncclSuccess || now_s() - t0 > CONF_XFER_TIMEOUT_S) {
				conf_fail(s, "test returned %s (%d)", netapi_result_str(r), r);
				goto out;
			}
		}
	}
	after = dev_counter(s->dev, offsetof(struct braid_ctr_dev, stalls));
	conf_log(s, "stalls on device %d: %ld before, %ld after", s->dev, before, after);
	if (before < 0 || after < 0)
		conf_fail(s, "cannot read the stalls counter of device %d", s->dev);
	else if (after - before != (receiver ? 1 : 0))
		conf_fail(s, "%ld stall(s) counted, want %d: the %s", after - before,
			  receiver ? 1 : 0,
			  receiver ? "receive waited 900 ms with BRAID_STALL_MS=300"
				   : "send completed at once");
	else
		ret = 0;
	/* the peer reads its counter before either side closes */
	if (rdv_put(s, "counted", "", 0) || rdv_get(s, "counted", NULL, 0, CONF_RDV_TIMEOUT_S))
		ret = -1;
out:
	if (mh)
		s->api->dereg_mr(s->api, receiver ? rc : sc, mh);
	close_comms(s, sc, rc, lc);
	s->api->finalize(s->api, s->ctx);
	return ret;
}

/*
 * Memory per comm (issue 13), under tests/conformance/mem.sh, which preloads the counting
 * allocator (tests/conformance/memcount): bytes allocated by braid's own code and by the
 * provider's libraries, live, per comm, and after every comm is closed. braid's own must
 * come back exactly to where they were before the first comm, and stay within
 * MEM_BUDGET per comm. The process's resident memory and glibc's view (mallinfo2) are
 * logged beside them, to say who holds what after close.
 */
#define MEM_COMMS 64
#define MEM_ROUNDS 3
#define MEM_BUDGET (128 << 10)
enum { MEM_BRAID, MEM_PROVIDER };

typedef void (*memcount_watch_fn)(uintptr_t lo, uintptr_t hi, int group);
typedef long long (*memcount_live_fn)(int group, long long *peak, long long *calls);

static int watch_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	memcount_watch_fn watch = (memcount_watch_fn)arg;
	const char *name = info->dlpi_name ? info->dlpi_name : "";
	int group = strstr(name, "libnccl-net-braid") ? MEM_BRAID
		    : strstr(name, "libfabric") || strstr(name, "libibverbs") ||
				    strstr(name, "softverbs") || strstr(name, "rdma")
			    ? MEM_PROVIDER
			    : -1;

	(void)size;
	for (int i = 0; group >= 0 && i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
			watch(info->dlpi_addr + ph->p_vaddr,
			      info->dlpi_addr + ph->p_vaddr + ph->p_memsz, group);
	}
	return 0;
}

static void mem_log(struct side *s, const char *when, memcount_live_fn live, long long b0,
		    long long p0, int n)
{
	struct mallinfo2 mi = mallinfo2();
	long long b = live(MEM_BRAID, NULL, NULL), p = live(MEM_PROVIDER, NULL, NULL);

	conf_log(s,
		 "%-14s braid %7lld KiB (%+lld B%s), provider %7lld KiB (%+lld KiB), rss %ld KiB; "
		 "malloc: %zu KiB in use, %zu KiB free but kept, %zu KiB mmapped",
		 when, b / 1024, b - b0, n ? " per comm" : "", p / 1024, (p - p0) / 1024, rss_kib(),
		 mi.uordblks / 1024, mi.fordblks / 1024, mi.hblkhd / 1024);
}

int sc_mem(struct side *s)
{
	memcount_watch_fn watch = (memcount_watch_fn)dlsym(RTLD_DEFAULT, "memcount_watch");
	memcount_live_fn live = (memcount_live_fn)dlsym(RTLD_DEFAULT, "memcount_live");
	int ncomms = env_int("CONF_MEM_COMMS", MEM_COMMS),
	    rounds = env_int("CONF_MANY_ROUNDS", MEM_ROUNDS);
	bool receiver = s->role == 'a';
	char handle[NCCL_NET_HANDLE_MAXSIZE], name[32];
	void **comm = calloc(ncomms, sizeof(void *)), *lc = NULL;
	long long b0, p0, b;
	int ret = -1;

	if (!comm)
		return conf_fail(s, "calloc");
	if (!watch || !live) {
		free(comm);
		return conf_fail(s, "no counting allocator: run this scenario through "
				    "tests/conformance/mem.sh (LD_PRELOAD of libmemcount.so)");
	}
	dl_iterate_phdr(watch_object, (void *)watch);
	raise_fd_limit(s, 4 * ncomms + 256);
	if (link_share_listener(s, receiver, "mem", handle, &lc))
		goto out;
	b0 = live(MEM_BRAID, NULL, NULL);
	p0 = live(MEM_PROVIDER, NULL, NULL);
	mem_log(s, "before:", live, b0, p0, 0);
	for (int round = 1; round <= rounds; round++) {
		long long per;
		double t0;

		conf_step(s, "round %d: %d comms open, one message each, measured", round, ncomms);
		memset(comm, 0, ncomms * sizeof(void *));
		if (mc_open(s, ncomms, lc, handle, comm) || mc_traffic(s, ncomms, comm, round))
			goto close;
		b = live(MEM_BRAID, NULL, NULL);
		per = (b - b0) / ncomms;
		snprintf(name, sizeof(name), "round %d open:", round);
		conf_log(s,
			 "round %d: %d %s comms open: braid %lld B per comm, provider %lld B per "
			 "comm",
			 round, ncomms, receiver ? "receive" : "send", per,
			 (live(MEM_PROVIDER, NULL, NULL) - p0) / ncomms);
		mem_log(s, name, live, b0, p0, 0);
		if (per > MEM_BUDGET) {
			conf_fail(s,
				  "braid's own allocations are %lld B per %s comm, over the "
				  "%d B budget",
				  per, receiver ? "receive" : "send", MEM_BUDGET);
			goto close;
		}
		snprintf(name, sizeof(name), "mem%d", round);
		if (rdv_sync(s, name))
			goto close;
		conf_step(s, "round %d: closing every comm", round);
		for (int i = 0; i < ncomms; i++) {
			ncclResult_t r = receiver ? s->api->close_recv(s->api, comm[i])
						  : s->api->close_send(s->api, comm[i]);

			comm[i] = NULL;
			if (r != ncclSuccess) {
				conf_fail(s, "close #%d returned %s (%d)", i, netapi_result_str(r),
					  r);
				goto close;
			}
		}
		/* a closed comm may wait parked for its provider operations (ofi: up to
		 * OFI_CLOSE_REAP_MS), so give it a bounded moment */
		t0 = now_s();
		while ((b = live(MEM_BRAID, NULL, NULL)) != b0 && now_s() - t0 < 5)
			usleep(20000);
		snprintf(name, sizeof(name), "round %d closed:", round);
		mem_log(s, name, live, b0, p0, 0);
		if (round == rounds) {
			/* what glibc keeps of what was freed: give it back, see what remains */
			malloc_trim(0);
			mem_log(s, "malloc_trim:", live, b0, p0, 0);
		}
		if (b != b0) {
			conf_fail(s,
				  "round %d: braid holds %+lld B more than before the first comm, "
				  "with every comm closed",
				  round, b - b0);
			goto close;
		}
		snprintf(name, sizeof(name), "mem%d-closed", round);
		if (rdv_sync(s, name))
			goto close;
	}
	ret = 0;
close:
	mc_close_all(s, receiver, comm, ncomms);
out:
	if (lc && close_comms(s, NULL, NULL, lc))
		ret = -1;
	free(comm);
	return ret;
}
