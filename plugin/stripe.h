/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Multi-rail striping policy: how a message on a fused device is cut across its lanes
 * (one connection per NIC). The policy lives here alone, apart from the transports, as in
 * aws-ofi-nccl's nccl_ofi_scheduler: net_ib and net_ofi ask braid_stripe_split() where the
 * bytes go, post the chunks, and report each post and completion back, so that both
 * backends stripe the same way and the policy is tested without a NIC.
 *
 * State is one struct embedded in the comm: no allocation, no lock (NCCL drives a comm
 * from one thread at a time), no libm. Time is the caller's monotonic clock in ns.
 *
 * The split is the sender's decision: the sender measures each lane's goodput from its own
 * completions and owns the weights. On net_ib it cuts each message itself. On net_ofi the
 * receiver must cut (a tagged receive lands where it was posted), so it runs in
 * BRAID_STRIPE_FOLLOW mode: it cuts by the sender's weights, which the sender sends it
 * (braid_stripe_weights_wire, braid_stripe_follow) whenever they move. The two sides never
 * mix their own measurements into one split.
 * The knobs (BRAID_STRIPE, BRAID_STRIPE_BYTES) are read in one place,
 * braid_stripe_cfg_load(), and their defaults are those of plugin/params.h.
 */
#ifndef BRAID_STRIPE_H
#define BRAID_STRIPE_H

#include <stddef.h>
#include <stdint.h>

#define BRAID_STRIPE_MAX_LANES 8 /* NCCL_NET_MAX_DEVS_PER_NIC of v12 */

/*
 * Policy constants (the reasons are in plugin/stripe.c, next to their use).
 * Defaults of struct braid_stripe_cfg: see braid_stripe_cfg_default().
 */
#define BRAID_STRIPE_DEF_MIN_CHUNK (64u << 10) /* no smaller chunk when split */
#define BRAID_STRIPE_DEF_ALIGN 4096u           /* chunk boundaries on pages */
#define BRAID_STRIPE_WINDOW_BYTES (1u << 20)   /* a rate sample: this many bytes... */
#define BRAID_STRIPE_WINDOW_MIN_NS 100000ull   /* ...over at least this busy time... */
#define BRAID_STRIPE_WINDOW_NS 2000000ull      /* ...or this much busy time */
#define BRAID_STRIPE_EMA_ALPHA 0.25            /* weight of a new sample in the rate */
#define BRAID_STRIPE_WEIGHT_FLOOR 0.02         /* least weight of a lane, adaptive mode */
#define BRAID_STRIPE_SLOW_RATIO 0.5            /* slow: under this x the others' mean */
#define BRAID_STRIPE_SLOW_COMPLETIONS 8        /* slow for at least this many completions */
#define BRAID_STRIPE_SLOW_BUSY_NS 100000000ull /* and this much busy time (100 ms) */
#define BRAID_STRIPE_MEMO_SLACK 0.01           /* a kept cut outlives weight moves under this */
#define BRAID_STRIPE_QP_SAMPLE 16              /* QP lanes: of every this many messages... */
#define BRAID_STRIPE_QP_SAMPLE_RUN 4           /* ...this many in a row are accounted (1 marks) */
#define BRAID_STRIPE_SAMPLE_WARM 4             /* sampled once each lane has this many samples */
#define BRAID_STRIPE_SAMPLE_CAP 2.0            /* sampled: a sample counts <= this x the rate */
#define BRAID_STRIPE_PROBE_EVERY 64            /* cuts per probe of a left-out live lane */

enum braid_stripe_mode {
	BRAID_STRIPE_ADAPTIVE = 0, /* weights follow the measured lane rates */
	BRAID_STRIPE_EQUAL = 1,    /* equal weights always; rates still measured */
	BRAID_STRIPE_FOLLOW = 2    /* not a user value: weights only from braid_stripe_follow()
				    * (equal until then); rates still measured */
};

/* A change of any lane's weight on the wire smaller than this (in 1/65535) is not worth a
 * message: 1%, about the noise of one rate sample. With 5 to 8 lanes, weights travel in
 * 1/255 and the threshold is the same 1% (3/255). */
#define BRAID_STRIPE_WIRE_HYSTERESIS 655u

struct braid_stripe_cfg {
	int mode;         /* enum braid_stripe_mode */
	size_t threshold; /* messages of fewer bytes go whole to one lane */
	size_t min_chunk; /* least bytes of a chunk of a split message (rounded up to align) */
	size_t align;     /* every chunk boundary but the message end is a multiple of it */
	int batched;      /* the caller reaps completions in batches and calls
			   * braid_stripe_reaped() after each (a NIC's CQ read at test()) */
	/* 0, 1: the caller measures every message; n >= 2: it asks braid_stripe_sample()
	 * for each, and of every n messages a run of sample_run (2..n) is accounted */
	unsigned sample;
	unsigned sample_run;
};

