/* SPDX-License-Identifier: Apache-2.0 */
/*
 * net_ofi's wire protocol: what two peers' lanes send each other. Data goes in tagged
 * messages, control messages (announcements, weights) untagged, and each lane's address
 * travels in the handshake blob (plugin/link.c). Private to the backend, through ofi.h.
 *
 * Data protocol: receiver-driven, like NCCL's IB transport, over libfabric tag matching.
 * irecv cuts each buffer into one contiguous part per lane (plugin/stripe.c, by the weights
 * the sender measured and sent in its last weight message) and posts on every lane that
 * lane's parts, each tagged with the lane's id and the buffer's number (counted from 0 over
 * the connection, the same on every lane), then sends on every lane an announcement {group,
 * first buffer number, the lane's part sizes, NCCL tags}. A fused receiver leaves out of
 * its new groups a lane whose NIC is down on either side (ofi_live.c): such a group is
 * posted and announced on the other lanes only, and its announcements name them
 * (OFI_KIND_LANES). isend waits until the announcement of the current group is in on every
 * lane it names (a NULL request until then, as ncclIbIsend waits for its FIFO slot), takes
 * the first unused buffer with its NCCL tag (none: a NULL request, as NCCL's), truncates
 * the message once to the buffer's size (the sum of its parts, as ncclIbIsend does) and
 * sends on every lane the bytes of that lane's part, to exactly that buffer (0 bytes where
 * the message ends before the part; nothing on a lane whose part is empty and has no
 * receive posted: OFI_PART_POSTED). No message is ever larger than the buffer it matches,
 * so the provider never truncates (libfabric 1.17's shm never completes a truncated
 * receive; tcp's rxm breaks the connection every comm of the device shares). Announcements
 * land in buffers shared by the whole endpoint, sized from the provider's receive queue and
 * posted once (not 32 per comm: shm's queue held 32 comms' worth), and carry the
 * destination lane's token.
 */
#ifndef BRAID_OFI_WIRE_H
#define BRAID_OFI_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "plugin/backend.h"

/*
 * Tag: a receive buffer's number in bits 0..43, the destination comm's id in bits 44..59.
 * Bits 60..63 are left to the provider: it must offer at least 60 tag bits
 * (mem_tag_format). Announcements are untagged messages (fi_recv/fi_send), their
 * destination comm in the message: in a tagged queue, every data message matched past the
 * device's 256 posted announcement buffers first (about 2,000 instructions each in
 * libfabric 1.17's tcp;ofi_rxm), while the untagged queue holds only them.
 */
#define OFI_TAG_BUF_MASK ((1ULL << 44) - 1)
#define OFI_TAG_ID_SHIFT 44
#define OFI_TAG_BITS 60
#define OFI_MAX_COMM_IDS 65536 /* 16 bits; id 0 is never used, so 0 means "none" */
static inline uint64_t ofi_msg_tag(uint16_t id, uint64_t buf)
{
	return ((uint64_t)id << OFI_TAG_ID_SHIFT) | (buf & OFI_TAG_BUF_MASK);
}

/*
 * A part moved to another lane (net_ofi/ofi_move.c) travels there under a tag of its own:
 * bit 43 of the buffer field set, the part's own lane in bits 40..42, the buffer's number
 * in bits 0..39. A data tag reaches bit 43 only 2^43 buffers in, and two tags that agree
 * are 2^40 buffers apart, never both in flight (at most 32 x maxRecvs are).
 */
#define OFI_TAG_MOVED (1ULL << 43)
static inline uint64_t ofi_moved_tag(uint16_t id, int from, uint64_t buf)
{
	return ofi_msg_tag(id,
			   OFI_TAG_MOVED | (uint64_t)(from & 7) << 40 | (buf & ((1ULL << 40) - 1)));
}

/* 0 when the provider's tag format leaves braid OFI_TAG_BITS bits; -1 with why. */
int ofi_tag_format_ok(uint64_t mem_tag_format, char *why, size_t whylen);

/*
 * The control messages, untagged, landing in the device's shared buffers:
 * - OFI_MSG_ANNOUNCE, receiver -> sender: "group seq is posted: these buffers". Only the
 *   n used entries travel (40 bytes for one buffer), so it usually fits the inject size.
 * - OFI_MSG_WEIGHTS, sender -> receiver, lane 0 to lane 0 (fused comms only): "cut by
 *   these weights" (plugin/stripe.h wire form in `first`, n 0, seq counting the sender's
 *   weight messages so that an older one overtaking a newer is dropped). 24 bytes,
 *   always injected.
 */
/* An announced part has a receive posted on its lane, which a message must fill (maybe
 * with 0 bytes); a part without it has none, and the sender sends nothing there: a
 * fused comm's small message travels on one lane only. */
#define OFI_PART_POSTED 1u
#define OFI_MSG_ANNOUNCE 0u
#define OFI_MSG_WEIGHTS 1u
/* kind: OFI_MSG_* in bits 0..7; an announcement's group lanes in bits 8..15: the lanes of
 * the comm it has parts on (the receiver leaves out a NIC that is down, ofi_live.c), 0
 * for every lane. The group is announced on those lanes only. */
#define OFI_KIND_MSG(kind) ((kind)&0xffu)
#define OFI_KIND_LANES(kind) ((kind) >> 8 & 0xffu)
struct ofi_announce {
	uint16_t dst; /* the destination comm's lane id */
	uint16_t n;
	uint32_t token; /* the destination comm's: a message for an older comm is dropped */
	uint32_t seq;
	uint32_t kind;  /* OFI_MSG_* */
	uint64_t first; /* number of the group's first buffer; OFI_MSG_WEIGHTS: the weights */
	struct {
		uint64_t size;
		int32_t tag;
		uint32_t flags; /* OFI_PART_POSTED */
	} e[BRAID_MAX_RECVS];
};

static inline size_t ofi_announce_len(uint32_t n)
{
	return __builtin_offsetof(struct ofi_announce, e) +
	       (size_t)n * sizeof(((struct ofi_announce *)0)->e[0]);
}

/* A lane's address, sent to the peer over plugin/link.c: the provider's name, the
 * device's shared endpoint name, the lane's id and token. A comm's blob is a
 * struct ofi_blob_head and one of these per lane. */
struct ofi_blob {
	char provider[64];
	uint32_t name_len;
	uint8_t name[64];
	uint16_t comm_id;
	uint16_t pad;
	uint32_t token;
};

#define OFI_BLOB_MAGIC 0x6f666c34u /* "ofl4": announcements name their lanes (OFI_KIND_LANES) */
struct ofi_blob_head {
	uint32_t magic;
	uint32_t nlanes; /* NICs of the sender's device */
	uint32_t used;   /* bit k: NIC k has a lane in this comm, in order; one ofi_blob each */
};

/* What a valid peer blob says. */
struct ofi_peer_addr {
	uint8_t name[64];
	uint32_t name_len;
	uint16_t comm_id;
	uint32_t token;
};

/* The pure check of a peer's lane blob (no comm, no I/O): 0 and *out, or -EPROTO with the
 * reason in why. provider: the one this process runs. */
int ofi_blob_check(const void *blob, uint32_t len, const char *provider, struct ofi_peer_addr *out,
		   char *why, size_t whylen);

#endif
