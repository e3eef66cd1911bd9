// SPDX-License-Identifier: Apache-2.0
/*
 * The multi-rail striping policy (plugin/stripe.h). The constants, and why:
 *
 * - threshold 128 KiB, min_chunk 64 KiB: under 64 KiB a chunk costs about as much in
 *   per-request work (a work request, a completion, the proxy's turn) as in wire time at
 *   100-400 Gb/s, so cutting it finer buys nothing. aws-ofi-nccl's MIN_STRIPE_SIZE is
 *   64 KiB (128 KiB in later releases). 128 KiB is the least size that makes two chunks.
 * - align 4 KiB: chunks start on pages of the (page-aligned) NCCL buffers, and the
 *   rounding costs at most 4 KiB of balance per boundary, under 2% of a 256 KiB message.
 * - a message under min_chunk (whole to one lane) is no sample: its time is latency. As
 *   samples, small messages took a lane's rate to a few MB/s, and where lanes share a CPU
 *   (tcp, softverbs) its 2% floor chunk then ended with the message and never read fast
 *   again (docs/multirail.md).
 * - a rate sample is 1 MiB of completions (over at least 100 us) or 2 ms of busy time,
 *   whichever comes first:
 *   long enough that the jitter of when a completion is seen (a few us) is a few percent
 *   of the sample at 50 GB/s, short enough that a slow 1 GB/s lane still gives a sample
 *   every millisecond or two.
 * - moving average alpha 0.25: a step in a lane's rate is 90% followed after 8 samples,
 *   and one odd sample moves the rate by a quarter of its error.
 * - weight floor 2%: a lane at 1/4 speed still gets its 20% (the floor only ever lifts a
 *   lane under 2%), and a lane that has become very slow keeps being sent chunks, and so
 *   measured, as long as 2% of the message is at least min_chunk; below that the cut
 *   leaves it out, and it is measured by a probe:
 * - probe, a chunk of min_chunk once in 64 cuts that leave a live lane out: a lane that
 *   read slow for a moment (CI: a loaded machine, 0.1 GB/s against 5.2) is measured again
 *   within a thousand 1 MiB messages; on a lane that really is slow it costs one message
 *   in 64 a min_chunk's time on that lane, beside the other lanes' messages.
 * - slow lane: under half the others' mean for 8 completions in a row and 100 ms of its
 *   busy time: long enough that a transient (a congestion burst, a retransmit) does not
 *   WARN, short enough that a link that trained at a lower speed is named within the
 *   first second of real traffic.
 * - QP lanes sampled, a run of 4 messages in 16 (the first marks, 3 are measured): a
 *   quarter of the messages pay for the accounting, so most of its cost per message goes.
 *   On softverbs' uplink model (tests/bench/qp-lanes.sh) that keeps 0.90-1.00 of the
 *   capacity, median 0.98 (measuring every message: 0.97-1.00). Before the whole-run
 *   samples and the cap, runs of 2 in 8 read more noise (0.82-0.97) and 4 in 32
 *   converged too slowly (0.78-0.96 in the bench's 192 messages). Every message is
 *   measured until each lane has 4 samples: the first weights come as fast as before.
 */
#include "plugin/stripe.h"

#include <errno.h>
#include <string.h>

#include "plugin/params.h"
#include "plugin/stripe_int.h"

void braid_stripe_cfg_default(struct braid_stripe_cfg *cfg)
{
	*cfg = (struct braid_stripe_cfg){ 0 };
	cfg->mode = BRAID_STRIPE_ADAPTIVE;
	cfg->threshold = BRAID_STRIPE_BYTES_DEFAULT;
	cfg->min_chunk = BRAID_STRIPE_DEF_MIN_CHUNK;
	cfg->align = BRAID_STRIPE_DEF_ALIGN;
}

