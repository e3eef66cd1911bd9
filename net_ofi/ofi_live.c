// SPDX-License-Identifier: Apache-2.0
/*
 * Which NICs of a fused device a new comm uses: those whose interface is up on both sides
 * (issue 19, a NIC down before connect). Lane k of a comm pairs with the peer's lane k,
 * so both sides must leave out the same NICs: the listener marks its down NICs in the
 * handle (struct braid_handle nic_down), the connector leaves out each NIC that is down
 * on either side and names the NICs it kept in its HELLO (struct ofi_blob_head used),
 * and the listener builds its comm on exactly those. A NIC left out gets a WARN on each
 * side; with every NIC down the comm forms on all of them, as before.
 *
 * "Down": the interface named like the libfabric domain (tcp;ofi_rxm and the sockets
 * providers name domains after interfaces) is not IFF_UP or has no carrier
 * (IFF_RUNNING; a veth whose peer went down loses it). A domain that is no interface
 * (EFA's rdmap*, shm) is never down here.
 */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_ofi/ofi.h"
#include "plugin/handle.h"
#include "plugin/log.h"

int ofi_dev_link_down(const struct ofi_dev *d)
{
	struct ifreq ifr;
	int fd, down = 0;

	if (strlen(d->name) >= sizeof(ifr.ifr_name) || !if_nametoindex(d->name))
		return 0;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, d->name, strlen(d->name));
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
		down = !(ifr.ifr_flags & IFF_UP) || !(ifr.ifr_flags & IFF_RUNNING);
	close(fd);
	return down;
}

void ofi_live_fill_handle(const struct braid_vdev *vd, struct braid_handle *h)
{
	h->nnics = (uint8_t)vd->n;
	h->nic_down = 0;
	for (int k = 0; k < vd->n; k++)
		if (ofi_dev_link_down(&ofi.devs[vd->nic[k]]))
			h->nic_down |= (uint8_t)(1u << k);
}

static void subset(const struct braid_vdev *vd, uint32_t used, struct braid_vdev *use)
{
	use->n = 0;
	for (int k = 0; k < vd->n; k++)
		if (used >> k & 1)
			use->nic[use->n++] = vd->nic[k];
}

uint32_t ofi_live_pick(const struct braid_vdev *vd, const struct braid_link *lk,
		       struct braid_vdev *use)
{
	uint32_t all = (1u << vd->n) - 1, used = 0, ours = 0;
	int nused;

	for (int k = 0; k < vd->n; k++) {
		int mine = ofi_dev_link_down(&ofi.devs[vd->nic[k]]);
		int theirs = k < lk->peer_nnics && (lk->peer_nic_down >> k & 1);

		ours |= (uint32_t)mine << k;
		if (!mine && !theirs)
			used |= 1u << k;
	}
	if (!used) {
		*use = *vd;
		return all;
	}
	subset(vd, used, use);
	nused = use->n;
	for (int k = 0; k < vd->n; k++)
		if (!(used >> k & 1))
			BRAID_WARN("ofi: connect to %s: NIC %s (lane %d) left out of the comm, which "
				   "runs on %d of the device's %d NICs: %s",
				   lk->peer, ofi.devs[vd->nic[k]].name, k, nused, vd->n,
				   ours >> k & 1 ? "its interface is down"
						 : "the peer's NIC on that lane is down");
	return used;
}

int ofi_live_take(const struct braid_vdev *vd, uint32_t used, const char *peer,
		  struct braid_vdev *use)
{
	if (!used || used >> vd->n)
		return -EPROTO;
	subset(vd, used, use);
	for (int k = 0; k < vd->n; k++)
		if (!(used >> k & 1))
			BRAID_WARN("ofi: accept from %s: NIC %s (lane %d) left out of the comm, which "
				   "runs on %d of the device's %d NICs: %s",
				   peer, ofi.devs[vd->nic[k]].name, k, use->n, vd->n,
				   ofi_dev_link_down(&ofi.devs[vd->nic[k]])
					   ? "its interface is down"
					   : "the peer's NIC on that lane is down");
	return 0;
}
