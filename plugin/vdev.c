// SPDX-License-Identifier: Apache-2.0
/*
 * The device table NCCL sees (vdev.h). Made under the init lock; makeVDevice appends
 * under vdev_lock while other communicators' threads may read, so an entry is written
 * whole before the count that publishes it is raised, and never changes afterwards.
 */
#include "plugin/vdev.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/log.h"
#include "plugin/net_ids.h"
#include "plugin/params.h"
#include "topo/topo.h"

/* NCCL makes at most one device per GPU and merge choice; 64 leaves room for both. */
#define VDEV_MAX 64

static pthread_mutex_t vdev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct braid_dev_props table[VDEV_MAX]; /* what NCCL sees; vdev = its vProps */
static struct braid_vdev nic_sets[VDEV_MAX];   /* the NICs a comm stripes over */
static int count;                              /* published with release; read with acquire */
static int initial;                            /* set at init */
static const struct braid_dev_props *nics;
static int nnics;
static int nics_per_comm; /* the backend's limit */

void braid_vdev_merge_props(const struct braid_dev_props *const *p, int n,
			    struct braid_dev_props *out)
{
	size_t used = 0;

	/* As NCCL's IB transport reports a merged device: the first NIC's properties, the
	 * NICs' names joined with '+' and the sum of their speeds. */
	*out = *p[0];
	out->name[0] = '\0';
	out->speed_mbps = 0;
	for (int i = 0; i < n; i++) {
		used += (size_t)snprintf(out->name + used, sizeof(out->name) - used, "%s%s",
					 i ? "+" : "", p[i]->name);
		if (used >= sizeof(out->name))
			used = sizeof(out->name) - 1;
		out->speed_mbps += p[i]->speed_mbps;
	}
	braid_net_ids_merge(p, n, &out->rail_id, &out->plane_id);
}

/* Append a device of the given NICs, shown to NCCL as made of `parts` (its own index when
 * NULL: NCCL then sees one NIC); the caller holds vdev_lock or is init. */
static int add_device(const struct braid_vdev *vd, const struct braid_vdev *parts)
{
	const struct braid_dev_props *p[BRAID_VDEV_MAX_NICS];
	int d = __atomic_load_n(&count, __ATOMIC_ACQUIRE);

	if (d >= VDEV_MAX)
		return -1;
	for (int i = 0; i < vd->n; i++)
		p[i] = &nics[vd->nic[i]];
	braid_vdev_merge_props(p, vd->n, &table[d]);
	table[d].vdev = parts ? *parts : (struct braid_vdev){ .n = 1, .nic = { d } };
	nic_sets[d] = *vd;
	__atomic_store_n(&count, d + 1, __ATOMIC_RELEASE);
	return d;
}

/* A NIC by name: "mlx5_0" (its first port) or "mlx5_0:2". -1 when none. */
static int find_nic(const struct braid_dev_props *phys, int nphys, const char *name, size_t len)
{
	for (int i = 0; i < nphys; i++) {
		char full[80];

		snprintf(full, sizeof(full), "%s:%d", phys[i].name, phys[i].port);
		if ((strlen(phys[i].name) == len && !strncmp(phys[i].name, name, len)) ||
		    (strlen(full) == len && !strncmp(full, name, len)))
			return i;
	}
	return -1;
}

int braid_vdev_parse_list(const char *text, const struct braid_dev_props *phys, int nphys,
			  struct braid_vdev *groups, int max, int *ngroups, char *why,
			  size_t whylen)
{
	const char *s = text;
	int g = 0;
	char used[256] = { 0 };

	while (*s) {
		struct braid_vdev vd = { 0 };

		if (g == max) {
			snprintf(why, whylen, "more than %d devices", max);
			return -1;
		}
		for (;;) {
			size_t len = strcspn(s, "+,");
			int nic = find_nic(phys, nphys, s, len);

			if (len == 0) {
				snprintf(why, whylen, "an empty name at \"%s\"", s);
				return -1;
			}
			if (nic < 0) {
				snprintf(why, whylen, "no NIC named \"%.*s\"", (int)len, s);
				return -1;
			}
			if (nic < (int)sizeof(used) && used[nic]) {
				snprintf(why, whylen, "\"%.*s\" is named twice", (int)len, s);
				return -1;
			}
			if (vd.n == BRAID_VDEV_MAX_NICS) {
				snprintf(why, whylen, "more than %d NICs in one device at \"%.*s\"",
					 BRAID_VDEV_MAX_NICS, (int)len, s);
				return -1;
			}
			if (nic < (int)sizeof(used))
				used[nic] = 1;
			vd.nic[vd.n++] = nic;
			s += len;
			if (*s != '+')
				break;
			s++;
		}
		groups[g++] = vd;
		if (*s == ',' && !*++s) {
			snprintf(why, whylen, "a trailing comma");
			return -1;
		}
	}
	*ngroups = g;
	return 0;
}

