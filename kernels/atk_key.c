/*
** atk_key.c — [CACHE_KEY] the tuner's cache key, rebuilt by the runtime from
** a row's fields, so a row whose stored digest does not match its fields
** (damaged, or written by another key format) is never used. The text and
** digest are the cache module's (cache/key.c), the same code the tuner
** stores winners with: this file only hands it a row's fields.
*/
#include "atk_internal.h"
#include "cache.h"

#include <string.h>

/* A row's key fields have the sizes of at_key's: read up to the same caps. */
#define ATK_SAME_SIZE(f) _Static_assert(sizeof(((atk_row *)0)->f) == sizeof(((at_key *)0)->f), #f)
ATK_SAME_SIZE(op);
ATK_SAME_SIZE(shape);
ATK_SAME_SIZE(device);
ATK_SAME_SIZE(space_sha);
ATK_SAME_SIZE(options);
ATK_SAME_SIZE(tuner_version);

/* The row's dtype column is the tuner's dtype text ("bf16", or "#n"). */
static at_key_text row_key(const atk_row *r)
{
    return (at_key_text){.op = r->op, .dtype = r->dtype, .shape = r->shape, .device = r->device, .cc = r->cc,
                         .sms = r->sms, .driver_version = r->driver_version, .nvrtc_version = r->nvrtc_version,
                         .space_sha = r->space_sha, .options = r->options, .tuner_version = r->tuner_version};
}

void atk__key_string(const atk_row *r, char *buf, size_t len)
{
    at_key_text t = row_key(r);
    at_key_text_string(&t, buf, len);
}

void atk__key_digest(const atk_row *r, char hex[65])
{
    at_key_text t = row_key(r);
    at_key_text_digest(&t, hex);
}

void atk__sha256_hex(const void *data, size_t len, char hex[65]) { at_sha256_hex(data, len, hex); }
