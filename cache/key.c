/*
** key.c — [CACHE_KEY] the cache key's canonical text and its digest, the one
** implementation: the tuner digests an at_key when it stores a winner, the
** runtime library (kernels/atk_key.c) digests a row's fields when it loads
** one, and a row whose fields do not give its stored key_sha is never used.
** Invariant: the text is a function of the fields alone, and no field's value
** can forge a separator (';', '=' and '\\' are escaped).
*/
#include "cache.h"

#include <stdio.h>
#include <string.h>

/* Appends to buf[*pos..len) keeping it NUL-terminated; stops when full. */
static void put_raw(char *buf, size_t len, size_t *pos, const char *s, size_t n)
{
    for (size_t i = 0; i < n && *pos + 1 < len; i++)
        buf[(*pos)++] = s[i];
    if (len)
        buf[*pos < len ? *pos : len - 1] = '\0';
}

/* ";name=" then the field, at most `cap` bytes of it, with '\\', ';' and '='
** escaped by a backslash so a field can never forge a separator. */
static void put_field(char *buf, size_t len, size_t *pos, const char *name, const char *val, size_t cap)
{
    put_raw(buf, len, pos, ";", 1);
    put_raw(buf, len, pos, name, strlen(name));
    put_raw(buf, len, pos, "=", 1);
    if (!val)
        val = "";
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

void at_key_dtype_text(at_dtype d, char out[24])
{
    const char *name = at_dtype_name(d);
    at_dtype back;
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", at_errmsg()); /* parse may overwrite it */
    if (name && name[0] && name[0] != '#' && at_dtype_parse(name, &back) == AT_OK && back == d)
        snprintf(out, 24, "%s", name);
    else
        snprintf(out, 24, "#%d", (int)d);
    at_fail(AT_OK, "%s", saved);
}

/* The caps: a string field is read up to the size of its at_key field. */
#define KEY_CAP(field) sizeof(((at_key *)0)->field)

/* [CACHE_KEY] The canonical key text. Format "v1" then ";field=value" for
** op, dtype, shape, device, cc, sms, driver, nvrtc, space, options, tuner, in
** that order; string fields escaped as put_field does. Bump "v1" if the
** format moves (every stored winner then retunes). */
void at_key_text_string(const at_key_text *t, char *buf, size_t len)
{
    size_t pos = 0;
    if (!buf || !len)
        return;
    buf[0] = '\0';
    put_raw(buf, len, &pos, "v1", 2);
    put_field(buf, len, &pos, "op", t->op, KEY_CAP(op));
    put_field(buf, len, &pos, "dtype", t->dtype, 24);
    put_field(buf, len, &pos, "shape", t->shape, KEY_CAP(shape));
    put_field(buf, len, &pos, "device", t->device, KEY_CAP(device));
    put_int(buf, len, &pos, "cc", t->cc);
    put_int(buf, len, &pos, "sms", t->sms);
    put_int(buf, len, &pos, "driver", t->driver_version);
    put_int(buf, len, &pos, "nvrtc", t->nvrtc_version);
    put_field(buf, len, &pos, "space", t->space_sha, KEY_CAP(space_sha));
    put_field(buf, len, &pos, "options", t->options, KEY_CAP(options));
    put_field(buf, len, &pos, "tuner", t->tuner_version, KEY_CAP(tuner_version));
}

/* Every string field escaped doubles at most; 4 KiB holds the largest key. */
#define KEY_TEXT_MAX 4096
_Static_assert(2 * sizeof(at_key) + 256 < KEY_TEXT_MAX, "key text buffer too small");

void at_key_text_digest(const at_key_text *t, char hex[65])
{
    char text[KEY_TEXT_MAX];
    at_key_text_string(t, text, sizeof text);
    at_sha256_hex(text, strlen(text), hex);
}

/* k's fields as a row holds them; dt receives the dtype's text. */
static at_key_text key_text(const at_key *k, char dt[24])
{
    at_key_dtype_text(k->dtype, dt);
    return (at_key_text){.op = k->op, .dtype = dt, .shape = k->shape, .device = k->device, .cc = k->cc,
                         .sms = k->sms, .driver_version = k->driver_version, .nvrtc_version = k->nvrtc_version,
                         .space_sha = k->space_sha, .options = k->options, .tuner_version = k->tuner_version};
}

void at_key_string(const at_key *k, char *buf, size_t len)
{
    char dt[24];
    if (!buf || !len)
        return;
    at_key_text t = key_text(k, dt);
    at_key_text_string(&t, buf, len);
}

void at_key_digest(const at_key *k, char hex[65])
{
    char dt[24];
    at_key_text t = key_text(k, dt);
    at_key_text_digest(&t, hex);
}