struct braid_stripe_lane {
	int speed_mbps;       /* nominal speed; <= 0 unknown */
	uint64_t outstanding; /* bytes posted and not completed */
	uint64_t busy_mark;   /* while outstanding > 0: busy time is counted up to here */
	uint64_t win_bytes;   /* the rate sample being gathered: completed bytes... */
	uint64_t win_ns;      /* ...and the busy time they took */
	double rate;          /* moving average of samples, bytes/s; 0 not measured yet */
	double weight;        /* share of a split message; the lanes' weights sum to 1 */
	double inv_weight;    /* 1 / weight (1e30 at 0, infinite down): a pick's finish times */
	/* totals, for counters */
	uint64_t bytes_posted, chunks_posted;
	uint64_t bytes_completed, chunks_completed;
	uint64_t busy_ns;
	uint32_t samples; /* samples folded into rate */
	/* slow-lane state: the current run of completions seen slow, and the latch */
	uint32_t slow_run;
	uint64_t slow_run_ns;
	uint32_t batch_n; /* batched: completions since the last reap, and their busy time */
	uint64_t batch_ns;
	/* adaptive: the lane's NIC's bytes over all comms (braid_stripe_nic_bytes), and at
	 * the start of the current slow run its own and the other lanes' (nic_mask) */
	const uint64_t *nic_bytes;
	uint64_t nic_self, nic_others;
	uint8_t nic_mask;
	uint8_t slow_found;    /* the run was long enough: to report */
	uint8_t slow_reported; /* braid_stripe_slow_lane() returned it: never again */
	uint8_t down;          /* failed (braid_stripe_lane_down): weight 0, never picked */
};

/* The last cut over every lane, kept while no lane's weight has moved by
 * BRAID_STRIPE_MEMO_SLACK since: a stream of same-sized messages (the common case) is cut
 * once per real change of the weights, not once a message. */
struct braid_stripe_memo {
	size_t size; /* 0: none */
	int first, rr;
	size_t len[BRAID_STRIPE_MAX_LANES];
	double weight[BRAID_STRIPE_MAX_LANES]; /* the weights it was cut by */
};

struct braid_stripe {
	int nlanes;
	int ndown; /* lanes down (braid_stripe_lane_down) */
	int rr;    /* the lane preferred next among equals (round robin) */
	/* cfg.sample: messages asked about (braid_stripe_sample), and whether every lane has
	 * its BRAID_STRIPE_SAMPLE_WARM samples (till then every message is measured) */
	uint32_t sample_seq;
	int sampling;
	/* braid_stripe_pick has placed a message: from then on every message is accounted
	 * (the pick reads the bytes outstanding, which a sampled lane does not know); picks
	 * left before one answers "cut it" */
	int whole;
	uint32_t pick_left;
	/* adaptive and follow: cuts left before a live lane that the cut leaves out gets a
	 * probe chunk, and the lane to look at first (braid_stripe_cut) */
	uint32_t probe_left;
	int probe_next;
	struct braid_stripe_cfg cfg;
	struct braid_stripe_memo memo;
	struct braid_stripe_lane lane[BRAID_STRIPE_MAX_LANES];
};

/* The defaults: adaptive, threshold BRAID_STRIPE_BYTES_DEFAULT (128 KiB), min_chunk
 * 64 KiB, align 4 KiB, not batched. */
void braid_stripe_cfg_default(struct braid_stripe_cfg *cfg);

/* The defaults, with mode and threshold from BRAID_STRIPE and BRAID_STRIPE_BYTES: the one
 * reader of the striping knobs, for every backend. */
void braid_stripe_cfg_load(struct braid_stripe_cfg *cfg);

/*
 * The configuration of one NIC's QPs as lanes (net_ib: a rail's part of a message above
 * split_bytes is cut over its nqps QPs by their measured goodput, each QP's ECMP path
 * being a lane of its own). Mode from BRAID_STRIPE like the NICs'; threshold just above
 * split_bytes; chunks on 128-byte boundaries (the cut of the equal split before) and of
 * at least split_bytes / nqps, so that a message that was cut over every QP still is
 * when the weights are equal; batched (a CQ is read at test()); sampled
 * (braid_stripe_sample): of every BRAID_STRIPE_QP_SAMPLE messages, a run of
 * BRAID_STRIPE_QP_SAMPLE_RUN is accounted.
 */
