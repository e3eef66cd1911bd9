/* SPDX-License-Identifier: Apache-2.0 */
/*
 * braid stat's JSON documents (tools/stat_json.c), with jansson: the listing, and the
 * pieces --watch builds its reports from.
 */
#ifndef BRAID_TOOLS_STAT_JSON_H
#define BRAID_TOOLS_STAT_JSON_H

#include <jansson.h>
#include <stdint.h>

#include "tools/stat.h"

/* An integer member, capped at INT64_MAX. */
json_t *stat_jint(uint64_t v);
/* Set o[key] = v, taking v (freed on failure). */
void stat_jset(json_t *o, const char *key, json_t *v);
/* A document's head: schema, layout version, dir, time. */
json_t *stat_json_head(const struct stat_opts *o);
/* A document's tail: the ended files and those not read. */
void stat_json_tail(json_t *root, const struct scan *s);
/* Print root to stdout with flags, a newline, and free it; json_dumpf's result. */
int stat_json_print(json_t *root, size_t flags);
/* The whole listing as one indented document; 0 or -1. */
int stat_json_listing(const struct stat_opts *o, const struct scan *s);

#endif
