/*
** table.c — tuned tables as files: the JSON, CSV and C-header writers, the
** strict reader of a JSON export, and the `autotune export|import|merge|show|prune`
** command line. Invariant: output is a function of the rows alone (sorted, no
** timestamps, shortest round-trip numbers), so JSON and CSV are byte-stable
** through export -> import -> export; nothing read is trusted (keys
** re-digested, cubins re-hashed).
*/
#include "table.h"

#include "json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define AT_C_MAX_SOURCES 64

/* [TABLE_FORMAT] The formats, version 1 (AT_TABLE_VERSION):
**
** JSON  {"format": "autotune-table", "version": 1, "devices": [DEVICE...]}
**       DEVICE = {name, cc_major, cc_minor, sms, l2_bytes, mem_bytes,
**       driver_version, nvrtc_major, nvrtc_minor, read_gbps, copy_gbps,
**       empty_us, "entries": [ENTRY...], and, when the GPU was validated,
**       "validations": [VALIDATION...]}; VALIDATION = {op, dtype, shape,
**       path, chosen, strategy, from, bucket, us, us_min, us_max,
**       baseline_us, baseline_min, baseline_max, noise_us, rel_err, verdict,
**       reason} (cache/cache_validation.h); ENTRY = {op, dtype, shape,
**       driver_version, nvrtc_version, space_sha, options, tuner_version,
**       key_sha, strategy, kernel, template, params, grid [3], block [3], smem,
**       us, us_min, us_max, baseline_us, baseline_min, baseline_max, speedup,
**       bytes, cubin_size, cubin_sha256, cubin (base64, or null for the
**       baseline)}. Every member is required and no other is accepted; a
**       number not measured is null. The key of an entry is its fields plus
**       its device's name, cc and sms; key_sha must equal their at_key_digest.
** CSV   one header line, then one line per entry with its device's columns
**       repeated; no cubin; RFC 4180 quoting where needed; empty = not measured.
** C     one self-contained header, layout 2 (guard ATK_TABLE_TYPES_V2, the
**       same types as kernels/atk.h): atk_table_device / atk_table_entry /
**       atk_table_source / atk_table, cubins as byte arrays, the template
**       sources and common/ headers the entries need as byte arrays (for an
**       NVRTC rebuild at run time), atk_exported_table() returns it. */
#define TABLE_FORMAT_NAME "autotune-table"

int at_table_format_parse(const char *text, at_table_format *out)
{
    static const char *const names[] = {"json", "csv", "c"};
    for (int i = 0; i < 3; i++)
        if (text && strcmp(text, names[i]) == 0) {
            *out = (at_table_format)(AT_TABLE_JSON + i);
            return AT_OK;
        }
    return at_fail(AT_ERR_USAGE, "unknown table format '%s' (expected json, csv or c)", text ? text : "");
}

/* ------------------------------------------------------------------ JSON */

static void jkey(FILE *f, int indent, int *first, const char *key)
{
    fputs(*first ? "" : ",\n", f);
    *first = 0;
    fprintf(f, "%*s\"%s\": ", indent, "", key);
}

static void jstr(FILE *f, int indent, int *first, const char *key, const char *v)
{
    jkey(f, indent, first, key);
    at_json_write_string(f, v);
}

static void jint(FILE *f, int indent, int *first, const char *key, long long v)
{
    jkey(f, indent, first, key);
    fprintf(f, "%lld", v);
}

static void jnum(FILE *f, int indent, int *first, const char *key, double v)
{
    char num[32];
    at_json_format_number(v, num, sizeof num);
    jkey(f, indent, first, key);
    fputs(num, f);
}

static void json_entry(FILE *f, const at_table_entry *e)
{
    const at_key *k = &e->key;
    const at_winner *w = &e->w;
    int first = 1, in = 10;
    fputs("        {\n", f);
    jstr(f, in, &first, "op", k->op);
    jstr(f, in, &first, "dtype", at_dtype_name(k->dtype));
    jstr(f, in, &first, "shape", k->shape);
    jint(f, in, &first, "driver_version", k->driver_version);
    jint(f, in, &first, "nvrtc_version", k->nvrtc_version);
    jstr(f, in, &first, "space_sha", k->space_sha);
    jstr(f, in, &first, "options", k->options);
    jstr(f, in, &first, "tuner_version", k->tuner_version);
    jstr(f, in, &first, "key_sha", e->key_sha);
    jstr(f, in, &first, "strategy", w->strategy);
    jstr(f, in, &first, "kernel", w->kernel);
    jstr(f, in, &first, "template", w->template_name);
    jstr(f, in, &first, "params", w->params);
    jkey(f, in, &first, "grid");
    fprintf(f, "[%u, %u, %u]", w->grid[0], w->grid[1], w->grid[2]);
    jkey(f, in, &first, "block");
    fprintf(f, "[%u, %u, %u]", w->block[0], w->block[1], w->block[2]);
    jint(f, in, &first, "smem", w->smem);
    const double d[] = {w->us,           w->us_min,       w->us_max,  w->baseline_us,
                        w->baseline_min, w->baseline_max, w->speedup, w->bytes};
    static const char *const dn[] = {"us",           "us_min",       "us_max",  "baseline_us",
                                     "baseline_min", "baseline_max", "speedup", "bytes"};
    for (int i = 0; i < 8; i++)
        jnum(f, in, &first, dn[i], d[i]);
    jint(f, in, &first, "cubin_size", (long long)w->cubin_size);
    jstr(f, in, &first, "cubin_sha256", w->cubin_sha);
    jkey(f, in, &first, "cubin");
    if (w->cubin_size) {
        fputc('"', f);
        at_json_write_base64(f, w->cubin, w->cubin_size);
        fputc('"', f);
    } else {
        fputs("null", f);
    }
    fputs("\n        }", f);
}

