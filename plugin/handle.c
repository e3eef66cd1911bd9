// SPDX-License-Identifier: Apache-2.0
#include "plugin/handle.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Fixed little-endian-agnostic wire layout: explicit byte order, no struct padding. */
struct wire_handle {
	uint32_t magic;
	uint16_t version;
	uint8_t backend;
	uint8_t family;
	uint16_t port;
	uint16_t reserved;
	uint32_t dev;
	uint64_t nonce;
	uint8_t addr[16];
	uint8_t nnics;
	uint8_t nic_down;
	uint8_t pad[2];
	uint8_t nic_net[BRAID_HANDLE_NICS][8];
	uint32_t check;
} __attribute__((packed));

_Static_assert(sizeof(struct wire_handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle too large");

uint32_t braid_hash32(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 16777619u;
	}
	return h;
}

void braid_handle_encode(const struct braid_handle *h, void *out)
{
	struct wire_handle w;

	memset(&w, 0, sizeof(w));
	w.magic = htonl(BRAID_HANDLE_MAGIC);
	w.version = htons(BRAID_WIRE_VERSION);
	w.backend = h->backend;
	w.dev = htonl(h->dev);
	w.nonce = h->nonce;
	w.nnics = h->nnics;
	w.nic_down = h->nic_down;
	memcpy(w.nic_net, h->nic_net, sizeof(w.nic_net));
	if (h->addr.ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)&h->addr;

		w.family = 4;
		w.port = sin->sin_port;
		memcpy(w.addr, &sin->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&h->addr;

		w.family = 6;
		w.port = sin6->sin6_port;
		memcpy(w.addr, &sin6->sin6_addr, 16);
	}
	w.check = htonl(braid_hash32(&w, offsetof(struct wire_handle, check)));
	memset(out, 0, NCCL_NET_HANDLE_MAXSIZE);
	memcpy(out, &w, sizeof(w));
}

int braid_handle_decode(const void *in, struct braid_handle *h, char *why, size_t whylen)
{
	struct wire_handle w;

	memcpy(&w, in, sizeof(w));
	memset(h, 0, sizeof(*h));
	if (ntohl(w.magic) != BRAID_HANDLE_MAGIC) {
		snprintf(why, whylen, "not a braid connection handle (magic 0x%08x)",
			 ntohl(w.magic));
		return -1;
	}
	if (ntohs(w.version) != BRAID_WIRE_VERSION) {
		snprintf(why, whylen, "handle from braid wire version %d, this braid speaks %d",
			 ntohs(w.version), BRAID_WIRE_VERSION);
		return -1;
	}
	if (ntohl(w.check) != braid_hash32(&w, offsetof(struct wire_handle, check))) {
		snprintf(why, whylen, "handle checksum mismatch (corrupted or truncated)");
		return -1;
	}
	h->backend = w.backend;
	h->dev = ntohl(w.dev);
	h->nonce = w.nonce;
	if (w.nnics > BRAID_HANDLE_NICS) {
		snprintf(why, whylen, "handle lists %u NICs, at most %d", w.nnics,
			 BRAID_HANDLE_NICS);
		return -1;
	}
	h->nnics = w.nnics;
	h->nic_down = w.nic_down;
	memcpy(h->nic_net, w.nic_net, sizeof(h->nic_net));
	if (w.family == 4) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&h->addr;

		sin->sin_family = AF_INET;
		sin->sin_port = w.port;
		memcpy(&sin->sin_addr, w.addr, 4);
	} else if (w.family == 6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&h->addr;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = w.port;
		memcpy(&sin6->sin6_addr, w.addr, 16);
	} else {
		snprintf(why, whylen, "handle has unknown address family %u", w.family);
		return -1;
	}
	return 0;
}

#define STAGE_MAGIC 0x73746765u /* "stge" */
#define STAGE_OFFSET 112

struct stage {
	uint32_t magic;
	int32_t pid;
	void *comm;
};

_Static_assert(sizeof(struct wire_handle) <= STAGE_OFFSET, "stage overlaps the wire handle");
_Static_assert(STAGE_OFFSET + sizeof(struct stage) <= NCCL_NET_HANDLE_MAXSIZE, "stage too big");

void *braid_handle_stage_get(const void *handle)
{
	struct stage s;

	memcpy(&s, (const char *)handle + STAGE_OFFSET, sizeof(s));
	return s.magic == STAGE_MAGIC && s.pid == (int32_t)getpid() ? s.comm : NULL;
}

void braid_handle_stage_set(void *handle, void *comm)
{
	struct stage s = { .magic = comm ? STAGE_MAGIC : 0,
			   .pid = (int32_t)getpid(),
			   .comm = comm };

	memcpy((char *)handle + STAGE_OFFSET, &s, sizeof(s));
}