/* BRAID_MERGE=rail: the NICs of each GPU's rail (topo/) as one device, in rail order; NICs
 * in no rail stay alone. Returns the number of groups. */
static int rail_groups(const struct braid_dev_props *phys, int nphys, const struct braid_topo *topo,
		       int max_nics, struct braid_vdev *groups)
{
	int ng = 0, rails = topo ? braid_topo_rail_count(topo) : 0;
	char taken[VDEV_MAX] = { 0 };

	for (int r = 0; r < rails && ng < VDEV_MAX; r++) {
		struct braid_vdev vd = { 0 };

		for (int i = 0; i < nphys && i < VDEV_MAX; i++) {
			if (taken[i] || braid_topo_nic_rail(topo, phys[i].name) != r)
				continue;
			if (vd.n == max_nics) {
				groups[ng++] = vd;
				vd.n = 0;
			}
			vd.nic[vd.n++] = i;
			taken[i] = 1;
		}
		if (vd.n)
			groups[ng++] = vd;
	}
	for (int i = 0; i < nphys && i < VDEV_MAX && ng < VDEV_MAX; i++)
		if (!taken[i])
			groups[ng++] = (struct braid_vdev){ .n = 1, .nic = { i } };
	return ng;
}

int braid_vdev_setup(const struct braid_dev_props *phys, int nphys, const struct braid_topo *topo,
		     int api_version, int max_nics)
{
	const char *merge = braid_param_str(BRAID_P_MERGE);
	struct braid_vdev groups[VDEV_MAX];
	char why[160];
	int mode = 1, ng = 0;

	/* NCCL's vProps hold 4 devices before v12 (NCCL_NET_MAX_DEVS_PER_NIC), 8 from v12 */
	if (max_nics >
	    (api_version >= 12 ? NCCL_NET_MAX_DEVS_PER_NIC_V12 : NCCL_NET_MAX_DEVS_PER_NIC))
		max_nics = api_version >= 12 ? NCCL_NET_MAX_DEVS_PER_NIC_V12
					     : NCCL_NET_MAX_DEVS_PER_NIC;
	nics = phys;
	nnics = nphys;
	nics_per_comm = max_nics;
	__atomic_store_n(&count, 0, __ATOMIC_RELEASE);
	if (!strcmp(merge, "") || !strcmp(merge, "auto"))
		mode = api_version < 9 ? 2 : 1; /* v8 cannot ask: braid fuses each rail */
	else if (!strcmp(merge, "none"))
		mode = 1;
	else if (!strcmp(merge, "rail"))
		mode = 2;
	else
		mode = 3;
	if (mode > 1 && max_nics < 2) {
		if (mode == 3 || strcmp(merge, "rail") == 0)
			BRAID_WARN("BRAID_MERGE=%s: this backend does not stripe over several NICs "
				   "yet; each NIC stays its own device",
				   merge);
		mode = 1;
	}
	if (mode == 3) {
		if (braid_vdev_parse_list(merge, phys, nphys, groups, VDEV_MAX, &ng, why,
					  sizeof(why))) {
			BRAID_WARN("BRAID_MERGE=\"%s\": %s. Write it as mlx5_0+mlx5_1,mlx5_2+mlx5_3 "
				   "(NIC names as `braid topo` lists them), or use none or rail.",
				   merge, why);
			return -1;
		}
		for (int i = 0; i < ng; i++)
			if (groups[i].n > max_nics) {
				BRAID_WARN("BRAID_MERGE=\"%s\": device %d has %d NICs; a device "
					   "holds at most %d here (ncclNet v%d: 4 before v12, 8 "
					   "from v12)",
					   merge, i, groups[i].n, max_nics, api_version);
				return -1;
			}
	} else if (mode == 2) {
		ng = rail_groups(phys, nphys, topo, max_nics, groups);
	} else {
		for (int i = 0; i < nphys && i < VDEV_MAX; i++)
			groups[ng++] = (struct braid_vdev){ .n = 1, .nic = { i } };
	}
	for (int i = 0; i < ng; i++)
		add_device(&groups[i], NULL);
	initial = ng;
	BRAID_INFO(NCCL_INIT | NCCL_NET, "devices: %d from %d NIC(s), BRAID_MERGE=%s%s", ng, nphys,
		   merge[0] ? merge : "auto",
		   mode == 3 ? "" : (mode == 2 ? " (one device per rail)" : " (one per NIC)"));
	return 0;
}

