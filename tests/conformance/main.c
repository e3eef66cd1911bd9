// SPDX-License-Identifier: Apache-2.0
/*
 * conformance: run the scenarios on each exported API version, each side of each
 * scenario in its own process, as two NCCL ranks would.
 *
 * Local (default): both sides on this host, meeting in a fresh temporary directory.
 * --role a|b --dir DIR: one side only, for runs across network namespaces or hosts
 * sharing a filesystem; start the other with the other role, same --dir and --seed.
 */
#include "tests/conformance/conf.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SC(n, fn, minv, d) .name = n, .run = fn, .min_version = minv, .doc = d

const struct scenario scenarios[] = {
	{ SC("props", sc_props, 8,
	     "devices() and getProperties() are sane; an unused listen closes"),
	  .one_sided = true, .quick = true },
	{ SC("tiny", sc_zero_and_tiny, 8, "600 messages of 0..16 bytes, the window full"),
	  .quick = true },
	{ SC("stream", sc_stream, 8,
	     "0, 1, odd, page-crossing sizes up to 64 MiB, 32 in "
	     "flight, receive buffers larger than the message") },
	{ SC("groups", sc_groups, 8,
	     "grouped receives of 1..maxRecvs buffers, tags sent "
	     "in shuffled order, sub-ranges of one registration") },
	{ SC("threads", sc_threads, 8,
	     "two comms, one each way, driven from two threads "
	     "at once (v11: each thread its own init)") },
	{ SC("init-twice", sc_init_twice, 11,
	     "v11: init twice, finalize one, the other "
	     "still works, finalize it, init again"),
	  .own_init = true },
	{ SC("bad-handle", sc_bad_handle, 8,
	     "garbage and truncated handles fail with "
	     "ncclInvalidArgument quickly; connect+accept to self from one thread"),
	  .one_sided = true },
	{ SC("kill-sender", sc_kill_sender, 8,
	     "the sender SIGKILLs itself mid-transfer: "
	     "the receiver gets an error in bounded time and closes"),
	  .victim = 'b' },
	{ SC("kill-receiver", sc_kill_receiver, 8,
	     "the receiver SIGKILLs itself "
	     "mid-transfer: the sender gets an error in bounded time and closes"),
	  .victim = 'a' },
	{ SC("tag-order", sc_tag_order, 8,
	     "grouped receives whose sends come in another "
	     "order, and isends with no free buffer yet: NULL request, called again") },
	{ SC("truncate", sc_truncate, 8,
	     "messages larger than their receive buffers arrive "
	     "truncated, the send succeeds, test() reports what arrived") },
	{ SC("isolation", sc_isolation, 8,
	     "one comm truncates and fails while another on "
	     "the same device streams 1 GiB, verified") },
	{ SC("reuse-close", sc_reuse_close, 8,
	     "200 connections through one listen comm, "
	     "closed in either order as soon as done: no error"),
	  .own_init = true },
	{ SC("strangers", sc_strangers, 8,
	     "scans, garbage, a replayed handle and idle "
	     "connections on the listen port: accept drops them, the peer gets through") },
	{ SC("flush", sc_flush, 8,
	     "iflush of 32 receives on each of 64 comms, all in "
	     "flight at once: never an error"),
	  .own_init = true },
	{ SC("abort-close", sc_abort_close, 8,
	     "as ncclCommAbort: 8 x 1 MiB posted each way, deregMr and close everything in "
	     "flight, no sync between ranks; 10 rounds on 1 thread and on 4; an isend into a "
	     "receive the peer posted before closing returns a request, test() ends it"),
	  /* issue 19: net_ofi over tcp;ofi_rxm fails its strict case (docs/contract.md);
	   tests/ib/conformance-roce.sh names it */
	  .explicit_only = true },
	{ SC("dereg-idle", sc_dereg_idle, 8,
	     "deregMr of a registration nothing uses while 8 x 1 MiB are in flight on the comm "
	     "(ncclCommDeregister): they all complete, every byte right") },
	{ SC("abort-reinit", sc_abort_reinit, 11,
	     "as ncclCommAbort of a job's only communicator, 10 times: init, 8 x 1 MiB each "
	     "way closed in flight, the last finalize; the next init opens the devices again"),
	  .own_init = true },
	{ SC("vdevice", sc_vdevice, 9,
	     "makeVDevice: bad arguments refused with ncclInvalidUsage, nothing changed; two "
	     "devices fused into a third (name a+b, sum of speeds, vProps)"),
	  .one_sided = true, .quick = true },
	{ SC("props-v12", sc_props_v12, 12,
	     "v12: every member of the properties written (struct pre-filled with two "
	     "patterns), railId/planeId in range; makeVDevice of 5..8 devices fuses them where "
	     "there are that many (else a WARN naming the missing one), 9 refused with a WARN "
	     "naming the limit"),
	  .one_sided = true, .quick = true },
	{ SC("stall", sc_stall, 8,
	     "a receive that waits 900 ms for its send is one stall (BRAID_STALL_MS=300), "
	     "counted once; the send is none"),
	  .own_init = true },
	{ SC("ring", sc_ring, 8,
	     "rings of 2, 3 and 4 processes: irecv, then isend until "
	     "taken, 1,000 times: no deadlock"),
	  .own_init = true },
	{ SC("comm-limit", sc_comm_limit, 8,
	     "BRAID_MAX_COMMS=8: maxComms 8; the 9th connect, and an accept past the "
	     "acceptor's limit, fail with a WARN naming the limit and the knob, never hang"),
	  .own_init = true },
	{ SC("soak", sc_soak, 11,
	     "random traffic on several comms at once, both ways: sizes 0..16 MiB, random "
	     "tags, grouped receives of 1..maxRecvs, random iflush; every byte verified "
	     "(CONF_SOAK_TRANSFERS, CONF_SOAK_COMMS, CONF_SOAK_SEED)"),
	  .bound_s = sc_soak_bound_s },
	{ SC("kill-any", sc_kill_any, 11,
	     "b SIGKILLs itself at a seeded moment of connect, accept, a transfer, a grouped "
	     "receive, iflush or close: a's requests with b all end within 2 x "
	     "BRAID_LIVENESS_MS (+1 s), its comms with a bystander process still move data"),
	  .victim = 'b', .own_init = true },
	{ SC("mem", sc_mem, 11,
	     "memory per comm: braid's own allocations and the provider's, per comm and after "
	     "close (braid's back to the start, <= 128 KiB per comm); only through mem.sh"),
	  .explicit_only = true },
	{ SC("profiler", sc_profiler, 10,
	     "a profiler stand-in passed to init, two comms on two threads: every event started "
	     "is stopped once, under a phandle given to isend/irecv, a request's lengths adding "
	     "up to its message (8 B, 1 MiB, 5 MiB + 3, 300001 B, every byte checked); init "
	     "without one: no call"),
	  .own_init = true },
	{ SC("many-comms", sc_many_comms, 11,
	     "1,024 comms opened and closed 10 times: "
	     "descriptors, AV entries and memory come back") },
};
const int nscenarios = sizeof(scenarios) / sizeof(scenarios[0]);

