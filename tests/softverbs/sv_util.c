// SPDX-License-Identifier: MIT
/* softverbs: small helpers (time, logging, full-length socket I/O). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include "tests/softverbs/sv_internal.h"

uint64_t sv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sv_vlog(const char *fmt, va_list ap)
{
	char buf[512];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	fprintf(stderr, "softverbs[%d]: %s\n", (int)getpid(), buf);
}

void sv_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sv_vlog(fmt, ap);
	va_end(ap);
}

void sv_debug(const char *fmt, ...)
{
	va_list ap;

	if (!sv_eng.cfg.debug)
		return;
	va_start(ap, fmt);
	sv_vlog(fmt, ap);
	va_end(ap);
}

/* The socket calls below block, but every socket has SO_RCVTIMEO and
 * SO_SNDTIMEO set, so each wait is bounded: a timeout reads as a dead path. */
int sv_writev_full(int fd, struct iovec *iov, int iovcnt)
{
	while (iovcnt > 0) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };
		ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

int sv_readv_full(int fd, struct iovec *iov, int iovcnt)
{
	while (iovcnt > 0) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };
		ssize_t n;

		if (iov->iov_len == 0) {
			iov++;
			iovcnt--;
			continue;
		}
		n = recvmsg(fd, &m, MSG_WAITALL);
		if (n == 0)
			return -EPIPE;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

int sv_write_full(int fd, const void *buf, size_t len)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return sv_writev_full(fd, &iov, 1);
}

int sv_read_full(int fd, void *buf, size_t len)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return sv_readv_full(fd, &iov, 1);
}

/* Read and throw away a payload we will not place (dropped or rejected). */
int sv_drain(int fd, uint64_t len)
{
	static char sink[1 << 16]; /* only the rx thread drains */

	while (len) {
		size_t n = len < sizeof(sink) ? (size_t)len : sizeof(sink);
		int rc = sv_read_full(fd, sink, n);

		if (rc)
			return rc;
		len -= n;
	}
	return 0;
}

uint64_t sv_hash64(uint64_t x)
{
	/* splitmix64 finaliser: cheap, well mixed. */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}
