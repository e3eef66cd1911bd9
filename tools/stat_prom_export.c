// SPDX-License-Identifier: Apache-2.0
/*
 * `braid stat --serve ADDR:PORT` and `braid stat --textfile DIR`: the Prometheus exposition
 * (tools/stat_prom.c) served at /metrics (libmicrohttpd) or written to DIR/braid.prom for
 * node_exporter's textfile collector.
 *
 * Each scrape (or write) is a fresh scan of the counters files (tools/stat_read.c, which
 * checks each file's layout), so nothing is cached and only the processes running at
 * that moment are exported: a process that ended leaves no series behind.
 */
#include "tools/stat.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define PROM_TEXTFILE "braid.prom"

/* A scan rendered into a malloc'ed buffer; NULL on failure (said). */
static char *render_scan(const struct stat_opts *o, size_t *len)
{
	struct scan s;
	char *buf = NULL;
	FILE *f;

	if (stat_scan_dir(o, &s))
		return NULL;
	f = open_memstream(&buf, len);
	if (!f) {
		fprintf(stderr, "braid stat: out of memory\n");
		stat_scan_free(&s);
		return NULL;
	}
	stat_prom_render(f, &s);
	stat_scan_free(&s);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* ---- --serve */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned int status, char *body,
			     size_t len, const char *type)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, body,
								    MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	if (!resp) {
		free(body);
		return MHD_NO;
	}
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned int status,
				  const char *text)
{
	char *body = strdup(text);

	if (!body)
		return MHD_NO;
	return reply(conn, status, body, strlen(body), "text/plain; charset=utf-8");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **state)
{
	const struct stat_opts *o = cls;
	static int first_call;
	size_t len = 0;
	char *body;

	(void)version;
	(void)upload;
	if (*state != &first_call) {
		/* headers only so far; a body (there should be none) comes next */
		*state = &first_call;
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET /metrics\n");
	if (!strcmp(url, "/"))
		return reply_text(conn, MHD_HTTP_OK,
				  "braid stat exporter: the metrics are at /metrics\n");
	if (strcmp(url, "/metrics"))
		return reply_text(conn, MHD_HTTP_NOT_FOUND,
				  "not found: the metrics are at /metrics\n");
	body = render_scan(o, &len);
	if (!body)
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
				  "braid stat: the counters directory cannot be read\n");
	return reply(conn, MHD_HTTP_OK, body, len, PROM_CONTENT_TYPE);
}

/* ADDR:PORT, [ADDR6]:PORT: a listening socket bound to it, or -1 (said). */
static int listen_on(const char *spec, char *shown, size_t shown_len)
{
	char host[256], port[16];
	const char *colon = strrchr(spec, ':');
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | AI_PASSIVE };
	struct addrinfo *ai = NULL;
	struct sockaddr_storage sa;
	socklen_t salen = sizeof(sa);
	size_t hlen;
	int fd, one = 1, rc;
	char *end;
	long pn;

	if (!colon || colon == spec || strlen(colon + 1) >= sizeof(port) || !colon[1]) {
		fprintf(stderr, "braid stat: --serve %s: ADDR:PORT, e.g. 127.0.0.1:9464\n", spec);
		return -1;
	}
	hlen = (size_t)(colon - spec);
	if (spec[0] == '[' && hlen >= 2 && spec[hlen - 1] == ']') {
		spec++;
		hlen -= 2;
	}
	if (hlen >= sizeof(host)) {
		fprintf(stderr, "braid stat: --serve: address too long\n");
		return -1;
	}
	memcpy(host, spec, hlen);
	host[hlen] = '\0';
	snprintf(port, sizeof(port), "%s", colon + 1);
	pn = strtol(port, &end, 10);
	if (*end || pn < 0 || pn > 65535) {
		fprintf(stderr, "braid stat: --serve: port '%s': 0 to 65535\n", port);
		return -1;
	}
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "braid stat: --serve: address '%s': %s\n", host, gai_strerror(rc));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "braid stat: --serve %s: socket: %s\n", spec, strerror(errno));
		freeaddrinfo(ai);
		return -1;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
		int err = errno;

		fprintf(stderr, "braid stat: --serve: cannot listen on %s:%s: %s%s\n", host, port,
			strerror(err),
			err == EADDRINUSE ? " (another exporter on that port? choose another)"
					  : "");
		close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	/* the port bound, which the kernel chose with port 0 */
	if (getsockname(fd, (struct sockaddr *)&sa, &salen) == 0) {
		char h[NI_MAXHOST], p[NI_MAXSERV];

		if (getnameinfo((struct sockaddr *)&sa, salen, h, sizeof(h), p, sizeof(p),
				NI_NUMERICHOST | NI_NUMERICSERV) == 0)
			snprintf(shown, shown_len, "%s%s%s:%s", sa.ss_family == AF_INET6 ? "[" : "",
				 h, sa.ss_family == AF_INET6 ? "]" : "", p);
	}
	return fd;
}

