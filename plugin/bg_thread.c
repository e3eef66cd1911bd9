// SPDX-License-Identifier: Apache-2.0
/*
 * Stopping runs under one lock, whoever asks (a backend's fini, or the exit handler on
 * another thread while NCCL finalizes): each thread is joined once, and none starts once
 * the exit handler ran (an init on another thread, or from an earlier handler). It is
 * registered when the first thread starts, after the counters' (plugin/counters.c), so it
 * runs before they unmap the region the threads write; a handler registered from a shared
 * object also runs at its dlclose, before its code is unmapped (ncclNet v8 to v10 have no
 * finalize).
 */
#include "plugin/bg_thread.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define BG_MAX 4

static struct braid_bg *live[BG_MAX];
static pthread_mutex_t bg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t at_exit_once = PTHREAD_ONCE_INIT;
static int exiting; /* the exit handler ran: no thread starts any more */

static void forget(struct braid_bg *bg)
{
	for (int i = 0; i < BG_MAX; i++)
		if (live[i] == bg)
			live[i] = NULL;
	close(bg->wake);
	bg->wake = -1;
	bg->running = 0;
}

/* Forgets a thread of the parent's: fork copies the state, not the thread. bg_lock held. */
static void forget_if_forked(struct braid_bg *bg)
{
	if (bg->running && bg->pid != getpid())
		forget(bg);
}

/* In a forked child: the lock as new (a start or stop may have held it at the fork), and
 * none of the parent's threads. */
static void at_fork_child(void)
{
	pthread_mutex_init(&bg_lock, NULL);
	for (int i = 0; i < BG_MAX; i++)
		if (live[i])
			forget(live[i]);
}

/* bg_lock held. 0 once the thread returned, -1 when it could not be told (left running). */
static int stop_locked(struct braid_bg *bg)
{
	uint64_t one = 1;

	forget_if_forked(bg);
	if (!bg->running)
		return 0;
	/* an eventfd below its maximum takes the write; if not, it stays running (a later
	 * stop tries again) rather than hang here */
	if (write(bg->wake, &one, sizeof(one)) != (ssize_t)sizeof(one))
		return -1;
	pthread_join(bg->thread, NULL);
	forget(bg);
	return 0;
}

static void stop_all(void)
{
	pthread_mutex_lock(&bg_lock);
	exiting = 1;
	for (int i = 0; i < BG_MAX; i++)
		if (live[i])
			(void)stop_locked(live[i]);
	pthread_mutex_unlock(&bg_lock);
}

static void register_handlers(void)
{
	(void)atexit(stop_all);
	(void)pthread_atfork(NULL, NULL, at_fork_child);
}

int braid_bg_start(struct braid_bg *bg, void *(*fn)(void *), void *arg)
{
	int rc = 0, slot = -1;

	pthread_once(&at_exit_once, register_handlers);
	pthread_mutex_lock(&bg_lock);
	forget_if_forked(bg);
	for (int i = 0; i < BG_MAX && slot < 0; i++)
		if (!live[i])
			slot = i;
	if (bg->running || slot < 0 || exiting) {
		rc = bg->running ? -EALREADY : exiting ? -ESHUTDOWN : -ENOSPC;
		goto out;
	}
	bg->wake = eventfd(0, EFD_CLOEXEC);
	if (bg->wake < 0) {
		rc = -errno;
		goto out;
	}
	rc = -pthread_create(&bg->thread, NULL, fn, arg);
	if (rc) {
		close(bg->wake);
		bg->wake = -1;
		goto out;
	}
	bg->pid = getpid();
	bg->running = 1;
	live[slot] = bg;
out:
	pthread_mutex_unlock(&bg_lock);
	return rc;
}

int braid_bg_stop(struct braid_bg *bg)
{
	int rc;

	pthread_mutex_lock(&bg_lock);
	rc = stop_locked(bg);
	pthread_mutex_unlock(&bg_lock);
	return rc;
}
