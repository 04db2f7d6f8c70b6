/*
** cache_validation.h — what `autotune validate` stores: one row per call
** shape of one GPU (the runtime's choice there, measured against its
** fallback), in the cache's `validations` table. Rows whose verdict is
** "slower" or "wrong" are overrides: the runtime falls back at that call
** shape while the entry it measured (`chosen`, a key digest) still serves it.
*/
#ifndef AT_CACHE_VALIDATION_H
#define AT_CACHE_VALIDATION_H

#include "cache.h"

/* A tuned shape of the winners table. */
typedef struct at_tuned_shape {
    char op[32];
    at_dtype dtype;
    char shape[64];
} at_tuned_shape;

/* One validated call shape. */
typedef struct at_validation {
    char device[128];
    int cc, sms;
    char op[32];
    at_dtype dtype;
    char shape[64];         /* the call: "12x2048x8192", "5x2048" */
    char path[16];          /* "tuned", "bucket", "inferred", "fallback" */
    char chosen[65];        /* key digest of the entry that served it; "" on fallback */
    char strategy[AT_NAME_LEN];
    char from[64];          /* the tuned shape the kernel comes from */
    int bucket;             /* the tuned M (T) of a bucket / inferred choice */
    double us, us_min, us_max;       /* the choice, per call */
    double base_us, base_min, base_max; /* the fallback */
    double noise;           /* 0.5 * (p90 - p10), the larger of the two */
    double err;             /* ||y - ref|| / ||ref|| of the choice */
    char verdict[16];       /* "ok", "fallback", "slower", "wrong", "harness" */
    char reason[320];
} at_validation;

/* The distinct tuned shapes of the winners table: of one GPU (device, cc,
** sms), or of all when device is NULL. *out is malloc'ed (free it). */
int at_cache_list_tuned(at_cache *c, const char *device, int cc, int sms, at_tuned_shape **out, int *n);

/* Stores v, replacing the row of the same GPU, op, dtype and call shape. */
int at_cache_put_validation(at_cache *c, const at_validation *v);

/* Every validation row, of every GPU, in order: fn is called per row; a
** non-zero return from fn stops and is returned. A cache without the table
** has no rows. */
int at_cache_each_validation(at_cache *c, int (*fn)(void *arg, const at_validation *v), void *arg);

/* 1 when the verdict makes the row an override. */
int at_validation_is_override(const at_validation *v);

#endif
