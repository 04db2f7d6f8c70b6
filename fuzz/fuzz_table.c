/*
** fuzz_table.c — libFuzzer harness for the exported-table import path: the
** strict JSON reader (at_json_parse), base64, at_table_read_json on a file
** holding the bytes, and for a table it accepts, at_cache_apply_table into an
** empty in-memory cache, at_cache_read_table and a second export/read.
** Invariants (abort() on a violation): a refusal is AT_ERR_USAGE/NOMEM with
** one printable line naming the file; a parsed tree writes out and parses back to the
** same tree; an accepted base64 text re-encodes to itself; an accepted table
** has re-digested keys and matching cubins, applies whole, and exports as
** bytes that read back and export to the same bytes. Each input is also read
** again with its checksums recomputed (see check_repaired), so mutations of
** the other fields get past the key and cubin hashes.
*/
#include "autotune.h"
#include "json.h"
#include "table.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_table: invariant broken: %s (errmsg '%s')\n", what, at_errmsg());
    abort();
}

/* ------------------------------------------------------------ JSON tree */

/* v as JSON text, with the project's own writers. */
static void write_tree(FILE *f, const at_json *v)
{
    char num[32];
    switch (v->type) {
    case AT_JSON_NULL:
        fputs("null", f);
        break;
    case AT_JSON_BOOL:
        fputs(v->boolean ? "true" : "false", f);
        break;
    case AT_JSON_NUMBER:
        at_json_format_number(v->number, num, sizeof num);
        fputs(num, f);
        break;
    case AT_JSON_STRING:
        at_json_write_string(f, v->string);
        break;
    case AT_JSON_ARRAY:
    case AT_JSON_OBJECT:
        fputc(v->type == AT_JSON_ARRAY ? '[' : '{', f);
        for (size_t i = 0; i < v->count; i++) {
            if (i)
                fputc(',', f);
            if (v->type == AT_JSON_OBJECT) {
                at_json_write_string(f, v->keys[i]);
                fputc(':', f);
            }
            write_tree(f, &v->items[i]);
        }
        fputc(v->type == AT_JSON_ARRAY ? ']' : '}', f);
        break;
    }
}

static int same_tree(const at_json *a, const at_json *b)
{
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case AT_JSON_NULL:
        return 1;
    case AT_JSON_BOOL:
        return a->boolean == b->boolean;
    case AT_JSON_NUMBER:
        return a->number == b->number && signbit(a->number) == signbit(b->number);
    case AT_JSON_STRING:
        return a->length == b->length && memcmp(a->string, b->string, a->length) == 0;
    default:
        if (a->count != b->count)
            return 0;
        for (size_t i = 0; i < a->count; i++)
            if ((a->type == AT_JSON_OBJECT && strcmp(a->keys[i], b->keys[i]) != 0) ||
                !same_tree(&a->items[i], &b->items[i]))
                return 0;
        return 1;
    }
}

/* What the reader promises of every value; base64 texts re-encode to themselves. */
static void check_value(const at_json *v, int depth)
{
    if (depth > AT_JSON_MAX_DEPTH)
        fail("tree deeper than AT_JSON_MAX_DEPTH");
    if (v->type == AT_JSON_NUMBER) {
        if (!isfinite(v->number))
            fail("number not finite");
        if (v->is_int && (double)v->integer != v->number)
            fail("is_int value differs from the double");
    } else if (v->type == AT_JSON_STRING) {
        if (!v->string || strlen(v->string) != v->length)
            fail("string length wrong or holds a NUL");
        unsigned char *bytes = NULL;
        size_t n = 0;
        const char *why = NULL;
        if (at_json_base64_decode(v->string, v->length, &bytes, &n, &why) == AT_OK) {
            char *text = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&text, &len);
            if (!f)
                fail("open_memstream");
            at_json_write_base64(f, bytes, n);
            fclose(f);
            if (len != v->length || memcmp(text, v->string, len) != 0)
                fail("base64 text accepted but re-encodes differently");
            free(text);
        } else if (!why) {
            fail("base64 refusal without a reason");
        }
        free(bytes);
    } else if (v->type == AT_JSON_ARRAY || v->type == AT_JSON_OBJECT) {
        if (v->count && !v->items)
            fail("container without items");
        if (v->type == AT_JSON_OBJECT && v->count > AT_JSON_MAX_MEMBERS)
            fail("object over AT_JSON_MAX_MEMBERS");
        for (size_t i = 0; i < v->count; i++) {
            if (v->type == AT_JSON_OBJECT) {
                if (!v->keys[i])
                    fail("object member without a key");
                for (size_t j = 0; j < i; j++)
                    if (!strcmp(v->keys[i], v->keys[j]))
                        fail("duplicate key accepted");
                if (at_json_member(v, v->keys[i]) != &v->items[i])
                    fail("at_json_member does not find a member");
            }
            check_value(&v->items[i], depth + 1);
        }
    }
}

