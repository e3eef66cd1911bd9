// SPDX-License-Identifier: MIT
/* softverbs: configuration from the environment, and the timing model. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/softverbs/sv_internal.h"

static long env_long(const char *name, long dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 0) : dflt;
}

/* "U:V,U:V" or "*:V" into table[U] = V * mult. */
static void parse_uplink_table(const char *name, uint64_t *table, uint64_t mult)
{
	const char *v = getenv(name);
	char buf[512], *save = NULL, *tok;

	if (!v || !*v)
		return;
	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':');
		uint64_t val;

		if (!colon) {
			sv_log("%s: ignoring '%s' (want UPLINK:VALUE)", name, tok);
			continue;
		}
		val = strtoull(colon + 1, NULL, 0) * mult;
		if (tok[0] == '*') {
			for (int i = 0; i < SV_STATS_MAX_UPLINKS; i++)
				table[i] = val;
		} else {
			long u = strtol(tok, NULL, 0);

			if (u >= 0 && u < SV_STATS_MAX_UPLINKS)
				table[u] = val;
		}
	}
}

#define SV_MAX_RATE_MBPS 10000000ull /* 10 TB/s: B * 1e9 / rate cannot overflow */

/*
 * A per-device table from var: "NAME:VALUE,..." and/or "*:VALUE", applied left to right
 * (so "*:100,svroce1:400" gives svroce1 400), NAME a device of SOFTVERBS_DEVICES and
 * VALUE (unit) a whole number from 0 to max, stored times mult; a device no entry names
 * holds unset. An entry that is not that
 * is reported and the whole variable ignored: a half-applied setting would skew a
 * measurement without anyone noticing. 0: the table is set.
 */
static int parse_device_table(const char *var, const char *unit, unsigned long long max,
			      uint64_t mult, uint64_t unset, uint64_t *out)
{
	const char *v = getenv(var);
	uint64_t tab[SV_MAX_DEVICES];
	char buf[512], *save = NULL, *tok;
	struct sv_device *devs;
	int ndevs;

	for (int d = 0; d < SV_MAX_DEVICES; d++)
		tab[d] = unset;
	if (!v || !*v)
		return -1;
	if (strlen(v) >= sizeof(buf)) {
		sv_log("%s: value longer than %zu characters: ignored", var, sizeof(buf) - 1);
		return -1;
	}
	devs = sv_devices(&ndevs);
	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':'), *end;
		unsigned long long val;
		int d;

		if (!colon || colon == tok) {
			sv_log("%s: bad entry '%s' (want DEVICE:%s or *:%s): variable ignored", var,
			       tok, unit, unit);
			return -1;
		}
		*colon = 0;
		errno = 0;
		val = strtoull(colon + 1, &end, 10);
		if (!isdigit((unsigned char)colon[1]) || *end || errno || val > max) {
			sv_log("%s: bad entry '%s:%s' (%s: a whole number from 0 to %llu): "
			       "variable ignored",
			       var, tok, colon + 1, unit, max);
			return -1;
		}
		if (!strcmp(tok, "*")) {
			for (d = 0; d < SV_MAX_DEVICES; d++)
				tab[d] = val * mult;
			continue;
		}
		for (d = 0; d < ndevs && strcmp(devs[d].ibdev.name, tok); d++)
			;
		if (d == ndevs) {
			sv_log("%s: bad entry '%s:%s' (no device %s in SOFTVERBS_DEVICES): "
			       "variable ignored",
			       var, tok, colon + 1, tok);
			return -1;
		}
		tab[d] = val * mult;
	}
	memcpy(out, tab, sizeof(tab));
	return 0;
}

/* SOFTVERBS_DEVICE_RATE_MBPS: line rates in 10^6 bytes/s (0: no limit). */
static void parse_device_rates(uint64_t *rate)
{
	struct sv_device *devs;
	int ndevs;

	if (parse_device_table("SOFTVERBS_DEVICE_RATE_MBPS", "MBPS", SV_MAX_RATE_MBPS, 1000000ull,
			       0, rate))
		return;
	devs = sv_devices(&ndevs);
	for (int d = 0; d < ndevs; d++)
		if (rate[d])
			sv_debug("device %s: %llu MB/s", devs[d].ibdev.name,
				 (unsigned long long)(rate[d] / 1000000ull));
}