void braid_stripe_cfg_load(struct braid_stripe_cfg *cfg)
{
	braid_stripe_cfg_default(cfg);
	cfg->mode = (int)braid_param_int(BRAID_P_STRIPE);
	cfg->threshold = (size_t)braid_param_int(BRAID_P_STRIPE_BYTES);
}

void braid_stripe_cfg_qps(struct braid_stripe_cfg *cfg, size_t split_bytes, int nqps)
{
	braid_stripe_cfg_load(cfg);
	cfg->threshold = split_bytes + 1;
	cfg->align = 128;
	cfg->min_chunk = nqps > 1 ? split_bytes / (size_t)nqps : split_bytes;
	cfg->batched = 1;
	cfg->sample = BRAID_STRIPE_QP_SAMPLE;
	cfg->sample_run = BRAID_STRIPE_QP_SAMPLE_RUN;
}

/*
 * Weights from what is known: in equal mode (and in follow mode, until the other side's
 * weights come) 1/n; in adaptive mode the measured rates once
 * every lane has one (a mix of measured and nominal figures would compare unlike things),
 * before that the nominal speeds when all are known, else equal. Then the floor: lanes
 * under it are raised to it and the rest scaled down, until none is under.
 */
static void stripe_weigh(struct braid_stripe *st)
{
	int n = st->nlanes, measured = 1, speeds = 1, under = 0;
	int fixed[BRAID_STRIPE_MAX_LANES] = { 0 };
	double raw[BRAID_STRIPE_MAX_LANES], sum = 0;

	for (int i = 0; i < n; i++) {
		measured &= st->lane[i].down || st->lane[i].rate > 0;
		speeds &= st->lane[i].down || st->lane[i].speed_mbps > 0;
	}
	for (int i = 0; i < n; i++) {
		if (st->lane[i].down)
			raw[i] = 0;
		else if (st->cfg.mode != BRAID_STRIPE_ADAPTIVE)
			raw[i] = 1;
		else if (measured)
			raw[i] = st->lane[i].rate;
		else
			raw[i] = speeds ? st->lane[i].speed_mbps : 1;
		sum += raw[i];
	}
	if (sum <= 0) /* every lane down: nothing to weigh (the caller splits no more) */
		return;
	for (int i = 0; i < n; i++) {
		st->lane[i].weight = raw[i] / sum;
		under |= !st->lane[i].down && st->lane[i].weight < BRAID_STRIPE_WEIGHT_FLOOR;
	}
	if (st->cfg.mode != BRAID_STRIPE_ADAPTIVE || !under)
		return;
	/* At most n rounds: each one fixes at least one more lane at the floor. */
	for (int round = 0; round < n; round++) {
		double free_sum = 0, free_mass = 1;
		int again = 0;

		for (int i = 0; i < n; i++) {
			if (fixed[i])
				free_mass -= BRAID_STRIPE_WEIGHT_FLOOR;
			else
				free_sum += raw[i];
		}
		for (int i = 0; i < n; i++)
			st->lane[i].weight = fixed[i] ? BRAID_STRIPE_WEIGHT_FLOOR
						      : raw[i] * free_mass / free_sum;
		for (int i = 0; i < n; i++) {
			if (!fixed[i] && !st->lane[i].down &&
			    st->lane[i].weight < BRAID_STRIPE_WEIGHT_FLOOR) {
				fixed[i] = 1;
				again = 1;
			}
		}
		if (!again)
			break;
	}
}

/* New weights; the kept cut goes once some lane's weight moved by the slack since it was
 * made (samples move weights a little all the time: cutting again for each costs more than
 * the message's other work on the path, and a cut 1% off costs 1% of one lane's share). */
static void stripe_reweigh(struct braid_stripe *st)
{
	stripe_weigh(st);
	braid_stripe_weights_set(st);
	for (int i = 0; st->memo.size && i < st->nlanes; i++) {
		double d = st->lane[i].weight - st->memo.weight[i];

		if (d >= BRAID_STRIPE_MEMO_SLACK || d <= -BRAID_STRIPE_MEMO_SLACK)
			st->memo.size = 0;
	}
}