int stat_prom_serve(const struct stat_opts *o)
{
	char shown[NI_MAXHOST + NI_MAXSERV + 4] = "?";
	struct MHD_Daemon *d;
	sigset_t set;
	int fd, sig = 0;

	fd = listen_on(o->serve, shown, sizeof(shown));
	if (fd < 0)
		return 1;
	/* the server's thread inherits these blocked: only this thread takes them */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
			     on_request, (void *)o, MHD_OPTION_LISTEN_SOCKET, fd,
			     MHD_OPTION_CONNECTION_TIMEOUT, 30U, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "braid stat: --serve %s: the HTTP server did not start\n", shown);
		close(fd);
		return 1;
	}
	printf("braid stat: serving http://%s/metrics (counters of %s)\n", shown, o->dir);
	fflush(stdout);
	sigwait(&set, &sig);
	MHD_stop_daemon(d);
	close(fd);
	return 0;
}

/* ---- --textfile */

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig)
{
	stop_sig = sig;
}

/* DIR/braid.prom: written to a temporary file of DIR, then renamed over it. */
static int write_textfile(const struct stat_opts *o)
{
	char tmp[PATH_MAX], dst[PATH_MAX];
	size_t len = 0, off = 0;
	char *body;
	int fd;

	if ((size_t)snprintf(dst, sizeof(dst), "%s/%s", o->textfile, PROM_TEXTFILE) >=
		    sizeof(dst) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", o->textfile, PROM_TEXTFILE) >=
		    sizeof(tmp)) {
		fprintf(stderr, "braid stat: --textfile %s: path too long\n", o->textfile);
		return -1;
	}
	body = render_scan(o, &len);
	if (!body)
		return -1;
	fd = mkstemp(tmp);
	if (fd < 0) {
		fprintf(stderr, "braid stat: --textfile: cannot create a file in %s: %s\n",
			o->textfile, strerror(errno));
		free(body);
		return -1;
	}
	while (off < len) {
		ssize_t n = write(fd, body + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	free(body);
	/* mkstemp makes it 0600; node_exporter usually runs as another user */
	if (off < len || fchmod(fd, 0644) != 0 || fsync(fd) != 0 || close(fd) != 0) {
		fprintf(stderr, "braid stat: --textfile: writing %s: %s\n", tmp,
			off < len ? "short write" : strerror(errno));
		if (off < len)
			close(fd);
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, dst) != 0) {
		fprintf(stderr, "braid stat: --textfile: rename to %s: %s\n", dst, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

int stat_prom_textfile(const struct stat_opts *o)
{
	struct sigaction sa = { .sa_handler = on_stop };
	double next = stat_mono_now();
	struct stat st;

	if (stat(o->textfile, &st) != 0) {
		fprintf(stderr, "braid stat: --textfile %s: %s\n", o->textfile, strerror(errno));
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "braid stat: --textfile %s: not a directory\n", o->textfile);
		return 1;
	}
	if (!o->watch)
		return write_textfile(o) ? 1 : 0;
	/* stop between two writes, never in the middle of one */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (long n = 1; !o->count || n <= o->count; n++) {
		if (write_textfile(o))
			return 1;
		if (o->count && n == o->count)
			break;
		next += o->watch;
		while (!stop_sig) {
			double left = next - stat_mono_now();
			struct timespec ts;

			if (left <= 0)
				break;
			ts.tv_sec = (time_t)left;
			ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
			nanosleep(&ts, NULL);
		}
		if (stop_sig)
			break;
	}
	return 0;
}