/* SOFTVERBS_DEVICE_MAX_MSG_SZ: each port's max_msg_sz (0: SV_MAX_MSG, the most). */
static void parse_device_max_msg(uint64_t *max_msg)
{
	for (int d = 0; d < SV_MAX_DEVICES; d++)
		max_msg[d] = SV_MAX_MSG;
	if (parse_device_table("SOFTVERBS_DEVICE_MAX_MSG_SZ", "BYTES", SV_MAX_MSG, 1, 0, max_msg))
		return;
	for (int d = 0; d < SV_MAX_DEVICES; d++)
		if (!max_msg[d])
			max_msg[d] = SV_MAX_MSG;
}

/*
 * SOFTVERBS_FAULT_PORT_{DOWN,UP}_AFTER_MS: a plain number is every device's time, as it
 * always was; "NAME:MS,..." (or "*:MS") takes devices one by one, so that one NIC of a
 * fused device can fail while the other carries on. -1: no fault on that device.
 */
static void parse_port_fault(const char *var, long *ms)
{
	const char *v = getenv(var);
	uint64_t tab[SV_MAX_DEVICES];
	long all;

	for (int d = 0; d < SV_MAX_DEVICES; d++)
		ms[d] = -1;
	if (!v || !*v)
		return;
	if (!strchr(v, ':')) {
		all = env_long(var, -1);
		for (int d = 0; d < SV_MAX_DEVICES; d++)
			ms[d] = all;
		return;
	}
	/* UINT64_MAX marks a device no entry named (0 ms is a valid time). */
	if (parse_device_table(var, "MS", 86400000ull, 1, UINT64_MAX, tab))
		return;
	for (int d = 0; d < SV_MAX_DEVICES; d++)
		ms[d] = tab[d] == UINT64_MAX ? -1 : (long)tab[d];
}

#define SV_MAX_PORT_FLAPS 100000

/*
 * SOFTVERBS_FAULT_PORT_FLAPS=N: each device with both a down and an up time goes down and
 * comes back N times, cycle i (from 0) down at DOWN + i * UP and up at (i + 1) * UP, so UP
 * must be above DOWN. A value that is not a whole number from 1 to SV_MAX_PORT_FLAPS, or
 * a device whose UP is not above its DOWN, is reported and the variable ignored (one flap).
 */
static int parse_port_flaps(const struct sv_config *cfg)
{
	const char *var = "SOFTVERBS_FAULT_PORT_FLAPS", *v = getenv(var);
	struct sv_device *devs;
	unsigned long long val;
	char *end;
	int ndevs;

	if (!v || !*v)
		return 1;
	errno = 0;
	val = strtoull(v, &end, 10);
	if (!isdigit((unsigned char)v[0]) || *end || errno || val < 1 || val > SV_MAX_PORT_FLAPS) {
		sv_log("%s: bad value '%s' (a whole number from 1 to %d): variable ignored", var, v,
		       SV_MAX_PORT_FLAPS);
		return 1;
	}
	devs = sv_devices(&ndevs);
	for (int d = 0; val > 1 && d < ndevs && d < SV_MAX_DEVICES; d++) {
		long dn = cfg->fault_port_down_ms[d], up = cfg->fault_port_up_ms[d];

		if (dn >= 0 && up >= 0 && up <= dn) {
			sv_log("%s=%s: device %s comes back at %ld ms, not after it goes down at "
			       "%ld ms (each flap's period is SOFTVERBS_FAULT_PORT_UP_AFTER_MS, "
			       "which must be above SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS): "
			       "variable ignored",
			       var, v, devs[d].ibdev.name, up, dn);
			return 1;
		}
	}
	return (int)val;
}

uint64_t sv_max_msg(int d)
{
	uint64_t m = d >= 0 && d < SV_MAX_DEVICES ? sv_eng.cfg.max_msg[d] : 0;

	return m ? m : SV_MAX_MSG;
}

