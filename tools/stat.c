// SPDX-License-Identifier: Apache-2.0
/*
 * `braid stat`: every braid process of this host from its counters file
 * (/dev/shm/braid-<pid>): the options, then one of the views: the listing
 * (tools/stat_text.c), --json (tools/stat_json.c), --watch (tools/stat_watch.c), or the
 * Prometheus exports --serve and --textfile (tools/stat_prom_export.c). Reading the files
 * is tools/stat_read.c.
 */
#include "tools/cmds.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "tools/stat.h"
#include "tools/stat_json.h"

#define STAT_DEFAULT_DIR "/dev/shm"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: braid stat [--json] [--watch N [--count K]] [--pid PID] [--dir DIR]\n"
		"       braid stat --serve ADDR:PORT [--pid PID] [--dir DIR]\n"
		"       braid stat --textfile DIR [--watch N [--count K]] [--pid PID] [--dir DIR]\n"
		"\n"
		"Every braid process of this host, from its counters in shared memory\n"
		"(/dev/shm/braid-<pid>): backend and provider, slow path and why, GPUDirect\n"
		"and why, devices, comms (each NIC of a fused device), QPs, errors. Processes\n"
		"on a slow path come first and are marked SLOW PATH. Files of processes that\n"
		"ended, of another counters layout version, damaged or hidden by permissions\n"
		"are named at the end. docs/stat.md says what each field means.\n"
		"\n"
		"  --json         one JSON document (with --watch: one per report and line)\n"
		"  --watch N      every N seconds (decimals allowed), rates over the interval per\n"
		"                 process, device and QP, like iostat, until interrupted\n"
		"  --count K      with --watch: stop after K reports\n"
		"  --pid PID      only the file braid-PID\n"
		"  --dir DIR      where the counters files are (default $BRAID_SHM_DIR, else\n"
		"                 /dev/shm): a host's /dev/shm mounted elsewhere\n"
		"  --serve ADDR:PORT  serve the counters in Prometheus' text format at\n"
		"                 http://ADDR:PORT/metrics (e.g. 127.0.0.1:9464; [::1]:9464;\n"
		"                 port 0: any free one, printed) until SIGINT or SIGTERM\n"
		"  --textfile DIR write them to DIR/braid.prom (a temporary file of DIR renamed\n"
		"                 over it) for node_exporter's textfile collector: once, or\n"
		"                 every N seconds with --watch N\n");
}

int braid_cmd_stat(int argc, char **argv)
{
	enum { O_JSON = 1, O_WATCH, O_COUNT, O_PID, O_DIR, O_SERVE, O_TEXTFILE };
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, O_JSON },
		{ "watch", required_argument, NULL, O_WATCH },
		{ "count", required_argument, NULL, O_COUNT },
		{ "pid", required_argument, NULL, O_PID },
		{ "dir", required_argument, NULL, O_DIR },
		{ "serve", required_argument, NULL, O_SERVE },
		{ "textfile", required_argument, NULL, O_TEXTFILE },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct stat_opts o = { .dir = getenv("BRAID_SHM_DIR") };
	struct scan s;
	char *end;
	int c, rc = 0;

	if (!o.dir || !o.dir[0])
		o.dir = STAT_DEFAULT_DIR;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_JSON: o.json = true; break;
		case O_WATCH:
			o.watch = strtod(optarg, &end);
			if (*end || !(o.watch >= 0.01 && o.watch <= 86400)) {
				fprintf(stderr, "braid stat: --watch %s: seconds, 0.01 to 86400\n",
					optarg);
				return 2;
			}
			break;
		case O_COUNT:
			o.count = strtol(optarg, &end, 10);
			if (*end || o.count < 1) {
				fprintf(stderr,
					"braid stat: --count %s: a number of reports >= 1\n",
					optarg);
				return 2;
			}
			break;
		case O_PID:
			o.pid = (int)strtol(optarg, &end, 10);
			if (*end || o.pid < 1) {
				fprintf(stderr, "braid stat: --pid %s: a pid\n", optarg);
				return 2;
			}
			break;
		case O_DIR: o.dir = optarg; break;
		case O_SERVE: o.serve = optarg; break;
		case O_TEXTFILE: o.textfile = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "braid stat: unexpected argument '%s' (see braid stat --help)\n",
			argv[optind]);
		return 2;
	}
	if (o.count && !o.watch) {
		fprintf(stderr, "braid stat: --count goes with --watch\n");
		return 2;
	}
	if (o.serve && (o.textfile || o.json || o.watch)) {
		fprintf(stderr, "braid stat: --serve goes with none of --textfile, --json, "
				"--watch (each scrape reads the counters)\n");
		return 2;
	}
	if (o.textfile && o.json) {
		fprintf(stderr, "braid stat: --textfile writes Prometheus' format, not --json\n");
		return 2;
	}
	if (o.serve)
		return stat_prom_serve(&o);
	if (o.textfile)
		return stat_prom_textfile(&o);
	if (o.watch)
		return stat_watch(&o);
	if (stat_scan_dir(&o, &s))
		return 1;
	if (o.json)
		rc = stat_json_listing(&o, &s) ? 1 : 0;
	else
		stat_print_listing(&o, &s);
	stat_scan_free(&s);
	return rc;
}
