// SPDX-License-Identifier: Apache-2.0
#include "plugin/oob.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "plugin/filter.h"
#include "plugin/handle.h"
#include "plugin/log.h"
#include "plugin/params.h"

#define OOB_MAGIC 0x6272616fu /* "brao" */

struct oob_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t len;
	uint32_t check; /* hash of the payload */
} __attribute__((packed));

_Static_assert(sizeof(struct oob_hdr) == 16, "oob header is 16 bytes on the wire");

static socklen_t addr_len(const struct sockaddr_storage *a)
{
	return a->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

void braid_oob_addr_str(const struct sockaddr_storage *a, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)a;

		inet_ntop(AF_INET, &s->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(s->sin_port));
	} else if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)a;

		inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(s->sin6_port));
	} else {
		snprintf(buf, len, "<no address>");
	}
}

static int usable_addr(const struct ifaddrs *ifa)
{
	if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP))
		return 0;
	if (ifa->ifa_addr->sa_family == AF_INET)
		return 1;
	if (ifa->ifa_addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ifa->ifa_addr;

		/* Link-local needs a scope id on the peer's side too: skip it. */
		return !IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr);
	}
	return 0;
}

int braid_oob_pick_addr(struct sockaddr_storage *addr, char *ifname, size_t ifname_len)
{
	const char *spec = braid_param_str(BRAID_P_SOCKET_IFNAME);
	struct ifaddrs *list, *ifa, *pick = NULL;
	struct braid_filter f;

	if (braid_filter_parse(spec, &f)) {
		BRAID_WARN("%s=\"%s\" cannot be parsed; using any interface",
			   braid_param_source(BRAID_P_SOCKET_IFNAME), spec);
		braid_filter_parse(NULL, &f);
	}
	if (getifaddrs(&list))
		return -errno;
	/* Pass 1: the filter's choice (or, unfiltered, non-loopback) with IPv4 before IPv6;
	 * pass 2 (unfiltered only): loopback, for single-host use. */
	for (int pass = 0; pass < 4 && !pick; pass++) {
		int want_loop = pass >= 2;
		int want_family = (pass % 2) ? AF_INET6 : AF_INET;

		if (want_loop && spec[0])
			break;
		for (ifa = list; ifa && !pick; ifa = ifa->ifa_next) {
			int loop = !!(ifa->ifa_flags & IFF_LOOPBACK);

			if (!usable_addr(ifa) || ifa->ifa_addr->sa_family != want_family)
				continue;
			if (spec[0] ? !braid_filter_match(&f, ifa->ifa_name, -1)
				    : loop != want_loop)
				continue;
			pick = ifa;
		}
	}
	if (!pick) {
		freeifaddrs(list);
		BRAID_WARN("no usable network interface for the handshake%s%s%s",
			   spec[0] ? " matches " : "",
			   spec[0] ? braid_param_source(BRAID_P_SOCKET_IFNAME) : "",
			   spec[0] ? "" : " (no interface is up)");
		return -ENODEV;
	}
	memset(addr, 0, sizeof(*addr));
	memcpy(addr, pick->ifa_addr,
	       pick->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
						    : sizeof(struct sockaddr_in6));
	snprintf(ifname, ifname_len, "%s", pick->ifa_name);
	freeifaddrs(list);
	return 0;
}

static void tune_socket(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* A hung host (not a dead process) is caught by keepalive rather than never. */
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
}

int braid_oob_listen(struct sockaddr_storage *addr, int *fd_out)
{
	socklen_t len = addr_len(addr);
	int fd, err;

	fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (addr->ss_family == AF_INET)
		((struct sockaddr_in *)addr)->sin_port = 0;
	else
		((struct sockaddr_in6 *)addr)->sin6_port = 0;
	if (bind(fd, (struct sockaddr *)addr, len) || listen(fd, 128) ||
	    getsockname(fd, (struct sockaddr *)addr, &len)) {
		err = -errno;
		close(fd);
		return err;
	}
	*fd_out = fd;
	return 0;
}

int braid_oob_accept(int lfd, int *fd_out)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? -EAGAIN
										   : -errno;
	tune_socket(fd);
	*fd_out = fd;
	return 0;
}

int braid_oob_connect(const struct sockaddr_storage *addr, int *fd_out)
{
	int fd, err;

	fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	tune_socket(fd);
	if (connect(fd, (const struct sockaddr *)addr, addr_len(addr)) && errno != EINPROGRESS) {
		err = -errno;
		close(fd);
		return err;
	}
	*fd_out = fd;
	return 0;
}

