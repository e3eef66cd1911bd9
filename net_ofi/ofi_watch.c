// SPDX-License-Identifier: Apache-2.0
/*
 * The kernel's word on the NICs that are network interfaces (tcp;ofi_rxm and the sockets
 * providers name their domains after them), heard on rtnetlink (RTMGRP_LINK) by one
 * thread. ofi_live.c reads an interface only where a request waits, so without this a
 * NIC that went down under idle comms showed up in braid stat until a comm waited on it
 * (issue 19). The thread writes the device's port_down counter only (braid stat's device
 * state and its lanes'); failover, its bound and the WARNs stay with the comms' reads.
 * Nothing on the data path: a link change costs the thread one ioctl per watched NIC.
 * No netlink here (a seccomp filter, no permission): no thread, as before, said at INFO.
 */
#include "net_ofi/ofi_watch.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_ofi/ofi.h"
#include "net_ofi/ofi_lanes.h"
#include "plugin/bg_thread.h"
#include "plugin/log.h"

/* One watcher a process; start and stop run under the core's init lock (the backend's
 * init and fini), the thread reads what start wrote before it began. */
static struct {
	struct braid_bg bg;
	int nl; /* the rtnetlink socket */
	int ndevs;
} watch = { .bg = BRAID_BG_INIT, .nl = -1 };

/* d's interface read again and its counter set, under d->lock, which orders it with
 * ofi_live.c's edges; 0, or -1 when the lock is busy (registration, set-up: try later).
 * An interface that is gone (a veth deleted, its namespace too) is down. */
static int dev_refresh(struct ofi_dev *d)
{
	int down;

	if (pthread_mutex_trylock(&d->lock))
		return -1;
	down = ofi_dev_link_down(d);
	__atomic_store_n(&d->ctr->port_down, (uint32_t)down, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/* Every watched device, whatever interface the events named: a few ioctls, and an
 * interface re-created under another index is still read. 0, or -1 if one was busy. */
static int refresh_all(void)
{
	int rc = 0;

	for (int i = 0; i < watch.ndevs; i++)
		if (ofi.devs[i].is_iface && dev_refresh(&ofi.devs[i]))
			rc = -1;
	return rc;
}

/* What is queued on the socket, read and dropped: 1 if anything (or an overrun) came,
 * 0 if nothing, -1 if the socket failed. */
static int drain(void)
{
	char buf[8192];
	int any = 0;

	for (;;) {
		ssize_t n = recv(watch.nl, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0 || (n < 0 && errno == ENOBUFS)) {
			any = 1;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN) {
			return any;
		} else {
			BRAID_WARN("ofi: the NICs' link watcher stops: reading rtnetlink failed: %s",
				   n ? strerror(errno) : "socket closed");
			return -1;
		}
	}
}

/* The socket says only that some link changed: every watched NIC is read again then, and
 * again every 20 ms while a device's lock was busy (never a wait on it: a stop joins this
 * thread at exit, whoever holds the lock). */
static void watch_loop(void)
{
	struct pollfd p[2] = { { .fd = watch.nl, .events = POLLIN },
			       { .fd = watch.bg.wake, .events = POLLIN } };
	int pending = 0;

	for (;;) {
		int rc = poll(p, 2, pending ? 20 : -1);

		if (rc < 0 && errno != EINTR) {
			BRAID_WARN("ofi: the NICs' link watcher stops: poll failed: %s",
				   strerror(errno));
			return;
		}
		if (rc < 0)
			continue;
		if (p[1].revents)
			return;
		if (p[0].revents) {
			rc = drain();
			if (rc < 0)
				return;
			pending |= rc;
		}
		if (pending)
			pending = refresh_all() != 0;
	}
}

/* The socket is the thread's from its start: it closes it as it ends, which is also what
 * an unload without finalize gets (ncclNet v8 to v10: bg_thread.c stops it at dlclose). */
static void *watch_main(void *arg)
{
	int fd;

	(void)arg;
	watch_loop();
	fd = watch.nl; /* -1 first: a fork meanwhile must not close a reused number */
	watch.nl = -1;
	close(fd);
	return NULL;
}

static void watch_close(void)
{
	if (watch.nl >= 0)
		close(watch.nl);
	watch.nl = -1;
	watch.ndevs = 0;
}

/* The rtnetlink socket, bound to link changes; -errno. */
static int netlink_open(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = RTMGRP_LINK };
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), rc;

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

void ofi_watch_start(void)
{
	int n = 0, rc;

	if (braid_bg_stop(&watch.bg)) /* a start without a stop: it runs on */
		return;
	watch_close(); /* a forked child's copy */
	watch.ndevs = ofi.ndevs;
	for (int i = 0; i < ofi.ndevs; i++)
		n += ofi.devs[i].is_iface;
	if (!n) { /* no NIC is an interface (EFA, shm): nothing to watch */
		watch_close();
		return;
	}
	watch.nl = netlink_open();
	if (watch.nl < 0) {
		BRAID_INFO(NCCL_INIT | NCCL_NET,
			   "ofi: no rtnetlink (%s): braid stat shows a NIC's link state as the "
			   "comms waiting on it last read it",
			   strerror(-watch.nl));
		watch_close();
		return;
	}
	(void)refresh_all(); /* the state before the first event (a busy one: at the next) */
	rc = braid_bg_start(&watch.bg, watch_main, NULL);
	if (rc) {
		BRAID_INFO(NCCL_INIT | NCCL_NET, "ofi: no link watcher thread: %s", strerror(-rc));
		watch_close();
		return;
	}
	BRAID_INFO(NCCL_INIT | NCCL_NET, "ofi: watching the links of %d NIC(s) (rtnetlink)", n);
}

void ofi_watch_stop(void)
{
	if (braid_bg_stop(&watch.bg) == 0) /* else it runs on: leave it what it reads */
		watch_close();
}
