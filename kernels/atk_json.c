/*
** atk_json.c — rows from a JSON table (`autotune export --format json`),
** read with the cache module's strict JSON parser (cache/json.c, the one the
** tuner uses). Only the GPU asked for is kept; its entries must have the
** fields the format names, of the right type ([TABLE_FORMAT] in
** cache/table.c); anything else is a reason, never a crash.
*/
#include "atk_internal.h"
#include "cache.h"
#include "json.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ATK_JSON_MAX_BYTES (256L * 1024 * 1024) /* cache/table.h AT_TABLE_MAX_BYTES */

/* A json-reader failure as a table error: the reader's message (recorded
** by at_fail, cache/error.c) becomes atk's. */
static int table_fail(int st)
{
    if (st == ATK_ERR_NOMEM)
        return ATK_ERR_NOMEM;
    return atk__fail(NULL, ATK_ERR_TABLE, "%s", at_errmsg());
}

static int get_int(const at_json_path *d, const at_json *o, const char *key, long long lo, long long hi, int *out)
{
    long long v = 0;
    int st = at_json_get_int(d, o, key, lo, hi, &v);
    *out = (int)v;
    return st;
}

static int read_entry(const at_json_path *d, const at_json *o, const char *name, int cc, int sms, atk_row *r)
{
    char *const s[] = {r->op,        r->dtype,        r->shape,    r->space_sha, r->options,
                       r->tuner_version, r->key_sha, r->strategy, r->kernel,    r->template_name,
                       r->params,    r->cubin_sha};
    const size_t cap[] = {sizeof r->op,        sizeof r->dtype,     sizeof r->shape,   sizeof r->space_sha,
                          sizeof r->options,   sizeof r->tuner_version, sizeof r->key_sha, sizeof r->strategy,
                          sizeof r->kernel,    sizeof r->template_name, sizeof r->params, sizeof r->cubin_sha};
    static const char *const keys[] = {"op",       "dtype",    "shape",  "space_sha", "options", "tuner_version",
                                       "key_sha",  "strategy", "kernel", "template",  "params",  "cubin_sha256"};
    int st, smem = 0;
    double us = 0.0;
    for (int i = 0; i < 12; i++)
        if ((st = at_json_get_string(d, o, keys[i], s[i], cap[i])) != 0)
            return st;
    if ((st = get_int(d, o, "driver_version", 0, INT_MAX, &r->driver_version)) ||
        (st = get_int(d, o, "nvrtc_version", 0, INT_MAX, &r->nvrtc_version)) ||
        (st = get_int(d, o, "smem", 0, INT_MAX, &smem)) || (st = at_json_get_uint3(d, o, "grid", r->grid)) ||
        (st = at_json_get_uint3(d, o, "block", r->block)) || (st = at_json_get_number(d, o, "us", &us)))
        return st;
    r->smem = (unsigned)smem;
    r->us = us == us ? us : -1.0; /* null: not measured */
    snprintf(r->device, sizeof r->device, "%s", name);
    r->cc = cc;
    r->sms = sms;
    const at_json *cub = at_json_member(o, "cubin");
    if (cub && cub->type == AT_JSON_STRING) {
        unsigned char *bytes = NULL;
        size_t n = 0;
        const char *why = NULL;
        if ((st = at_json_base64_decode(cub->string, cub->length, &bytes, &n, &why)) != 0)
            return st == ATK_ERR_NOMEM ? st : at_json_fail(d, "cubin", "bad base64: %s", why ? why : "?");
        r->cubin = bytes;
        r->cubin_size = n;
        r->cubin_owned = 1;
    } else if (!cub || cub->type != AT_JSON_NULL) {
        return at_json_fail(d, "cubin", "expected a base64 string or null");
    }
    return 0;
}

