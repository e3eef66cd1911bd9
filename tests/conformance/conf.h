/* SPDX-License-Identifier: Apache-2.0 */
/*
 * braid conformance harness: drives an NCCL net plugin .so exactly as NCCL does, one
 * process per side of each scenario, the two sides meeting through files in a shared
 * directory (which also works across network namespaces).
 */
#ifndef BRAID_CONF_H
#define BRAID_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tools/netapi.h"

/* Wall-clock limits; every wait in the harness is bounded by one of these. */
#define CONF_CONNECT_TIMEOUT_S 20.0 /* listen..connect/accept ready */
#define CONF_RDV_TIMEOUT_S 60.0     /* waiting for the peer at a meeting point */
#define CONF_XFER_TIMEOUT_S 90.0    /* one transfer plan, start to end */
#define CONF_ERROR_BOUND_S 15.0     /* a peer's death or a size error must surface by then */
#define CONF_CLOSE_TIMEOUT_S 10.0   /* closing after an error */
#define CONF_SCENARIO_ALARM_S 150   /* whole scenario process: SIGALRM kills it */

/* One side of one scenario, in its own process. */
struct side {
	char role; /* 'a' (listens, usually receives) or 'b' (connects) */
	const struct net_api *api;
	int dev;
	const char *dir; /* rendezvous directory */
	char key[96];    /* "v11.stream": prefix of every rendezvous name */
	uint64_t seed;
	void *ctx; /* v11 context from init; NULL before */
	struct net_props props;
	char what[128]; /* the step in progress, for messages */
};