void braid_stripe_cfg_qps(struct braid_stripe_cfg *cfg, size_t split_bytes, int nqps);

/*
 * Set up for nlanes lanes (1..BRAID_STRIPE_MAX_LANES). speed_mbps (NULL: all unknown)
 * gives the first weights, until every lane has been measured. cfg NULL: the defaults;
 * align 0 is taken as 1, min_chunk is rounded up to a multiple of align (at least align),
 * an unknown mode is adaptive. Returns 0, or -EINVAL (and a usable single-lane state)
 * when nlanes is out of range.
 */
int braid_stripe_init(struct braid_stripe *st, int nlanes, const int *speed_mbps,
		      const struct braid_stripe_cfg *cfg);

/*
 * The bytes the lane's NIC carries for every comm (its device record's tx_bytes, counted
 * as each NIC's part completes), read when a lane runs slow. Comms that share NICs can
 * settle on opposite adaptive splits, each NIC busy with another comm's larger share: a
 * comm then measures a NIC at under half the others' rate that is busy, not slow. In
 * adaptive mode a lane is named slow only if its NIC also carried under half the others'
 * mean over the slow run. NULL (the default): the comm's rates alone decide.
 */
void braid_stripe_nic_bytes(struct braid_stripe *st, int lane, const uint64_t *bytes);

/*
 * Cut a message of size bytes: len[i] is lane i's part (i < nlanes; the entries past the
 * comm's lanes are not written), the parts sum to size and are
 * contiguous in lane order (lane 0 has [0, len[0]), the next lane with a part the bytes
 * after it, ...). Returns how many lanes have a part (>= 1), and in *first_lane the first
 * of them; a 0-byte message goes to one lane, *first_lane, with len 0.
 *
 * Under cfg.threshold (or with one lane, or too small to make two chunks of min_chunk)
 * the whole message goes to ONE lane: the one that would be done with it first, its
 * bytes outstanding and the message over its weight, because a small message waits
 * behind what is queued and a window of them must follow the weights; on equal terms the
 * heavier lane, then round robin, so equal idle lanes take turns. From the threshold up the message is split by weight: each part's share of
 * size is its lane's weight. Boundaries are multiples of align; no part is under
 * min_chunk (a lane whose share would be is left out and its share goes to the others by
 * weight, the lowest weight left out first); never more parts than size / min_chunk.
 * Deterministic for a given state; it moves only the round robin and, in a cut that
 * leaves a live lane out, the probe's count (plugin/stripe.c). A cut over every lane
 * is kept (struct braid_stripe_memo) and given again for the same size until some
 * lane's weight moves by BRAID_STRIPE_MEMO_SLACK. braid_stripe_cut(): the same without
 * looking at the kept cut first (it makes one, and keeps it when it may).
 */
int braid_stripe_cut(struct braid_stripe *st, size_t size, size_t len[BRAID_STRIPE_MAX_LANES],
		     int *first_lane);

/*
 * The lane for a whole message of size bytes, above the threshold too: the one a cut under
 * it would give it (the first done with it, by bytes outstanding and weight). For a
 * caller whose lanes are all busy with its earlier messages, where a cut would start no
 * lane sooner and only add chunks. The choice reads what is outstanding, so from the
 * first pick on cfg.sample is off: braid_stripe_sample() answers BRAID_STRIPE_MEASURE for
 * every message, whole or cut, and the caller accounts each (braid_stripe_posted and
 * braid_stripe_completed). -1 once in BRAID_STRIPE_PROBE_EVERY calls (not in equal mode):
 * the caller cuts that message (braid_stripe_split), so that a lane no pick chooses is
 * still measured.
 */
int braid_stripe_pick(struct braid_stripe *st, size_t size);

static inline int braid_stripe_split(struct braid_stripe *st, size_t size,
				     size_t len[BRAID_STRIPE_MAX_LANES], int *first_lane)
{
	/* inline, the kept cut: once a message on every striped path (the call and its
	 * frame cost more than the copy); braid_stripe_cut() makes and keeps a new one */
	if (size != st->memo.size || !size)
		return braid_stripe_cut(st, size, len, first_lane);
	for (int i = 0; i < st->nlanes; i++)
		len[i] = st->memo.len[i];
	st->rr = st->memo.rr;
	*first_lane = st->memo.first;
	return st->nlanes;
}

/*
 * Accounting: bytes handed to lane at now_ns (one call per posted chunk), and their
 * completion. Completions feed the lane's rate, measured over its BUSY time only (time
 * with bytes outstanding), so that neither queueing behind the lane's own chunks nor idle
 * time between messages reads as slowness. A lane out of range is ignored; completing
 * more than is outstanding counts as completing what is.
 */