static void json_validation(FILE *f, const at_validation *v)
{
    int first = 1, in = 10;
    fputs("        {\n", f);
    jstr(f, in, &first, "op", v->op);
    jstr(f, in, &first, "dtype", at_dtype_name(v->dtype));
    jstr(f, in, &first, "shape", v->shape);
    jstr(f, in, &first, "path", v->path);
    jstr(f, in, &first, "chosen", v->chosen);
    jstr(f, in, &first, "strategy", v->strategy);
    jstr(f, in, &first, "from", v->from);
    jint(f, in, &first, "bucket", v->bucket);
    jnum(f, in, &first, "us", v->us);
    jnum(f, in, &first, "us_min", v->us_min);
    jnum(f, in, &first, "us_max", v->us_max);
    jnum(f, in, &first, "baseline_us", v->base_us);
    jnum(f, in, &first, "baseline_min", v->base_min);
    jnum(f, in, &first, "baseline_max", v->base_max);
    jnum(f, in, &first, "noise_us", v->noise);
    jnum(f, in, &first, "rel_err", v->err);
    jstr(f, in, &first, "verdict", v->verdict);
    jstr(f, in, &first, "reason", v->reason);
    fputs("\n        }", f);
}

static void write_json(FILE *f, const at_table_device *const *sel, size_t n)
{
    fprintf(f, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"devices\": [", TABLE_FORMAT_NAME,
            AT_TABLE_VERSION);
    for (size_t i = 0; i < n; i++) {
        const at_device_info *d = &sel[i]->info;
        int first = 1, in = 6;
        fputs(i ? ",\n    {\n" : "\n    {\n", f);
        jstr(f, in, &first, "name", d->name);
        jint(f, in, &first, "cc_major", d->cc_major);
        jint(f, in, &first, "cc_minor", d->cc_minor);
        jint(f, in, &first, "sms", d->sms);
        jint(f, in, &first, "l2_bytes", d->l2_bytes);
        jint(f, in, &first, "mem_bytes", d->mem_bytes);
        jint(f, in, &first, "driver_version", d->driver_version);
        jint(f, in, &first, "nvrtc_major", d->nvrtc_major);
        jint(f, in, &first, "nvrtc_minor", d->nvrtc_minor);
        jnum(f, in, &first, "read_gbps", d->read_gbps);
        jnum(f, in, &first, "copy_gbps", d->copy_gbps);
        jnum(f, in, &first, "empty_us", d->empty_us);
        jkey(f, in, &first, "entries");
        fputc('[', f);
        for (size_t j = 0; j < sel[i]->nentries; j++) {
            fputs(j ? ",\n" : "\n", f);
            json_entry(f, &sel[i]->entries[j]);
        }
        fputs("\n      ]", f);
        if (sel[i]->nvalidations) {
            fputs(",\n      \"validations\": [", f);
            for (size_t j = 0; j < sel[i]->nvalidations; j++) {
                fputs(j ? ",\n" : "\n", f);
                json_validation(f, &sel[i]->validations[j]);
            }
            fputs("\n      ]", f);
        }
        fputs("\n    }", f);
    }
    fputs("\n  ]\n}\n", f);
}

/* ------------------------------------------------------------------- CSV */

