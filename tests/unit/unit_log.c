// SPDX-License-Identifier: Apache-2.0
#include "tests/unit/unit.h"

#include <stdio.h>
#include <string.h>

char unit_log[8192];
int unit_warns;

void unit_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		 const char *fmt, ...)
{
	size_t used = strlen(unit_log);
	va_list ap;

	(void)flags, (void)file, (void)line;
	if (level == NCCL_LOG_WARN)
		unit_warns++;
	va_start(ap, fmt);
	if (used < sizeof(unit_log) - 1) {
		vsnprintf(unit_log + used, sizeof(unit_log) - used, fmt, ap);
		used = strlen(unit_log);
		if (used < sizeof(unit_log) - 1)
			strcat(unit_log, "\n");
	}
	va_end(ap);
}

void unit_log_reset(void)
{
	unit_log[0] = '\0';
	unit_warns = 0;
}