int braid_stripe_init(struct braid_stripe *st, int nlanes, const int *speed_mbps,
		      const struct braid_stripe_cfg *cfg)
{
	int rc = 0;

	memset(st, 0, sizeof(*st));
	if (nlanes < 1 || nlanes > BRAID_STRIPE_MAX_LANES) {
		rc = -EINVAL;
		nlanes = 1;
		speed_mbps = NULL;
	}
	st->nlanes = nlanes;
	st->probe_left = BRAID_STRIPE_PROBE_EVERY;
	if (cfg)
		st->cfg = *cfg;
	else
		braid_stripe_cfg_default(&st->cfg);
	if (st->cfg.mode != BRAID_STRIPE_EQUAL && st->cfg.mode != BRAID_STRIPE_FOLLOW)
		st->cfg.mode = BRAID_STRIPE_ADAPTIVE;
	if (!st->cfg.align)
		st->cfg.align = 1;
	/* Whole units of align, at least one: then a split never needs a short chunk. */
	if (st->cfg.min_chunk < st->cfg.align)
		st->cfg.min_chunk = st->cfg.align;
	st->cfg.min_chunk = (st->cfg.min_chunk + st->cfg.align - 1) / st->cfg.align * st->cfg.align;
	/* A run is its mark and at least one measured message, and fits in the period. */
	if (st->cfg.sample < 2)
		st->cfg.sample = 0;
	else if (st->cfg.sample_run < 2)
		st->cfg.sample_run = 2;
	else if (st->cfg.sample_run > st->cfg.sample)
		st->cfg.sample_run = st->cfg.sample;
	for (int i = 0; i < nlanes; i++)
		st->lane[i].speed_mbps = speed_mbps ? speed_mbps[i] : 0;
	stripe_reweigh(st);
	return rc;
}

/* Cyclic distance from the round-robin lane: the smaller, the sooner that lane's turn. */
static int stripe_turn(const struct braid_stripe *st, int lane)
{
	return (lane - st->rr + st->nlanes) % st->nlanes;
}

/* Which active lane to leave out first: the lowest weight; among equal weights the one
 * with more outstanding, then the one whose turn is furthest away. */
static int stripe_drop_first(const struct braid_stripe *st, const int *active)
{
	int worst = -1;

	for (int i = 0; i < st->nlanes; i++) {
		const struct braid_stripe_lane *a = &st->lane[i], *w;

		if (!active[i])
			continue;
		if (worst < 0) {
			worst = i;
			continue;
		}
		w = &st->lane[worst];
		if (a->weight < w->weight ||
		    (a->weight == w->weight && (a->outstanding > w->outstanding ||
						(a->outstanding == w->outstanding &&
						 stripe_turn(st, i) > stripe_turn(st, worst)))))
			worst = i;
	}
	return worst;
}

/* cfg.sample: will the message being cut be measured? (braid_stripe_sample is asked
 * right after its cut.) */
static int stripe_next_measured(const struct braid_stripe *st)
{
	uint32_t phase;

	if (!st->sampling)
		return 1;
	phase = st->sample_seq % st->cfg.sample;
	return phase >= 1 && phase < st->cfg.sample_run;
}

/*
 * A live lane that the cut leaves out (its share under min_chunk: at the weight floor, 2%
 * of a message under 3.2 MiB) is measured no more, so a lane that read slow for a moment
 * would stay at the floor for the comm's life. Once in BRAID_STRIPE_PROBE_EVERY such cuts
 * one of them (in turn) gets a chunk of min_chunk, on a message that is measured and can
 * take one more part. Not in equal mode: nothing there is measured. The lane, or -1.
 */