/* RFC 4180 quoting, only where needed (',', '"', CR, LF). */
static void csv_field(FILE *f, const char *s, int last)
{
    if (strpbrk(s, ",\"\r\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

/* A number; empty where it is not finite (not measured). */
static void csv_num(FILE *f, double v)
{
    char num[32];
    at_json_format_number(v, num, sizeof num);
    csv_field(f, isfinite(v) ? num : "", 0);
}

static void write_csv(FILE *f, const at_table_device *const *sel, size_t n)
{
    fputs("device,arch,sms,driver_version,nvrtc_version,read_gbps,copy_gbps,empty_us,op,dtype,shape,"
          "space_sha,options,tuner_version,key_sha,strategy,kernel,template,params,grid_x,grid_y,grid_z,"
          "block_x,block_y,block_z,smem,us,us_min,us_max,baseline_us,baseline_min,baseline_max,speedup,"
          "bytes,cubin_size,cubin_sha256\n",
          f);
    for (size_t i = 0; i < n; i++) {
        const at_device_info *d = &sel[i]->info;
        for (size_t j = 0; j < sel[i]->nentries; j++) {
            const at_table_entry *e = &sel[i]->entries[j];
            const at_winner *w = &e->w;
            char arch[16], num[32];
            snprintf(arch, sizeof arch, "sm_%d%d", d->cc_major, d->cc_minor);
            csv_field(f, d->name, 0);
            csv_field(f, arch, 0);
            fprintf(f, "%d,%d,%d,", d->sms, e->key.driver_version, e->key.nvrtc_version);
            csv_num(f, d->read_gbps);
            csv_num(f, d->copy_gbps);
            csv_num(f, d->empty_us);
            const char *s[] = {e->key.op,      at_dtype_name(e->key.dtype),
                               e->key.shape,   e->key.space_sha,
                               e->key.options, e->key.tuner_version,
                               e->key_sha,     w->strategy,
                               w->kernel,      w->template_name,
                               w->params};
            for (int k = 0; k < 11; k++)
                csv_field(f, s[k], 0);
            fprintf(f, "%u,%u,%u,%u,%u,%u,%u,", w->grid[0], w->grid[1], w->grid[2], w->block[0], w->block[1],
                    w->block[2], w->smem);
            const double v[] = {w->us,           w->us_min,       w->us_max,  w->baseline_us,
                                w->baseline_min, w->baseline_max, w->speedup, w->bytes};
            for (int k = 0; k < 8; k++)
                csv_num(f, v[k]);
            snprintf(num, sizeof num, "%zu", w->cubin_size);
            csv_field(f, num, 0);
            csv_field(f, w->cubin_sha, 1);
        }
    }
}

/* -------------------------------------------------------------- C header */

/* A C string literal: printable ASCII as is except '"', '\\' and '?' (no
** trigraphs under -std=c11); everything else as a three-digit octal escape. */
static void c_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\' && *p != '?')
            fputc(*p, f);
        else
            fprintf(f, "\\%03o", *p);
    }
    fputc('"', f);
}

/* A double literal; -1.0 where not finite (never a real measurement). */
static void c_num(FILE *f, const char *name, double v)
{
    char num[32];
    at_json_format_number(v, num, sizeof num);
    fprintf(f, "        .%s = %s%s,\n", name, isfinite(v) ? num : "-1.0",
            isfinite(v) && !strpbrk(num, ".e") ? ".0" : "");
}

/* Text safe inside a C comment: no "*" + "/", no control bytes. */
static void c_comment_text(FILE *f, const char *s)
{
    for (; *s; s++)
        fputc((*s >= 0x20 && *s < 0x7f && *s != '*' && *s != '\\') ? *s : '_', f);
}

/* [TABLE_FORMAT] layout 2 of the C header: the same text as kernels/atk.h
** (the guard name carries the layout, so a header of another layout fails
** to compile next to atk.h instead of being misread). */
static const char C_TYPES[] =
    "#ifndef ATK_TABLE_TYPES_V2\n"
    "#define ATK_TABLE_TYPES_V2\n"
    "/* [TABLE_FORMAT] layout 2: version 1 of the table plus embedded sources. */\n"
    "typedef struct atk_table_device {\n"
    "    const char *name;\n"
    "    int cc_major, cc_minor, sms;\n"
    "    long long l2_bytes, mem_bytes;\n"
    "    int driver_version, nvrtc_major, nvrtc_minor;\n"
    "    double read_gbps, copy_gbps, empty_us; /* -1.0: not measured */\n"
    "} atk_table_device;\n"
    "\n"
    "typedef struct atk_table_entry {\n"
    "    int device; /* index into atk_table.devices */\n"
    "    const char *op, *dtype, *shape;\n"
    "    int driver_version, nvrtc_version;\n"
    "    const char *space_sha, *options, *tuner_version;\n"
    "    const char *key_sha; /* at_key_digest of the key: these fields + the device's */\n"
    "    const char *strategy, *kernel, *template_name, *params;\n"
    "    unsigned grid[3], block[3], smem;\n"
    "    double us, us_min, us_max, baseline_us, baseline_min, baseline_max, speedup, bytes;\n"
    "    const unsigned char *cubin; /* NULL when the baseline (cuBLAS) won */\n"
    "    size_t cubin_size;\n"
    "    const char *cubin_sha256; /* \"\" without a cubin */\n"
    "    int source; /* index into atk_table.sources of template_name, -1 if not embedded */\n"
    "} atk_table_entry;\n"
    "\n"
    "typedef struct atk_table_source {\n"
    "    const char *name;\n"
    "    const char *text;\n"
    "    const char *sha256; /* of text */\n"
    "} atk_table_source;\n"
    "\n"
    "typedef struct atk_table {\n"
    "    int version; /* the table format version (1, as in JSON) */\n"
    "    const atk_table_device *devices;\n"
    "    size_t ndevices;\n"
    "    const atk_table_entry *entries;\n"
    "    size_t nentries;\n"
    "    const atk_table_source *sources; /* templates, then every common/ header */\n"
    "    size_t nsources;\n"
    "} atk_table;\n"
    "#endif\n\n";

/* The sources a C table embeds so the runtime can rebuild a cubin that does
** not load (NVRTC): each template the entries name and every shared header
** under common/, read from the templates folder at export time
** ($AUTOTUNE_HOME/templates, else the source tree's). Missing files are left
** out (the header says which). */
typedef struct c_sources {
    char *name[AT_C_MAX_SOURCES], *text[AT_C_MAX_SOURCES];
    int n;
    char root[4096];
} c_sources;

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (4L << 20) && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
        buf[n] = '\0';
    else if (buf) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

static int c_source_index(const c_sources *cs, const char *name)
{
    for (int i = 0; i < cs->n; i++)
        if (!strcmp(cs->name[i], name))
            return i;
    return -1;
}

static void c_source_add(c_sources *cs, const char *name)
{
    char path[8192];
    if (!name[0] || name[0] == '/' || strstr(name, "..") || c_source_index(cs, name) >= 0 ||
        cs->n >= AT_C_MAX_SOURCES)
        return;
    snprintf(path, sizeof path, "%s/%s", cs->root, name);
    char *text = read_text(path), *copy = strdup(name);
    if (!text || !copy) {
        free(text);
        free(copy);
        return;
    }
    cs->name[cs->n] = copy;
    cs->text[cs->n++] = text;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void c_sources_read(c_sources *cs, const at_table_device *const *sel, size_t n)
{
    const char *home = getenv("AUTOTUNE_HOME");
#ifdef AT_SOURCE_DIR
    const char *src_dir = AT_SOURCE_DIR;
#else
    const char *src_dir = ".";
#endif
    memset(cs, 0, sizeof *cs);
    snprintf(cs->root, sizeof cs->root, "%s/templates", home && home[0] ? home : src_dir);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < sel[i]->nentries; j++)
            if (sel[i]->entries[j].w.cubin_size)
                c_source_add(cs, sel[i]->entries[j].w.template_name);
    /* every shared header, sorted, so the output does not depend on readdir order */
    char path[8192], *hdr[AT_C_MAX_SOURCES];
    int nh = 0;
    snprintf(path, sizeof path, "%s/common", cs->root);
    DIR *d = cs->n ? opendir(path) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL && nh < AT_C_MAX_SOURCES) {
        size_t k = strlen(de->d_name);
        if (k > 4 && !strcmp(de->d_name + k - 4, ".cuh") && (hdr[nh] = malloc(k + 8)))
            snprintf(hdr[nh++], k + 8, "common/%s", de->d_name);
    }
    if (d)
        closedir(d);
    qsort(hdr, (size_t)nh, sizeof *hdr, cmp_str);
    for (int i = 0; i < nh; i++) {
        c_source_add(cs, hdr[i]);
        free(hdr[i]);
    }
}

static void c_sources_free(c_sources *cs)
{
    for (int i = 0; i < cs->n; i++) {
        free(cs->name[i]);
        free(cs->text[i]);
    }
    cs->n = 0;
}

/* Bytes as the body of a C array initializer, 16 a line. */
static void c_bytes(FILE *f, const unsigned char *p, size_t n)
{
    for (size_t b = 0; b < n; b++)
        fprintf(f, "%s0x%02x,", b % 16 ? " " : "\n    ", p[b]);
}