/* ---- log.c ---- */
void conf_log(const struct side *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Logs "FAIL: ..." with the side and step, and returns -1. */
int conf_fail(const struct side *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int conf_failures(void); /* how many conf_fail lines this process printed */
double now_s(void);
/* Sleep briefly when a poll made no progress (bounded loops must not spin a core). */
void idle_wait(void);
/* Step being run, for failure messages. */
void conf_step(struct side *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- rdv.c: meeting points in a directory shared by both sides ---- */
int rdv_put(const struct side *s, const char *name, const void *data, size_t len);
/* Waits for the peer's `name` (bounded), fails fast if the peer announced an abort. */
int rdv_get(const struct side *s, const char *name, void *data, size_t len, double timeout_s);
/* The same, for a file published by the given role (several processes per side). */
int rdv_get_from(const struct side *s, char role, const char *name, void *data, size_t len,
		 double timeout_s);
/* Both sides reach `name` before either goes on. */
int rdv_sync(const struct side *s, const char *name);
/* Tell the peer this side failed, so it stops waiting for us. */
void rdv_abort(const struct side *s);
bool rdv_peer_aborted(const struct side *s);
/* The peer's `name` if it is there now: true with data read; never waits. */
bool rdv_peek(const struct side *s, const char *name, void *data, size_t len);

/* ---- link.c: establishing comms the way NCCL does ---- */
/* listen, publish the handle under `name`, poll accept until ready. */
int link_accept(struct side *s, void *ctx, const char *name, void **listen_comm, void **recv_comm);
/* fetch the handle published under `name`, poll connect until ready. */
int link_connect(struct side *s, void *ctx, const char *name, void **send_comm);
/* Poll connect (on a copy of the handle) or accept: 0 with *comm, 1 when the call failed
 * (*res), -1 when neither happened within bound_s. */
int link_poll_connect(struct side *s, const char *handle, void **comm, ncclResult_t *res,
		      double bound_s);
int link_poll_accept(struct side *s, void *lc, void **comm, ncclResult_t *res, double bound_s);
/* One listener for many comms: the listener side listens and publishes its handle under
 * `name`; the other side fetches it. 0, or -1 (after conf_fail where it failed here). */
int link_share_listener(struct side *s, bool listener, const char *name, char *handle,
			void **listen_comm);
/* Close with a bound: the process is killed by alarm if a close hangs. */
int close_comms(struct side *s, void *send_comm, void *recv_comm, void *listen_comm);

/* ---- xfer.c: the data engine ---- */
#define XFER_MAX_GROUP 8

struct xfer_msg {
	uint64_t id; /* pattern message number */
	size_t size; /* bytes the sender sends */
	size_t cap;  /* receive buffer size (>= size, or < size to provoke an error) */
	int tag;
};

struct xfer_group {
	int first; /* index of its first message in plan.msgs */
	int n;     /* messages in the group: one irecv(n), n consecutive isends */
	int send_order[XFER_MAX_GROUP]; /* the order the sender sends them in (shuffled) */
};

struct xfer_plan {
	struct xfer_msg *msgs;
	int nmsgs;
	struct xfer_group *groups;
	int ngroups;
	int recv_window;       /* irecv requests in flight, <= 32 */
	int send_window;       /* isend requests in flight, <= 8 * 32 */
	size_t inflight_bytes; /* memory bound per side */
	bool arena;            /* sub-ranges of one registered region, not one MR each */
	int kill_after;        /* > 0: SIGKILL ourselves after this many messages done */
	bool expect_error;     /* an error is the expected end: do not log it as failure */
	int flush_pct;         /* receiver: iflush this % of completed receives (by message id) */
	int kill_in_flush;     /* > 0: SIGKILL ourselves inside this many-th iflush */
	bool one_lane_each;    /* every message under any stripe threshold: on a comm of
				* several NICs each goes whole over one of them */
};

struct xfer_slot;

struct xfer {
	struct side *s;
	void *comm;
	const struct xfer_plan *p;
	bool sender;
	struct xfer_slot *slots;
	int nslots;
	char *arena;
	size_t arena_len;
	size_t stride; /* arena bytes per buffer */
	void *arena_mh;
	/* the first error */
	ncclResult_t err_rc;
	char err_call[160];
	double err_after_s; /* seconds from the start to the error */
	double err_at;      /* now_s() when it was seen */
	size_t bytes_done;
	int msgs_done;
	int flushes; /* iflush calls made (flush_pct) */
};

/* Runs the plan as sender or receiver. 0 when all done and verified, 1 when a plugin
 * call returned an error (x->err_rc, x->err_call), -1 on a verification or harness
 * failure. */
int xfer_run(struct xfer *x, struct side *s, void *comm, const struct xfer_plan *p, bool sender);
/* After xfer_run (whatever it returned): deregister what is still registered. Call
 * before closing the comm; free after closing it. */
void xfer_dereg(struct xfer *x);
/* After xfer_run returned 1: test every request still posted until each has failed (or
 * completed, verified) within bound_s. 0, with *last_at the time the last one ended. */
int xfer_drain(struct xfer *x, double bound_s, double *last_at);
/* The victim of a kill: publish the moment (rdv "killed", a double from now_s()), then
 * SIGKILL ourselves. */
void conf_die(struct side *s, const char *when);
void xfer_free(struct xfer *x);

/* Plans (plan.c): deterministic from the seed, so both sides build the same one. */
void plan_stream(struct xfer_plan *p, uint64_t seed, int nrandom, size_t max_random,
		 bool with_huge);
void plan_groups(struct xfer_plan *p, uint64_t seed, int ngroups, int max_recvs, size_t max_size);
void plan_fixed(struct xfer_plan *p, int nmsgs, size_t size, size_t cap, uint64_t id0);
void plan_free(struct xfer_plan *p);

/* sc_data.c: a receives the plan over a fresh connection, b sends it */
int one_way_plan(struct side *s, void *ctx, const char *name, const struct xfer_plan *p);

/* ---- scenarios ---- */
struct scenario {
	const char *name;
	const char *doc;
	int (*run)(struct side *s);
	int min_version;
	bool one_sided;       /* only side a runs; there is no peer process */
	char victim;          /* 'a' or 'b': that side's process ends by SIGKILL; 0 none */
	bool quick;           /* part of the short list (valgrind) */
	bool own_init;        /* the scenario calls init/finalize itself */
	int (*bound_s)(void); /* its own wall-clock bound; NULL: CONF_SCENARIO_ALARM_S */
	bool explicit_only;   /* runs only when named (needs a set-up of its own script) */
};

extern const struct scenario scenarios[];
extern const int nscenarios;

int sc_props(struct side *s);
int sc_stream(struct side *s);
int sc_groups(struct side *s);
int sc_threads(struct side *s);
int sc_init_twice(struct side *s);
int sc_bad_handle(struct side *s);
int sc_kill_sender(struct side *s);
int sc_kill_receiver(struct side *s);
int sc_zero_and_tiny(struct side *s);
int sc_tag_order(struct side *s);
int sc_truncate(struct side *s);
int sc_isolation(struct side *s);
int sc_reuse_close(struct side *s);
int sc_strangers(struct side *s);
int sc_flush(struct side *s);
int sc_ring(struct side *s);
int sc_many_comms(struct side *s);
int sc_vdevice(struct side *s);
int sc_props_v12(struct side *s);
int sc_stall(struct side *s);
int sc_comm_limit(struct side *s);
int sc_mem(struct side *s);
int sc_soak(struct side *s);
int sc_soak_bound_s(void);
int sc_kill_any(struct side *s);
int sc_abort_close(struct side *s);
int sc_abort_reinit(struct side *s);
int sc_dereg_idle(struct side *s);
int sc_profiler(struct side *s);

#endif /* BRAID_CONF_H */