static int stripe_probe_lane(struct braid_stripe *st, const int *active, int count, size_t kmax)
{
	int n = st->nlanes;

	if (st->cfg.mode == BRAID_STRIPE_EQUAL || count + st->ndown >= n)
		return -1;
	if (st->probe_left > 1) {
		st->probe_left--;
		return -1;
	}
	st->probe_left = 1; /* due: the next cut that can take it */
	if ((size_t)count >= kmax || !stripe_next_measured(st))
		return -1;
	for (int k = 0; k < n; k++) {
		int i = (st->probe_next + k) % n;

		if (!active[i] && !st->lane[i].down) {
			st->probe_next = (i + 1) % n;
			st->probe_left = BRAID_STRIPE_PROBE_EVERY;
			return i;
		}
	}
	return -1;
}

int braid_stripe_cut(struct braid_stripe *st, size_t size, size_t len[BRAID_STRIPE_MAX_LANES],
		     int *first_lane)
{
	int n = st->nlanes, active[BRAID_STRIPE_MAX_LANES], count, first = -1, last = -1, probe;
	size_t a = st->cfg.align, mu = st->cfg.min_chunk, kmax = size / mu;
	uint64_t units, shared, m, u[BRAID_STRIPE_MAX_LANES], sum = 0;
	double x[BRAID_STRIPE_MAX_LANES], wsum;

	if (n == 1 || size < st->cfg.threshold || kmax < 2 || st->ndown >= n - 1) {
		int lane = braid_stripe_pick_one(st, size);

		for (int i = 0; i < n; i++)
			len[i] = 0;
		len[lane] = size;
		*first_lane = lane;
		return 1;
	}

	/* The lanes that take part: drop the lowest weight until every share is at least
	 * min_chunk and there are at most size / min_chunk of them. */
	count = 0;
	for (int i = 0; i < n; i++) {
		active[i] = !st->lane[i].down;
		count += active[i];
	}
	for (;;) {
		int short_share = 0;

		wsum = 0;
		for (int i = 0; i < n; i++)
			wsum += active[i] ? st->lane[i].weight : 0;
		for (int i = 0; i < n; i++)
			short_share |= active[i] &&
				       (double)size * st->lane[i].weight < (double)mu * wsum;
		if (count == 1 || ((size_t)count <= kmax && !short_share))
			break;
		active[stripe_drop_first(st, active)] = 0;
		count--;
	}
	/* the probe takes min_chunk; the others share the rest by their weights (wsum is
	 * theirs) */
	probe = stripe_probe_lane(st, active, count, kmax);

	/* In units of align: each lane its share rounded down, but at least min_chunk; then
	 * units one at a time to the lanes furthest under their share, or back from those
	 * furthest over it (never under min_chunk: count * m <= units since count <= kmax).
	 * The bytes past the last whole unit go to the last lane: the message end. */
	units = size / a;
	m = mu / a;
	shared = units;
	if (probe >= 0) {
		active[probe] = 1;
		count++;
		shared -= m;
	}
	for (int i = 0; i < n; i++) {
		x[i] = 0;
		u[i] = 0;
		if (!active[i])
			continue;
		x[i] = i == probe ? (double)m : (double)shared * st->lane[i].weight / wsum;
		u[i] = (uint64_t)x[i];
		if (u[i] < m)
			u[i] = m;
		sum += u[i];
		if (first < 0)
			first = i;
		last = i;
	}
	while (sum < units) {
		int best = first;

		for (int i = first + 1; i < n; i++)
			if (active[i] && x[i] - (double)u[i] > x[best] - (double)u[best])
				best = i;
		u[best]++;
		sum++;
	}
	while (sum > units) {
		int best = -1;

		for (int i = 0; i < n; i++)
			if (active[i] && u[i] > m &&
			    (best < 0 || (double)u[i] - x[i] > (double)u[best] - x[best]))
				best = i;
		if (best < 0)
			break; /* not reached: sum > units >= count * m, so some u[i] > m */
		u[best]--;
		sum--;
	}
	for (int i = 0; i < n; i++)
		len[i] = (size_t)u[i] * a;
	len[last] += size - (size_t)units * a;
	st->rr = (last + 1) % n;
	*first_lane = first;
	/* Kept only when every lane has a part and none is a probe: then the cut depends on
	 * nothing but the weights and size (leaving lanes out looks at what each has
	 * outstanding). */
	if (count == n && probe < 0) {
		memcpy(st->memo.len, len, (size_t)n * sizeof(len[0]));
		for (int i = 0; i < n; i++)
			st->memo.weight[i] = st->lane[i].weight;
		st->memo.size = size;
		st->memo.first = first;
		st->memo.rr = st->rr;
	}
	return count;
}