struct options {
	const char *plugin;
	const char *dir;
	char role; /* 0: both, locally */
	int dev;
	uint64_t seed;
	bool versions[NETAPI_MAX_VERSION + 1];
	bool chosen[sizeof(scenarios) / sizeof(scenarios[0])];
};

static struct side *alarm_side;

static void on_alarm(int sig)
{
	char msg[300];
	int n = snprintf(msg, sizeof(msg), "[%c %s] FAIL: TIMEOUT (%d s alarm) in step: %s\n",
			 alarm_side ? alarm_side->role : '-', alarm_side ? alarm_side->key : "-",
			 CONF_SCENARIO_ALARM_S, alarm_side ? alarm_side->what : "-");

	if (n > 0 && write(2, msg, n) < 0)
		_exit(124);
	_exit(124);
}

/*
 * A side that failed says why in DIR/why.ROLE.KEY, which its parent prints: a scenario
 * that returned an error without a FAIL line (a harness bug), or a stderr that is no
 * longer the log (fd 2 closed and reused by the process under test, whose lines then went
 * elsewhere), would otherwise leave only "exit status non-zero" to go on.
 */
static void why_path(const char *dir, char role, const char *key, char *path, size_t len)
{
	snprintf(path, len, "%s/why.%c.%s", dir, role, key);
}

