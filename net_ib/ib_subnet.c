// SPDX-License-Identifier: Apache-2.0
/*
 * Subnet-aware NIC pairing (BRAID_IB_SUBNET_AWARE_ROUTING, NCCL_IB_SUBNET_AWARE_ROUTING).
 *
 * On a rail-optimised RoCE fabric each rail is its own subnet, with no route between
 * them: NIC 0 of one host reaches only the NICs of the other hosts on its subnet. When two
 * hosts list their NICs in different orders, pairing a fused comm's QP i with the peer's
 * NIC i mod n crosses subnets, and the QP times out on its first message.
 *
 * NCCL 2.30.7 (src/transport/net_ib/connect.cc, gidSameSubnet, ncclIbFindDevBySubnet):
 * the listener puts the GIDs of its device's RoCE ports in the handle (listenGids[2]);
 * two IPv4-mapped GIDs are on one subnet when they share NCCL_IB_SUBNET_PREFIX_LEN (24)
 * bits, two IPv6 GIDs when they share the 64-bit subnet prefix, GIDs of different
 * families never; InfiniBand ports are not checked. It then picks a whole merged device
 * whose ports all reach the peer, and keeps the asked one when none does. Off by default.
 *
 * braid keeps the same reachability and default but pairs per NIC of the fused device:
 * each NIC of ours goes to a NIC of the peer on its subnet, a NIC of ours with none is
 * left out (WARN), and with none at all the connect fails at once.
 *
 * Why the handle and not the set-up blob: the connector makes its QPs, each on one of its
 * NICs, before it sends the HELLO (ib_conn_create), so it must know which of its NICs
 * reach the peer before any set-up message; the listener's NICs ride in the handle,
 * 8 bytes each (struct braid_handle). The HELLO then names, per QP, the listener's NIC it
 * goes to, and the listener puts its QP there (link_answer): both sides pair the same way.
 *
 * Ports that are down (issue 19): a NIC whose port is down when the comm forms is left out
 * of it, with a WARN, as long as one NIC of the device is up: the comm forms on the live
 * NICs instead of putting QPs on a port that cannot carry them, whose first message would
 * fail the whole comm once the retry budget is spent. The listener marks its down NICs in
 * the handle (nic_down) and the connector pairs with the others. With every NIC down the
 * comm forms on all of them as before, and RC retries carry it over a short flap. A port
 * that goes down between listen and the connector's HELLO is not seen here: the comm
 * forms on it and fails as it did.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net_ib/ib.h"
#include "net_ib/ib_wire.h"
#include "plugin/log.h"
#include "plugin/params.h"

_Static_assert(BRAID_HANDLE_NICS == BRAID_VDEV_MAX_NICS, "a handle slot per NIC");

static const uint8_t v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/*
 * A port's network in 8 bytes: bytes 8..15 of an IPv4-mapped GID (00 00 ff ff a b c d),
 * else the GID's 64-bit subnet prefix; zeros, which reach everything, for InfiniBand (as
 * NCCL, which checks RoCE ports only) and for a zero GID.
 */
void ib_subnet_key(int link_layer, const uint8_t *gid, uint8_t *key)
{
	static const uint8_t zero[16];

	memset(key, 0, 8);
	if (link_layer != IBV_LINK_LAYER_ETHERNET || !memcmp(gid, zero, 16))
		return;
	memcpy(key, !memcmp(gid, v4_mapped, 12) ? gid + 8 : gid, 8);
}

static int key_is_v4(const uint8_t *key)
{
	return !memcmp(key, v4_mapped + 8, 4);
}

static int key_is_any(const uint8_t *key)
{
	static const uint8_t zero[8];

	return !memcmp(key, zero, 8);
}

static int ib_subnet_aware(void)
{
	return braid_param_int(BRAID_P_IB_SUBNET_AWARE_ROUTING) != 0;
}

/* NCCL's gidSameSubnet, on keys; unknown networks reach everything. */
static int keys_reach(const uint8_t *a, const uint8_t *b)
{
	int len = (int)braid_param_int(BRAID_P_IB_SUBNET_PREFIX_LEN);
	uint32_t x, y, mask = htonl(len >= 32 ? 0xffffffffu : ~(0xffffffffu >> len));

	if (!ib_subnet_aware() || key_is_any(a) || key_is_any(b))
		return 1;
	if (key_is_v4(a) != key_is_v4(b))
		return 0;
	if (!key_is_v4(a))
		return !memcmp(a, b, 8);
	memcpy(&x, a + 4, 4);
	memcpy(&y, b + 4, 4);
	return (x & mask) == (y & mask);
}

