/*
** atk_key.c — [CACHE_KEY] the tuner's cache key, rebuilt by the runtime from
** a row's fields, so a row whose stored digest does not match its fields
** (damaged, or written by another key format) is never used. The text is
** exactly tuner/cache.c's at_key_string: change both together
** (tests/test_atk.c compares the two digests).
*/
#include "atk_internal.h"

#include <stdio.h>
#include <string.h>

static void put_raw(char *buf, size_t len, size_t *pos, const char *s, size_t n)
{
    for (size_t i = 0; i < n && *pos + 1 < len; i++)
        buf[(*pos)++] = s[i];
    if (len)
        buf[*pos < len ? *pos : len - 1] = '\0';
}

/* ";name=" then at most `cap` bytes of val, '\\', ';' and '=' escaped. */
static void put_field(char *buf, size_t len, size_t *pos, const char *name, const char *val, size_t cap)
{
    put_raw(buf, len, pos, ";", 1);
    put_raw(buf, len, pos, name, strlen(name));
    put_raw(buf, len, pos, "=", 1);
    size_t n = strnlen(val, cap);
    for (size_t i = 0; i < n; i++) {
        if (val[i] == '\\' || val[i] == ';' || val[i] == '=')
            put_raw(buf, len, pos, "\\", 1);
        put_raw(buf, len, pos, val + i, 1);
    }
}

static void put_int(char *buf, size_t len, size_t *pos, const char *name, int v)
{
    char num[16];
    snprintf(num, sizeof num, "%d", v);
    put_field(buf, len, pos, name, num, sizeof num);
}

/* The row's dtype column is the tuner's dtype text ("bf16", or "#n"). */
void atk__key_string(const atk_row *r, char *buf, size_t len)
{
    size_t pos = 0;
    if (!buf || !len)
        return;
    buf[0] = '\0';
    put_raw(buf, len, &pos, "v1", 2);
    put_field(buf, len, &pos, "op", r->op, sizeof r->op);
    put_field(buf, len, &pos, "dtype", r->dtype, sizeof r->dtype);
    put_field(buf, len, &pos, "shape", r->shape, sizeof r->shape);
    put_field(buf, len, &pos, "device", r->device, sizeof r->device);
    put_int(buf, len, &pos, "cc", r->cc);
    put_int(buf, len, &pos, "sms", r->sms);
    put_int(buf, len, &pos, "driver", r->driver_version);
    put_int(buf, len, &pos, "nvrtc", r->nvrtc_version);
    put_field(buf, len, &pos, "space", r->space_sha, sizeof r->space_sha);
    put_field(buf, len, &pos, "options", r->options, sizeof r->options);
    put_field(buf, len, &pos, "tuner", r->tuner_version, sizeof r->tuner_version);
}

void atk__key_digest(const atk_row *r, char hex[65])
{
    char text[4096];
    atk__key_string(r, text, sizeof text);
    atk__sha256_hex(text, strlen(text), hex);
}
