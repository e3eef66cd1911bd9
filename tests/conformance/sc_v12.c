// SPDX-License-Identifier: Apache-2.0
/*
 * ncclNet v12 only: every member of ncclNetProperties_v12_t written by getProperties,
 * railId and planeId in range, and makeVDevice's limits (NCCL's 8, braid's 4) refused
 * with a WARN that names them.
 */
#include <stdio.h>
#include <string.h>

#include "tests/conformance/conf.h"

#define V12(s) ((const ncclNet_v12_t *)(s)->api->table)

struct member {
	const char *name;
	size_t off, size;
};

#define M(f)                                                      \
	{                                                         \
#f, offsetof(ncclNetProperties_v12_t, f),         \
			sizeof(((ncclNetProperties_v12_t *)0)->f) \
	}
#define DEV(i)                                                                                   \
	{                                                                                        \
		"vProps.devs[" #i "]", offsetof(ncclNetProperties_v12_t, vProps.devs) + (i)*4, 4 \
	}

/* Every member NCCL 2.30 reads (include/nccl_net_abi.h; the padding before maxP2pBytes is
 * not a member). vProps.devs past ndevs too: a reader may copy the whole array. */
static const struct member members[] = {
	M(name),
	M(pciPath),
	M(guid),
	M(ptrSupport),
	M(regIsGlobal),
	M(forceFlush),
	M(speed),
	M(port),
	M(latency),
	M(maxComms),
	M(maxRecvs),
	M(netDeviceType),
	M(netDeviceVersion),
	M(vProps.ndevs),
	DEV(0),
	DEV(1),
	DEV(2),
	DEV(3),
	DEV(4),
	DEV(5),
	DEV(6),
	DEV(7),
	M(maxP2pBytes),
	M(maxCollBytes),
	M(maxMultiRequestSize),
	M(railId),
	M(planeId),
};

#define GUARD 64

/* getProperties into a struct pre-filled with `fill`, GUARD bytes of it past the end. */
static ncclResult_t props_filled(struct side *s, int dev, unsigned char fill, unsigned char *buf)
{
	memset(buf, fill, sizeof(ncclNetProperties_v12_t) + GUARD);
	return V12(s)->getProperties(dev, (ncclNetProperties_v12_t *)buf);
}

static int check_device(struct side *s, int dev)
{
	unsigned char a[sizeof(ncclNetProperties_v12_t) + GUARD] __attribute__((aligned(8)));
	unsigned char b[sizeof(a)] __attribute__((aligned(8)));
	const ncclNetProperties_v12_t *p = (const void *)a;
	int rc = 0;

	conf_step(s, "getProperties(%d) over 0xa5 and over 0x5a", dev);
	if (props_filled(s, dev, 0xa5, a) != ncclSuccess || props_filled(s, dev, 0x5a, b))
		return conf_fail(s, "getProperties(%d) failed", dev);
	/* A member the plugin wrote holds the same bytes whatever was there before. */
	for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++)
		if (memcmp(a + members[i].off, b + members[i].off, members[i].size))
			rc = conf_fail(s, "dev %d: %s (offset %zu) not written", dev,
				       members[i].name, members[i].off);
	for (size_t i = sizeof(ncclNetProperties_v12_t); i < sizeof(a); i++)
		if (a[i] != 0xa5 || b[i] != 0x5a) {
			rc = conf_fail(s, "dev %d: byte %zu past the struct written", dev, i);
			break;
		}
	if (rc)
		return rc;
	conf_log(s, "dev %d '%s': every v12 member written; railId %d planeId %d vProps %d", dev,
		 p->name, p->railId, p->planeId, p->vProps.ndevs);
	if (p->railId < NCCL_NET_ID_UNDEF || p->planeId < NCCL_NET_ID_UNDEF)
		rc = conf_fail(s, "dev %d: railId %d / planeId %d below NCCL_NET_ID_UNDEF", dev,
			       p->railId, p->planeId);
	if (p->vProps.ndevs < 1 || p->vProps.ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V12)
		rc = conf_fail(s, "dev %d: vProps.ndevs %d", dev, p->vProps.ndevs);
	if (p->maxMultiRequestSize < 1)
		rc = conf_fail(s, "dev %d: maxMultiRequestSize %d", dev, p->maxMultiRequestSize);
	return rc;
}