void braid_stripe_nic_bytes(struct braid_stripe *st, int lane, const uint64_t *bytes)
{
	if (lane >= 0 && lane < st->nlanes)
		st->lane[lane].nic_bytes = bytes;
}

/* The others' mean rate, over those measured; 0 when none is. */
static double stripe_others_rate(const struct braid_stripe *st, int lane)
{
	double sum = 0;
	int n = 0;

	for (int i = 0; i < st->nlanes; i++) {
		if (i != lane && !st->lane[i].down && st->lane[i].rate > 0) {
			sum += st->lane[i].rate;
			n++;
		}
	}
	return n ? sum / n : 0;
}

static uint64_t nic_read(const struct braid_stripe_lane *l)
{
	return __atomic_load_n(l->nic_bytes, __ATOMIC_RELAXED);
}

/* A slow run starts on lane: what its NIC and the other lanes' NICs have carried so far
 * (adaptive mode, counters given). Rare: once a run, not once a completion. */
static void stripe_nic_mark(struct braid_stripe *st, int lane)
{
	struct braid_stripe_lane *l = &st->lane[lane];

	l->nic_mask = 0;
	if (st->cfg.mode != BRAID_STRIPE_ADAPTIVE || !l->nic_bytes)
		return;
	l->nic_self = nic_read(l);
	l->nic_others = 0;
	for (int i = 0; i < st->nlanes; i++) {
		if (i == lane || st->lane[i].down || !st->lane[i].nic_bytes)
			continue;
		if (st->lane[i].nic_bytes == l->nic_bytes) { /* no record per NIC (counters off) */
			l->nic_mask = 0;
			return;
		}
		l->nic_others += nic_read(&st->lane[i]);
		l->nic_mask |= (uint8_t)(1u << i);
	}
}

/* At the end of a slow run: did lane's NIC carry at least half the other NICs' mean over
 * it (so other comms keep it busy)? Equal mode, or no counters: no. */
static int stripe_nic_busy(const struct braid_stripe *st, int lane)
{
	const struct braid_stripe_lane *l = &st->lane[lane];
	uint64_t others = 0;
	int n = 0;

	if (!l->nic_mask)
		return 0;
	for (int i = 0; i < st->nlanes; i++) {
		if (l->nic_mask >> i & 1) {
			others += nic_read(&st->lane[i]);
			n++;
		}
	}
	return (double)(nic_read(l) - l->nic_self) >=
	       BRAID_STRIPE_SLOW_RATIO * (double)(others - l->nic_others) / n;
}

/* n completions on lane, busy_ns of busy time since the last, others the other lanes'
 * mean rate: extend or end its run of slow completions, and mark it found when the run is
 * long enough (once). */
