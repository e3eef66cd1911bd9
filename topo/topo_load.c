// SPDX-License-Identifier: Apache-2.0
/*
 * Load: hwloc with I/O devices, from an XML file or this machine, then the steps of
 * topo_int.h. The hwloc topology is destroyed before returning, so a braid_topo holds
 * no hwloc state and queries never call into hwloc.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topo/topo_int.h"

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Check the file ourselves first: hwloc's own failure says little ("Invalid argument"). */
static int check_xml_file(const char *xml, const char *origin, char *err, size_t errlen)
{
	struct stat st;

	if (!*xml) {
		set_err(err, errlen, "empty topology XML file name%s", origin);
		return -EINVAL;
	}
	if (stat(xml, &st) < 0) {
		int e = errno;

		set_err(err, errlen, "cannot open topology XML %s%s: %s", xml, origin, strerror(e));
		return -e;
	}
	if (S_ISDIR(st.st_mode)) {
		set_err(err, errlen, "topology XML %s%s is a directory, not a file", xml, origin);
		return -EISDIR;
	}
	if (access(xml, R_OK) < 0) {
		int e = errno;

		set_err(err, errlen, "cannot read topology XML %s%s: %s", xml, origin, strerror(e));
		return -e;
	}
	if (st.st_size == 0) {
		set_err(err, errlen, "topology XML %s%s is empty", xml, origin);
		return -EINVAL;
	}
	return 0;
}

static const char *const skip_components[] = { "opencl", "gl", "rsmi", "levelzero", "pci" };

static hwloc_topology_t open_hwloc(const char *xml, const char *origin, char *err, size_t errlen)
{
	hwloc_topology_t h;

	if (hwloc_topology_init(&h) < 0) {
		set_err(err, errlen, "hwloc_topology_init failed: %s", strerror(errno));
		return NULL;
	}
	/* Keep PCI devices, bridges on their way and OS devices (what lstopo shows). */
	hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	/*
	 * Skip components braid does not need. opencl, gl, rsmi and levelzero only name
	 * other vendors' GPUs or displays, and would load their runtimes into NCCL's
	 * process. pci (libpciaccess) only adds vendor and device names from pci.ids, since
	 * the linux component reads PCI devices and link speeds from sysfs itself, and
	 * libpciaccess leaks on every load (which fails LeakSanitizer runs of every test
	 * that loads this machine). CUDA and NVML, which name our GPUs, stay.
	 */
	for (size_t i = 0; i < sizeof(skip_components) / sizeof(skip_components[0]); i++)
		hwloc_topology_set_components(h, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
					      skip_components[i]);
	if (xml && hwloc_topology_set_xml(h, xml) < 0) {
		set_err(err, errlen,
			"cannot load topology XML %s%s: not a valid hwloc XML topology "
			"(check it with `lstopo -i %s`)",
			xml, origin, xml);
		hwloc_topology_destroy(h);
		return NULL;
	}
	if (hwloc_topology_load(h) < 0) {
		if (xml)
			set_err(err, errlen,
				"cannot load topology XML %s%s: not a valid hwloc XML topology "
				"(hwloc: %s; check it with `lstopo -i %s`)",
				xml, origin, strerror(errno), xml);
		else
			set_err(err, errlen, "hwloc could not discover this machine: %s",
				strerror(errno));
		hwloc_topology_destroy(h);
		return NULL;
	}
	return h;
}

struct braid_topo *braid_topo_load(const char *xml_file, char *err, size_t errlen)
{
	const char *xml = xml_file, *origin = "";
	struct braid_topo *t;
	hwloc_topology_t h;
	int rc;

	if (err && errlen)
		err[0] = '\0';
	/* The library's major ABI must be the one we were compiled against. */
	if ((hwloc_get_api_version() >> 16) != (HWLOC_API_VERSION >> 16)) {
		set_err(err, errlen, "hwloc library API %#x does not match the headers (%#x)",
			hwloc_get_api_version(), HWLOC_API_VERSION);
		return NULL;
	}
	if (!xml) {
		xml = getenv("HWLOC_XMLFILE");
		origin = " (from $HWLOC_XMLFILE)";
	}
	if (xml && check_xml_file(xml, origin, err, errlen) < 0)
		return NULL;

	t = calloc(1, sizeof(*t));
	if (!t) {
		set_err(err, errlen, "out of memory");
		return NULL;
	}
	h = open_hwloc(xml, origin, err, errlen);
	if (!h) {
		free(t);
		return NULL;
	}
	snprintf(t->source, sizeof(t->source), "%s", xml ? xml : "this machine");
	t->thissystem = !xml && hwloc_topology_is_thissystem(h);
	t->numa_nodes = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);

	rc = braid_topo_scan_devices(t, h);
	if (!rc && t->thissystem)
		rc = braid_topo_scan_sysfs(t, "/sys");
	if (!rc) {
		braid_topo_sort(t);
		rc = braid_topo_classify(t, h);
	}
	hwloc_topology_destroy(h);
	if (!rc)
		rc = braid_topo_build_rails(t);
	if (!rc)
		rc = braid_topo_build_warnings(t);
	if (rc) {
		set_err(err, errlen, "cannot build the topology of %s: %s", t->source,
			strerror(-rc));
		braid_topo_free(t);
		return NULL;
	}
	return t;
}

void braid_topo_free(struct braid_topo *t)
{
	int i;

	if (!t)
		return;
	for (i = 0; i < t->nwarns; i++)
		free(t->warns[i].text);
	for (i = 0; i < t->nnotes; i++)
		free(t->notes[i]);
	free(t->warns);
	free(t->notes);
	free(t->links);
	free(t->gpus);
	free(t->nics);
	free(t);
}