void braid_vdev_teardown(void)
{
	__atomic_store_n(&count, 0, __ATOMIC_RELEASE);
	initial = 0;
	nics = NULL;
	nnics = 0;
}

int braid_vdev_initial_count(void)
{
	return initial;
}

int braid_vdev_count(void)
{
	return __atomic_load_n(&count, __ATOMIC_ACQUIRE);
}

const struct braid_vdev *braid_vdev_get(int d)
{
	return d >= 0 && d < braid_vdev_count() ? &nic_sets[d] : NULL;
}

const struct braid_dev_props *braid_vdev_props(int d)
{
	return d >= 0 && d < braid_vdev_count() ? &table[d] : NULL;
}

ncclResult_t braid_vdev_make(int *d, int ndevs, const int *devs)
{
	struct braid_vdev vd = { 0 }, parts = { 0 };
	int n = braid_vdev_count(), made;

	if (ndevs < 1 || ndevs > BRAID_VDEV_MAX_NICS) {
		BRAID_WARN("makeVDevice: %d devices; braid fuses 1 to %d (NCCL_NET_MAX_DEVS_PER_NIC)",
			   ndevs, BRAID_VDEV_MAX_NICS);
		return ncclInvalidUsage;
	}
	/* the listed devices' NICs, each once */
	for (int i = 0; i < ndevs; i++) {
		const struct braid_vdev *part = braid_vdev_get(devs[i]);

		if (!part || devs[i] >= initial) {
			BRAID_WARN("makeVDevice: device %d is not one of braid's %d devices",
				   devs[i], initial);
			return ncclInvalidUsage;
		}
		parts.nic[parts.n++] = devs[i];
		for (int k = 0; k < part->n; k++) {
			for (int j = 0; j < vd.n; j++)
				if (vd.nic[j] == part->nic[k]) {
					BRAID_WARN("makeVDevice: NIC %s is listed twice",
						   nics[part->nic[k]].name);
					return ncclInvalidUsage;
				}
			if (vd.n == BRAID_VDEV_MAX_NICS || vd.n == nics_per_comm) {
				BRAID_WARN("makeVDevice: the %d devices hold more than %d NICs, "
					   "the most one comm stripes over%s",
					   ndevs, vd.n,
					   nics_per_comm < 2
						   ? " (this backend does not stripe over "
						     "several NICs yet)"
						   : "");
				return ncclInvalidUsage;
			}
			vd.nic[vd.n++] = part->nic[k];
		}
	}
	if (ndevs == 1) {
		*d = devs[0]; /* nothing to fuse: the device itself, as NCCL asks of v8 */
		return ncclSuccess;
	}
	pthread_mutex_lock(&vdev_lock);
	made = add_device(&vd, &parts);
	pthread_mutex_unlock(&vdev_lock);
	if (made < 0) {
		BRAID_WARN("makeVDevice: already %d devices, the most braid keeps", n);
		return ncclInvalidUsage;
	}
	*d = made;
	BRAID_INFO(NCCL_INIT | NCCL_NET, "makeVDevice: device %d = %s, %d Mbps", made,
		   table[made].name, table[made].speed_mbps);
	return ncclSuccess;
}