static void report_why(const struct options *o, const struct side *s, const struct stat *err0)
{
	char path[600], now[256] = "(closed)", msg[1200];
	struct stat st;
	ssize_t n;
	FILE *f;
	int len;

	len = snprintf(msg, sizeof(msg), "[%c %s] FAIL (%s): ", s->role, s->key,
		       s->what[0] ? s->what : "-");
	if (fstat(2, &st) || st.st_dev != err0->st_dev || st.st_ino != err0->st_ino) {
		n = readlink("/proc/self/fd/2", now, sizeof(now) - 1);
		now[n > 0 ? n : 0] = '\0';
		len += snprintf(msg + len, sizeof(msg) - (size_t)len,
				"stderr (fd 2) was replaced while the scenario ran, now %s: its "
				"FAIL lines went there; ",
				now[0] ? now : "(closed)");
	}
	if (!conf_failures())
		snprintf(msg + len, sizeof(msg) - (size_t)len,
			 "the scenario returned an error without a FAIL line");
	else
		snprintf(msg + len, sizeof(msg) - (size_t)len, "%d FAIL line(s) above",
			 conf_failures());
	why_path(o->dir, s->role, s->key, path, sizeof(path));
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "%s\n", msg);
		fclose(f);
	}
}

/* The parent's side of report_why(): its own stderr is the log. */
static void print_why(const struct options *o, char role, const char *key)
{
	char path[600], line[1200];
	FILE *f;

	why_path(o->dir, role, key, path, sizeof(path));
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(line, sizeof(line), f))
		fprintf(stderr, "%s", line);
	fclose(f);
	unlink(path);
}

/* One side of one scenario on one version: this is the whole life of the process. */

/* CONF_START_DELAY_MS: a pause between init and the scenario, for a fault that must come
 * after init has listed the devices and before the first comm forms (tests/ib/nic-down.sh,
 * netns-fused.sh). */
static void start_delay(void)
{
	const char *v = getenv("CONF_START_DELAY_MS");
	long ms = v ? strtol(v, NULL, 10) : 0;
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L };

	if (ms <= 0 || ms > 60000)
		return;
	/* a script waits for this line before it injects the fault */
	printf("start delay: %ld ms\n", ms);
	fflush(stdout);
	nanosleep(&ts, NULL);
}
static int run_side(const struct options *o, const struct scenario *sc, int version, char role)
{
	char loaded[512], err[1024];
	struct stat err0 = { 0 };
	struct net_api api;
	struct side s;
	ncclResult_t r;
	int ndev = 0, rc;
	void *dl;

	memset(&s, 0, sizeof(s));
	(void)fstat(2, &err0);
	s.role = role;
	s.api = &api;
	s.dev = o->dev;
	s.dir = o->dir;
	snprintf(s.key, sizeof(s.key), "v%d.%s", version, sc->name);
	/* both sides derive the same seed for the same scenario and version */
	s.seed = o->seed * 1000003ULL + (uint64_t)version * 101 + (uint64_t)(sc - scenarios);
	snprintf(netapi_log_prefix, sizeof(netapi_log_prefix), "%c.%s", role, s.key);
	alarm_side = &s;
	signal(SIGALRM, on_alarm);
	alarm(CONF_SCENARIO_ALARM_S);

	conf_step(&s, "dlopen(%s)", o->plugin);
	dl = netapi_open(o->plugin, loaded, sizeof(loaded), err, sizeof(err));
	if (!dl)
		return conf_fail(&s, "%s", err);
	if (netapi_bind(dl, version, &api))
		return conf_fail(&s, "%s exports no ncclNetPlugin_v%d", loaded, version);
	if (!api.name || !api.name[0])
		return conf_fail(&s, "ncclNetPlugin_v%d has an empty name", version);
	if (!sc->own_init) {
		conf_step(&s, "init");
		r = api.init(&api, &s.ctx, s.seed);
		if (r != ncclSuccess)
			return conf_fail(&s, "init returned %s (%d)", netapi_result_str(r), r);
	}
	/* devices and properties need an init first; own-init scenarios go without them */
	if (!sc->own_init) {
		conf_step(&s, "devices");
		r = api.devices(&api, &ndev);
		if (r != ncclSuccess || ndev < 1 || o->dev >= ndev)
			return conf_fail(&s,
					 "devices returned %s (%d), %d devices; want "
					 "device %d",
					 netapi_result_str(r), r, ndev, o->dev);
		r = api.get_props(&api, o->dev, &s.props);
		if (r != ncclSuccess)
			return conf_fail(&s, "getProperties(%d) returned %s (%d)", o->dev,
					 netapi_result_str(r), r);
	}
	start_delay();
	rc = sc->run(&s);
	if (!sc->own_init) {
		conf_step(&s, "finalize");
		r = api.finalize(&api, s.ctx);
		if (r != ncclSuccess)
			rc = conf_fail(&s, "finalize returned %s (%d)", netapi_result_str(r), r);
	}
	alarm(0);
	if (rc)
		report_why(o, &s, &err0);
	return rc;
}