static void stripe_slow_check(struct braid_stripe *st, int lane, uint32_t n, uint64_t busy_ns,
			      double others)
{
	struct braid_stripe_lane *l = &st->lane[lane];

	if (l->slow_found)
		return;
	if (l->rate > 0 && others > 0 && l->rate < BRAID_STRIPE_SLOW_RATIO * others) {
		if (!l->slow_run)
			stripe_nic_mark(st, lane);
		l->slow_run += n;
		l->slow_run_ns += busy_ns;
		if (l->slow_run < BRAID_STRIPE_SLOW_COMPLETIONS ||
		    l->slow_run_ns < BRAID_STRIPE_SLOW_BUSY_NS)
			return;
		if (!stripe_nic_busy(st, lane)) {
			l->slow_found = 1;
			return;
		}
		l->slow_run = 0; /* shared, not slow: a new run looks again */
		l->slow_run_ns = 0;
	} else {
		l->slow_run = 0;
		l->slow_run_ns = 0;
	}
}

/* Fold the lane's sample into its rate once it is long enough, the sample at most cap x
 * the rate (cap 0: any); 1 when it was. The caller reweighs. */
static int stripe_close_window(struct braid_stripe_lane *l, double cap)
{
	double sample;

	if (l->win_ns < BRAID_STRIPE_WINDOW_NS &&
	    (l->win_bytes < BRAID_STRIPE_WINDOW_BYTES || l->win_ns < BRAID_STRIPE_WINDOW_MIN_NS))
		return 0;
	sample = (double)l->win_bytes * 1e9 / (double)l->win_ns;
	if (cap > 0 && l->samples && sample > cap * l->rate)
		sample = cap * l->rate;
	l->rate = l->samples ? l->rate + BRAID_STRIPE_EMA_ALPHA * (sample - l->rate) : sample;
	l->samples++;
	l->win_bytes = 0;
	l->win_ns = 0;
	return 1;
}

/* cfg.sample: sample once every lane up has its BRAID_STRIPE_SAMPLE_WARM samples (till
 * then the weights still move by much from one sample to the next). */
static void stripe_sample_check(struct braid_stripe *st)
{
	int warm = st->cfg.sample >= 2 && !st->whole;

	for (int i = 0; warm && i < st->nlanes; i++)
		warm = st->lane[i].down || st->lane[i].samples >= BRAID_STRIPE_SAMPLE_WARM;
	st->sampling = warm;
}

/* The busy time measured completions stand for: while sampling, sample_run - 1 messages
 * in sample are measured, and their chunks had about that share of each lane's busy time
 * (the slow-lane rule counts the lane's busy time, not the measured part of it). */
static uint64_t stripe_busy_seen(const struct braid_stripe *st, uint64_t busy_ns)
{
	return st->sampling ? busy_ns * st->cfg.sample / (st->cfg.sample_run - 1) : busy_ns;
}

/* While sampling, a lane's sample holds its whole run (up to the run's last completion:
 * nothing accounted outstanding), or BRAID_STRIPE_WINDOW_NS of it: each measured
 * message is timed from the completion before it, and when that one was seen late (the
 * CQ is read at test(), and the thread may be off the CPU) the message reads fast by as
 * much; over the run the error counts once, not once a message. Without sampling the
 * windows are contiguous, and a completion seen late lengthens the one that it ends as
 * much as it shortens the next. */
static int stripe_run_done(const struct braid_stripe *st, const struct braid_stripe_lane *l)
{
	return !st->sampling || !l->outstanding || l->win_ns >= BRAID_STRIPE_WINDOW_NS;
}

/* While sampling, no sample counts for more than BRAID_STRIPE_SAMPLE_CAP x the lane's
 * rate (0: no cap). A run is a short stretch of a lane's time, and one that starts on a
 * lane that was idle can read far above the lane's rate: a link may catch up on the
 * idle time (softverbs lets it, for 10 ms), a mark may be seen late. On the softverbs
 * uplink bench such runs read 3-13 times a fast link's speed and took the weights with
 * them (0.58-0.81 of the capacity in 5 of 41 runs; capped, 0.90-1.00 in 17). A real rise
 * is still followed, by a quarter of the rate per sample. */
static double stripe_sample_cap(const struct braid_stripe *st)
{
	return st->sampling ? BRAID_STRIPE_SAMPLE_CAP : 0;
}

