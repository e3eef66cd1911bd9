// SPDX-License-Identifier: Apache-2.0
/*
 * gdr-xfer: GPUDirect data paths of the built plugin, driven as NCCL drives them, with the
 * CUDA stand-in's "device memory" (host memory, so every byte can be checked). Two
 * processes (a sender and a receiver, each its own plugin instance) over one device:
 *
 *   gdr-xfer PLUGIN MODE    MODE: cuda (regMr NCCL_PTR_CUDA, the peer-memory path),
 *                                 dmabuf (cuMemGetHandleForAddressRange + regMrDmaBuf, the
 *                                 fd closed right after, as NCCL does), host (regMr HOST)
 *
 * Both sides use MODE for their buffer. The receiver receives a fixed series of sizes
 * (zero included), checks every byte, and after each receive calls iflush as NCCL's proxy
 * does (n = 1, the received size), then a grouped receive (n = 2) and its iflush, and
 * once more with two zero sizes. It prints
 * (key=value on stdout, the plugin's log on stderr):
 *   reg_send, reg_recv     the registration results
 *   bytes_ok               1 when every message arrived intact
 *   flush_requests         iflush calls that returned a request (each tested to completion)
 *   flush_reads            RDMA READs the receiver's flush QPs (softverbs loopback QPs,
 *                          qpn == dest_qpn) issued, from softverbs' stats file
 *   nonzero_recvs          receives that got bytes (the grouped one not counted)
 *   group_flush_reads      flush READs of the grouped receive (n = 2, sizes 3000 and 0)
 * tests/cuda/gdr-data.sh runs it over softverbs and says what NCCL's transport would do.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/cuda/cuda_standin.h"
#include "tests/softverbs/sv_stats.h"
#include "tools/netapi.h"

#define BUF_BYTES (1u << 20)
#define WAIT_S 30
#define GROUP_BYTES 3000

static const size_t sizes[] = { 4096, 0, 1, 65536, BUF_BYTES, 12345, 0, 7 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

enum mode { MODE_CUDA, MODE_DMABUF, MODE_HOST };

static struct {
	CUresult (*init)(unsigned int);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*get_handle)(void *, CUdeviceptr, size_t, int, unsigned long long);
} cu;

static int cuda_open(void)
{
	void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!dl) {
		fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
		return -1;
	}
	cu.init = (CUresult(*)(unsigned int))dlsym(dl, "cuInit");
	cu.alloc = (CUresult(*)(CUdeviceptr *, size_t))dlsym(dl, "cuMemAlloc_v2");
	cu.get_handle = (CUresult(*)(void *, CUdeviceptr, size_t, int,
				     unsigned long long))dlsym(dl, "cuMemGetHandleForAddressRange");
	if (!cu.init || !cu.alloc || !cu.get_handle || cu.init(0) != CUDA_SUCCESS) {
		fprintf(stderr, "libcuda.so.1: no usable driver\n");
		return -1;
	}
	return 0;
}

static void *buffer(enum mode m)
{
	CUdeviceptr p;

	if (m == MODE_HOST)
		return aligned_alloc(4096, BUF_BYTES);
	return cu.alloc(&p, BUF_BYTES) == CUDA_SUCCESS ? (void *)(uintptr_t)p : NULL;
}

static ncclResult_t reg(struct net_api *api, void *comm, void *buf, enum mode m, void **mh)
{
	ncclResult_t r;
	int fd = -1;

	if (m == MODE_HOST)
		return api->reg_mr_type(api, comm, buf, BUF_BYTES, NCCL_PTR_HOST, mh);
	if (m == MODE_CUDA)
		return api->reg_mr_type(api, comm, buf, BUF_BYTES, NCCL_PTR_CUDA, mh);
	if (cu.get_handle(&fd, (CUdeviceptr)(uintptr_t)buf, BUF_BYTES,
			  CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) != CUDA_SUCCESS) {
		fprintf(stderr, "cuMemGetHandleForAddressRange failed\n");
		return ncclSystemError;
	}
	r = api->reg_mr_dmabuf(api, comm, buf, BUF_BYTES, NCCL_PTR_CUDA, 0, fd, mh);
	close(fd); /* as NCCL: the registration keeps what it needs */
	return r;
}