/* "10.0.1.0/24", "fd00:1:2:3::/64", "any": a key's subnet, for messages. */
static void key_str(const uint8_t *key, char *buf, size_t len)
{
	uint8_t raw[16] = { 0 };
	char a[INET6_ADDRSTRLEN];
	int plen = (int)braid_param_int(BRAID_P_IB_SUBNET_PREFIX_LEN);

	if (key_is_any(key)) {
		snprintf(buf, len, "any");
	} else if (key_is_v4(key)) {
		uint32_t ip, mask = htonl(plen >= 32 ? 0xffffffffu : ~(0xffffffffu >> plen));

		memcpy(&ip, key + 4, 4);
		ip &= mask;
		inet_ntop(AF_INET, &ip, a, sizeof(a));
		snprintf(buf, len, "%s/%d", a, plen);
	} else {
		memcpy(raw, key, 8);
		inet_ntop(AF_INET6, raw, a, sizeof(a));
		snprintf(buf, len, "%s/64", a);
	}
}

static void dev_key(const struct ib_dev *d, uint8_t *key)
{
	ib_subnet_key(d->link_layer, d->gid.raw, key);
}

/* d's port is down now: its HCA's pending async events are read first (set-up only). */
static int dev_down(struct ib_dev *d)
{
	ib_async_poll(d->hca);
	return __atomic_load_n(&d->down_ns, __ATOMIC_ACQUIRE) != 0;
}

/* The peer's NIC p may take QPs: not marked down, unless all of them are. */
static int peer_nic_up(const struct braid_link *lk, int p)
{
	unsigned all = (1u << lk->peer_nnics) - 1;

	return !(lk->peer_nic_down >> p & 1) || (lk->peer_nic_down & all) == all;
}

void ib_subnet_fill_handle(const struct braid_vdev *vd, struct braid_handle *h)
{
	h->nnics = (uint8_t)vd->n;
	h->nic_down = 0;
	for (int k = 0; k < vd->n; k++) {
		dev_key(&ib.devs[vd->nic[k]], h->nic_net[k]);
		if (dev_down(&ib.devs[vd->nic[k]]))
			h->nic_down |= (uint8_t)(1u << k);
	}
}

/* "10.0.0.0/24, 10.0.1.0/24": the networks of a list of keys, for messages. */
static void keys_str(const uint8_t (*keys)[8], int n, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int k = 0; k < n && used < len; k++) {
		char s[64];

		key_str(keys[k], s, sizeof(s));
		used += (size_t)snprintf(buf + used, len - used, "%s%s", k ? ", " : "", s);
	}
}

static void warn_left_out(const struct ib_dev *d, const char *side, const char *peer,
			  const char *peer_nets)
{
	char gid[48], net[64];
	uint8_t key[8];

	dev_key(d, key);
	ib_gid_str(&d->gid, gid, sizeof(gid));
	key_str(key, net, sizeof(net));
	BRAID_WARN("ib: %s %s: %s:%d (GID %s, subnet %s) reaches none of the peer's NICs "
		   "(subnets %s): left out of the comm (BRAID_IB_SUBNET_AWARE_ROUTING)",
		   side, peer, d->name, d->port, gid, net, peer_nets);
}

static void warn_down(const struct ib_dev *d, const char *side, const char *peer, int live, int n)
{
	BRAID_WARN("ib: %s %s: %s:%d's port is down: left out of the comm, which runs on %d "
		   "of the device's %d NICs",
		   side, peer, d->name, d->port, live, n);
}

/* Our NICs whose port is up, into live; all of vd when none is (see the top). */
static void pick_live(const struct braid_vdev *vd, const char *peer, struct braid_vdev *live)
{
	int down[BRAID_VDEV_MAX_NICS];

	live->n = 0;
	for (int k = 0; k < vd->n; k++) {
		down[k] = dev_down(&ib.devs[vd->nic[k]]);
		if (!down[k])
			live->nic[live->n++] = vd->nic[k];
	}
	if (!live->n) {
		*live = *vd;
		return;
	}
	for (int k = 0; k < vd->n; k++)
		if (down[k])
			warn_down(&ib.devs[vd->nic[k]], "connect to", peer, live->n, vd->n);
}

int ib_subnet_pick_rails(const struct braid_vdev *vd, const struct braid_link *lk,
			 struct braid_vdev *use)
{
	char nets[BRAID_HANDLE_NICS * 48];
	struct braid_vdev live;