int braid_oob_connect_done(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int err = 0;
	socklen_t len = sizeof(err);

	if (poll(&p, 1, 0) < 0)
		return errno == EINTR ? -EINPROGRESS : -errno;
	if (!(p.revents & (POLLOUT | POLLERR | POLLHUP)))
		return -EINPROGRESS;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
		return -errno;
	return err ? -err : 0;
}

void braid_oob_chan_init(struct braid_oob_chan *ch, int fd)
{
	ch->fd = fd;
	ch->tx_len = ch->tx_off = 0;
	ch->rx_off = 0;
}

int braid_oob_chan_post(struct braid_oob_chan *ch, uint16_t type, const void *payload, uint32_t len)
{
	struct oob_hdr h = {
		.magic = htonl(OOB_MAGIC),
		.version = htons(BRAID_WIRE_VERSION),
		.type = htons(type),
		.len = htonl(len),
		.check = htonl(braid_hash32(payload, len)),
	};

	if (ch->tx_off < ch->tx_len)
		return -EBUSY;
	if (len > BRAID_OOB_MAX_PAYLOAD)
		return -EMSGSIZE;
	memcpy(ch->tx, &h, sizeof(h));
	if (len)
		memcpy(ch->tx + sizeof(h), payload, len);
	ch->tx_len = sizeof(h) + len;
	ch->tx_off = 0;
	return 0;
}

int braid_oob_chan_flush(struct braid_oob_chan *ch)
{
	while (ch->tx_off < ch->tx_len) {
		ssize_t n = send(ch->fd, ch->tx + ch->tx_off, ch->tx_len - ch->tx_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return (errno == EAGAIN || errno == EWOULDBLOCK) ? -EAGAIN : -errno;
		}
		ch->tx_off += (uint32_t)n;
	}
	return 0;
}

/* Read until rx holds `want` bytes: 0 done, -EAGAIN, -ECONNRESET at EOF, -errno. */
static int chan_fill(struct braid_oob_chan *ch, uint32_t want)
{
	while (ch->rx_off < want) {
		ssize_t n = recv(ch->fd, ch->rx + ch->rx_off, want - ch->rx_off, MSG_DONTWAIT);

		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return (errno == EAGAIN || errno == EWOULDBLOCK) ? -EAGAIN : -errno;
		}
		ch->rx_off += (uint32_t)n;
	}
	return 0;
}

int braid_oob_chan_recv_any(struct braid_oob_chan *ch, uint16_t *type, const void **payload,
			    uint32_t *len, char *why, size_t whylen)
{
	struct oob_hdr h;
	uint32_t plen;
	int rc;

	rc = chan_fill(ch, sizeof(h));
	if (rc)
		return rc;
	memcpy(&h, ch->rx, sizeof(h));
	plen = ntohl(h.len);
	if (ntohl(h.magic) != OOB_MAGIC) {
		snprintf(why, whylen, "not braid (bad magic 0x%08x)", ntohl(h.magic));
		return -EPROTO;
	}
	if (ntohs(h.version) != BRAID_WIRE_VERSION) {
		snprintf(why, whylen, "braid wire version %u, we speak %d", ntohs(h.version),
			 BRAID_WIRE_VERSION);
		return -EPROTO;
	}
	if (plen > BRAID_OOB_MAX_PAYLOAD) {
		snprintf(why, whylen, "message type %u of %u bytes (at most %d)", ntohs(h.type),
			 plen, BRAID_OOB_MAX_PAYLOAD);
		return -EPROTO;
	}
	rc = chan_fill(ch, (uint32_t)sizeof(h) + plen);
	if (rc)
		return rc;
	if (braid_hash32(ch->rx + sizeof(h), plen) != ntohl(h.check)) {
		snprintf(why, whylen, "message checksum mismatch");
		return -EPROTO;
	}
	*type = ntohs(h.type);
	*payload = ch->rx + sizeof(h);
	*len = plen;
	ch->rx_off = 0;
	return 0;
}

int braid_oob_chan_recv(struct braid_oob_chan *ch, uint16_t type, const void **payload,
			uint32_t *len, char *why, size_t whylen)
{
	uint16_t got;
	int rc = braid_oob_chan_recv_any(ch, &got, payload, len, why, whylen);

	if (rc == 0 && got != type) {
		snprintf(why, whylen, "message type %u where type %u was due", got, type);
		return -EPROTO;
	}
	return rc;
}