static void check_json(const uint8_t *data, size_t size)
{
    at_json *root = (at_json *)&root;
    at_fail(AT_OK, "%s", "");
    int rc = at_json_parse((const char *)data, size, "fuzz.json", &root);
    if (rc != AT_OK) {
        if ((rc != AT_ERR_USAGE && rc != AT_ERR_NOMEM) || root)
            fail("json refusal: wrong status or *out left set");
        if (rc == AT_ERR_USAGE && strncmp(at_errmsg(), "fuzz.json:", 10) != 0)
            fail("json refusal does not name the document");
        for (const unsigned char *m = (const unsigned char *)at_errmsg(); *m; m++)
            if (*m < 0x20 || *m == 0x7f)
                fail("json refusal is not one printable line");
        return;
    }
    check_value(root, 1);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        fail("open_memstream");
    write_tree(f, root);
    fclose(f);
    at_json *back = NULL;
    if (at_json_parse(text, len, "rewritten", &back) != AT_OK)
        fail("a parsed tree, written out, does not parse");
    if (!same_tree(root, back))
        fail("a parsed tree, written out, parses to another tree");
    at_json_free(back);
    at_json_free(root);
    free(text);
}

/* ---------------------------------------------------------------- table */

/* An accepted table: every invariant the reader promises its caller. */
static void check_table(const at_table *t)
{
    char sha[65];
    for (size_t i = 0; i < t->ndevices; i++) {
        const at_table_device *d = &t->devices[i];
        if (!d->info.name[0])
            fail("device without a name");
        for (size_t j = 0; j < i; j++)
            if (!strcmp(t->devices[j].info.name, d->info.name) &&
                t->devices[j].info.cc_major == d->info.cc_major &&
                t->devices[j].info.cc_minor == d->info.cc_minor && t->devices[j].info.sms == d->info.sms)
                fail("the same GPU twice");
        for (size_t k = 0; k < d->nentries; k++) {
            const at_table_entry *e = &d->entries[k];
            at_key_digest(&e->key, sha);
            if (strcmp(sha, e->key_sha) != 0)
                fail("entry's key_sha is not its key's digest");
            if (strcmp(e->key.device, d->info.name) != 0 || e->key.sms != d->info.sms ||
                e->key.cc != 10 * d->info.cc_major + d->info.cc_minor)
                fail("entry keyed for another device");
            if ((e->w.cubin_size == 0) != (e->w.cubin == NULL))
                fail("cubin pointer and size disagree");
            if (e->w.cubin_size) {
                at_sha256_hex(e->w.cubin, e->w.cubin_size, sha);
                if (strcmp(sha, e->w.cubin_sha) != 0)
                    fail("cubin does not match its sha256");
            } else if (e->w.cubin_sha[0]) {
                fail("cubin_sha256 without a cubin");
            }
            for (size_t m = 0; m < k; m++)
                if (!strcmp(d->entries[m].key_sha, e->key_sha))
                    fail("two entries with one key");
        }
    }
}

/* data into a memory file; its /proc path in path. -1 on failure. */
static int memfile(const uint8_t *data, size_t size, char *path, size_t len)
{
    int fd = memfd_create("fuzz_table", 0);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    snprintf(path, len, "/proc/self/fd/%d", fd);
    return fd;
}

