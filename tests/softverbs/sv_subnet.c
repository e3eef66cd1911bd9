// SPDX-License-Identifier: MIT
/*
 * softverbs: IPv4 subnets for RoCE ports, so that a test can build a rail-optimised fabric
 * (each rail its own subnet, no route between them) on one machine.
 *
 * SOFTVERBS_SUBNETS=DEV:A.B.C.D/LEN[,DEV:...] gives every RoCE port of DEV the address
 * A.B.C.D (its IPv4-mapped GIDs, indices 2 and 3) on the subnet A.B.C.D/LEN (LEN 1 to 32,
 * 24 when left out). A port so placed reaches only addresses in its subnet: a QP whose
 * destination GID is outside it, or whose requester is, never delivers a byte; its
 * sends end with IBV_WC_RETRY_EXC_ERR after the retry budget, as on a fabric without a
 * route. A port not named keeps the host's address and reaches everything, as before.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/softverbs/sv_internal.h"

/* A GID's IPv4 address (network order) when it is IPv4-mapped (::ffff:a.b.c.d), else 0. */
uint32_t sv_gid_ipv4(const uint8_t *gid)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	uint32_t a;

	if (memcmp(gid, mapped, sizeof(mapped)))
		return 0;
	memcpy(&a, gid + 12, 4);
	return a;
}

bool sv_subnet_reaches(const struct sv_port *p, uint32_t ipv4)
{
	uint32_t mask;

	if (!p->subnet_len || !ipv4)
		return true; /* no subnet configured, or not an IPv4 peer: as before */
	mask = htonl(p->subnet_len >= 32 ? 0xffffffffu : ~(0xffffffffu >> p->subnet_len));
	return (p->ipv4 & mask) == (ipv4 & mask);
}

static void place_port(struct sv_port *p, uint32_t addr, int len)
{
	p->ipv4 = addr;
	p->subnet_len = len;
	for (int i = 0; i < p->ngids; i++)
		if (sv_gid_ipv4(p->gid[i].raw))
			memcpy(&p->gid[i].raw[12], &addr, 4);
}

void sv_subnets_load(struct sv_device *devs, int ndevs)
{
	static const char var[] = "SOFTVERBS_SUBNETS";
	const char *v = getenv(var);
	char buf[512], *save = NULL, *tok;

	if (!v || !*v)
		return;
	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':'), *slash, *end = NULL;
		struct in_addr addr;
		long len = 24;
		int d;

		if (!colon) {
			sv_log("%s: bad entry '%s' (want DEV:A.B.C.D[/LEN]): ignored", var, tok);
			continue;
		}
		*colon = '\0';
		slash = strchr(colon + 1, '/');
		if (slash) {
			*slash = '\0';
			len = strtol(slash + 1, &end, 10);
		}
		for (d = 0; d < ndevs && strcmp(devs[d].ibdev.name, tok); d++)
			;
		if (d == ndevs || !devs[d].roce || inet_pton(AF_INET, colon + 1, &addr) != 1 ||
		    (end && *end) || len < 1 || len > 32) {
			sv_log("%s: bad entry for '%s' (not a RoCE device of SOFTVERBS_DEVICES, "
			       "not an IPv4 address, or a prefix length outside 1..32): ignored",
			       var, tok);
			continue;
		}
		for (int p = 0; p < devs[d].nports; p++)
			place_port(&devs[d].port[p], addr.s_addr, (int)len);
		sv_debug("device %s: subnet %s/%ld", tok, colon + 1, len);
	}
}
