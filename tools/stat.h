/* SPDX-License-Identifier: Apache-2.0 */
/*
 * braid stat's parts, each calling only downwards: the command (tools/stat.c) picks a
 * view: the listing (tools/stat_text.c), JSON (tools/stat_json.c, tools/stat_json.h),
 * --watch (tools/stat_watch.c) or the Prometheus exports (tools/stat_prom_export.c, of the
 * exposition tools/stat_prom.c writes); every view reads through the scan of the counters
 * files (tools/stat_read.c).
 */
#ifndef BRAID_TOOLS_STAT_H
#define BRAID_TOOLS_STAT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "plugin/counters.h"

enum ent_kind {
	ENT_LIVE,    /* read; its process holds the file's lock (or its pid is here) */
	ENT_UNKNOWN, /* read; whether its process runs cannot be told */
	ENT_ENDED,   /* read; nobody holds its lock: the process ended without removing it */
	ENT_VERSION, /* another layout version: named, not read */
	ENT_BAD,     /* truncated, garbage, another layout of this version: named, skipped */
	ENT_HIDDEN,  /* cannot be opened: permissions */
};

enum owner_ns {
	NS_UNKNOWN,
	NS_THIS,  /* its pid here is the process that holds the file */
	NS_OTHER, /* another PID namespace: the pid is not here, or is someone else here */
};

struct ent {
	char name[NAME_MAX + 1];
	char path[PATH_MAX + NAME_MAX + 2];
	int pid; /* from the name */
	enum ent_kind kind;
	enum owner_ns ns;
	const char *reason; /* JSON, for files not read: version, truncated, garbage, ... */
	char why[512];      /* liveness of a read file, or why a file was not read */
	char qp_note[160];  /* why the QP records were not read, "" when they were */
	uint32_t version;   /* ENT_VERSION: the file's */
	bool lock_held;     /* for files not read: its process still runs */
	bool lock_known;
	struct braid_ctr_region *r; /* a private copy, for LIVE, UNKNOWN and ENDED */
	double t_mono;              /* when it was read, CLOCK_MONOTONIC seconds */
	uint64_t t_real_ns;         /* the same, CLOCK_REALTIME */
};

struct scan {
	struct ent *e;
	size_t n, cap;
	int nslow, nlive, nunknown, nended, nnotread;
};

struct stat_opts {
	bool json;
	double watch; /* seconds between reports; 0: one listing */
	long count;   /* reports with --watch; 0: until interrupted */
	const char *dir;
	int pid;              /* 0: every process */
	const char *serve;    /* --serve ADDR:PORT: /metrics over HTTP */
	const char *textfile; /* --textfile DIR: DIR/braid.prom */
};

/* tools/stat_read.c */
/* Every counters file of o->dir (or braid-<o->pid>), read and sorted; 0 or -1 (said). */
int stat_scan_dir(const struct stat_opts *o, struct scan *s);
void stat_scan_free(struct scan *s);
/* A process braid stat lists: live, or of unknown liveness (not ended, not unread). */
bool stat_ent_running(const struct ent *e);
double stat_mono_now(void);
const char *stat_dev_name(const struct braid_ctr_region *r, int32_t dev);
uint32_t stat_comm_nlanes(const struct braid_ctr_comm *c);
/* A comm's lane is up: it never failed over or came back as often as it failed
 * (recoveries >= failovers: net_ib counts a failed NIC that rejoins the comm's stripe),
 * and its NIC's port is not down (struct braid_ctr_dev port_down). */
bool stat_lane_up(const struct braid_ctr_region *r, const struct braid_ctr_lane *l);
bool stat_comm_used(const struct braid_ctr_comm *c);
bool stat_qps_readable(const struct ent *e);
uint64_t stat_real_now_ns(void);
/* Seconds since the process started, -1 when its start time makes no sense. */
double stat_uptime_s(const struct ent *e);
const char *stat_backend_str(const struct braid_ctr_fallback *fb);
/* "free", "send", "recv" for a comm record's kind; "?" for another value. */
const char *stat_kind_name(uint32_t kind);

/* tools/stat_text.c */
void stat_print_listing(const struct stat_opts *o, const struct scan *s);
void stat_fmt_duration(double s, char *buf, size_t len);
void stat_fmt_time(uint64_t ns, char *buf, size_t len); /* local time, "?" for 0 */

/* tools/stat_watch.c: reports every o->watch seconds; the exit status. */
int stat_watch(const struct stat_opts *o);

/* tools/stat_prom.c */
/* The Prometheus text exposition of a scan (every running process) into f. */
void stat_prom_render(FILE *f, const struct scan *s);

/* tools/stat_prom_export.c */
/* --serve ADDR:PORT: /metrics until SIGINT or SIGTERM; the exit status. */
int stat_prom_serve(const struct stat_opts *o);
/* --textfile DIR: DIR/braid.prom, once or every o->watch seconds; the exit status. */
int stat_prom_textfile(const struct stat_opts *o);

#endif
