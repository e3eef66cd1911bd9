// SPDX-License-Identifier: Apache-2.0
#include "plugin/gid.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "plugin/params.h"

struct addr_range {
	bool set;
	int family;
	uint8_t addr[16];
	int prefix;
};

const char *braid_gid_type_name(int type)
{
	switch (type) {
	case BRAID_GID_IB: return "IB";
	case BRAID_GID_ROCE_V1: return "RoCEv1";
	case BRAID_GID_ROCE_V2: return "RoCEv2";
	default: return "(type unknown)";
	}
}

void braid_gid_rule_from_params(struct braid_gid_rule *r)
{
	r->want_index = (int)braid_param_int(BRAID_P_IB_GID_INDEX);
	r->family = braid_param_int(BRAID_P_IB_ADDR_FAMILY) == 1 ? AF_INET6 : AF_INET;
	r->range = braid_param_str(BRAID_P_IB_ADDR_RANGE);
	r->roce_version = (int)braid_param_int(BRAID_P_IB_ROCE_VERSION_NUM);
}

static bool is_v4mapped(const uint8_t *raw)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(raw, pfx, sizeof(pfx));
}

/* "address/prefix"; 0 (r->set false for NULL or ""), or -1 when it is not one. */
static int parse_range(const char *s, struct addr_range *r)
{
	char buf[128], *slash;
	int maxbits;

	memset(r, 0, sizeof(*r));
	if (!s || !s[0])
		return 0;
	snprintf(buf, sizeof(buf), "%s", s);
	slash = strchr(buf, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	if (inet_pton(AF_INET, buf, r->addr) == 1) {
		r->family = AF_INET;
		maxbits = 32;
	} else if (inet_pton(AF_INET6, buf, r->addr) == 1) {
		r->family = AF_INET6;
		maxbits = 128;
	} else {
		return -1;
	}
	r->prefix = atoi(slash + 1);
	if (r->prefix < 0 || r->prefix > maxbits)
		return -1;
	r->set = true;
	return 0;
}

static bool in_range(const struct addr_range *r, const uint8_t *raw)
{
	const uint8_t *a = r->family == AF_INET ? raw + 12 : raw;

	if (!r->set)
		return true;
	if ((r->family == AF_INET) != is_v4mapped(raw))
		return false;
	for (int bit = 0; bit < r->prefix; bit++) {
		int byte = bit / 8, mask = 0x80 >> (bit % 8);

		if ((a[byte] & mask) != (r->addr[byte] & mask))
			return false;
	}
	return true;
}

/* Why an entry does not fit the rule (the other RoCE version: only as the fallback), or
 * NULL. other: BRAID_GID_ROCE_V1 or _V2, the version not preferred. */
static const char *skip_reason(const struct braid_gid_entry *e, int family,
			       const struct addr_range *range, int other)
{
	int fam = is_v4mapped(e->raw) ? AF_INET : AF_INET6;

	if (fam == AF_INET6 && e->raw[0] == 0xfe && (e->raw[1] & 0xc0) == 0x80)
		return "link-local";
	if (fam != family)
		return "family";
	if (!in_range(range, e->raw))
		return "range";
	if (e->type == other)
		return braid_gid_type_name(other);
	return NULL;
}

static void choose_index(const struct braid_gid_entry *g, int n, int want,
			 struct braid_gid_pick *out)
{
	for (int i = 0; i < n; i++)
		if (g[i].index == want) {
			out->pos = i;
			snprintf(out->why, sizeof(out->why), "index %d as set", want);
			return;
		}
	snprintf(out->why, sizeof(out->why), "no GID at index %d", want);
}

void braid_gid_choose(const struct braid_gid_entry *g, int n, const struct braid_gid_rule *r,
		      struct braid_gid_pick *out)
{
	const char *fam = r->family == AF_INET6 ? "IPv6" : "IPv4";
	struct addr_range range;
	int other = r->roce_version == 1 ? BRAID_GID_ROCE_V2 : BRAID_GID_ROCE_V1;
	char skipped[96] = "";
	size_t used = 0;
	int fb = -1;

	memset(out, 0, sizeof(*out));
	out->pos = -1;
	if (r->want_index >= 0) {
		choose_index(g, n, r->want_index, out);
		return;
	}
	if (parse_range(r->range, &range)) {
		out->range_bad = true;
		memset(&range, 0, sizeof(range));
	}
	for (int i = 0; i < n; i++) {
		const char *skip = skip_reason(&g[i], r->family, &range, other);

		if (!skip) {
			out->pos = i;
			snprintf(out->why, sizeof(out->why), "first %s %s GID%s%s%s%s%s",
				 braid_gid_type_name(g[i].type), fam, range.set ? " in " : "",
				 range.set ? r->range : "", used ? " (skipped " : "", skipped,
				 used ? ")" : "");
			return;
		}
		if (!strcmp(skip, braid_gid_type_name(other)) && fb < 0)
			fb = i;
		if (used < sizeof(skipped))
			used += (size_t)snprintf(skipped + used, sizeof(skipped) - used, "%s%d %s",
						 used ? ", " : "", g[i].index, skip);
	}
	if (fb >= 0) {
		out->pos = fb;
		out->version_fallback = true;
		snprintf(out->why, sizeof(out->why), "no %s GID fits; %s fallback",
			 braid_gid_type_name(other == BRAID_GID_ROCE_V1 ? BRAID_GID_ROCE_V2
									: BRAID_GID_ROCE_V1),
			 braid_gid_type_name(other));
		return;
	}
	snprintf(out->why, sizeof(out->why), "no %s RoCE GID%s%s (skipped: %s)", fam,
		 range.set ? " in " : "", range.set ? r->range : "", used ? skipped : "none");
}