static void write_c(FILE *f, const at_table_device *const *sel, size_t n)
{
    size_t total = 0, idx = 0;
    c_sources cs;
    c_sources_read(&cs, sel, n);
    fputs("/*\n** Tuned kernel table generated by `autotune export --format c` (autotune " AT_TUNER_VERSION
          ").\n** Do not edit: regenerate it. GPUs: ",
          f);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ", " : "", f);
        c_comment_text(f, sel[i]->info.name);
        fprintf(f, " (sm_%d%d)", sel[i]->info.cc_major, sel[i]->info.cc_minor);
        total += sel[i]->nentries;
    }
    fputs(".\n**\n"
          "** The runtime library (kernels/atk.h) reads it: atk_open_table(atk_exported_table(),\n"
          "** device, flags, &ctx), so an engine dispatches the tuned kernels with no\n"
          "** SQLite at run time. Include it in exactly one .c file (after atk.h or\n"
          "** alone). Each entry holds its cubin (built for its device's architecture)\n"
          "** and the cubin's sha256; the template sources and shared headers the\n"
          "** entries need are embedded too (as read from the templates folder at\n"
          "** export), so a cubin that does not load can be rebuilt with NVRTC.\n"
          "** Self-contained: needs only <stddef.h>.\n*/\n"
          "#ifndef ATK_EXPORTED_TABLE_H\n#define ATK_EXPORTED_TABLE_H\n\n#include <stddef.h>\n\n",
          f);
    fputs(C_TYPES, f);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < sel[i]->nentries; j++, idx++) {
            const at_winner *w = &sel[i]->entries[j].w;
            if (!w->cubin_size)
                continue;
            fprintf(f, "static const unsigned char atk_cubin_%zu[%zu] = {", idx, w->cubin_size);
            c_bytes(f, w->cubin, w->cubin_size);
            fputs("\n};\n\n", f);
        }
    /* sources as bytes (with their NUL): a string literal this long is past
    ** what ISO C promises a compiler takes */
    for (int i = 0; i < cs.n; i++) {
        size_t len = strlen(cs.text[i]) + 1;
        fprintf(f, "/* %s */\nstatic const unsigned char atk_source_%d[%zu] = {", cs.name[i], i, len);
        c_bytes(f, (const unsigned char *)cs.text[i], len);
        fputs("\n};\n\n", f);
    }
    fputs("static const atk_table_source atk_table_sources[] = {\n", f);
    for (int i = 0; i < cs.n; i++) {
        char sha[65];
        at_sha256_hex(cs.text[i], strlen(cs.text[i]), sha);
        fputs("    {.name = ", f);
        c_string(f, cs.name[i]);
        fprintf(f, ", .text = (const char *)atk_source_%d, .sha256 = \"%s\"},\n", i, sha);
    }
    if (!cs.n)
        fputs("    {.name = NULL, .text = NULL, .sha256 = NULL}, /* none found at export */\n", f);
    fputs("};\n\n", f);
    fputs("static const atk_table_device atk_table_devices[] = {\n", f);
    for (size_t i = 0; i < n; i++) {
        const at_device_info *d = &sel[i]->info;
        fputs("    {\n        .name = ", f);
        c_string(f, d->name);
        fprintf(f, ",\n        .cc_major = %d,\n        .cc_minor = %d,\n        .sms = %d,\n", d->cc_major,
                d->cc_minor, d->sms);
        fprintf(f, "        .l2_bytes = %lldLL,\n        .mem_bytes = %lldLL,\n", (long long)d->l2_bytes,
                (long long)d->mem_bytes);
        fprintf(f, "        .driver_version = %d,\n        .nvrtc_major = %d,\n        .nvrtc_minor = %d,\n",
                d->driver_version, d->nvrtc_major, d->nvrtc_minor);
        c_num(f, "read_gbps", d->read_gbps);
        c_num(f, "copy_gbps", d->copy_gbps);
        c_num(f, "empty_us", d->empty_us);
        fputs("    },\n", f);
    }
    fputs("};\n\nstatic const atk_table_entry atk_table_entries[] = {\n", f);
    idx = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < sel[i]->nentries; j++, idx++) {
            const at_table_entry *e = &sel[i]->entries[j];
            const at_winner *w = &e->w;
            const char *sn[] = {"op",      "dtype",    "shape",  "space_sha",     "options", "tuner_version",
                                "key_sha", "strategy", "kernel", "template_name", "params"};
            const char *sv[] = {e->key.op,      at_dtype_name(e->key.dtype),
                                e->key.shape,   e->key.space_sha,
                                e->key.options, e->key.tuner_version,
                                e->key_sha,     w->strategy,
                                w->kernel,      w->template_name,
                                w->params};
            fprintf(f,
                    "    {\n        .device = %zu,\n        .driver_version = %d,\n"
                    "        .nvrtc_version = %d,\n",
                    i, e->key.driver_version, e->key.nvrtc_version);
            for (int k = 0; k < 11; k++) {
                fprintf(f, "        .%s = ", sn[k]);
                c_string(f, sv[k]);
                fputs(",\n", f);
            }
            fprintf(
                f,
                "        .grid = {%uu, %uu, %uu},\n        .block = {%uu, %uu, %uu},\n        .smem = %uu,\n",
                w->grid[0], w->grid[1], w->grid[2], w->block[0], w->block[1], w->block[2], w->smem);
            const double v[] = {w->us,           w->us_min,       w->us_max,  w->baseline_us,
                                w->baseline_min, w->baseline_max, w->speedup, w->bytes};
            static const char *const vn[] = {"us",           "us_min",       "us_max",  "baseline_us",
                                             "baseline_min", "baseline_max", "speedup", "bytes"};
            for (int k = 0; k < 8; k++)
                c_num(f, vn[k], v[k]);
            if (w->cubin_size)
                fprintf(f, "        .cubin = atk_cubin_%zu,\n        .cubin_size = %zu,\n", idx,
                        w->cubin_size);
            else
                fputs("        .cubin = NULL,\n        .cubin_size = 0,\n", f);
            fputs("        .cubin_sha256 = ", f);
            c_string(f, w->cubin_sha);
            fprintf(f, ",\n        .source = %d,\n    },\n", w->cubin_size ? c_source_index(&cs, w->template_name) : -1);
        }
    fprintf(f,
            "};\n\nstatic const atk_table atk_table_data = {\n    .version = %d,\n"
            "    .devices = atk_table_devices,\n    .ndevices = %zu,\n"
            "    .entries = atk_table_entries,\n    .nentries = %zu,\n"
            "    .sources = atk_table_sources,\n    .nsources = %d,\n};\n\n",
            AT_TABLE_VERSION, n, total, cs.n);
    c_sources_free(&cs);
    fputs("/* The table in this header (static storage; never freed). */\n"
          "static inline const atk_table *atk_exported_table(void)\n{\n    return &atk_table_data;\n}\n\n"
          "#endif /* ATK_EXPORTED_TABLE_H */\n",
          f);
}