static unsigned char pattern(size_t msg, size_t i)
{
	return (unsigned char)(msg * 131 + i * 7 + (i >> 8) + 1);
}

/* Test a request to completion within WAIT_S; 0 or -1. got: a size per buffer, or NULL. */
static int wait_req(struct net_api *api, void *req, int *got)
{
	int scratch[8] = { 0 }; /* BRAID_MAX_RECVS: test() writes one size per buffer */
	time_t until = time(NULL) + WAIT_S;
	int done = 0;

	while (!done && time(NULL) < until) {
		if (api->test(api, req, &done, got ? got : scratch) != ncclSuccess)
			return -1;
	}
	return done ? 0 : -1;
}

/* RDMA READs issued by this process's loopback (flush) QPs, from softverbs' stats. A READ
 * is two messages on such a QP: the request and the response, both its own. */
static long flush_reads(void)
{
	const char *fab = getenv("SOFTVERBS_FABRIC");
	char dir[512], path[800], prefix[32];
	long msgs = 0;
	struct dirent *e;
	DIR *d;

	if (!fab)
		return -1;
	snprintf(dir, sizeof(dir), "%s/stats", fab);
	snprintf(prefix, sizeof(prefix), "%d.", (int)getpid());
	d = opendir(dir);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		struct sv_stats_file *f;
		int fd;

		if (strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		f = mmap(NULL, sizeof(*f), PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		if (f == MAP_FAILED)
			continue;
		for (int q = 0; q < SV_STATS_MAX_QPS; q++)
			if (f->qp[q].qpn && f->qp[q].qpn == f->qp[q].dest_qpn)
				msgs += (long)__atomic_load_n(&f->qp[q].tx_msgs, __ATOMIC_RELAXED);
		munmap(f, sizeof(*f));
	}
	closedir(d);
	return msgs / 2;
}

static int open_plugin(const char *so, struct net_api *api, void **ctx)
{
	char loaded[256], err[1024];
	void *dl = netapi_open(so, loaded, sizeof(loaded), err, sizeof(err));

	if (!dl || netapi_bind(dl, 11, api)) {
		fprintf(stderr, "cannot load %s: %s\n", so, err);
		return -1;
	}
	*ctx = NULL;
	return api->init(api, ctx, 1) == ncclSuccess ? 0 : -1;
}

static int sender(const char *so, enum mode m, int rfd)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	time_t until = time(NULL) + WAIT_S;
	struct net_api api;
	void *ctx, *sc = NULL, *mh, *req;
	unsigned char *buf;
	ncclResult_t r;

	snprintf(netapi_log_prefix, sizeof(netapi_log_prefix), "gdr-xfer send");
	if (read(rfd, handle, sizeof(handle)) != (ssize_t)sizeof(handle))
		return 1;
	if ((m != MODE_HOST && cuda_open()) || open_plugin(so, &api, &ctx))
		return 1;
	while (!sc && time(NULL) < until)
		if (api.connect(&api, ctx, 0, handle, &sc) != ncclSuccess)
			return 1;
	buf = buffer(m);
	if (!sc || !buf)
		return 1;
	r = reg(&api, sc, buf, m, &mh);
	printf("reg_send=%s\n", netapi_result_str(r));
	fflush(stdout);
	if (r != ncclSuccess) {
		api.close_send(&api, sc);
		api.finalize(&api, ctx);
		if (m == MODE_HOST)
			free(buf);
		return 1;
	}
	for (size_t k = 0; k < NSIZES; k++) {
		for (size_t i = 0; i < sizes[k]; i++)
			buf[i] = pattern(k, i);
		req = NULL;
		while (!req && time(NULL) < until + WAIT_S)
			if (api.isend(&api, sc, buf, sizes[k], 1, mh, &req) != ncclSuccess)
				return 1;
		if (!req || wait_req(&api, req, NULL))
			return 1;
	}
	/* A grouped receive (n = 2): tag 2 gets GROUP_BYTES at the buffer's second half,
	 * tag 3 nothing. Both sends are posted before either is tested, as NCCL does. */
	{
		void *reqs[2] = { NULL, NULL };

		for (size_t i = 0; i < GROUP_BYTES; i++)
			buf[BUF_BYTES / 2 + i] = pattern(NSIZES, i);
		for (int t = 0; t < 2; t++)
			while (!reqs[t] && time(NULL) < until + WAIT_S)
				if (api.isend(&api, sc, buf + BUF_BYTES / 2, t ? 0 : GROUP_BYTES,
					      2 + t, mh, &reqs[t]) != ncclSuccess)
					return 1;
		for (int t = 0; t < 2; t++)
			if (!reqs[t] || wait_req(&api, reqs[t], NULL))
				return 1;
	}
	/* The receiver closes first; our close waits for its goodbye. */
	api.dereg_mr(&api, sc, mh);
	api.close_send(&api, sc);
	api.finalize(&api, ctx);
	if (m == MODE_HOST)
		free(buf); /* device memory lives until exit, as a process's CUDA memory may */
	return 0;
}

