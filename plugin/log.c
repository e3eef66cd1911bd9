// SPDX-License-Identifier: Apache-2.0
#include "plugin/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * Written at init, read from every thread afterwards. NCCL passes the same logger on
 * each init, so a plain atomic pointer is enough.
 */
static ncclDebugLogger_t nccl_logger;
static int stderr_level = BRAID_LOG_WARN;

void braid_log_set_logger(ncclDebugLogger_t logger)
{
	__atomic_store_n(&nccl_logger, logger, __ATOMIC_RELEASE);
}

void braid_log_set_level(enum braid_log_level level)
{
	__atomic_store_n(&stderr_level, (int)level, __ATOMIC_RELAXED);
}

enum braid_log_level braid_log_level(void)
{
	/* With NCCL's logger NCCL decides what to show, so produce everything but TRACE. */
	int lvl = __atomic_load_n(&stderr_level, __ATOMIC_RELAXED);

	if (__atomic_load_n(&nccl_logger, __ATOMIC_ACQUIRE) && lvl < BRAID_LOG_INFO)
		return BRAID_LOG_INFO;
	return (enum braid_log_level)lvl;
}

static ncclDebugLogLevel to_nccl_level(enum braid_log_level level)
{
	switch (level) {
	case BRAID_LOG_WARN: return NCCL_LOG_WARN;
	case BRAID_LOG_INFO: return NCCL_LOG_INFO;
	case BRAID_LOG_TRACE: return NCCL_LOG_TRACE;
	default: return NCCL_LOG_NONE;
	}
}

void braid_log(enum braid_log_level level, unsigned long subsys, const char *file, int line,
	       const char *fmt, ...)
{
	ncclDebugLogger_t logger = __atomic_load_n(&nccl_logger, __ATOMIC_ACQUIRE);
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	if (logger) {
		logger(to_nccl_level(level), subsys, file, line, "NET/braid : %s", msg);
		return;
	}
	if ((int)level > __atomic_load_n(&stderr_level, __ATOMIC_RELAXED))
		return;

	static const char *const names[] = { "NONE", "WARN", "INFO", "TRACE" };
	char host[64] = "";
	gethostname(host, sizeof(host) - 1);
	fprintf(stderr, "%s:%d:%ld [braid] NET/braid %s %s\n", host, (int)getpid(),
		(long)syscall(SYS_gettid), names[level], msg);
}