void at_table_write(FILE *f, at_table_format fmt, const at_table_device *const *sel, size_t n)
{
    if (fmt == AT_TABLE_JSON)
        write_json(f, sel, n);
    else if (fmt == AT_TABLE_CSV)
        write_csv(f, sel, n);
    else
        write_c(f, sel, n);
}

/* ------------------------------------------------------- JSON table reader */

/* dst = the integer member `key` checked to lie in lo..hi (so the cast to
** dst's type `type` is exact); returns from the caller on error. */
#define GET_INT(d, obj, key, lo, hi, type, dst)                                                              \
    do {                                                                                                     \
        long long v_;                                                                                        \
        if ((st = at_json_get_int((d), (obj), (key), (lo), (hi), &v_)) != AT_OK)                             \
            return st;                                                                                       \
        (dst) = (type)v_;                                                                                    \
    } while (0)

static int is_sha(const char *s)
{
    size_t n = strspn(s, "0123456789abcdef");
    return n == 64 && s[64] == '\0';
}

static int read_cubin(const at_json_path *d, const at_json *obj, at_winner *w)
{
    const at_json *v = at_json_member(obj, "cubin");
    long long size;
    int st;
    GET_INT(d, obj, "cubin_size", 0, AT_TABLE_MAX_BYTES, long long, size);
    if ((st = at_json_get_string(d, obj, "cubin_sha256", w->cubin_sha, sizeof w->cubin_sha)) != AT_OK)
        return st;
    if (v->type == AT_JSON_NULL) {
        if (size != 0 || w->cubin_sha[0])
            return at_json_fail(d, "cubin", "null, but cubin_size or cubin_sha256 says there is one");
        return AT_OK;
    }
    if (v->type != AT_JSON_STRING)
        return at_json_fail(d, "cubin", "expected a base64 string or null, got %s",
                            at_json_type_name(v->type));
    const char *why = NULL;
    unsigned char *bytes = NULL;
    size_t n = 0;
    if ((st = at_json_base64_decode(v->string, v->length, &bytes, &n, &why)) != AT_OK)
        return st == AT_ERR_NOMEM ? at_fail(st, "out of memory")
                                  : at_json_fail(d, "cubin", "bad base64: %s", why);
    w->cubin = bytes;
    w->cubin_size = n;
    if (n == 0 || (long long)n != size)
        return at_json_fail(d, "cubin", "%zu bytes, but cubin_size says %lld", n, size);
    char got[65];
    at_sha256_hex(bytes, n, got);
    if (strcmp(got, w->cubin_sha) != 0)
        return at_json_fail(d, "cubin_sha256", "does not match the cubin (its sha256 is %s)", got);
    return AT_OK;
}

static int read_entry(const at_json_path *d, const at_json *obj, const at_device_info *dev, at_table_entry *e)
{
    /* clang-format off */
    static const char *const fields[] = {
        "op", "dtype", "shape", "driver_version", "nvrtc_version", "space_sha", "options", "tuner_version",
        "key_sha", "strategy", "kernel", "template", "params", "grid", "block", "smem", "us", "us_min",
        "us_max", "baseline_us", "baseline_min", "baseline_max", "speedup", "bytes", "cubin_size",
        "cubin_sha256", "cubin", NULL};
    /* clang-format on */
    at_key *k = &e->key;
    at_winner *w = &e->w;
    char dtype[24], sha[65], canon[64];
    at_shape shape;
    int st;
    if ((st = at_json_check_fields(d, obj, fields)) ||
        (st = at_json_get_string(d, obj, "op", k->op, sizeof k->op)) ||
        (st = at_json_get_string(d, obj, "dtype", dtype, sizeof dtype)) ||
        (st = at_json_get_string(d, obj, "shape", k->shape, sizeof k->shape)) ||
        (st = at_json_get_string(d, obj, "space_sha", k->space_sha, sizeof k->space_sha)) ||
        (st = at_json_get_string(d, obj, "options", k->options, sizeof k->options)) ||
        (st = at_json_get_string(d, obj, "tuner_version", k->tuner_version, sizeof k->tuner_version)) ||
        (st = at_json_get_string(d, obj, "key_sha", sha, sizeof sha)) ||
        (st = at_json_get_string(d, obj, "strategy", w->strategy, sizeof w->strategy)) ||
        (st = at_json_get_string(d, obj, "kernel", w->kernel, sizeof w->kernel)) ||
        (st = at_json_get_string(d, obj, "template", w->template_name, sizeof w->template_name)) ||
        (st = at_json_get_string(d, obj, "params", w->params, sizeof w->params)) ||
        (st = at_json_get_uint3(d, obj, "grid", w->grid)) ||
        (st = at_json_get_uint3(d, obj, "block", w->block)))
        return st;
    GET_INT(d, obj, "driver_version", 0, INT_MAX, int, k->driver_version);
    GET_INT(d, obj, "nvrtc_version", 0, INT_MAX, int, k->nvrtc_version);
    GET_INT(d, obj, "smem", 0, UINT_MAX, unsigned, w->smem);
    static const char *const dn[] = {"us",           "us_min",       "us_max",  "baseline_us",
                                     "baseline_min", "baseline_max", "speedup", "bytes"};
    double *dv[] = {&w->us,           &w->us_min,       &w->us_max,  &w->baseline_us,
                    &w->baseline_min, &w->baseline_max, &w->speedup, &w->bytes};
    for (int i = 0; i < 8; i++)
        if ((st = at_json_get_number(d, obj, dn[i], dv[i])) != AT_OK)
            return st;
    if (!k->op[0] || !w->strategy[0])
        return at_json_fail(d, k->op[0] ? "strategy" : "op", "must not be empty");
    if (at_dtype_parse(dtype, &k->dtype) != AT_OK)
        return at_json_fail(d, "dtype", "unknown dtype '%s' (expected bf16 or fp16)", dtype);
    if (at_shape_parse(k->shape, 3, &shape) != AT_OK && at_shape_parse(k->shape, 2, &shape) != AT_OK)
        return at_json_fail(d, "shape", "'%s' is not a shape MxKxN or TxH", k->shape);
    at_shape_format(&shape, canon, sizeof canon);
    if (strcmp(canon, k->shape) != 0)
        return at_json_fail(d, "shape", "'%s' is not written canonically ('%s')", k->shape, canon);
    if (!is_sha(k->space_sha))
        return at_json_fail(d, "space_sha", "expected 64 lower-case hex digits");
    if ((st = read_cubin(d, obj, w)) != AT_OK)
        return st;
    snprintf(k->device, sizeof k->device, "%s", dev->name);
    k->cc = 10 * dev->cc_major + dev->cc_minor;
    k->sms = dev->sms;
    at_key_digest(k, e->key_sha); /* recomputed; the file's is only checked */
    if (strcmp(sha, e->key_sha) != 0)
        return at_json_fail(d, "key_sha", "does not match the key fields (they digest to %s)", e->key_sha);
    return AT_OK;
}