	pick_live(vd, lk->peer, &live);
	if (!lk->peer_nnics) { /* nothing to pair by */
		*use = live;
		return 0;
	}
	keys_str(lk->peer_nic_net, lk->peer_nnics, nets, sizeof(nets));
	use->n = 0;
	for (int k = 0; k < live.n; k++) {
		uint8_t key[8];
		int reach = 0;

		dev_key(&ib.devs[live.nic[k]], key);
		for (int p = 0; p < lk->peer_nnics && !reach; p++)
			reach = peer_nic_up(lk, p) && keys_reach(key, lk->peer_nic_net[p]);
		if (reach)
			use->nic[use->n++] = live.nic[k];
		else
			warn_left_out(&ib.devs[live.nic[k]], "connect to", lk->peer, nets);
	}
	if (use->n)
		return 0;
	BRAID_WARN("ib: connect to %s on %s:%d: none of the device's %d NIC(s) is on a subnet "
		   "of the peer's NICs (%s); check the fabric, or BRAID_IB_SUBNET_PREFIX_LEN "
		   "(%lld), or set BRAID_IB_SUBNET_AWARE_ROUTING=0 where the subnets are routed",
		   lk->peer, ib.devs[vd->nic[0]].name, ib.devs[vd->nic[0]].port, vd->n,
		   lk->peer_nnics ? nets : "none listed",
		   (long long)braid_param_int(BRAID_P_IB_SUBNET_PREFIX_LEN));
	return -ENETUNREACH;
}

void ib_subnet_pair_qps(const struct ib_comm *c, const struct braid_link *lk, uint8_t *peer_nic)
{
	int np = lk->peer_nnics ? lk->peer_nnics : 1;

	for (int i = 0; i < c->nqps; i++) {
		int a = c->qps[i].rail, cand[BRAID_HANDLE_NICS], n = 0;
		uint8_t key[8];

		dev_key(c->rails[a].dev, key);
		for (int p = 0; p < lk->peer_nnics; p++)
			if (peer_nic_up(lk, p) && keys_reach(key, lk->peer_nic_net[p]))
				cand[n++] = p;
		/* The peer's NIC i mod n when reachable: the pairing of a flat fabric, which
		 * is braid's pairing with routing off. Else the reachable ones in turn. */
		if (!n || (peer_nic_up(lk, i % np) && keys_reach(key, lk->peer_nic_net[i % np])))
			peer_nic[i] = (uint8_t)(i % np);
		else
			peer_nic[i] = (uint8_t)cand[(i / c->nrails) % n];
	}
}

void ib_subnet_listener_rails(const struct braid_vdev *vd, const struct ib_wire *hello,
			      const char *peer, struct braid_vdev *use, uint8_t *rail_of)
{
	uint8_t nets[BRAID_VDEV_MAX_NICS][8];
	char nets_str[BRAID_VDEV_MAX_NICS * 48];
	int slot[BRAID_VDEV_MAX_NICS];

	for (int k = 0; k < vd->n; k++)
		slot[k] = -1;
	use->n = 0;
	for (int i = 0; i < hello->nqps; i++) {
		int k = hello->qp_peer_rail[i];

		if (slot[k] < 0) {
			slot[k] = use->n;
			use->nic[use->n++] = vd->nic[k];
		}
		rail_of[i] = (uint8_t)slot[k];
	}
	for (int r = 0; r < hello->nrails; r++)
		ib_subnet_key(hello->rails[r].link_layer, hello->rails[r].gid, nets[r]);
	keys_str((const uint8_t(*)[8])nets, hello->nrails, nets_str, sizeof(nets_str));
	for (int k = 0; k < vd->n; k++) {
		const struct ib_dev *d = &ib.devs[vd->nic[k]];
		uint8_t key[8];
		int reach = 0;

		if (slot[k] >= 0)
			continue;
		if (dev_down(&ib.devs[vd->nic[k]])) {
			warn_down(d, "accept from", peer, use->n, vd->n);
			continue;
		}
		dev_key(d, key);
		for (int r = 0; r < hello->nrails && !reach; r++)
			reach = keys_reach(key, nets[r]);
		if (!reach)
			warn_left_out(d, "accept from", peer, nets_str);
		else
			BRAID_INFO(NCCL_NET,
				   "ib: comm from %s leaves %s:%d unused (the peer's %d "
				   "QP(s) go to other NICs)",
				   peer, d->name, d->port, hello->nqps);
	}
}
