// SPDX-License-Identifier: Apache-2.0
/* Read-only lookups over a loaded topology. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "topo/topo_int.h"

int braid_topo_parse_bus_id(const char *s, char out[16])
{
	unsigned dom = 0, bus, dev, fn;
	int used = 0;

	if (!s)
		return -EINVAL;
	/* "dddd:bb:dd.f" or "bb:dd.f"; hex digits only, nothing after. */
	for (const char *p = s; *p; p++)
		if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
			return -EINVAL;
	if (sscanf(s, "%4x:%2x:%2x.%1x%n", &dom, &bus, &dev, &fn, &used) == 4 && !s[used]) {
		/* full form */
	} else if (dom = 0, used = 0,
		   sscanf(s, "%2x:%2x.%1x%n", &bus, &dev, &fn, &used) == 3 && !s[used]) {
		/* short form, domain 0 */
	} else {
		return -EINVAL;
	}
	if (dev > 0x1f || fn > 7)
		return -EINVAL;
	snprintf(out, 16, "%04x:%02x:%02x.%01x", dom, bus, dev, fn);
	return 0;
}

static int nic_has_name(const struct braid_topo_nic_rec *n, const char *name)
{
	int i;

	if (!strcmp(n->info.name, name) || (n->info.netdev[0] && !strcmp(n->info.netdev, name)))
		return 1;
	for (i = 0; i < n->naliases; i++)
		if (!strcmp(n->aliases[i], name))
			return 1;
	return 0;
}

const struct braid_topo_nic_rec *braid_topo_find_nic(const struct braid_topo *t, const char *name)
{
	char bus[16], base[64];
	const char *dash;
	int i;

	if (!t || !name || !*name)
		return NULL;
	for (i = 0; i < t->nnics; i++)
		if (nic_has_name(&t->nics[i], name))
			return &t->nics[i];
	if (!braid_topo_parse_bus_id(name, bus)) {
		for (i = 0; i < t->nnics; i++)
			if (!strcmp(t->nics[i].info.bus_id, bus))
				return &t->nics[i];
		return NULL;
	}
	/* libfabric names domains "<device>-rdm", "<device>-dgrm": try the device. */
	dash = strrchr(name, '-');
	if (dash && dash != name && (size_t)(dash - name) < sizeof(base)) {
		snprintf(base, sizeof(base), "%.*s", (int)(dash - name), name);
		for (i = 0; i < t->nnics; i++)
			if (nic_has_name(&t->nics[i], base))
				return &t->nics[i];
	}
	return NULL;
}

int braid_topo_nic_place(const struct braid_topo *t, const char *name,
			 struct braid_topo_nic_place *out)
{
	const struct braid_topo_nic_rec *n;

	if (!t || !name || !out)
		return -EINVAL;
	n = braid_topo_find_nic(t, name);
	if (!n)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	snprintf(out->bus_id, sizeof(out->bus_id), "%s", n->info.bus_id);
	snprintf(out->pci_path, sizeof(out->pci_path), "%s", n->info.pci_path);
	out->numa_node = n->info.numa_node;
	out->rail = n->info.rail;
	return 0;
}

int braid_topo_rail_count(const struct braid_topo *t)
{
	return t ? t->nrails : 0;
}

int braid_topo_rail_nics(const struct braid_topo *t, int rail, const char **names, int max)
{
	int i, count = 0;

	if (!t || rail < 0 || rail >= t->nrails)
		return -ENOENT;
	for (i = 0; i < t->nnics; i++) {
		if (t->nics[i].info.rail != rail)
			continue;
		if (names && count < max)
			names[count] = t->nics[i].info.name;
		count++;
	}
	return count;
}

int braid_topo_nic_rail(const struct braid_topo *t, const char *name)
{
	const struct braid_topo_nic_rec *n = braid_topo_find_nic(t, name);

	return n ? n->info.rail : -ENOENT;
}

int braid_topo_gpu_rail(const struct braid_topo *t, const char *bus_id)
{
	char bus[16];
	int i;

	if (!t || braid_topo_parse_bus_id(bus_id, bus) < 0)
		return -ENOENT;
	for (i = 0; i < t->ngpus; i++)
		if (!strcmp(t->gpus[i].info.bus_id, bus))
			return t->gpus[i].info.rail;
	return -ENOENT;
}

int braid_topo_cuda_rail(const struct braid_topo *t, int cuda_index)
{
	int i;

	if (!t || cuda_index < 0)
		return -ENOENT;
	for (i = 0; i < t->ngpus; i++)
		if (t->gpus[i].info.cuda_index == cuda_index)
			return t->gpus[i].info.rail;
	return -ENOENT;
}

int braid_topo_gpu_count(const struct braid_topo *t)
{
	return t ? t->ngpus : 0;
}

int braid_topo_nic_count(const struct braid_topo *t)
{
	return t ? t->nnics : 0;
}

int braid_topo_gpu_info(const struct braid_topo *t, int gpu, struct braid_topo_gpu_info *out)
{
	if (!t || !out || gpu < 0 || gpu >= t->ngpus)
		return -ENOENT;
	*out = t->gpus[gpu].info;
	return 0;
}

int braid_topo_nic_info(const struct braid_topo *t, int nic, struct braid_topo_nic_info *out)
{
	if (!t || !out || nic < 0 || nic >= t->nnics)
		return -ENOENT;
	*out = t->nics[nic].info;
	return 0;
}

int braid_topo_path(const struct braid_topo *t, int gpu, int nic, enum braid_topo_path *path,
		    int *distance)
{
	const struct braid_topo_link *l;

	if (!t || gpu < 0 || gpu >= t->ngpus || nic < 0 || nic >= t->nnics)
		return -ENOENT;
	l = braid_topo_link_at(t, gpu, nic);
	if (path)
		*path = l->path;
	if (distance)
		*distance = l->distance;
	return 0;
}

const char *braid_topo_path_name(enum braid_topo_path path)
{
	switch (path) {
	case BRAID_TOPO_PATH_PIX: return "PIX";
	case BRAID_TOPO_PATH_PXB: return "PXB";
	case BRAID_TOPO_PATH_PHB: return "PHB";
	case BRAID_TOPO_PATH_NODE: return "NODE";
	case BRAID_TOPO_PATH_SYS: return "SYS";
	}
	return "?";
}

const char *braid_topo_nic_kind_name(enum braid_topo_nic_kind k)
{
	switch (k) {
	case BRAID_TOPO_NIC_VERBS: return "verbs";
	case BRAID_TOPO_NIC_EFA: return "EFA";
	case BRAID_TOPO_NIC_NETDEV: return "netdev";
	}
	return "?";
}

int braid_topo_warning_count(const struct braid_topo *t)
{
	return t ? t->nwarns : 0;
}

int braid_topo_warning(const struct braid_topo *t, int i, struct braid_topo_warning *out)
{
	const struct braid_topo_warn_rec *w;

	if (!t || !out || i < 0 || i >= t->nwarns)
		return -ENOENT;
	w = &t->warns[i];
	out->code = w->code;
	out->gpu = w->gpu;
	out->nic = w->nic;
	out->rail = w->rail;
	out->text = w->text;
	return 0;
}

int braid_topo_note_count(const struct braid_topo *t)
{
	return t ? t->nnotes : 0;
}

const char *braid_topo_note(const struct braid_topo *t, int i)
{
	return t && i >= 0 && i < t->nnotes ? t->notes[i] : NULL;
}

const char *braid_topo_source(const struct braid_topo *t)
{
	return t ? t->source : "";
}