/* The whole JSON export of a table's devices, malloc'ed. */
static char *export_json(const at_table *t, size_t *len)
{
    const at_table_device **sel = calloc(t->ndevices ? t->ndevices : 1, sizeof *sel);
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!sel || !f)
        fail("out of memory in the harness");
    for (size_t i = 0; i < t->ndevices; i++)
        sel[i] = &t->devices[i];
    at_table_write(f, AT_TABLE_JSON, sel, t->ndevices);
    fclose(f);
    free(sel);
    return text;
}

static int read_text(const char *text, size_t len, at_table *out)
{
    char path[64];
    int fd = memfile((const uint8_t *)text, len, path, sizeof path);
    if (fd < 0)
        fail("memfd");
    int rc = at_table_read_json(path, out);
    close(fd);
    return rc;
}

/* Applies t to an empty cache, reads it back, exports it, reads that and
** exports again: both exports must be the same bytes and hold every entry. */
static void check_import(const at_table *t)
{
    at_cache *c = NULL;
    at_table back = {0}, again = {0};
    size_t n_in = 0, n_back = 0, la = 0, lb = 0;
    if (at_cache_open(":memory:", &c) != AT_OK)
        fail("cannot open an in-memory cache");
    if (at_cache_apply_table(c, t, "fuzz", NULL) != AT_OK)
        fail("an accepted table does not apply to an empty cache");
    if (at_cache_read_table(c, NULL, &back) != AT_OK)
        fail("the applied table does not read back");
    at_cache_close(c);
    for (size_t i = 0; i < t->ndevices; i++)
        n_in += t->devices[i].nentries;
    for (size_t i = 0; i < back.ndevices; i++)
        n_back += back.devices[i].nentries;
    if (n_in != n_back || back.ndevices != t->ndevices)
        fail("entries or devices lost between import and export");
    char *a = export_json(&back, &la);
    if (read_text(a, la, &again) != AT_OK)
        fail("an export does not read back");
    check_table(&again);
    char *b = export_json(&again, &lb);
    if (la != lb || memcmp(a, b, la) != 0)
        fail("export -> read -> export is not byte-stable");
    free(a);
    free(b);
    at_table_free(&back);
    at_table_free(&again);
}

static void check_table_file(const uint8_t *data, size_t size)
{
    char path[64];
    at_table t;
    int fd = memfile(data, size, path, sizeof path);
    if (fd < 0)
        return; /* no memfd: nothing to check */
    memset(&t, 0xA5, sizeof t); /* the reader must zero it */
    at_fail(AT_OK, "%s", "");
    int rc = at_table_read_json(path, &t);
    close(fd);
    if (rc != AT_OK) {
        if (rc != AT_ERR_USAGE && rc != AT_ERR_NOMEM)
            fail("table refusal is not AT_ERR_USAGE/NOMEM");
        if (rc == AT_ERR_USAGE && strncmp(at_errmsg(), path, strlen(path)) != 0)
            fail("table refusal does not name the file");
        for (const unsigned char *m = (const unsigned char *)at_errmsg(); *m; m++)
            if (*m < 0x20 || *m == 0x7f)
                fail("table refusal is not one printable line");
        if (t.devices || t.ndevices)
            fail("a refused table left devices behind");
        return;
    }
    check_table(&t);
    check_import(&t);
    at_table_free(&t);
}

/* ------------------------------------------------ checksums repaired */

/* A mutation almost always breaks key_sha or cubin_sha256, and the reader
** then refuses the whole table. So the harness also recomputes both (and
** cubin_size) in the parsed tree wherever the fields they cover are there and
** typed, writes the tree out and reads that: the fuzzer's changes to any other
** field reach the rest of the reader and the import. */

static at_json *member_of(at_json *obj, const char *key, at_json_type type)
{
    at_json *v = (at_json *)at_json_member(obj, key);
    return v && v->type == type ? v : NULL;
}

/* dst = member `key`, a string (truncated to cap: the reader refuses a longer one anyway). */
static int get_str(at_json *obj, const char *key, char *dst, size_t cap)
{
    at_json *v = member_of(obj, key, AT_JSON_STRING);
    if (!v)
        return 0;
    snprintf(dst, cap, "%s", v->string);
    return 1;
}

