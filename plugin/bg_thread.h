/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A backend's own thread that sleeps in poll() on its fds and on a wake fd (the NICs'
 * link watcher of net_ofi, the async event thread of net_ib). Started by the backend's
 * init, stopped by its fini or, before that, at exit or dlclose (bg_thread.c): no thread
 * writes the counters after they are unmapped or runs in unmapped code.
 */
#ifndef BRAID_PLUGIN_BG_THREAD_H
#define BRAID_PLUGIN_BG_THREAD_H

#include <pthread.h>
#include <sys/types.h>

struct braid_bg {
	pthread_t thread;
	pid_t pid;   /* the process that started it: a forked child has no such thread */
	int wake;    /* an eventfd, readable once the thread is to end; -1 before start */
	int running; /* under bg_thread.c's lock */
};

#define BRAID_BG_INIT      \
	{                  \
		.wake = -1 \
	}

/* fn(arg) polls bg->wake beside its own fds, returns once it is readable, and never
 * waits for a lock without a bound (a stop joins it). 0, or -errno with no thread. */
int braid_bg_start(struct braid_bg *bg, void *(*fn)(void *), void *arg);
/* Wakes the thread and waits for it to return (0); nothing when none runs (0). -1: it
 * could not be told and runs on (what it reads must not be freed; cannot happen with an
 * eventfd below its maximum). */
int braid_bg_stop(struct braid_bg *bg);

#endif
