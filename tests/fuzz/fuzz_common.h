/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every fuzz target shares: braid's log goes through a logger that formats each
 * message (so a format argument built from fuzzed bytes is checked by ASan) and drops it.
 */
#ifndef BRAID_FUZZ_COMMON_H
#define BRAID_FUZZ_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "plugin/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static inline void fuzz_logger(ncclDebugLogLevel level, unsigned long flags, const char *file,
			       int line, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	(void)level, (void)flags, (void)file, (void)line;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
}

static inline void fuzz_quiet_log(void)
{
	braid_log_set_logger(fuzz_logger);
}

/* A why buffer must come back a terminated string whatever the input. */
static inline void fuzz_check_why(const char *why, size_t len)
{
	size_t i = 0;

	while (i < len && why[i])
		i++;
	if (i == len)
		__builtin_trap();
}

#endif