/* Wait for a child with a bound; kill it past the bound. Returns its wait status. */
static int wait_bounded(pid_t pid, double timeout_s, bool *timed_out)
{
	double deadline = now_s() + timeout_s;
	int status = 0;

	*timed_out = false;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			return status;
		if (w < 0 && errno != EINTR)
			return -1;
		if (now_s() > deadline) {
			*timed_out = true;
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return status;
		}
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

static int scenario_bound_s(const struct scenario *sc)
{
	return sc->bound_s ? sc->bound_s() : CONF_SCENARIO_ALARM_S;
}

/* Every chosen scenario on every chosen version, for one role; returns failures. */
static int run_role(const struct options *o, char role)
{
	int failures = 0, passes = 0;
	char failed[512] = ""; /* names, so that a log's last line says which */

	for (int v = NETAPI_MIN_VERSION; v <= NETAPI_MAX_VERSION; v++) {
		for (int i = 0; i < nscenarios; i++) {
			const struct scenario *sc = &scenarios[i];
			bool timed_out, ok;
			double t0 = now_s();
			int status;
			pid_t pid;

			if (!o->versions[v] || !o->chosen[i] || v < sc->min_version)
				continue;
			if (sc->one_sided && role == 'b')
				continue;
			fflush(NULL);
			pid = fork();
			if (pid < 0) {
				perror("fork");
				return failures + 1;
			}
			if (pid == 0)
				_exit(run_side(o, sc, v, role) ? 1 : 0);
			status = wait_bounded(pid, scenario_bound_s(sc) + 30, &timed_out);
			if (sc->victim == role)
				ok = !timed_out && WIFSIGNALED(status) &&
				     WTERMSIG(status) == SIGKILL;
			else
				ok = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
			if (!ok) {
				struct side s = { .role = role, .dir = o->dir };

				/* let the peer stop waiting for a side that is gone */
				snprintf(s.key, sizeof(s.key), "v%d.%s", v, sc->name);
				print_why(o, role, s.key);
				rdv_abort(&s);
				failures++;
				snprintf(failed + strlen(failed), sizeof(failed) - strlen(failed),
					 " v%d.%s", v, sc->name);
			} else {
				passes++;
			}
			fprintf(stderr, "%s  v%-2d %-14s side %c  %5.1f s%s%s\n",
				ok ? "PASS" : "FAIL", v, sc->name, role, now_s() - t0,
				timed_out ? "  (timed out, killed)"
				: WIFSIGNALED(status)
					? (sc->victim == role ? "  (killed itself, "
								"as planned)"
							      : "  (killed by a signal)")
					: "",
				!ok && WIFEXITED(status) ? "  (exit status non-zero)" : "");
			fflush(stderr);
		}
	}
	fprintf(stderr, "side %c: %d passed, %d failed%s%s\n", role, passes, failures,
		failures ? ":" : "", failed);
	return failures;
}

static void remove_dir(const char *dir)
{
	struct dirent *e;
	char path[1024];
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

static int run_local(struct options *o)
{
	char tmpl[] = "/tmp/braid-conf.XXXXXX";
	pid_t pid[2];
	int failures = 0;

	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		return 1;
	}
	o->dir = tmpl;
	for (int i = 0; i < 2; i++) {
		fflush(NULL);
		pid[i] = fork();
		if (pid[i] < 0) {
			perror("fork");
			if (i == 1)
				kill(pid[0], SIGKILL);
			remove_dir(tmpl);
			return 1;
		}
		if (pid[i] == 0)
			_exit(run_role(o, i == 0 ? 'a' : 'b') ? 1 : 0);
	}
	for (int i = 0; i < 2; i++) {
		bool timed_out;
		/* each scenario is bounded; the whole side gets a generous overall bound */
		int status = wait_bounded(pid[i], 1800 + sc_soak_bound_s(), &timed_out);

		if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			failures++;
			if (timed_out)
				fprintf(stderr, "side %c timed out\n", i ? 'b' : 'a');
		}
	}
	remove_dir(tmpl);
	return failures;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: conformance [--plugin VALUE] [--api 8,9,10,11,12] [--scenario LIST|quick]\n"
		"                   [--dev N] [--seed N] [--role a|b --dir DIR] [--list]\n"
		"  --plugin VALUE  as NCCL_NET_PLUGIN: a path, or NAME for libnccl-net-NAME.so\n"
		"                  (default: $NCCL_NET_PLUGIN, else $BUILD/libnccl-net-braid.so)\n"
		"  --role, --dir   run one side only; the other side runs the other role with\n"
		"                  the same --dir (shared directory) and --seed\n");
}

