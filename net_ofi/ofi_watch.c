// SPDX-License-Identifier: Apache-2.0
/*
 * The kernel's word on the NICs that are network interfaces (tcp;ofi_rxm and the sockets
 * providers name their domains after them), heard on rtnetlink (RTMGRP_LINK) by one
 * thread. ofi_live.c reads an interface only where a request waits, so without this a
 * NIC that went down under idle comms showed up in braid stat until a comm waited on it
 * (issue 19). The thread writes the device's port_down counter only (braid stat's device
 * state and its lanes'); failover, its bound and the WARNs stay with the comms' reads.
 * Nothing on the data path: a link change costs the thread one ioctl per device on it.
 * No netlink here (a seccomp filter, no permission): no thread, as before, said at INFO.
 */
#include "net_ofi/ofi_watch.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_ofi/ofi.h"
#include "plugin/log.h"

/*
 * One watcher a process. start and stop run under the core's init lock (backend init and
 * fini), and the library destructor, which stops a watcher that a plugin unloaded
 * without finalize (ncclNet v8 to v10) left running, after every call into the plugin.
 */
static struct {
	pthread_t thread;
	pid_t pid;         /* of the process that started it: a forked child has no thread */
	int nl, wake;      /* the rtnetlink socket; an eventfd that tells the thread to end */
	unsigned int *ifx; /* per device: its interface index, 0 when it is none */
	int ndevs;
	int running;
} watch = { .nl = -1, .wake = -1 };

/* d's interface read again, its counter set; d->lock orders it with ofi_live.c's edges. */
static void dev_refresh(struct ofi_dev *d)
{
	int down;

	pthread_mutex_lock(&d->lock);
	down = ofi_dev_link_down(d);
	__atomic_store_n(&d->ctr->port_down, (uint32_t)down, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&d->lock);
}

/* ifindex 0: every device (at start, and after the socket overran: events were lost). */
static void refresh(unsigned int ifindex)
{
	for (int i = 0; i < watch.ndevs; i++)
		if (watch.ifx[i] && (!ifindex || watch.ifx[i] == ifindex))
			dev_refresh(&ofi.devs[i]);
}

/* The link messages in one datagram. */
static void take_messages(const void *buf, size_t len)
{
	for (const struct nlmsghdr *h = buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
		const struct ifinfomsg *ifi = NLMSG_DATA(h);

		if ((h->nlmsg_type == RTM_NEWLINK || h->nlmsg_type == RTM_DELLINK) &&
		    h->nlmsg_len >= NLMSG_LENGTH(sizeof(*ifi)) && ifi->ifi_index > 0)
			refresh((unsigned int)ifi->ifi_index);
	}
}

static void *watch_main(void *arg)
{
	/* aligned for struct nlmsghdr; one datagram per read */
	static _Alignas(struct nlmsghdr) char buf[16384];
	struct pollfd p[2] = { { .fd = watch.nl, .events = POLLIN },
			       { .fd = watch.wake, .events = POLLIN } };

	(void)arg;
	for (;;) {
		ssize_t n;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			BRAID_WARN("ofi: the NICs' link watcher stops: poll failed: %s",
				   strerror(errno));
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		n = recv(watch.nl, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0) {
			take_messages(buf, (size_t)n);
		} else if (n < 0 && errno == ENOBUFS) {
			refresh(0);
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			BRAID_WARN("ofi: the NICs' link watcher stops: reading rtnetlink failed: %s",
				   n ? strerror(errno) : "socket closed");
			return NULL;
		}
	}
}

static void watch_close(void)
{
	if (watch.nl >= 0)
		close(watch.nl);
	if (watch.wake >= 0)
		close(watch.wake);
	free(watch.ifx);
	watch.nl = watch.wake = -1;
	watch.ifx = NULL;
	watch.ndevs = 0;
	watch.running = 0;
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

	if (watch.running && watch.pid != getpid())
		watch_close(); /* inherited over fork: the thread stayed in the parent */
	if (watch.running)
		return;
	watch.ifx = calloc((size_t)ofi.ndevs, sizeof(*watch.ifx));
	if (!watch.ifx)
		return;
	watch.ndevs = ofi.ndevs;
	for (int i = 0; i < ofi.ndevs; i++) {
		const struct ofi_dev *d = &ofi.devs[i];

		if (d->ctr && strlen(d->name) < IF_NAMESIZE)
			watch.ifx[i] = if_nametoindex(d->name);
		n += watch.ifx[i] != 0;
	}
	if (!n) { /* no NIC is an interface (EFA, shm): nothing to watch */
		watch_close();
		return;
	}
	watch.nl = netlink_open();
	watch.wake = eventfd(0, EFD_CLOEXEC);
	if (watch.nl < 0 || watch.wake < 0) {
		BRAID_INFO(NCCL_INIT | NCCL_NET,
			   "ofi: no rtnetlink (%s): braid stat shows a NIC's link state as the "
			   "comms waiting on it last read it",
			   strerror(watch.nl < 0 ? -watch.nl : errno));
		watch_close();
		return;
	}
	refresh(0); /* the state before the first event */
	rc = pthread_create(&watch.thread, NULL, watch_main, NULL);
	if (rc) {
		BRAID_INFO(NCCL_INIT | NCCL_NET, "ofi: no link watcher thread: %s", strerror(rc));
		watch_close();
		return;
	}
	watch.pid = getpid();
	watch.running = 1;
	BRAID_INFO(NCCL_INIT | NCCL_NET, "ofi: watching the links of %d NIC(s) (rtnetlink)", n);
}

void ofi_watch_stop(void)
{
	uint64_t one = 1;

	if (!watch.running)
		return;
	if (watch.pid == getpid()) {
		if (write(watch.wake, &one, sizeof(one)) == (ssize_t)sizeof(one))
			pthread_join(watch.thread, NULL);
		else /* cannot happen with an eventfd below its maximum; never hang on it */
			pthread_detach(watch.thread);
	}
	watch_close();
}

/* A plugin unloaded without finalize (v8 to v10) must not leave the thread in freed code. */
__attribute__((destructor)) static void ofi_watch_unload(void)
{
	ofi_watch_stop();
}