static int cmp_key_sha(const void *a, const void *b)
{
    return strcmp((*(const at_table_entry *const *)a)->key_sha, (*(const at_table_entry *const *)b)->key_sha);
}

static int read_validation(const at_json_path *d, const at_json *obj, const at_device_info *dev, at_validation *v)
{
    static const char *const fields[] = {"op",          "dtype",        "shape",        "path",     "chosen",
                                         "strategy",    "from",         "bucket",       "us",       "us_min",
                                         "us_max",      "baseline_us",  "baseline_min", "baseline_max",
                                         "noise_us",    "rel_err",      "verdict",      "reason",   NULL};
    char dtype[16];
    long long bucket = 0;
    int st;
    if (obj->type != AT_JSON_OBJECT)
        return at_json_fail(d, NULL, "expected an object");
    memset(v, 0, sizeof *v);
    snprintf(v->device, sizeof v->device, "%s", dev->name);
    v->cc = 10 * dev->cc_major + dev->cc_minor;
    v->sms = dev->sms;
    char *const text[] = {v->op, dtype, v->shape, v->path, v->chosen, v->strategy, v->from, v->verdict, v->reason};
    const size_t cap[] = {sizeof v->op,   sizeof dtype,    sizeof v->shape,   sizeof v->path,  sizeof v->chosen,
                          sizeof v->strategy, sizeof v->from, sizeof v->verdict, sizeof v->reason};
    static const char *const tkeys[] = {"op", "dtype", "shape", "path", "chosen", "strategy", "from", "verdict",
                                        "reason"};
    double *const num[] = {&v->us, &v->us_min, &v->us_max, &v->base_us, &v->base_min, &v->base_max, &v->noise,
                           &v->err};
    static const char *const nkeys[] = {"us", "us_min", "us_max", "baseline_us", "baseline_min", "baseline_max",
                                        "noise_us", "rel_err"};
    if ((st = at_json_check_fields(d, obj, fields)) != AT_OK)
        return st;
    for (int i = 0; i < 9; i++)
        if ((st = at_json_get_string(d, obj, tkeys[i], text[i], cap[i])) != AT_OK)
            return st;
    for (int i = 0; i < 8; i++)
        if ((st = at_json_get_number(d, obj, nkeys[i], num[i])) != AT_OK)
            return st;
    if ((st = at_json_get_int(d, obj, "bucket", 0, 65535, &bucket)) != AT_OK)
        return st;
    v->bucket = (int)bucket;
    if (at_dtype_parse(dtype, &v->dtype) != AT_OK)
        return at_json_fail(d, "dtype", "'%s' (bf16 or fp16)", dtype);
    return AT_OK;
}