static inline void braid_stripe_posted(struct braid_stripe *st, int lane, size_t bytes,
				       uint64_t now_ns)
{
	struct braid_stripe_lane *l;

	/* inline: net_ib calls it for every chunk of a striped message */
	if (lane < 0 || lane >= st->nlanes)
		return;
	l = &st->lane[lane];
	l->chunks_posted++;
	if (!bytes)
		return; /* no bytes, no busy time: a 0-byte message measures latency, not rate */
	if (!l->outstanding)
		l->busy_mark = now_ns;
	l->outstanding += bytes;
	l->bytes_posted += bytes;
}

/* Bytes a caller counts against lane while it cuts more (a grouped receive holds its earlier
 * buffers' parts): raised by bytes, then lowered by the same, with no post or completion
 * counted and no busy time. A lane out of range is ignored. */
static inline void braid_stripe_hold(struct braid_stripe *st, int lane, int64_t bytes)
{
	if (lane >= 0 && lane < st->nlanes)
		st->lane[lane].outstanding = (uint64_t)((int64_t)st->lane[lane].outstanding +
							bytes);
}

/* Not batched: a completion's sample and slow-lane run (braid_stripe_completed's tail). */
void braid_stripe_fold(struct braid_stripe *st, int lane, uint64_t busy_ns);

/* A chunk of *bytes on lane completed: counted, and *bytes cut to what was outstanding;
 * the lane, or NULL for a lane out of range (ignored). */
static inline struct braid_stripe_lane *stripe_lane_done(struct braid_stripe *st, int lane,
							 size_t *bytes)
{
	struct braid_stripe_lane *l;

	if (lane < 0 || lane >= st->nlanes)
		return NULL;
	l = &st->lane[lane];
	l->chunks_completed++;
	if (*bytes > l->outstanding)
		*bytes = l->outstanding;
	l->outstanding -= *bytes;
	l->bytes_completed += *bytes;
	return l;
}

static inline void braid_stripe_completed(struct braid_stripe *st, int lane, size_t bytes,
					  uint64_t now_ns)
{
	/* inline, as braid_stripe_posted: once per completed chunk */
	struct braid_stripe_lane *l = stripe_lane_done(st, lane, &bytes);
	uint64_t busy = 0;

	/* Under min_chunk: a whole small message, whose time is latency, not rate (split
	 * parts are never smaller). No sample; its time stays in the lane's busy time while
	 * a measured chunk is outstanding with it. */
	if (!l || bytes < st->cfg.min_chunk || !bytes)
		return;
	/* Busy since the mark: the last post onto an idle lane, or the last completion.
	 * A clock that steps back counts as no time. */
	if (now_ns > l->busy_mark) {
		busy = now_ns - l->busy_mark;
		l->busy_mark = now_ns;
	}
	l->busy_ns += busy;
	l->win_bytes += bytes;
	l->win_ns += busy;
	if (st->cfg.batched) {
		/* The first completion of a batch carries all the time since the last reap,
		 * the rest almost none: a sample must hold whole batches (braid_stripe_reaped) */
		l->batch_n++;
		l->batch_ns += busy;
		return;
	}
	braid_stripe_fold(st, lane, busy);
}

/*
 * cfg.sample >= 2: how the caller accounts for the next message's chunks (one call a
 * message, after its cut and before posting it: the cut probes a left-out lane only on
 * a message that will be measured). Measuring a chunk costs a clock read and a call at its
 * post and at its completion, and a pass over the lanes after the CQ read; most messages
 * skip all of it (BRAID_STRIPE_SKIP) and are cut by the weights the measured ones gave.
 *
 * They still share the lanes with the measured ones, so a measured chunk cannot be timed
 * from its post: on a lane with a backlog it waits behind the unmeasured chunks queued
 * ahead of it, and would read slower by that backlog. The backlog is not the same on
 * every lane (the one whose weight is too high for its rate has the longest, the others
 * may have none), so that bias would move the weights further the wrong way. Measured
 * messages therefore come in runs of cfg.sample_run in a row, whose first only marks
 * (BRAID_STRIPE_MARK: its chunks go through braid_stripe_posted() and
 * braid_stripe_marked(), which folds no sample and sets the lane's busy mark at their
 * completion); the rest (BRAID_STRIPE_MEASURE) are timed from the completion before
 * theirs on the lane, or from their own post when the lane went idle first: on a lane
 * that serves its chunks in order, the time it spent on them. A run of several measured
 * messages is timed end to end (each from the one before), so the jitter of when the
 * completions are seen (a CQ is read at test()) counts once a run, not once a message.
 *
 * Every message is measured while some lane up has fewer than BRAID_STRIPE_SAMPLE_WARM
 * samples (and always when cfg.sample < 2); then, of every cfg.sample messages, one
 * marks, the next cfg.sample_run - 1 are measured and the rest skip.
 */
