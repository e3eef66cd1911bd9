/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `braid perf`'s parts, each calling only downwards: the command (tools/perf.c) reads the
 * options (tools/perf_opts.c, which also holds the messages and the clock every part
 * uses), starts the local peer process (tools/perf_peer.c) and runs a session
 * (tools/perf_session.c: plugin, connection, buffers), which runs the timed phases
 * (tools/perf_phases.c: streaming bandwidth, ping-pong latency).
 */
#ifndef BRAID_TOOLS_PERF_H
#define BRAID_TOOLS_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "tools/netapi.h"

#define PERF_DEFAULT_PORT 18515
#define PERF_PHASE_TIMEOUT_S 120.0 /* one size, one phase; far above any real run */
#define PERF_CONNECT_TIMEOUT_S 30.0
#define PERF_MAX_WINDOW NCCL_NET_MAX_REQUESTS
#define PERF_CTRL_BYTES 16
#define PERF_SEED 0x627261696450ULL

enum perf_mode { MODE_LOCAL, MODE_SERVER, MODE_CLIENT };

struct perf_opts {
	int api;
	const char *plugin;
	const char *backend;
	const char *provider;
	int dev;
	size_t min, max;
	int window;
	int iters;  /* 0: by size */
	int warmup; /* -1: by iterations */
	size_t lat_size;
	int lat_iters;
	bool bw, lat;
	enum perf_mode mode;
	const char *host;
	int port;
	double timeout;   /* waiting for the peer to show up */
	bool local_child; /* the peer process `braid perf` started for itself */
};

/* A control message: "go" (receiver ready) or "ack" (all received, verification). */
struct perf_ctrl {
	uint32_t kind;
	uint32_t ok;
	uint64_t seq;
};

struct perf {
	struct perf_opts o;
	struct net_api api;
	void *ctx;
	struct net_props props;
	void *lc, *sc, *rc;
	bool streamer; /* server: sends the stream and prints */
	int boot;
	/* streaming: check[0], check[1], bulk, each max bytes, on sc (streamer) or rc */
	char *big;
	void *big_mh;
	/* small messages: control and latency, one buffer on each comm */
	char *ssmall, *rsmall;
	size_t small_len;
	void *ssmall_mh, *rsmall_mh;
	char who[32];
};

/* tools/perf_opts.c */
/* Print "braid perf<who>: msg" to stderr; -1. */
int perf_err(const struct perf *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double perf_now_us(void); /* CLOCK_MONOTONIC */
void perf_sleep_us(long us);
/* argv into o; 0, 1 (--help printed) or -1 (said). */
int perf_parse_opts(int argc, char **argv, struct perf_opts *o);
int perf_iters_for(const struct perf_opts *o, size_t size);
int perf_warmup_for(const struct perf_opts *o, int iters);

/* tools/perf_phases.c */
/* 0 when r is ncclSuccess, else said with what; -1. */
int perf_check_call(const struct perf *p, ncclResult_t r, const char *what);
int perf_run_bandwidth(struct perf *p, bool *all_ok);
int perf_run_latency(struct perf *p, bool *all_ok);

/* tools/perf_session.c: one side's whole run on a connected bootstrap socket. */
int perf_run_session(struct perf *p);

/* tools/perf_peer.c */
/* The client process of a local run, started from the same argv; its pid or -1. */
pid_t perf_spawn_local_peer(int argc, char **argv, int port);
/* Wait up to timeout_s for pid; its exit status, or -1 (killed after the wait). */
int perf_reap(pid_t pid, double timeout_s);

#endif
