// SPDX-License-Identifier: Apache-2.0
#include "tools/bootstrap.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int ms_left(double deadline)
{
	double left = deadline - now_sec();

	return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

int boot_listen(const char *host, int port, int *bound_port, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *res, *ai;
	char service[16];
	int fd = -1, one = 1, rc;

	snprintf(service, sizeof(service), "%d", port);
	rc = getaddrinfo(host, service, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "getaddrinfo(%s:%d): %s", host ? host : "*", port,
			 gai_strerror(rc));
		return -1;
	}
	/* prefer IPv6 wildcard (takes IPv4 too) when no host, else the first that binds */
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 4) == 0)
			break;
		snprintf(err, errlen, "bind/listen(%s:%d): %s", host ? host : "*", port,
			 strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return -1;
	if (bound_port) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		getsockname(fd, (struct sockaddr *)&ss, &sl);
		*bound_port = ntohs(ss.ss_family == AF_INET6
					    ? ((struct sockaddr_in6 *)&ss)->sin6_port
					    : ((struct sockaddr_in *)&ss)->sin_port);
	}
	return fd;
}

int boot_accept(int lfd, double timeout_s, char *err, size_t errlen)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	double deadline = now_sec() + timeout_s;
	int fd, one = 1;

	for (;;) {
		int rc = poll(&p, 1, ms_left(deadline));

		if (rc > 0)
			break;
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc == 0)
			snprintf(err, errlen, "no peer connected within %.0f s", timeout_s);
		else
			snprintf(err, errlen, "poll(listen): %s", strerror(errno));
		return -1;
	}
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "accept: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int boot_connect(const char *host, int port, double timeout_s, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	double deadline = now_sec() + timeout_s;
	char service[16];
	int one = 1;

	snprintf(service, sizeof(service), "%d", port);
	for (;;) {
		struct addrinfo *res, *ai;
		int rc = getaddrinfo(host, service, &hints, &res);

		if (rc) {
			snprintf(err, errlen, "getaddrinfo(%s): %s", host, gai_strerror(rc));
			return -1;
		}
		for (ai = res; ai; ai = ai->ai_next) {
			int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);

			if (fd < 0)
				continue;
			if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
				freeaddrinfo(res);
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				return fd;
			}
			snprintf(err, errlen, "connect(%s:%d): %s", host, port, strerror(errno));
			close(fd);
		}
		freeaddrinfo(res);
		if (now_sec() > deadline) {
			size_t used = strlen(err);

			snprintf(err + used, errlen - used, " (gave up after %.0f s)", timeout_s);
			return -1;
		}
		struct timespec ts = { 0, 100 * 1000 * 1000 }; /* the server may not be up yet */
		nanosleep(&ts, NULL);
	}
}

int boot_send(int fd, const void *buf, size_t len, double timeout_s, char *err, size_t errlen)
{
	double deadline = now_sec() + timeout_s;
	const char *p = buf;
	size_t done = 0;

	while (done < len) {
		struct pollfd pf = { .fd = fd, .events = POLLOUT };
		int rc = poll(&pf, 1, ms_left(deadline));
		ssize_t n;

		if (rc == 0) {
			snprintf(err, errlen, "peer did not take %zu bytes within %.0f s", len,
				 timeout_s);
			return -1;
		}
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "poll(send): %s", strerror(errno));
			return -1;
		}
		n = send(fd, p + done, len - done, MSG_NOSIGNAL);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			snprintf(err, errlen, "send to peer: %s",
				 n < 0 ? strerror(errno) : "closed");
			return -1;
		}
		done += n;
	}
	return 0;
}

int boot_recv(int fd, void *buf, size_t len, double timeout_s, char *err, size_t errlen)
{
	double deadline = now_sec() + timeout_s;
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int rc = poll(&pf, 1, ms_left(deadline));
		ssize_t n;

		if (rc == 0) {
			snprintf(err, errlen, "peer sent %zu of %zu bytes within %.0f s", done, len,
				 timeout_s);
			return -1;
		}
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "poll(recv): %s", strerror(errno));
			return -1;
		}
		n = recv(fd, p + done, len - done, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			snprintf(err, errlen, "peer %s after %zu of %zu bytes",
				 n < 0 ? strerror(errno) : "closed the connection", done, len);
			return -1;
		}
		done += n;
	}
	return 0;
}
