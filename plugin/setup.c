// SPDX-License-Identifier: Apache-2.0
#include "plugin/setup.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "plugin/handle.h"
#include "plugin/log.h"
#include "plugin/oob.h"
#include "plugin/params.h"

uint64_t braid_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t braid_random_u64(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = braid_now_ns() ^ ((uint64_t)getpid() << 32);
	return v;
}

ncclResult_t braid_setup_listen(enum braid_backend_kind kind, const char *who, int dev,
				void *handle, struct braid_listener *l)
{
	struct braid_handle h = { .backend = (uint8_t)kind, .dev = (uint32_t)dev };
	char ifname[64];
	int rc;

	rc = braid_oob_pick_addr(&h.addr, ifname, sizeof(ifname));
	if (!rc)
		rc = braid_oob_listen(&h.addr, &l->fd);
	if (rc) {
		BRAID_WARN("%s: listen on device %d: no handshake socket: %s", who, dev, strerror(-rc));
		return ncclSystemError;
	}
	h.nonce = braid_random_u64();
	l->nonce = h.nonce;
	braid_oob_addr_str(&h.addr, l->addr, sizeof(l->addr));
	braid_handle_encode(&h, handle);
	BRAID_TRACE("%s: listening for device %d on %s (%s)", who, dev, l->addr, ifname);
	return ncclSuccess;
}

ncclResult_t braid_setup_dial(enum braid_backend_kind kind, const char *who, int dev,
			      const void *handle, int *fd, uint64_t *nonce, char *peer,
			      size_t peerlen)
{
	struct braid_handle h;
	char why[128];
	int rc;

	if (braid_handle_decode(handle, &h, why, sizeof(why))) {
		BRAID_WARN("%s: connect on device %d: %s", who, dev, why);
		return ncclInvalidArgument;
	}
	if (h.backend != kind) {
		BRAID_WARN("%s: connect on device %d: the peer listens with another backend (%u); "
			   "set the same BRAID_BACKEND on every rank",
			   who, dev, h.backend);
		return ncclInvalidUsage;
	}
	rc = braid_oob_connect(&h.addr, fd);
	if (rc) {
		BRAID_WARN("%s: connect on device %d: socket: %s", who, dev, strerror(-rc));
		return ncclSystemError;
	}
	*nonce = h.nonce;
	braid_oob_addr_str(&h.addr, peer, peerlen);
	return ncclSuccess;
}

int braid_setup_answer(const struct braid_listener *l, const char *who, int *fd, char *peer,
		       size_t peerlen)
{
	struct sockaddr_storage addr;
	socklen_t alen = sizeof(addr);
	int rc = braid_oob_accept(l->fd, fd);

	if (rc == -EAGAIN)
		return rc;
	if (rc) {
		BRAID_WARN("%s: accept on %s: %s", who, l->addr, strerror(-rc));
		return rc;
	}
	if (getpeername(*fd, (struct sockaddr *)&addr, &alen) == 0)
		braid_oob_addr_str(&addr, peer, peerlen);
	else
		snprintf(peer, peerlen, "<unknown peer>");
	return 0;
}

uint64_t braid_setup_deadline(void)
{
	return braid_now_ns() + (uint64_t)braid_param_int(BRAID_P_CONN_TIMEOUT_MS) * 1000000ULL;
}

int braid_setup_check_deadline(int rc, uint64_t deadline_ns, const char *who, const char *what,
			       const char *peer)
{
	if (rc != -EAGAIN || braid_now_ns() <= deadline_ns)
		return rc;
	BRAID_WARN("%s: %s %s: not finished after %lld ms (BRAID_CONN_TIMEOUT_MS); the peer "
		   "stopped answering",
		   who, what, peer, (long long)braid_param_int(BRAID_P_CONN_TIMEOUT_MS));
	return -ETIMEDOUT;
}