static int read_doc(const char *path, const at_json *root, const char *name, int cc, int sms, atk_rows *rows)
{
    at_json_path d = {.file = path};
    const at_json *fmt = at_json_member(root, "format"), *devs = at_json_member(root, "devices");
    long long version = 0;
    int st;
    if (!fmt || fmt->type != AT_JSON_STRING || strcmp(fmt->string, "autotune-table"))
        return at_json_fail(&d, "format", "not an autotune table (expected \"autotune-table\")");
    if ((st = at_json_get_int(&d, root, "version", LLONG_MIN, LLONG_MAX, &version)) != 0)
        return st;
    if (version != 1)
        return at_json_fail(&d, "version", "table version %lld (this atk reads 1)", version);
    if (!devs || devs->type != AT_JSON_ARRAY)
        return at_json_fail(&d, "devices", "expected an array");
    for (size_t i = 0; i < devs->count; i++) {
        const at_json *dev = &devs->items[i], *ents = at_json_member(dev, "entries");
        char dname[128];
        int major = 0, minor = 0, dsms = 0;
        snprintf(d.where, sizeof d.where, "devices[%zu]", i);
        if ((st = at_json_get_string(&d, dev, "name", dname, sizeof dname)) ||
            (st = get_int(&d, dev, "cc_major", 1, 99, &major)) || (st = get_int(&d, dev, "cc_minor", 0, 9, &minor)) ||
            (st = get_int(&d, dev, "sms", 0, 1000000, &dsms)))
            return st;
        if (!ents || ents->type != AT_JSON_ARRAY)
            return at_json_fail(&d, "entries", "expected an array");
        rows->total += ents->count;
        if (strcmp(dname, name) || 10 * major + minor != cc || dsms != sms)
            continue;
        size_t base = strlen(d.where);
        for (size_t j = 0; j < ents->count; j++) {
            atk_row *r = atk__rows_push(rows);
            if (!r)
                return atk__fail(NULL, ATK_ERR_NOMEM, "atk: out of memory");
            snprintf(d.where + base, sizeof d.where - base, ".entries[%zu]", j);
            if (ents->items[j].type != AT_JSON_OBJECT)
                return at_json_fail(&d, NULL, "expected an object");
            if ((st = read_entry(&d, &ents->items[j], dname, cc, dsms, r)) != 0)
                return st;
        }
        d.where[base] = '\0';
        const at_json *vals = at_json_member(dev, "validations");
        if (vals && vals->type != AT_JSON_ARRAY)
            return at_json_fail(&d, "validations", "expected an array");
        for (size_t j = 0; vals && j < vals->count; j++) {
            const at_json *v = &vals->items[j];
            char op[32], dtype[16], shape[64], chosen[65], verdict[16];
            double us = 0.0, base_us = 0.0;
            snprintf(d.where + base, sizeof d.where - base, ".validations[%zu]", j);
            if (v->type != AT_JSON_OBJECT)
                return at_json_fail(&d, NULL, "expected an object");
            if ((st = at_json_get_string(&d, v, "op", op, sizeof op)) ||
                (st = at_json_get_string(&d, v, "dtype", dtype, sizeof dtype)) ||
                (st = at_json_get_string(&d, v, "shape", shape, sizeof shape)) ||
                (st = at_json_get_string(&d, v, "chosen", chosen, sizeof chosen)) ||
                (st = at_json_get_string(&d, v, "verdict", verdict, sizeof verdict)) ||
                (st = at_json_get_number(&d, v, "us", &us)) ||
                (st = at_json_get_number(&d, v, "baseline_us", &base_us)) ||
                (st = atk__override_row(rows, name, cc, sms, dname, cc, dsms, op, dtype, shape, chosen, verdict, us,
                                        base_us)))
                return st;
        }
        d.where[base] = '\0';
    }
    return 0;
}

int atk__read_json(const char *path, const char *name, int cc, int sms, atk_rows *rows)
{
    struct stat sb;
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    at_json *root = NULL;
    int st = ATK_OK;
    if (!f || fstat(fileno(f), &sb) != 0) {
        st = atk__fail(NULL, ATK_ERR_IO, "atk: cannot read %s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode) || sb.st_size > ATK_JSON_MAX_BYTES) {
        st = atk__fail(NULL, ATK_ERR_TABLE, "%s: %s", path,
                       S_ISREG(sb.st_mode) ? "larger than the 256 MiB a table may take" : "not a regular file");
        goto done;
    }
    size_t n = (size_t)sb.st_size;
    if (!(text = malloc(n ? n : 1))) {
        st = atk__fail(NULL, ATK_ERR_NOMEM, "atk: out of memory reading %s", path);
        goto done;
    }
    if (fread(text, 1, n, f) != n) {
        st = atk__fail(NULL, ATK_ERR_IO, "atk: cannot read %s: short read", path);
        goto done;
    }
    if ((st = at_json_parse(text, n, path, &root)) != 0 || (st = read_doc(path, root, name, cc, sms, rows)) != 0)
        st = table_fail(st);
done:
    if (f)
        fclose(f);
    free(text);
    at_json_free(root);
    return st;
}