/* New rates, new weights; in follow mode the weights are the other side's
 * (braid_stripe_follow). */
static void stripe_rates_moved(struct braid_stripe *st)
{
	if (!st->sampling && st->cfg.sample >= 2)
		stripe_sample_check(st);
	if (st->cfg.mode != BRAID_STRIPE_FOLLOW)
		stripe_reweigh(st);
}

void braid_stripe_fold(struct braid_stripe *st, int lane, uint64_t busy_ns)
{
	if (stripe_run_done(st, &st->lane[lane]) &&
	    stripe_close_window(&st->lane[lane], stripe_sample_cap(st)))
		stripe_rates_moved(st);
	stripe_slow_check(st, lane, 1, stripe_busy_seen(st, busy_ns), stripe_others_rate(st, lane));
}

void braid_stripe_reaped(struct braid_stripe *st)
{
	int moved = 0, measured = 0;
	double sum = 0, cap = stripe_sample_cap(st);

	for (int i = 0; i < st->nlanes; i++) {
		struct braid_stripe_lane *l = &st->lane[i];

		if (l->batch_n)
			moved |= stripe_run_done(st, l) && stripe_close_window(l, cap);
	}
	if (moved) /* once a reap, however many lanes closed a sample */
		stripe_rates_moved(st);
	/* the measured rates' sum once, not the others' for each lane */
	for (int i = 0; i < st->nlanes; i++) {
		if (st->lane[i].down) /* its rate is from before it failed */
			continue;
		sum += st->lane[i].rate > 0 ? st->lane[i].rate : 0;
		measured += st->lane[i].rate > 0;
	}
	for (int i = 0; i < st->nlanes; i++) {
		struct braid_stripe_lane *l = &st->lane[i];
		int own = l->rate > 0;

		if (!l->batch_n)
			continue;
		stripe_slow_check(st, i, l->batch_n, stripe_busy_seen(st, l->batch_ns),
				  measured > own ? (sum - (own ? l->rate : 0)) / (measured - own)
						 : 0);
		l->batch_n = 0;
		l->batch_ns = 0;
	}
}

int braid_stripe_lane_down(struct braid_stripe *st, int lane, int down)
{
	struct braid_stripe_lane *l;

	if (lane < 0 || lane >= st->nlanes)
		return st->nlanes - st->ndown;
	l = &st->lane[lane];
	if (l->down != !!down) {
		l->down = (uint8_t) !!down;
		st->ndown += down ? 1 : -1;
		l->outstanding = 0;
		l->win_bytes = 0;
		l->win_ns = 0;
		l->batch_n = 0;
		l->batch_ns = 0;
		l->slow_run = 0;
		l->slow_run_ns = 0;
		st->memo.size = 0;
		stripe_sample_check(st);
		if (st->cfg.mode == BRAID_STRIPE_FOLLOW) {
			l->weight = 0; /* until the other side's next weights */
			braid_stripe_weights_set(st);
		} else {
			stripe_reweigh(st);
		}
	}
	return st->nlanes - st->ndown;
}

double braid_stripe_weight(const struct braid_stripe *st, int lane)
{
	return lane >= 0 && lane < st->nlanes ? st->lane[lane].weight : 0;
}

double braid_stripe_rate(const struct braid_stripe *st, int lane)
{
	return lane >= 0 && lane < st->nlanes && !st->lane[lane].down ? st->lane[lane].rate : 0;
}

int braid_stripe_slow_lane(struct braid_stripe *st, double *lane_rate, double *others_rate)
{
	for (int i = 0; i < st->nlanes; i++) {
		struct braid_stripe_lane *l = &st->lane[i];

		if (l->slow_found && !l->slow_reported) {
			l->slow_reported = 1;
			*lane_rate = l->rate;
			*others_rate = stripe_others_rate(st, i);
			return i;
		}
	}
	return -1;
}