static int parse_list(const char *arg, struct options *o, bool versions)
{
	char buf[512], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", arg);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		bool found = false;

		if (versions) {
			int v = atoi(tok);

			if (v < NETAPI_MIN_VERSION || v > NETAPI_MAX_VERSION)
				return -1;
			o->versions[v] = true;
			continue;
		}
		for (int i = 0; i < nscenarios; i++)
			if ((!strcmp(tok, "all") && !scenarios[i].explicit_only) ||
			    !strcmp(tok, scenarios[i].name) ||
			    (!strcmp(tok, "quick") && scenarios[i].quick)) {
				o->chosen[i] = true;
				found = true;
			}
		if (!found) {
			fprintf(stderr, "conformance: no scenario '%s' (--list shows them)\n", tok);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "plugin", required_argument, NULL, 'p' },
		{ "api", required_argument, NULL, 'v' },
		{ "scenario", required_argument, NULL, 's' },
		{ "dev", required_argument, NULL, 'd' },
		{ "seed", required_argument, NULL, 'S' },
		{ "role", required_argument, NULL, 'r' },
		{ "dir", required_argument, NULL, 'D' },
		{ "list", no_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static char default_plugin[512];
	struct options o;
	bool any_version = false, any_scenario = false, seed_given = false;
	int c, failures;

	memset(&o, 0, sizeof(o));
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': o.plugin = optarg; break;
		case 'v':
			if (parse_list(optarg, &o, true)) {
				fprintf(stderr, "conformance: --api takes versions 8..12\n");
				return 2;
			}
			any_version = true;
			break;
		case 's':
			if (parse_list(optarg, &o, false))
				return 2;
			any_scenario = true;
			break;
		case 'd': o.dev = atoi(optarg); break;
		case 'S':
			o.seed = strtoull(optarg, NULL, 0);
			seed_given = true;
			break;
		case 'r': o.role = optarg[0]; break;
		case 'D': o.dir = optarg; break;
		case 'l':
			for (int i = 0; i < nscenarios; i++)
				printf("%-14s v%d+  %s\n", scenarios[i].name,
				       scenarios[i].min_version, scenarios[i].doc);
			return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!any_version)
		for (int v = NETAPI_MIN_VERSION; v <= NETAPI_MAX_VERSION; v++)
			o.versions[v] = true;
	if (!any_scenario)
		for (int i = 0; i < nscenarios; i++)
			o.chosen[i] = !scenarios[i].explicit_only;
	if (!o.plugin)
		o.plugin = getenv("NCCL_NET_PLUGIN");
	if (!o.plugin) {
		const char *build = getenv("BUILD");

		snprintf(default_plugin, sizeof(default_plugin), "%s/libnccl-net-braid.so",
			 build ? build : "build");
		o.plugin = default_plugin;
	}
	if (!seed_given)
		o.seed = o.role ? 1 : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
	if (o.role && (!o.dir || (o.role != 'a' && o.role != 'b'))) {
		fprintf(stderr, "conformance: --role a|b needs --dir\n");
		return 2;
	}
	fprintf(stderr, "conformance: plugin %s, seed %llu (rerun with --seed %llu)\n", o.plugin,
		(unsigned long long)o.seed, (unsigned long long)o.seed);
	/* children report through exit status; a dying peer must not kill us by SIGPIPE */
	signal(SIGPIPE, SIG_IGN);
	failures = o.role ? run_role(&o, o.role) : run_local(&o);
	fprintf(stderr, "conformance: %s\n", failures ? "FAILED" : "all passed");
	return failures ? 1 : 0;
}
