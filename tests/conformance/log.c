// SPDX-License-Identifier: Apache-2.0
/* Harness logging: every line names the side, the API version and the scenario. */
#include "tests/conformance/conf.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static void vlog(const struct side *s, const char *head, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* One write per line so that both sides' lines interleave cleanly. */
	fprintf(stderr, "[%c %s] %s%s\n", s ? s->role : '-', s ? s->key : "-", head, msg);
	fflush(stderr);
}

void conf_log(const struct side *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(s, "", fmt, ap);
	va_end(ap);
}

static int fail_lines; /* this process's FAIL lines: a failure must have one */

int conf_failures(void)
{
	return fail_lines;
}

int conf_fail(const struct side *s, const char *fmt, ...)
{
	char head[200];
	va_list ap;

	fail_lines++;
	snprintf(head, sizeof(head), "FAIL (%s): ", s && s->what[0] ? s->what : "-");
	va_start(ap, fmt);
	vlog(s, head, fmt, ap);
	va_end(ap);
	return -1;
}

void conf_step(struct side *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->what, sizeof(s->what), fmt, ap);
	va_end(ap);
}

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void idle_wait(void)
{
	/* 50 us: short against a transfer, long enough to leave the core to the peer on a
	 * 2-core machine where both sides and the provider's threads share it. */
	struct timespec ts = { 0, 50 * 1000 };

	nanosleep(&ts, NULL);
}