enum braid_stripe_account {
	BRAID_STRIPE_SKIP = 0,    /* no accounting at all */
	BRAID_STRIPE_MARK = 1,    /* braid_stripe_posted(), braid_stripe_marked() */
	BRAID_STRIPE_MEASURE = 2, /* braid_stripe_posted(), braid_stripe_completed() */
};

static inline int braid_stripe_sample(struct braid_stripe *st)
{
	uint32_t phase;

	if (!st->sampling)
		return BRAID_STRIPE_MEASURE;
	phase = st->sample_seq++ % st->cfg.sample;
	return phase == 0                   ? BRAID_STRIPE_MARK
	       : phase < st->cfg.sample_run ? BRAID_STRIPE_MEASURE
					    : BRAID_STRIPE_SKIP;
}

/* The completion of a chunk posted for a BRAID_STRIPE_MARK message: no sample; the lane's
 * next measured completion is timed from now. */
static inline void braid_stripe_marked(struct braid_stripe *st, int lane, size_t bytes,
				       uint64_t now_ns)
{
	struct braid_stripe_lane *l = stripe_lane_done(st, lane, &bytes);

	if (l)
		l->busy_mark = now_ns;
}

/*
 * cfg.batched: every completion of a reap has been reported; fold the samples. A NIC's
 * completions are read in batches (at the next test()); within one, the first carries all
 * the time since the last read and the rest almost none, so a sample that ended inside a
 * batch read tens of TB/s on softverbs. Samples hold whole batches instead.
 */
void braid_stripe_reaped(struct braid_stripe *st);

/*
 * The weights as 64 bits for the wire: up to 4 lanes, lane i's weight in 1/65535 in bits
 * 16i..16i+15; 5 to 8 lanes, in 1/255 in bits 8i..8i+7 (rounded; lanes past nlanes 0). The
 * measuring side sends it, the cutting side, which has as many lanes, follows.
 */
uint64_t braid_stripe_weights_wire(const struct braid_stripe *st);

/* 1 when some lane's weight differs between two wire forms of nlanes lanes by at least
 * BRAID_STRIPE_WIRE_HYSTERESIS: a new form is worth sending. */
int braid_stripe_wire_moved(uint64_t sent, uint64_t now, int nlanes);

/* 1 when a wire form fits a comm of nlanes lanes: some of its first nlanes values is not
 * 0 and no lane past nlanes has one (else a garbled message, or a peer with another
 * number of lanes). */
int braid_stripe_wire_valid(uint64_t wire, int nlanes);

/*
 * Take the other side's weights (a wire form) as this side's: weights become each lane's
 * value over the sum of the first nlanes values. Returns 0, or -EINVAL and changes
 * nothing when the form is not valid for this comm (braid_stripe_wire_valid).
 */
int braid_stripe_follow(struct braid_stripe *st, uint64_t wire);

/*
 * Take a lane out (down 1: it failed; failover) or back in (0: recovery). A lane down has
 * weight 0 and gets no part of any message; its outstanding bytes are forgotten (they
 * never complete on it). It keeps its measured rate, which counts for nothing while it is
 * down and is its weight when it comes back (new samples then move it as usual): a NIC
 * back from a flap is as fast as before, and one put on probation with the weight floor's
 * trickle would take long to earn its share back. Returns the lanes still up; with none
 * up the caller must not split.
 */
int braid_stripe_lane_down(struct braid_stripe *st, int lane, int down);

/* Current weight of a lane, in [0, 1]; the lanes' weights sum to 1. For counters. */
double braid_stripe_weight(const struct braid_stripe *st, int lane);

/* Goodput estimate of a lane in bytes/s over its busy time; 0 = not measured yet, or down. */
double braid_stripe_rate(const struct braid_stripe *st, int lane);

/*
 * A lane that has stayed under half the mean rate of the other lanes for at least
 * BRAID_STRIPE_SLOW_COMPLETIONS completions in a row AND BRAID_STRIPE_SLOW_BUSY_NS of its
 * busy time, returned ONCE per lane (latched), with its rate and the others' mean rate
 * in bytes/s; -1 when there is none to report. The caller WARNs and bumps a counter.
 */
int braid_stripe_slow_lane(struct braid_stripe *st, double *lane_rate, double *others_rate);

#endif
