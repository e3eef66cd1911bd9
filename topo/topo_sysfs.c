// SPDX-License-Identifier: Apache-2.0
/*
 * NICs hwloc leaves out. hwloc lists only OS devices it can attach to a PCI device, so a
 * soft-RoCE device (rxe0), a veth or a VM's paravirtual interface without PCI is not in
 * its topology, yet a backend may well use one. Read them from sysfs, on this machine
 * only (never for an XML topology: it describes another machine).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_int.h"

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -1;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	n = strcspn(buf, "\n");
	buf[n] = '\0';
	return 0;
}

/* Fill bus id, sysfs path and NUMA node when <dir>/device is a PCI device. */
static void pci_from_device_link(struct braid_topo_nic_info *info, const char *dir)
{
	char link[PATH_MAX + 200], real[PATH_MAX], node[32];
	const char *base;

	snprintf(link, sizeof(link), "%s/device", dir);
	if (!realpath(link, real))
		return;
	base = strrchr(real, '/');
	base = base ? base + 1 : real;
	if (braid_topo_parse_bus_id(base, info->bus_id) < 0) {
		info->bus_id[0] = '\0';
		return;
	}
	if (strlen(real) < sizeof(info->pci_path))
		snprintf(info->pci_path, sizeof(info->pci_path), "%s", real);
	snprintf(link, sizeof(link), "%s/device/numa_node", dir);
	if (!read_line(link, node, sizeof(node))) {
		int v = atoi(node);

		info->numa_node = v >= 0 ? v : -1;
	}
}

/* An interface hwloc did not list, on the PCI device of a NIC it did: not a new NIC. */
static struct braid_topo_nic_rec *nic_on_same_pci(struct braid_topo *t, const char *dir)
{
	struct braid_topo_nic_info info = { .numa_node = -1 };
	int i;

	pci_from_device_link(&info, dir);
	if (!info.bus_id[0])
		return NULL;
	for (i = 0; i < t->nnics; i++)
		if (!strcmp(t->nics[i].info.bus_id, info.bus_id))
			return &t->nics[i];
	return NULL;
}

static int add_sysfs_nic(struct braid_topo *t, const char *name, const char *dir,
			 enum braid_topo_nic_kind kind)
{
	struct braid_topo_nic_rec *n;
	void *arr;

	arr = realloc(t->nics, (size_t)(t->nnics + 1) * sizeof(*t->nics));
	if (!arr)
		return -ENOMEM;
	t->nics = arr;
	n = &t->nics[t->nnics++];
	memset(n, 0, sizeof(*n));
	snprintf(n->info.name, sizeof(n->info.name), "%s", name);
	n->info.kind = kind;
	n->info.rdma = kind != BRAID_TOPO_NIC_NETDEV;
	n->info.numa_node = -1;
	n->info.rail = -1;
	pci_from_device_link(&n->info, dir);
	return 0;
}

static int scan_class(struct braid_topo *t, const char *root, const char *cls)
{
	char dir[PATH_MAX], sub[PATH_MAX + 80], parent[64];
	struct dirent *de;
	DIR *d;
	int rc = 0;

	snprintf(dir, sizeof(dir), "%s/class/%s", root, cls);
	d = opendir(dir);
	if (!d)
		return 0; /* no such class here: nothing to add */
	while (!rc && (de = readdir(d))) {
		const char *name = de->d_name;
		struct braid_topo_nic_rec *n;

		if (name[0] == '.' || !strcmp(name, "lo") || strlen(name) >= 64)
			continue;
		if (braid_topo_find_nic(t, name))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, name);
		if (strcmp(cls, "net")) {
			rc = add_sysfs_nic(t, name, sub,
					   strncmp(name, "efa", 3) ? BRAID_TOPO_NIC_VERBS
								   : BRAID_TOPO_NIC_EFA);
			continue;
		}
		/* A soft-RoCE device names its interface in "parent": not a NIC of its own. */
		n = NULL;
		for (int i = 0; i < t->nnics && !n; i++) {
			char p[PATH_MAX + 200];

			if (!t->nics[i].info.rdma || t->nics[i].info.netdev[0])
				continue;
			snprintf(p, sizeof(p), "%s/class/infiniband/%s/parent", root,
				 t->nics[i].info.name);
			if (!read_line(p, parent, sizeof(parent)) && !strcmp(parent, name))
				n = &t->nics[i];
		}
		if (!n)
			n = nic_on_same_pci(t, sub);
		if (n && !n->info.netdev[0] && n->info.kind != BRAID_TOPO_NIC_NETDEV)
			snprintf(n->info.netdev, sizeof(n->info.netdev), "%s", name);
		else if (n && n->naliases < BRAID_TOPO_MAX_ALIASES)
			snprintf(n->aliases[n->naliases++], sizeof(n->aliases[0]), "%s", name);
		else if (!n)
			rc = add_sysfs_nic(t, name, sub, BRAID_TOPO_NIC_NETDEV);
	}
	closedir(d);
	return rc;
}

int braid_topo_scan_sysfs(struct braid_topo *t, const char *sysfs_root)
{
	int rc = scan_class(t, sysfs_root, "infiniband");

	return rc ? rc : scan_class(t, sysfs_root, "net");
}