/* A refused makeVDevice of devices 0, 1, ... (ndevs of them, as many as vProps holds):
 * ncclInvalidUsage, *d untouched, no device made, a WARN saying `want`. */
static int refused(struct side *s, int ndevs, int ndev, const char *want)
{
	ncclNetVDeviceProps_v12_t vp = { .ndevs = ndevs };
	char warn[1024];
	int d = -7, after = -1;
	ncclResult_t r;

	for (int i = 0; i < ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC_V12; i++)
		vp.devs[i] = i;
	conf_step(s, "makeVDevice(%d devices)", ndevs);
	r = V12(s)->makeVDevice(&d, &vp);
	netapi_last_warn(warn, sizeof(warn));
	if (r != ncclInvalidUsage || d != -7)
		return conf_fail(s, "returned %s (%d), device %d", netapi_result_str(r), r, d);
	if (!strstr(warn, want))
		return conf_fail(s, "WARN \"%s\" does not say \"%s\"", warn, want);
	if (s->api->devices(s->api, &after) != ncclSuccess || after != ndev)
		return conf_fail(s, "devices() went from %d to %d", ndev, after);
	conf_log(s, "%d devices refused: %s", ndevs, warn);
	return 0;
}

/* makeVDevice of devices 0..n-1 (n of 5..8, all there): a new device, the last, whose
 * vProps lists exactly them and whose every v12 member is written. *ndev grows by one. */
static int fused(struct side *s, int n, int *ndev)
{
	ncclNetVDeviceProps_v12_t vp = { .ndevs = n };
	unsigned char a[sizeof(ncclNetProperties_v12_t) + GUARD] __attribute__((aligned(8)));
	const ncclNetProperties_v12_t *p = (const void *)a;
	int d = -7, after = -1;
	ncclResult_t r;

	for (int i = 0; i < n; i++)
		vp.devs[i] = i;
	conf_step(s, "makeVDevice(devices 0..%d)", n - 1);
	r = V12(s)->makeVDevice(&d, &vp);
	if (r != ncclSuccess)
		return conf_fail(s, "makeVDevice of %d devices returned %s (%d)", n,
				 netapi_result_str(r), r);
	if (s->api->devices(s->api, &after) != ncclSuccess || after != *ndev + 1 || d != *ndev)
		return conf_fail(s, "device %d made, devices() %d, want %d and %d", d, after, *ndev,
				 *ndev + 1);
	*ndev = after;
	if (check_device(s, d) || props_filled(s, d, 0xa5, a) != ncclSuccess)
		return conf_fail(s, "device %d's properties", d);
	if (p->vProps.ndevs != n)
		return conf_fail(s, "device %d: vProps.ndevs %d, want %d", d, p->vProps.ndevs, n);
	for (int i = 0; i < n; i++)
		if (p->vProps.devs[i] != i)
			return conf_fail(s, "device %d: vProps.devs[%d] = %d, want %d", d, i,
					 p->vProps.devs[i], i);
	conf_log(s, "%d devices fused into device %d '%s'", n, d, p->name);
	return 0;
}

int sc_props_v12(struct side *s)
{
	int ndev = 0, rc = 0;

	if (s->api->devices(s->api, &ndev) != ncclSuccess || ndev < 1)
		return conf_fail(s, "devices() failed");
	for (int d = 0; d < ndev; d++)
		rc |= check_device(s, d);
	/* NCCL 2.30 fuses up to 8 under v12 (4 under v9 to v11): 5 to 8 distinct devices make
	 * one whose vProps lists them, where there are that many; else the WARN names the
	 * first one missing. */
	for (int n = 5, phys = ndev; n <= 8 && !rc; n++) {
		if (phys >= n) {
			rc |= fused(s, n, &ndev);
		} else {
			char want[96];

			snprintf(want, sizeof(want), "device %d is not one of braid's %d devices",
				 phys, phys);
			rc |= refused(s, n, ndev, want);
		}
	}
	rc |= refused(s, 9, ndev, "9 devices; ncclNet v12 fuses 1 to 8");
	rc |= refused(s, 0, ndev, "0 devices; ncclNet v12 fuses 1 to 8");
	return rc;
}