static int read_device(at_json_path *d, const at_json *obj, at_table_device *td)
{
    static const char *const fields[] = {
        "name",        "cc_major",    "cc_minor",  "sms",       "l2_bytes", "mem_bytes", "driver_version",
        "nvrtc_major", "nvrtc_minor", "read_gbps", "copy_gbps", "empty_us", "entries",   "validations", NULL};
    static const size_t optional = 13; /* fields[13], "validations", only when validated */
    at_device_info *i = &td->info;
    int st;
    size_t base = strlen(d->where);
    const char *present[sizeof fields / sizeof fields[0]];
    memcpy(present, fields, sizeof fields);
    if (!at_json_member(obj, "validations"))
        present[optional] = NULL;
    if ((st = at_json_check_fields(d, obj, present)) ||
        (st = at_json_get_string(d, obj, "name", i->name, sizeof i->name)) ||
        (st = at_json_get_number(d, obj, "read_gbps", &i->read_gbps)) ||
        (st = at_json_get_number(d, obj, "copy_gbps", &i->copy_gbps)) ||
        (st = at_json_get_number(d, obj, "empty_us", &i->empty_us)))
        return st;
    if (!i->name[0])
        return at_json_fail(d, "name", "must not be empty");
    GET_INT(d, obj, "cc_major", 1, 99, int, i->cc_major);
    GET_INT(d, obj, "cc_minor", 0, 9, int, i->cc_minor);
    GET_INT(d, obj, "sms", 0, 1000000, int, i->sms);
    GET_INT(d, obj, "l2_bytes", 0, LLONG_MAX, int64_t, i->l2_bytes);
    GET_INT(d, obj, "mem_bytes", 0, LLONG_MAX, int64_t, i->mem_bytes);
    GET_INT(d, obj, "driver_version", 0, INT_MAX, int, i->driver_version);
    GET_INT(d, obj, "nvrtc_major", 0, 1000, int, i->nvrtc_major);
    GET_INT(d, obj, "nvrtc_minor", 0, 1000, int, i->nvrtc_minor);
    const at_json *ents = at_json_member(obj, "entries");
    if (ents->type != AT_JSON_ARRAY)
        return at_json_fail(d, "entries", "expected an array, got %s", at_json_type_name(ents->type));
    if (ents->count && !(td->entries = calloc(ents->count, sizeof *td->entries)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    for (size_t j = 0; j < ents->count; j++) {
        snprintf(d->where + base, sizeof d->where - base, ".entries[%zu]", j);
        td->nentries = j + 1; /* owned from here: freed on error too */
        if ((st = read_entry(d, &ents->items[j], i, &td->entries[j])) != AT_OK)
            return st;
    }
    d->where[base] = '\0';
    const at_json *vals = at_json_member(obj, "validations");
    if (vals && vals->type != AT_JSON_ARRAY)
        return at_json_fail(d, "validations", "expected an array, got %s", at_json_type_name(vals->type));
    if (vals && vals->count && !(td->validations = calloc(vals->count, sizeof *td->validations)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    for (size_t j = 0; vals && j < vals->count; j++) {
        snprintf(d->where + base, sizeof d->where - base, ".validations[%zu]", j);
        td->nvalidations = j + 1;
        if ((st = read_validation(d, &vals->items[j], i, &td->validations[j])) != AT_OK)
            return st;
    }
    d->where[base] = '\0';
    /* one entry per key: a duplicate would be a conflict with itself */
    const at_table_entry **by = malloc((td->nentries ? td->nentries : 1) * sizeof *by);
    if (!by)
        return at_fail(AT_ERR_NOMEM, "out of memory");
    for (size_t j = 0; j < td->nentries; j++)
        by[j] = &td->entries[j];
    qsort(by, td->nentries, sizeof *by, cmp_key_sha);
    for (size_t j = 1; j < td->nentries && st == AT_OK; j++)
        if (!strcmp(by[j]->key_sha, by[j - 1]->key_sha))
            st = at_json_fail(d, "entries", "two entries for %s %s %s with the same key", by[j]->key.op,
                              at_dtype_name(by[j]->key.dtype), by[j]->key.shape);
    free(by);
    return st;
}

static int cmp_device(const void *a, const void *b)
{
    const at_table_device *x = *(const at_table_device *const *)a, *y = *(const at_table_device *const *)b;
    int c = strcmp(x->info.name, y->info.name);
    if (!c)
        c = x->info.cc_major != y->info.cc_major ? x->info.cc_major - y->info.cc_major
            : x->info.cc_minor != y->info.cc_minor ? x->info.cc_minor - y->info.cc_minor
                                                   : (x->info.sms > y->info.sms) - (x->info.sms < y->info.sms);
    return c ? c : (x > y) - (x < y); /* then document order */
}

/* One GPU per table: sorted, so 70,000 devices are not 2.5e9 comparisons. */
static int check_same_gpu(at_json_path *d, const at_table *t)
{
    const at_table_device **by = malloc((t->ndevices ? t->ndevices : 1) * sizeof *by);
    size_t first = t->ndevices, twin = 0;
    if (!by)
        return at_fail(AT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < t->ndevices; i++)
        by[i] = &t->devices[i];
    qsort(by, t->ndevices, sizeof *by, cmp_device);
    for (size_t i = 1; i < t->ndevices; i++) {
        const at_device_info *a = &by[i - 1]->info, *b = &by[i]->info;
        size_t later = (size_t)(by[i] - t->devices);
        if (!strcmp(a->name, b->name) && a->cc_major == b->cc_major && a->cc_minor == b->cc_minor &&
            a->sms == b->sms && later < first) {
            first = later;
            twin = (size_t)(by[i - 1] - t->devices);
        }
    }
    free(by);
    if (first == t->ndevices)
        return AT_OK;
    snprintf(d->where, sizeof d->where, "devices[%zu]", first);
    return at_json_fail(d, NULL, "the same GPU as devices[%zu]", twin);
}

static int read_table_doc(const char *file, const at_json *root, at_table *t)
{
    static const char *const fields[] = {"format", "version", "devices", NULL};
    at_json_path d = {.file = file};
    char fmt[32];
    const at_json *fv;
    long long version;
    int st;
    if (root->type != AT_JSON_OBJECT)
        return at_json_fail(&d, NULL, "not an autotune table (the document is not an object)");
    if (!(fv = at_json_member(root, "format")) || fv->type != AT_JSON_STRING ||
        strcmp(fv->string, TABLE_FORMAT_NAME))
        return at_json_fail(&d, "format", "not an autotune table (expected \"%s\")", TABLE_FORMAT_NAME);
    if ((st = at_json_check_fields(&d, root, fields)) ||
        (st = at_json_get_string(&d, root, "format", fmt, sizeof fmt)) ||
        (st = at_json_get_int(&d, root, "version", LLONG_MIN, LLONG_MAX, &version)))
        return st;
    if (version != AT_TABLE_VERSION)
        return at_json_fail(&d, "version",
                            "table version %lld is not supported (this autotune reads version %d)", version,
                            AT_TABLE_VERSION);
    const at_json *devs = at_json_member(root, "devices");
    if (devs->type != AT_JSON_ARRAY)
        return at_json_fail(&d, "devices", "expected an array, got %s", at_json_type_name(devs->type));
    if (devs->count && !(t->devices = calloc(devs->count, sizeof *t->devices)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < devs->count; i++) {
        snprintf(d.where, sizeof d.where, "devices[%zu]", i);
        t->ndevices = i + 1;
        if ((st = read_device(&d, &devs->items[i], &t->devices[i])) != AT_OK)
            return st;
    }
    return check_same_gpu(&d, t);
}

int at_table_read_json(const char *path, at_table *out)
{
    struct stat sb;
    FILE *f = NULL;
    char *text = NULL;
    at_json *root = NULL;
    int st = AT_OK;
    memset(out, 0, sizeof *out);
    /* O_NONBLOCK: a FIFO is refused below instead of waiting for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || !(f = fdopen(fd, "rb")) || fstat(fd, &sb) != 0) {
        st = at_fail(AT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        if (fd >= 0 && !f)
            close(fd);
        goto done;
    }
    if (!S_ISREG(sb.st_mode) || sb.st_size > AT_TABLE_MAX_BYTES) {
        st = at_fail(AT_ERR_USAGE, "%s: %s", path,
                     S_ISREG(sb.st_mode) ? "larger than the 256 MiB a table may take" : "not a regular file");
        goto done;
    }
    size_t n = (size_t)sb.st_size;
    if (!(text = malloc(n ? n : 1))) {
        st = at_fail(AT_ERR_NOMEM, "out of memory reading %s", path);
        goto done;
    }
    if (fread(text, 1, n, f) != n) {
        st = at_fail(AT_ERR_IO, "cannot read %s: short read", path);
        goto done;
    }
    if ((st = at_json_parse(text, n, path, &root)) == AT_OK)
        st = read_table_doc(path, root, out);
done:
    if (f)
        fclose(f);
    free(text);
    at_json_free(root);
    if (st != AT_OK)
        at_table_free(out);
    return st;
}

/* ------------------------------------------------------------------- CLI */

static void sub_usage(FILE *f)
{
    fputs("usage: autotune export [--db FILE] [--device NAME | --all] --format json|csv|c [-o FILE]\n"
          "       autotune import FILE [--db FILE]\n"
          "       autotune merge OTHER.db [--db FILE]\n"
          "       autotune show [--db FILE] [--device NAME]\n"
          "       autotune prune [--db FILE] [--dry-run]\n"
          "\n"
          "export writes the winners of one GPU (the cache's only one, --device NAME, or\n"
          "--all) as JSON, CSV or a C header; import reads a JSON export into the cache;\n"
          "merge brings in every winner of another cache; on a key present in both the\n"
          "entry with the lower measured us is kept, and each such choice is printed.\n"
          "show lists what is tuned per GPU. prune deletes the winners the runtime never\n"
          "serves: of the rows one shape has on one GPU under one driver, NVRTC version\n"
          "and set of options (left by imports, merges or older retunes), all but the\n"
          "lowest us; --dry-run lists them and deletes nothing. --db defaults to the\n"
          "tuning cache.\n",
          f);
}

/* The CLI's options; which ones a subcommand takes is checked in parse_sub. */
typedef struct sub_opts {
    const char *db, *device, *format, *output, *file;
    int all, help, dry_run;
} sub_opts;

static int parse_sub(const char *cmd, int argc, char **argv, sub_opts *o)
{
    int exp = !strcmp(cmd, "export"), show = !strcmp(cmd, "show"), prune = !strcmp(cmd, "prune");
    int takes_file = !exp && !show && !prune;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL, **dst = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            o->help = 1;
            return AT_OK;
        }
        if (!strcmp(a, "--db"))
            dst = &o->db;
        else if ((exp || show) && !strcmp(a, "--device"))
            dst = &o->device;
        else if (exp && !strcmp(a, "--format"))
            dst = &o->format;
        else if (exp && (!strcmp(a, "-o") || !strcmp(a, "--output")))
            dst = &o->output;
        if (dst) {
            if (!v || !v[0])
                return at_fail(AT_ERR_USAGE, "%s %s needs a value", cmd, a);
            *dst = argv[++i];
        } else if (exp && !strcmp(a, "--all")) {
            o->all = 1;
        } else if (prune && !strcmp(a, "--dry-run")) {
            o->dry_run = 1;
        } else if (takes_file && a[0] != '-' && !o->file) {
            o->file = a;
        } else {
            return at_fail(AT_ERR_USAGE, "%s: unexpected argument '%s' (see autotune %s --help)", cmd, a,
                           cmd);
        }
    }
    if (takes_file && !o->file)
        return at_fail(AT_ERR_USAGE, "%s needs a file: autotune %s %s [--db FILE]", cmd, cmd,
                       !strcmp(cmd, "import") ? "TABLE.json" : "OTHER.db");
    if (exp && o->all && o->device)
        return at_fail(AT_ERR_USAGE, "export takes --device NAME or --all, not both");
    if (exp && !o->format)
        return at_fail(AT_ERR_USAGE, "export needs --format json, csv or c");
    return AT_OK;
}

int at_table_main(int argc, char **argv)
{
    sub_opts o = {0};
    char db[PATH_MAX];
    const char *cmd = argc > 0 ? argv[0] : "";
    at_table_format fmt = AT_TABLE_JSON;
    int st;
    if (strcmp(cmd, "export") && strcmp(cmd, "import") && strcmp(cmd, "merge") && strcmp(cmd, "show") &&
        strcmp(cmd, "prune"))
        st = at_fail(AT_ERR_USAGE, "unknown subcommand '%s' (export, import, merge, show, prune)", cmd);
    else
        st = parse_sub(cmd, argc, argv, &o);
    if (st == AT_OK && o.help) {
        sub_usage(stdout);
        return AT_OK;
    }
    if (st == AT_OK && o.format)
        st = at_table_format_parse(o.format, &fmt);
    if (st == AT_OK && !o.db && (st = at_cache_default_path(db, sizeof db)) == AT_OK)
        o.db = db;
    if (st == AT_OK) {
        if (!strcmp(cmd, "export") && o.output)
            st = at_table_export_file(o.db, o.device, o.all, fmt, o.output);
        else if (!strcmp(cmd, "export"))
            st = at_table_export(o.db, o.device, o.all, fmt, stdout);
        else if (!strcmp(cmd, "import"))
            st = at_table_import(o.db, o.file, stdout);
        else if (!strcmp(cmd, "merge"))
            st = at_table_merge(o.db, o.file, stdout);
        else if (!strcmp(cmd, "prune"))
            st = at_table_prune(o.db, o.dry_run, stdout);
        else
            st = at_table_show(o.db, o.device, stdout);
    }
    if (st != AT_OK) {
        /* one line of printable text: names and fields come from the files */
        char line[1024];
        snprintf(line, sizeof line, "%s", at_errmsg());
        for (unsigned char *p = (unsigned char *)line; *p; p++)
            if (*p < 0x20 || *p == 0x7f)
                *p = (*p == '\t' || *p == '\n' || *p == '\r') ? ' ' : '?';
        fprintf(stderr, "autotune: %s\n", line);
    }
    return st;
}
