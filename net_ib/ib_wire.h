/* SPDX-License-Identifier: Apache-2.0 */
/*
 * braid's verbs wire description, the blob each side of an ib comm sends the other over
 * plugin/link.c (net_ib/ib_conn.c). In a header of its own so that tests/fuzz can build
 * valid ones and feed any bytes to ib_wire_check().
 */
#ifndef BRAID_IB_WIRE_H
#define BRAID_IB_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "net_ib/ib.h"

#define IB_WIRE_MAGIC 0x62726962u /* "brib" */
/* 7: failover (each side's offer, the sender's FIFO key per rail, the receiver's
 * landed-chunk words); 6: each QP's rail, and the listener's NIC each connector QP goes to (subnet-aware
 * pairing, ib_subnet.c); 5: the receiver's adaptive-routing records; 4: the sender's traffic class and service
 * level; 3: several NICs per comm; 2: the nonce moved to link.c */
#define IB_WIRE_VERSION 7

struct ib_wire_rail {
	uint8_t link_layer;
	uint8_t mtu;
	uint8_t port;
	uint8_t pad;
	uint16_t lid;
	uint16_t gid_index;
	uint8_t gid[16];
	char dev[40];
} __attribute__((packed));

struct ib_wire {
	uint32_t magic;
	uint16_t version;
	uint16_t len; /* sizeof(struct ib_wire) */
	uint8_t nqps;
	uint8_t nrails;
	uint16_t pkey;      /* the P_Key of the sender's QPs (BRAID_IB_PKEY); 0: unknown */
	uint8_t tc;         /* the connecting side's traffic class and service level, which */
	uint8_t sl;         /* the accepting side's QPs take, as NCCL's receiver takes them */
	uint16_t ece_mask;  /* QPs whose ece[] entry holds ECE */
	uint64_t fifo_addr; /* on the sender's rail 0, where the receiver's QP 0 writes */
	uint32_t fifo_rkey;
	uint64_t ar_addr; /* accepting side: its struct ib_ar_rec[IB_RING]; 0: none */
	uint32_t ar_rkey[BRAID_VDEV_MAX_NICS]; /* of ar_addr, per rail of the accepting side */
	uint32_t qpn[IB_MAX_QPS];
	uint32_t psn[IB_MAX_QPS];
	uint8_t qp_rail[IB_MAX_QPS]; /* the rail (index into rails[]) of the sender's QP i */
	/* connecting side: the listener's NIC (its handle's order) that QP i goes to, where
	 * the listener puts its QP i */
	uint8_t qp_peer_rail[IB_MAX_QPS];
	struct {
		uint32_t vendor_id, options, comp_mask;
	} ece[IB_MAX_QPS]; /* connecting side: offered; accepting side: accepted */
	struct ib_wire_rail rails[BRAID_VDEV_MAX_NICS];
	/* failover (net_ib/ib_failover.c): 1 when this side offers it */
	uint8_t failover;
	uint8_t pad2[3];
	uint32_t fifo_rkeys[BRAID_VDEV_MAX_NICS]; /* connecting side: fifo_addr, per rail */
	uint64_t done_addr; /* accepting side: its landed-chunk words, [IB_RING][MAX_RECVS] */
	uint32_t done_rkey[BRAID_VDEV_MAX_NICS]; /* of done_addr, per rail */
} __attribute__((packed));

/*
 * The pure check of a peer's description (no comm, no I/O): 0 when usable, else -EPROTO
 * with the reason in why. local: our port (its link layer, name and port number);
 * want_nqps: the QP count we asked for, 0 on the listener (the hello picks it).
 */
int ib_wire_check(const void *payload, uint32_t len, int want_nqps, const struct ib_dev *local,
		  char *why, size_t whylen);

#endif
