/*
** cache_internal.h — the body of the opaque at_cache handle, shared by the
** files that implement the cache (cache.c: devices, trials, winners;
** cache_table.c: the queries behind exported tables; cache_prune.c: the
** rows the runtime never serves). Nothing outside cache/ includes it.
** Invariant: `db` is open and `path` names it while the handle lives.
*/
#ifndef AT_CACHE_INTERNAL_H
#define AT_CACHE_INTERNAL_H

#include "cache.h"

#include <sqlite3.h>

/* Prepared lazily, finalized by at_cache_close. */
enum { S_GET_DEVICE, S_PUT_DEVICE, S_GET_TRIAL, S_PUT_TRIAL, S_GET_WINNER, S_PUT_WINNER, S_SUPERSEDE, S_COUNT };

struct at_cache {
    sqlite3 *db;
    char *path;
    sqlite3_stmt *st[S_COUNT];
};

/* sqlite failure -> at status: NOMEM stays NOMEM, the rest is a cache
** error naming the file, `what` and SQLite's message (cache.c). */
int at_cache_sql_fail(at_cache *c, int rc, const char *what);

#endif /* AT_CACHE_INTERNAL_H */