static int receiver(const char *so, enum mode m, int wfd)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
	time_t until = time(NULL) + WAIT_S;
	struct net_api api;
	void *ctx, *lc, *rc = NULL, *mh, *req;
	int bytes_ok = 1, flushes = 0, nonzero = 0, fail = 0;
	unsigned char *buf;
	ncclResult_t r;

	snprintf(netapi_log_prefix, sizeof(netapi_log_prefix), "gdr-xfer recv");
	if ((m != MODE_HOST && cuda_open()) || open_plugin(so, &api, &ctx))
		return 1;
	if (api.listen(&api, ctx, 0, handle, &lc) != ncclSuccess ||
	    write(wfd, handle, sizeof(handle)) != (ssize_t)sizeof(handle))
		return 1;
	while (!rc && time(NULL) < until)
		if (api.accept(&api, lc, &rc) != ncclSuccess)
			return 1;
	buf = buffer(m);
	if (!rc || !buf)
		return 1;
	r = reg(&api, rc, buf, m, &mh);
	printf("reg_recv=%s\n", netapi_result_str(r));
	fflush(stdout);
	if (r != ncclSuccess) {
		api.close_recv(&api, rc);
		api.close_listen(&api, lc);
		api.finalize(&api, ctx);
		if (m == MODE_HOST)
			free(buf);
		return 1;
	}
	for (size_t k = 0; k < NSIZES && !fail; k++) {
		size_t cap = BUF_BYTES;
		int tag = 1, got = -1, fsize;
		void *data = buf;

		memset(buf, 0xee, BUF_BYTES);
		req = NULL;
		while (!req && time(NULL) < until + WAIT_S)
			if (api.irecv(&api, rc, 1, &data, &cap, &tag, &mh, &req) != ncclSuccess)
				return 1;
		if (!req || wait_req(&api, req, &got)) {
			fprintf(stderr, "receive %zu did not complete\n", k);
			return 1;
		}
		if ((size_t)got != sizes[k]) {
			fprintf(stderr, "receive %zu: %d bytes, want %zu\n", k, got, sizes[k]);
			bytes_ok = 0;
		}
		for (size_t i = 0; i < sizes[k] && bytes_ok; i++) {
			if (buf[i] != pattern(k, i)) {
				fprintf(stderr, "receive %zu: byte %zu is %#x, want %#x\n", k, i,
					buf[i], pattern(k, i));
				bytes_ok = 0;
			}
		}
		nonzero += got > 0;
		fsize = got;
		req = NULL;
		if (api.iflush(&api, rc, 1, &data, &fsize, &mh, &req) != ncclSuccess) {
			fail = 1;
		} else if (req) {
			flushes++;
			if (wait_req(&api, req, NULL)) {
				fprintf(stderr, "flush %d did not complete\n", flushes);
				fail = 1;
			}
		}
	}
	if (!fail) {
		/* The grouped receive: sizes {GROUP_BYTES, 0}; one READ (of the last non-empty
		 * buffer, the first here), as NCCL's transport posts. */
		void *data[2] = { buf + BUF_BYTES / 2, buf }, *mhs[2] = { mh, mh };
		size_t caps[2] = { BUF_BYTES / 2, BUF_BYTES / 2 };
		int tags[2] = { 2, 3 }, got[2] = { -1, -1 };
		long before = flush_reads();

		memset(buf, 0xee, BUF_BYTES);
		req = NULL;
		while (!req && time(NULL) < until + 2 * WAIT_S)
			if (api.irecv(&api, rc, 2, data, caps, tags, mhs, &req) != ncclSuccess)
				return 1;
		if (!req || wait_req(&api, req, got)) {
			fprintf(stderr, "the grouped receive did not complete\n");
			return 1;
		}
		if (got[0] != GROUP_BYTES || got[1] != 0) {
			fprintf(stderr, "grouped receive: %d and %d bytes, want %d and 0\n", got[0],
				got[1], GROUP_BYTES);
			bytes_ok = 0;
		}
		for (size_t i = 0; i < GROUP_BYTES && bytes_ok; i++)
			if (buf[BUF_BYTES / 2 + i] != pattern(NSIZES, i))
				bytes_ok = 0;
		req = NULL;
		if (api.iflush(&api, rc, 2, data, got, mhs, &req) != ncclSuccess)
			fail = 1;
		else if (req && (flushes++, wait_req(&api, req, NULL)))
			fail = 1;
		printf("group_flush_reads=%ld\n", flush_reads() - before);
	}
	if (!fail) {
		/* Nothing received: NCCL's transport posts no READ (last == -1). */
		void *two[2] = { buf, buf + 4096 }, *mhs[2] = { mh, mh };
		int zero[2] = { 0, 0 };

		req = NULL;
		if (api.iflush(&api, rc, 2, two, zero, mhs, &req) != ncclSuccess)
			fail = 1;
		else if (req && (flushes++, wait_req(&api, req, NULL)))
			fail = 1;
	}
	printf("bytes_ok=%d\nnonzero_recvs=%d\nflush_requests=%d\nflush_reads=%ld\n", bytes_ok,
	       nonzero, flushes, flush_reads());
	fflush(stdout);
	api.dereg_mr(&api, rc, mh);
	api.close_recv(&api, rc);
	api.close_listen(&api, lc);
	api.finalize(&api, ctx);
	if (m == MODE_HOST)
		free(buf);
	return fail || !bytes_ok;
}

int main(int argc, char **argv)
{
	enum mode m;
	int p[2], st, rc;
	pid_t pid;

	if (argc != 3) {
		fprintf(stderr, "usage: %s PLUGIN cuda|dmabuf|host\n", argv[0]);
		return 2;
	}
	if (!strcmp(argv[2], "cuda"))
		m = MODE_CUDA;
	else if (!strcmp(argv[2], "dmabuf"))
		m = MODE_DMABUF;
	else if (!strcmp(argv[2], "host"))
		m = MODE_HOST;
	else
		return 2;
	if (pipe(p))
		return 2;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		close(p[1]);
		alarm(3 * WAIT_S); /* never outlive the test */
		_exit(sender(argv[1], m, p[0]));
	}
	close(p[0]);
	rc = receiver(argv[1], m, p[1]);
	close(p[1]);
	if (rc)
		kill(pid, SIGKILL); /* the sender may wait for a receive that will not come */
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "the sender failed\n");
		rc = 1;
	}
	return rc;
}