void sv_config_load(struct sv_config *cfg)
{
	const char *v;

	memset(cfg, 0, sizeof(*cfg));
	v = getenv("SOFTVERBS_FABRIC");
	snprintf(cfg->fabric, sizeof(cfg->fabric), "%s", v && *v ? v : "/tmp/softverbs-fabric");
	v = getenv("SOFTVERBS_TIME_SCALE");
	cfg->time_scale = v && *v ? strtod(v, NULL) : 0.01;
	if (cfg->time_scale <= 0)
		cfg->time_scale = 0.01;
	cfg->uplinks = (int)env_long("SOFTVERBS_UPLINKS", 1);
	if (cfg->uplinks < 1)
		cfg->uplinks = 1;
	if (cfg->uplinks > SV_STATS_MAX_UPLINKS)
		cfg->uplinks = SV_STATS_MAX_UPLINKS;
	parse_uplink_table("SOFTVERBS_UPLINK_RATE_MBPS", cfg->uplink_rate, 1000000ull);
	parse_uplink_table("SOFTVERBS_UPLINK_DELAY_US", cfg->uplink_delay_us, 1);
	cfg->debug = env_long("SOFTVERBS_DEBUG", 0) != 0;
	parse_device_rates(cfg->device_rate);
	parse_device_max_msg(cfg->max_msg);
	cfg->fault_cut_bytes = (uint64_t)env_long("SOFTVERBS_FAULT_CUT_AFTER_BYTES", 0);
	cfg->fault_cut_qp = (int)env_long("SOFTVERBS_FAULT_CUT_QP", 0);
	cfg->fault_cut_deliver = env_long("SOFTVERBS_FAULT_CUT_DELIVER", 0) != 0;
	cfg->fault_cut_keep = env_long("SOFTVERBS_FAULT_CUT_KEEP", 0) != 0;
	v = getenv("SOFTVERBS_FAULT_CUT_DEVICE");
	snprintf(cfg->fault_cut_dev, sizeof(cfg->fault_cut_dev), "%s", v ? v : "");
	cfg->fault_fail_reg = env_long("SOFTVERBS_FAULT_FAIL_REG", 0);
	cfg->fault_remote_access = env_long("SOFTVERBS_FAULT_REMOTE_ACCESS", 0);
	parse_port_fault("SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS", cfg->fault_port_down_ms);
	parse_port_fault("SOFTVERBS_FAULT_PORT_UP_AFTER_MS", cfg->fault_port_up_ms);
	cfg->fault_port_flaps = parse_port_flaps(cfg);
	cfg->post_send_delay_us = env_long("SOFTVERBS_POST_SEND_DELAY_US", 0);
	cfg->dmabuf = env_long("SOFTVERBS_DMABUF", 0) != 0;
	cfg->stats_keep = env_long("SOFTVERBS_STATS_KEEP", 0) != 0;
}

/*
 * IB local ACK timeout: 4.096 us * 2^timeout per try, retry_cnt retries, so a
 * dead peer is reported after (retry_cnt + 1) tries. Scaled by
 * SOFTVERBS_TIME_SCALE (default 0.01) so tests stay fast; timeout 0 (wait for
 * ever in IB) is capped like the largest value. Clamped to [1 ms, 60 s].
 */
uint64_t sv_qp_timeout_ns(const struct ibv_qp_attr *attr)
{
	unsigned int t = attr->timeout ? attr->timeout : 31;
	double ns = 4096.0 * (double)(1ull << (t > 31 ? 31 : t));

	ns *= (double)(attr->retry_cnt + 1) * sv_eng.cfg.time_scale;
	if (ns < 1e6)
		ns = 1e6;
	if (ns > 60e9)
		ns = 60e9;
	return (uint64_t)ns;
}

/* IB min_rnr_timer encoding (IBA table 45), in microseconds. Not scaled: the
 * values are already short, and a scaled-down RNR wait would spin. */
uint64_t sv_rnr_delay_ns(uint8_t t)
{
	static const uint32_t us[32] = {
		655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,    320,
		480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240,  15360,
		20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
	};

	return (uint64_t)us[t & 31] * 1000ull;
}