static int get_int(at_json *obj, const char *key, int *dst)
{
    at_json *v = member_of(obj, key, AT_JSON_NUMBER);
    if (!v || !v->is_int || v->integer < -2147483647LL || v->integer > 2147483647LL)
        return 0;
    *dst = (int)v->integer;
    return 1;
}

static void set_str(at_json *obj, const char *key, const char *text)
{
    at_json *v = member_of(obj, key, AT_JSON_STRING);
    char *dup = strdup(text);
    if (!v || !dup) {
        free(dup);
        return;
    }
    free(v->string);
    v->string = dup;
    v->length = strlen(dup);
}

static void set_int(at_json *obj, const char *key, long long x)
{
    at_json *v = member_of(obj, key, AT_JSON_NUMBER);
    if (!v)
        return;
    v->number = (double)x;
    v->is_int = 1;
    v->integer = x;
}

static void repair_entry(at_json *e, const char *device, int cc, int sms)
{
    at_key k;
    char dtype[24], sha[65];
    memset(&k, 0, sizeof k);
    snprintf(k.device, sizeof k.device, "%s", device);
    k.cc = cc;
    k.sms = sms;
    at_fail(AT_OK, "%s", "");
    if (get_str(e, "op", k.op, sizeof k.op) && get_str(e, "dtype", dtype, sizeof dtype) &&
        at_dtype_parse(dtype, &k.dtype) == AT_OK && get_str(e, "shape", k.shape, sizeof k.shape) &&
        get_int(e, "driver_version", &k.driver_version) && get_int(e, "nvrtc_version", &k.nvrtc_version) &&
        get_str(e, "space_sha", k.space_sha, sizeof k.space_sha) &&
        get_str(e, "options", k.options, sizeof k.options) &&
        get_str(e, "tuner_version", k.tuner_version, sizeof k.tuner_version)) {
        at_key_digest(&k, sha);
        set_str(e, "key_sha", sha);
    }
    at_json *cubin = member_of(e, "cubin", AT_JSON_STRING);
    unsigned char *bytes = NULL;
    size_t n = 0;
    const char *why = NULL;
    if (cubin && at_json_base64_decode(cubin->string, cubin->length, &bytes, &n, &why) == AT_OK) {
        at_sha256_hex(bytes, n, sha);
        set_str(e, "cubin_sha256", sha);
        set_int(e, "cubin_size", (long long)n);
    }
    free(bytes);
}

static void repair(at_json *root)
{
    at_json *devs = member_of(root, "devices", AT_JSON_ARRAY);
    for (size_t i = 0; devs && i < devs->count; i++) {
        at_json *d = &devs->items[i], *ents = member_of(d, "entries", AT_JSON_ARRAY);
        char name[128];
        int major, minor, sms;
        if (d->type != AT_JSON_OBJECT || !ents || !get_str(d, "name", name, sizeof name) ||
            !get_int(d, "cc_major", &major) || !get_int(d, "cc_minor", &minor) || !get_int(d, "sms", &sms) ||
            major > 1000 || major < 0 || minor < 0 || minor > 1000)
            continue;
        for (size_t j = 0; j < ents->count; j++)
            if (ents->items[j].type == AT_JSON_OBJECT)
                repair_entry(&ents->items[j], name, 10 * major + minor, sms);
    }
}

static void check_repaired(const uint8_t *data, size_t size)
{
    at_json *root = NULL;
    char *text = NULL;
    size_t len = 0;
    if (at_json_parse((const char *)data, size, "fuzz.json", &root) != AT_OK)
        return;
    if (root->type == AT_JSON_OBJECT) {
        repair(root);
        FILE *f = open_memstream(&text, &len);
        if (!f)
            fail("open_memstream");
        write_tree(f, root);
        fclose(f);
        check_table_file((const uint8_t *)text, len);
        free(text);
    }
    at_json_free(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_json(data, size);
    check_table_file(data, size);
    check_repaired(data, size);
    return 0;
}
