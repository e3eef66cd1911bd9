// SPDX-License-Identifier: Apache-2.0
/* The 128-byte connection handle: round trip, and refusal of anything else. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "plugin/handle.h"
#include "tests/unit/unit.h"

/* Bytes of the encoded handle that carry meaning (the rest is zero padding). */
#define WIRE_BYTES 112

static struct braid_handle sample_v4(void)
{
	struct braid_handle h = { .backend = 1, .dev = 3, .nonce = 0x1122334455667788ULL };
	struct sockaddr_in *sin = (struct sockaddr_in *)&h.addr;

	sin->sin_family = AF_INET;
	sin->sin_port = htons(40123);
	inet_pton(AF_INET, "192.0.2.7", &sin->sin_addr);
	h.nnics = 2;
	memcpy(h.nic_net[0], "\0\0\xff\xff\x0a\0\0\x01", 8);
	memcpy(h.nic_net[1], "\0\0\xff\xff\x0a\0\x01\x01", 8);
	h.nic_down = 0x2;
	return h;
}

static void round_trip_ipv4(void **state)
{
	struct braid_handle h = sample_v4(), out;
	char buf[NCCL_NET_HANDLE_MAXSIZE], why[128];

	(void)state;
	memset(buf, 0xa5, sizeof(buf));
	braid_handle_encode(&h, buf);
	assert_int_equal(braid_handle_decode(buf, &out, why, sizeof(why)), 0);
	assert_int_equal(out.backend, 1);
	assert_int_equal(out.dev, 3);
	assert_true(out.nonce == h.nonce);
	assert_memory_equal(&out.addr, &h.addr, sizeof(struct sockaddr_in));
	assert_int_equal(out.nnics, 2);
	assert_memory_equal(out.nic_net, h.nic_net, sizeof(h.nic_net));
	assert_int_equal(out.nic_down, 0x2);
	/* Nothing of the old buffer survives past the handle. */
	for (size_t i = WIRE_BYTES; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0);
}

/* More NICs than a device holds: refused, whatever the checksum says. */
static void too_many_nics_is_refused(void **state)
{
	struct braid_handle h = sample_v4(), out;
	char buf[NCCL_NET_HANDLE_MAXSIZE], why[128];

	(void)state;
	h.nnics = BRAID_HANDLE_NICS + 1;
	braid_handle_encode(&h, buf);
	assert_int_equal(braid_handle_decode(buf, &out, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "NICs"));
}

static void round_trip_ipv6(void **state)
{
	struct braid_handle h = { .backend = 2 }, out;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&h.addr;
	char buf[NCCL_NET_HANDLE_MAXSIZE], why[128];

	(void)state;
	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons(1);
	inet_pton(AF_INET6, "2001:db8::5", &s6->sin6_addr);
	braid_handle_encode(&h, buf);
	assert_int_equal(braid_handle_decode(buf, &out, why, sizeof(why)), 0);
	assert_memory_equal(&((struct sockaddr_in6 *)&out.addr)->sin6_addr, &s6->sin6_addr, 16);
}

static void garbage_is_refused(void **state)
{
	struct braid_handle out;
	char buf[NCCL_NET_HANDLE_MAXSIZE], why[128];

	(void)state;
	for (int seed = 0; seed < 1000; seed++) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (char)((i * 131 + (size_t)seed * 7919) >> 3);
		assert_int_equal(braid_handle_decode(buf, &out, why, sizeof(why)), -1);
	}
	memset(buf, 0, sizeof(buf));
	assert_int_equal(braid_handle_decode(buf, &out, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "not a braid connection handle"));
}

static void truncated_or_corrupted_is_refused(void **state)
{
	struct braid_handle h = sample_v4(), out;
	char buf[NCCL_NET_HANDLE_MAXSIZE], why[128];

	(void)state;
	/* Every truncation: the tail lost (zeroed), as a short copy would leave it. */
	for (size_t keep = 0; keep < WIRE_BYTES; keep++) {
		braid_handle_encode(&h, buf);
		memset(buf + keep, 0, sizeof(buf) - keep);
		assert_int_equal(braid_handle_decode(buf, &out, why, sizeof(why)), -1);
	}
	/* Every single-bit flip in the wire part. */
	for (size_t bit = 0; bit < WIRE_BYTES * 8; bit++) {
		braid_handle_encode(&h, buf);
		buf[bit / 8] ^= (char)(1 << (bit % 8));
		assert_int_equal(braid_handle_decode(buf, &out, why, sizeof(why)), -1);
	}
}

/* A handle from another braid version, intact: refused by name, not as corruption. */
static void other_version_is_named(void **state)
{
	struct braid_handle h = sample_v4(), out;
	unsigned char buf[NCCL_NET_HANDLE_MAXSIZE];
	char why[128];
	uint32_t check;

	(void)state;
	braid_handle_encode(&h, buf);
	buf[4] = 0;
	buf[5] = 1; /* version 1, network order, right after the 4-byte magic */
	check = htonl(braid_hash32(buf, WIRE_BYTES - 4));
	memcpy(buf + WIRE_BYTES - 4, &check, 4);
	assert_int_equal(braid_handle_decode(buf, &out, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "wire version 1"));
}

static void stage_belongs_to_this_process(void **state)
{
	struct braid_handle h = sample_v4(), out;
	char buf[NCCL_NET_HANDLE_MAXSIZE], why[128];
	int x;

	(void)state;
	braid_handle_encode(&h, buf);
	assert_null(braid_handle_stage_get(buf));
	braid_handle_stage_set(buf, &x);
	assert_ptr_equal(braid_handle_stage_get(buf), &x);
	/* The stage does not disturb the wire part. */
	assert_int_equal(braid_handle_decode(buf, &out, why, sizeof(why)), 0);
	braid_handle_stage_set(buf, NULL);
	assert_null(braid_handle_stage_get(buf));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip_ipv4),
		cmocka_unit_test(round_trip_ipv6),
		cmocka_unit_test(garbage_is_refused),
		cmocka_unit_test(too_many_nics_is_refused),
		cmocka_unit_test(truncated_or_corrupted_is_refused),
		cmocka_unit_test(other_version_is_named),
		cmocka_unit_test(stage_belongs_to_this_process),
	};

	return cmocka_run_group_tests_name("handle", tests, NULL, NULL);
}
