// SPDX-License-Identifier: Apache-2.0
/*
 * Path type and distance between a GPU and a NIC, from their places in hwloc's tree.
 *
 * Let C be the lowest common ancestor of the two PCI devices. hwloc shows a PCIe switch
 * as its upstream port (a PCI bridge) with one downstream port (a PCI bridge) per slot,
 * so two devices in slots of one switch meet at its upstream port, one bridge below it
 * each; two devices behind one bridge or one switch port meet at that bridge.
 *
 *   PIX   C is a PCI bridge, and at most one bridge lies between C and each device
 *         (one switch, or one bridge), or C is one of the devices itself
 *   PXB   C is a PCI bridge, with more bridges below it (several switches)
 *   PHB   C is a host bridge (same CPU root complex)
 *   NODE  C is on the CPU side (different host bridges), and both host bridges hang
 *         under objects whose NUMA node is the same single node, or the machine has
 *         only one NUMA node
 *   SYS   otherwise: different NUMA nodes, sockets, or locality unknown (a device
 *         without PCI, or hwloc could not place it)
 *
 * The distance is the number of parent links on the tree path between them: it orders
 * NICs of the same path type (a NIC two switches away is farther than one switch away).
 */
#include <errno.h>
#include <stdlib.h>

#include "topo/topo_int.h"

#define MAX_DEPTH 256 /* far deeper than any real tree; bounds a corrupt one */

static int is_bridge(hwloc_obj_t o, hwloc_obj_bridge_type_t upstream)
{
	return o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == upstream;
}

/* ancestors[0] = o, then its parents up to the root; returns the count. */
static int ancestors(hwloc_obj_t o, hwloc_obj_t *out)
{
	int n = 0;

	for (; o && n < MAX_DEPTH; o = o->parent)
		out[n++] = o;
	return n;
}

static int same_single_numa(hwloc_topology_t h, hwloc_obj_t a, hwloc_obj_t b, int numa_nodes)
{
	hwloc_obj_t ca = hwloc_get_non_io_ancestor_obj(h, a);
	hwloc_obj_t cb = hwloc_get_non_io_ancestor_obj(h, b);

	if (numa_nodes == 1)
		return 1;
	if (!ca || !cb || !ca->nodeset || !cb->nodeset)
		return 0;
	return hwloc_bitmap_weight(ca->nodeset) == 1 &&
	       hwloc_bitmap_isequal(ca->nodeset, cb->nodeset);
}

static struct braid_topo_link classify(hwloc_topology_t h, hwloc_obj_t a, hwloc_obj_t b,
				       int numa_nodes)
{
	struct braid_topo_link l = { BRAID_TOPO_PATH_SYS, -1 };
	hwloc_obj_t *ca, *cb, c = NULL;
	int na, nb, ia = -1, ib = -1, i, j;

	if (!a || !b)
		return l;
	ca = malloc(2 * MAX_DEPTH * sizeof(*ca));
	if (!ca)
		return l;
	cb = ca + MAX_DEPTH;
	na = ancestors(a, ca);
	nb = ancestors(b, cb);
	for (j = 0; j < nb && !c; j++)
		for (i = 0; i < na; i++)
			if (ca[i] == cb[j]) {
				c = ca[i];
				ia = i;
				ib = j;
				break;
			}
	free(ca);
	if (!c)
		return l;
	l.distance = ia + ib;
	if (c->type == HWLOC_OBJ_PCI_DEVICE)
		l.path = BRAID_TOPO_PATH_PIX;
	else if (is_bridge(c, HWLOC_OBJ_BRIDGE_PCI))
		l.path = ia <= 2 && ib <= 2 ? BRAID_TOPO_PATH_PIX : BRAID_TOPO_PATH_PXB;
	else if (is_bridge(c, HWLOC_OBJ_BRIDGE_HOST))
		l.path = BRAID_TOPO_PATH_PHB;
	else if (same_single_numa(h, a, b, numa_nodes))
		l.path = BRAID_TOPO_PATH_NODE;
	else
		l.path = BRAID_TOPO_PATH_SYS;
	return l;
}

int braid_topo_classify(struct braid_topo *t, hwloc_topology_t h)
{
	int g, n, rc = 0;

	if (t->ngpus && t->nnics) {
		t->links = calloc((size_t)t->ngpus * (size_t)t->nnics, sizeof(*t->links));
		if (!t->links)
			rc = -ENOMEM;
	}
	for (g = 0; t->links && g < t->ngpus; g++)
		for (n = 0; n < t->nnics; n++)
			t->links[(size_t)g * (size_t)t->nnics + (size_t)n] =
				classify(h, t->gpus[g].pci, t->nics[n].pci, t->numa_nodes);
	/* The hwloc objects die with the hwloc topology: forget them. */
	for (g = 0; g < t->ngpus; g++)
		t->gpus[g].pci = NULL;
	for (n = 0; n < t->nnics; n++)
		t->nics[n].pci = NULL;
	return rc;
}
