// SPDX-License-Identifier: Apache-2.0
/*
 * `braid doctor`: the lab checklist of an RDMA host, automated. Each check says PASS,
 * WARN, FAIL or INFO (skipped or not exposed, with why) with one line of message and one
 * line of fix; --json for a program. Exit status 0 when nothing warned or failed, 1 with
 * warnings, 2 with failures (3 for a usage error).
 *
 * Host state is read from files under a root directory (--root DIR, else $BRAID_FSROOT,
 * else /), so tests and support engineers can describe a host with a tree of small files
 * (tests/doctor/hosts/). What is not a file (libraries, the plugin NCCL would load, the
 * environment, netlink DCB) is taken from the running process and machine.
 *
 * This file: the options and the output. The checks: tools/doctor_lib.c (libraries,
 * plugin resolution, environment), tools/doctor_rdma.c (devices, memlock, ports, GIDs,
 * ECN, PFC), tools/doctor_gpu.c (GPUDirect, topology, ACS, IOMMU); what they share:
 * tools/doctor_base.c.
 * docs/doctor.md: every check, what it reads and its rules.
 */
#include "tools/doctor.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cmds.h"
#include "topo/topo.h"

#define DOCTOR_SCHEMA 1 /* the JSON document's "braid_doctor" member */

static const char *const status_names[] = { "PASS", "INFO", "WARN", "FAIL" };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: braid doctor [--json] [--root DIR] [--xml FILE] [--only GROUPS]\n"
		"\n"
		"Check this host for what NCCL over braid needs: libraries and libfabric\n"
		"providers, the plugin NCCL would load, NCCL_* variables that conflict, RDMA\n"
		"devices in a container, memlock, ports, the RoCE GID braid would pick, ECN and\n"
		"PFC, GPUDirect (peermem, dma-buf), GPU-NIC distance, PCIe ACS and the IOMMU.\n"
		"Each check says PASS, WARN, FAIL or INFO (not checked, and why), with a fix.\n"
		"Exit status: 0 all passed, 1 warnings, 2 failures. docs/doctor.md has the rules.\n"
		"\n"
		"  --json         one JSON document\n"
		"  --root DIR     read /sys, /proc and /dev under DIR (default $BRAID_FSROOT, else /)\n"
		"  --xml FILE     hwloc topology for the GPU checks (default $HWLOC_XMLFILE, else\n"
		"                 this machine when the root is /)\n"
		"  --only GROUPS  comma list of check groups: lib plugin env dev memlock port gid\n"
		"                 ecn pfc gpudirect topo acs iommu\n");
}

/* ---- output ---- */

static void print_table(const struct doctor *d, const int count[4])
{
	printf("braid doctor: %s%s\n\n", d->root[0] ? "host files under " : "this host", d->root);
	printf("%-6s %-28s %s\n", "STATUS", "CHECK", "MESSAGE");
	for (size_t i = 0; i < d->n; i++) {
		const struct doc_check *c = &d->c[i];

		printf("%-6s %-28s %s\n", status_names[c->status], c->id, c->msg);
		if (c->fix[0] && (c->status == DOC_WARN || c->status == DOC_FAIL))
			printf("%-6s %-28s fix: %s\n", "", "", c->fix);
	}
	printf("\n%d passed, %d warnings, %d failed, %d not checked\n", count[DOC_PASS],
	       count[DOC_WARN], count[DOC_FAIL], count[DOC_INFO]);
}

static void print_json(const struct doctor *d, const int count[4], int rc)
{
	json_t *doc = json_object(), *arr = json_array(), *sum = json_object();
	char *s;

	json_object_set_new(doc, "braid_doctor", json_integer(DOCTOR_SCHEMA));
	json_object_set_new(doc, "root", json_string(d->root[0] ? d->root : "/"));
	for (size_t i = 0; i < d->n; i++) {
		const struct doc_check *c = &d->c[i];
		json_t *o = json_object();

		json_object_set_new(o, "id", json_string(c->id));
		json_object_set_new(o, "status", json_string(status_names[c->status]));
		json_object_set_new(o, "message", json_string(c->msg));
		json_object_set_new(o, "fix", c->fix[0] ? json_string(c->fix) : json_null());
		json_array_append_new(arr, o);
	}
	json_object_set_new(doc, "checks", arr);
	json_object_set_new(sum, "pass", json_integer(count[DOC_PASS]));
	json_object_set_new(sum, "warn", json_integer(count[DOC_WARN]));
	json_object_set_new(sum, "fail", json_integer(count[DOC_FAIL]));
	json_object_set_new(sum, "info", json_integer(count[DOC_INFO]));
	json_object_set_new(doc, "summary", sum);
	json_object_set_new(doc, "exit", json_integer(rc));
	s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (s)
		printf("%s\n", s);
	free(s);
	json_decref(doc);
}

int braid_cmd_doctor(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },      { "root", required_argument, NULL, 'r' },
		{ "xml", required_argument, NULL, 'x' }, { "only", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },      { NULL, 0, NULL, 0 },
	};
	struct doctor d = { 0 };
	char root[4096];
	const char *r = getenv("BRAID_FSROOT");
	int opt, count[4] = { 0 }, rc;
	size_t len;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'j': d.json = true; break;
		case 'r': r = optarg; break;
		case 'x': d.xml = optarg; break;
		case 'o': d.only = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 3;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "braid doctor: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 3;
	}
	snprintf(root, sizeof(root), "%s", r ? r : "");
	len = strlen(root);
	while (len > 0 && root[len - 1] == '/')
		root[--len] = '\0';
	if (len && access(root, R_OK | X_OK)) {
		fprintf(stderr, "braid doctor: root %s cannot be read\n", root);
		return 3;
	}
	d.root = root;

	doc_scan(&d); /* the RDMA devices, which the library checks ask about */
	doc_check_lib(&d);
	doc_check_rdma(&d);
	doc_check_gpu(&d);

	for (size_t i = 0; i < d.n; i++)
		count[d.c[i].status]++;
	rc = count[DOC_FAIL] ? 2 : count[DOC_WARN] ? 1 : 0;
	if (d.json)
		print_json(&d, count, rc);
	else
		print_table(&d, count);
	if (d.topo)
		braid_topo_free(d.topo);
	free(d.c);
	return rc;
}
