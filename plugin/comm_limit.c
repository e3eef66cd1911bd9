// SPDX-License-Identifier: Apache-2.0
#include "plugin/comm_limit.h"

#include <errno.h>

#include "plugin/log.h"
#include "plugin/params.h"

int braid_max_comms(int nic_limit)
{
	int knob = (int)braid_param_int(BRAID_P_MAX_COMMS);

	return knob > 0 && knob < nic_limit ? knob : nic_limit;
}

int braid_comm_limit_check(const char *who, const char *dev, int open, int nic_limit,
			   const char *what, const char *peer)
{
	int limit = braid_max_comms(nic_limit);

	if (open < limit)
		return 0;
	BRAID_WARN("%s: %s %s on device %s refused: %d comms are open, the limit (maxComms) is "
		   "%d (%s; the NIC's own is %d). Close comms, or raise BRAID_MAX_COMMS",
		   who, what, peer, dev, open, limit,
		   limit < nic_limit ? "set by BRAID_MAX_COMMS" : "BRAID_MAX_COMMS cannot raise it",
		   nic_limit);
	return -ENOSPC;
}
