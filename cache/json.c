/*
** json.c — a strict recursive-descent JSON reader (RFC 8259, no extensions),
** typed member access with messages, and the writer helpers of the exported
** tables. Invariant: the reader never
** recurses deeper than AT_JSON_MAX_DEPTH, never reads past text+len, and on
** any error frees everything it built and reports one "name:line:col" message.
*/
#include "json.h"

#include "cache.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct reader {
    const char *p, *end;
    const char *line_start; /* for columns: newlines only occur in whitespace */
    int line;
    int depth;
    long values; /* parsed so far, against AT_JSON_MAX_VALUES */
    const char *name;
} reader;

static int fail_at(const reader *r, const char *at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Text from a document (names, values) in a message: one printable line.
** Tab, CR and LF become a space, other control bytes '?'. */
static void one_line(char *s)
{
    for (unsigned char *p = (unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = (*p == '\t' || *p == '\n' || *p == '\r') ? ' ' : '?';
}

/* "name:line:col: json: message" for the byte at `at` (on the current line). */
static int fail_at(const reader *r, const char *at, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    one_line(msg); /* "duplicate key" quotes the document */
    return at_fail(AT_ERR_USAGE, "%s:%d:%ld: json: %s", r->name, r->line, (long)(at - r->line_start) + 1,
                   msg);
}

static int nomem(void)
{
    return at_fail(AT_ERR_NOMEM, "json: out of memory");
}

static void skip_ws(reader *r)
{
    while (r->p < r->end) {
        char c = *r->p;
        if (c == '\n') {
            r->line++;
            r->line_start = r->p + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            return;
        }
        r->p++;
    }
}

/* Frees what v owns (not v itself). */
static void free_children(at_json *v)
{
    for (size_t i = 0; i < v->count; i++) {
        free_children(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    memset(v, 0, sizeof *v);
}

size_t at_utf8_seq(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4;
    else
        return 0;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (avail < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

static size_t utf8_put(char *out, unsigned long cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Four hex digits at p (bounds checked by the caller) or -1. */
static long hex4(const char *p)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                         : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The string literal at r->p (which is '"') into a malloc'ed buffer. */
static int read_string(reader *r, char **out, size_t *outlen)
{
    const char *open = r->p, *q = r->p + 1, *close;
    char *buf, *o;
    *out = NULL;
    /* find the closing quote first: the decoded text is never longer */
    while (q < r->end && *q != '"')
        q += (*q == '\\' && q + 1 < r->end) ? 2 : 1;
    if (q >= r->end)
        return fail_at(r, open, "unterminated string");
    close = q;
    if (!(buf = malloc((size_t)(close - open))))
        return nomem();
    o = buf;
    for (q = open + 1; q < close;) {
        unsigned char c = (unsigned char)*q;
        if (c < 0x20) {
            free(buf);
            return fail_at(r, q, "control character 0x%02x in a string (escape it)", c);
        }
        if (c >= 0x80) {
            size_t n = at_utf8_seq((const unsigned char *)q, (size_t)(close - q));
            if (!n) {
                free(buf);
                return fail_at(r, q, "invalid UTF-8 in a string");
            }
            memcpy(o, q, n);
            o += n;
            q += n;
            continue;
        }
        if (c != '\\') {
            *o++ = (char)c;
            q++;
            continue;
        }
        const char *esc = q++;
        char e = *q++; /* q < close here: the scan above skipped past it */
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            *o++ = map[simple - "\"\\/bfnrt"];
            continue;
        }
        if (e != 'u') {
            free(buf);
            return fail_at(r, esc, "invalid escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?');
        }
        long cp = close - q >= 4 ? hex4(q) : -1;
        if (cp < 0) {
            free(buf);
            return fail_at(r, esc, "\\u needs four hex digits");
        }
        q += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            long lo = (close - q >= 6 && q[0] == '\\' && q[1] == 'u') ? hex4(q + 2) : -1;
            if (lo < 0xDC00 || lo > 0xDFFF) {
                free(buf);
                return fail_at(r, esc, "high surrogate \\u%04lX without a low surrogate", cp);
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            q += 6;
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            free(buf);
            return fail_at(r, esc, "lone low surrogate \\u%04lX", cp);
        } else if (cp == 0) {
            free(buf);
            return fail_at(r, esc, "\\u0000 is not accepted (strings are C strings)");
        }
        o += utf8_put(o, (unsigned long)cp);
    }
    *o = '\0';
    *out = buf;
    *outlen = (size_t)(o - buf);
    r->p = close + 1;
    return AT_OK;
}

static int is_digit(const char *p, const char *end)
{
    return p < end && *p >= '0' && *p <= '9';
}

static int read_number(reader *r, at_json *v)
{
    const char *s = r->p, *q = s;
    char text[AT_JSON_MAX_NUMBER + 1];
    int plain = 1;
    if (q < r->end && *q == '-')
        q++;
    if (!is_digit(q, r->end))
        return fail_at(r, s, "a number needs a digit after '-'");
    if (*q == '0' && is_digit(q + 1, r->end))
        return fail_at(r, s, "leading zero in a number");
    while (is_digit(q, r->end))
        q++;
    if (q < r->end && *q == '.') {
        plain = 0;
        if (!is_digit(++q, r->end))
            return fail_at(r, s, "a number needs digits after '.'");
        while (is_digit(q, r->end))
            q++;
    }
    if (q < r->end && (*q == 'e' || *q == 'E')) {
        plain = 0;
        q++;
        if (q < r->end && (*q == '+' || *q == '-'))
            q++;
        if (!is_digit(q, r->end))
            return fail_at(r, s, "a number needs digits in its exponent");
        while (is_digit(q, r->end))
            q++;
    }
    size_t n = (size_t)(q - s);
    if (n > AT_JSON_MAX_NUMBER)
        return fail_at(r, s, "number longer than %d characters", AT_JSON_MAX_NUMBER);
    memcpy(text, s, n);
    text[n] = '\0';
    v->type = AT_JSON_NUMBER;
    v->number = strtod(text, NULL);
    if (!isfinite(v->number))
        return fail_at(r, s, "number %s is out of range", text);
    if (plain) {
        errno = 0;
        long long i = strtoll(text, NULL, 10);
        if (errno == 0) {
            v->is_int = 1;
            v->integer = i;
        }
    }
    r->p = q;
    return AT_OK;
}

static int parse_value(reader *r, at_json *v);

/* Appends a zeroed child (and key slot for objects), growing by doubling. */
static int grow(at_json *v, size_t *cap)
{
    if (v->count < *cap)
        return AT_OK;
    size_t ncap = *cap ? 2 * *cap : 4;
    at_json *items = realloc(v->items, ncap * sizeof *items);
    if (!items)
        return nomem();
    v->items = items;
    if (v->type == AT_JSON_OBJECT) {
        char **keys = realloc(v->keys, ncap * sizeof *keys);
        if (!keys)
            return nomem();
        v->keys = keys;
    }
    *cap = ncap;
    return AT_OK;
}

/* Where a member name starts, for the duplicate-key message. */
typedef struct key_pos {
    int line, col;
} key_pos;

typedef struct key_ref {
    const char *key;
    size_t index;
} key_ref;

static int cmp_key_ref(const void *a, const void *b)
{
    const key_ref *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Refuses a finished object whose names repeat, naming the first repeat in
** document order. Sorting keeps this O(n log n) comparisons: a check against
** every earlier name was quadratic (4096 long names: 20 s per document). */
static int check_duplicates(const reader *r, const at_json *v, const key_pos *pos)
{
    key_ref *refs;
    size_t dup = v->count;
    if (v->count < 2)
        return AT_OK;
    if (!(refs = malloc(v->count * sizeof *refs)))
        return nomem();
    for (size_t i = 0; i < v->count; i++)
        refs[i] = (key_ref){v->keys[i], i};
    qsort(refs, v->count, sizeof *refs, cmp_key_ref);
    for (size_t i = 1; i < v->count; i++)
        if (!strcmp(refs[i].key, refs[i - 1].key) && refs[i].index < dup)
            dup = refs[i].index; /* the second of its group: the group's first repeat */
    free(refs);
    if (dup == v->count)
        return AT_OK;
    char key[65];
    snprintf(key, sizeof key, "%s", v->keys[dup]);
    one_line(key);
    return at_fail(AT_ERR_USAGE, "%s:%d:%d: json: duplicate key \"%s\"", r->name, pos[dup].line, pos[dup].col,
                   key);
}

/* '[' or '{' at r->p: the container and its children. */
static int parse_container(reader *r, at_json *v)
{
    int object = *r->p == '{';
    char close = object ? '}' : ']';
    size_t cap = 0, pos_cap = 0;
    key_pos *pos = NULL; /* objects: where each name starts */
    int st = AT_OK;
    v->type = object ? AT_JSON_OBJECT : AT_JSON_ARRAY;
    if (++r->depth > AT_JSON_MAX_DEPTH)
        return fail_at(r, r->p, "nesting deeper than %d levels", AT_JSON_MAX_DEPTH);
    r->p++;
    skip_ws(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        r->depth--;
        return AT_OK;
    }
    for (;;) {
        char *key = NULL;
        size_t keylen;
        skip_ws(r);
        if ((st = grow(v, &cap)) != AT_OK)
            goto done;
        if (object) {
            const char *at = r->p;
            if (r->p >= r->end || *r->p != '"') {
                st = fail_at(r, at, "expected a member name in double quotes");
                goto done;
            }
            if (v->count >= AT_JSON_MAX_MEMBERS) {
                st = fail_at(r, at, "object with more than %d members", AT_JSON_MAX_MEMBERS);
                goto done;
            }
            if (pos_cap < cap) {
                key_pos *np = realloc(pos, cap * sizeof *np);
                if (!np) {
                    st = nomem();
                    goto done;
                }
                pos = np;
                pos_cap = cap;
            }
            pos[v->count] = (key_pos){r->line, (int)(at - r->line_start) + 1};
            if ((st = read_string(r, &key, &keylen)) != AT_OK)
                goto done;
            skip_ws(r);
            if (r->p >= r->end || *r->p != ':') {
                free(key);
                st = fail_at(r, r->p, "expected ':' after a member name");
                goto done;
            }
            r->p++;
            v->keys[v->count] = key;
        }
        memset(&v->items[v->count], 0, sizeof v->items[0]);
        v->count++; /* owned from here, so an error below frees it */
        if ((st = parse_value(r, &v->items[v->count - 1])) != AT_OK)
            goto done;
        skip_ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            skip_ws(r);
            if (r->p < r->end && *r->p == close) {
                st = fail_at(r, r->p, "trailing comma before '%c'", close);
                goto done;
            }
            continue;
        }
        if (r->p < r->end && *r->p == close) {
            r->p++;
            r->depth--;
            if (object)
                st = check_duplicates(r, v, pos);
            goto done;
        }
        st = r->p >= r->end ? fail_at(r, r->p, "unexpected end of input (missing '%c')", close)
                            : fail_at(r, r->p, "expected ',' or '%c'", close);
        goto done;
    }
done:
    free(pos);
    return st;
}

static int parse_value(reader *r, at_json *v)
{
    static const char *const lit[] = {"true", "false", "null"};
    skip_ws(r);
    if (++r->values > AT_JSON_MAX_VALUES)
        return fail_at(r, r->p, "more than %d values in one document", AT_JSON_MAX_VALUES);
    v->line = r->line;
    v->col = (int)(r->p - r->line_start) + 1;
    if (r->p >= r->end)
        return fail_at(r, r->p, "unexpected end of input (expected a value)");
    char c = *r->p;
    if (c == '{' || c == '[')
        return parse_container(r, v);
    if (c == '"') {
        v->type = AT_JSON_STRING;
        return read_string(r, &v->string, &v->length);
    }
    if (c == '-' || (c >= '0' && c <= '9'))
        return read_number(r, v);
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(lit[i]);
        if ((size_t)(r->end - r->p) >= n && memcmp(r->p, lit[i], n) == 0) {
            v->type = i == 2 ? AT_JSON_NULL : AT_JSON_BOOL;
            v->boolean = i == 0;
            r->p += n;
            return AT_OK;
        }
    }
    unsigned char u = (unsigned char)c;
    if (u >= 0x20 && u < 0x7f)
        return fail_at(r, r->p, "unexpected character '%c'", c);
    return fail_at(r, r->p, "unexpected byte 0x%02x", u);
}

int at_json_parse(const char *text, size_t len, const char *name, at_json **out)
{
    reader r = {.p = text, .end = text + len, .line_start = text, .line = 1, .name = name ? name : "json"};
    at_json *v;
    int st;
    if (!out)
        return at_fail(AT_ERR_USAGE, "at_json_parse: NULL out");
    *out = NULL;
    if (!text)
        return at_fail(AT_ERR_USAGE, "at_json_parse: NULL text");
    if (!(v = calloc(1, sizeof *v)))
        return nomem();
    skip_ws(&r);
    if (r.p >= r.end)
        st = fail_at(&r, r.p, "empty document");
    else if ((st = parse_value(&r, v)) == AT_OK) {
        skip_ws(&r);
        if (r.p < r.end)
            st = fail_at(&r, r.p, "unexpected text after the document");
    }
    if (st != AT_OK) {
        at_json_free(v);
        return st;
    }
    *out = v;
    return AT_OK;
}

void at_json_free(at_json *v)
{
    if (!v)
        return;
    free_children(v);
    free(v);
}

const at_json *at_json_member(const at_json *obj, const char *key)
{
    if (!obj || obj->type != AT_JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->count; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return &obj->items[i];
    return NULL;
}

const char *at_json_type_name(at_json_type t)
{
    switch (t) {
    case AT_JSON_NULL:
        return "null";
    case AT_JSON_BOOL:
        return "boolean";
    case AT_JSON_NUMBER:
        return "number";
    case AT_JSON_STRING:
        return "string";
    case AT_JSON_ARRAY:
        return "array";
    case AT_JSON_OBJECT:
        return "object";
    }
    return "unknown";
}

/* ---------------------------------------------------------------- writers */

/* Control characters are escaped; a byte that is not valid UTF-8 becomes
** U+FFFD, so the output always reads back through at_json_parse. */
void at_json_write_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    fputc('"', f);
    while (left) {
        unsigned char c = *p;
        size_t n = 1;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c < 0x20) {
            const char *e = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            if (e)
                fputs(e, f);
            else
                fprintf(f, "\\u%04x", c);
        } else if (c < 0x80) {
            fputc(c, f);
        } else if ((n = at_utf8_seq(p, left)) != 0) {
            fwrite(p, 1, n, f);
        } else {
            fputs("\xEF\xBF\xBD", f);
            n = 1;
        }
        p += n;
        left -= n;
    }
    fputc('"', f);
}

void at_json_format_number(double v, char *buf, size_t len)
{
    if (!isfinite(v)) {
        snprintf(buf, len, "null");
        return;
    }
    if (v == floor(v) && fabs(v) < 1e15) { /* whole: 131200, never 1.312e+05 */
        snprintf(buf, len, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* ---------------------------------------------------------------- base64 */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void at_json_write_base64(FILE *f, const void *data, size_t n)
{
    const unsigned char *p = data;
    char out[4];
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        out[0] = B64[(v >> 18) & 63];
        out[1] = B64[(v >> 12) & 63];
        out[2] = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        out[3] = i + 2 < n ? B64[v & 63] : '=';
        fwrite(out, 1, 4, f);
    }
}

static int b64_value(char c)
{
    const char *p = c ? strchr(B64, c) : NULL;
    return p ? (int)(p - B64) : -1;
}

int at_json_base64_decode(const char *s, size_t len, unsigned char **out, size_t *n, const char **why)
{
    size_t pad = 0, o = 0;
    unsigned char *buf;
    *out = NULL;
    *n = 0;
    if (len % 4) {
        *why = "length is not a multiple of 4";
        return AT_ERR_USAGE;
    }
    while (pad < 2 && pad < len && s[len - 1 - pad] == '=')
        pad++;
    size_t size = len / 4 * 3 - pad;
    if (!(buf = malloc(size ? size : 1))) {
        *why = "out of memory";
        return AT_ERR_NOMEM;
    }
    for (size_t i = 0; i < len; i += 4) {
        int last = i + 4 == len;
        unsigned bits = 0;
        for (size_t j = 0; j < 4; j++) {
            int v = (last && j >= 4 - pad) ? 0 : b64_value(s[i + j]);
            if (v < 0) {
                free(buf);
                *why = s[i + j] == '=' ? "'=' before the end" : "a character outside the base64 alphabet";
                return AT_ERR_USAGE;
            }
            bits = bits << 6 | (unsigned)v;
        }
        if (last && ((pad == 1 && (bits & 0xFF)) || (pad == 2 && (bits & 0xFFFF)))) {
            free(buf);
            *why = "non-zero bits in the padding";
            return AT_ERR_USAGE;
        }
        for (int j = 2; j >= 0 && o < size; j--)
            buf[o++] = (unsigned char)(bits >> (8 * j));
    }
    *out = buf;
    *n = size;
    return AT_OK;
}

/* ------------------------------------------------------- typed accessors */

int at_json_fail(const at_json_path *p, const char *field, const char *fmt, ...)
{
    char msg[256], line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "%s: %s%s%s: %s", p->file, p->where, p->where[0] && field ? "." : "",
             field ? field : "", msg);
    one_line(line); /* field names and values come from the file */
    return at_fail(AT_ERR_USAGE, "%s", line);
}

int at_json_check_fields(const at_json_path *p, const at_json *obj, const char *const *fields)
{
    if (obj->type != AT_JSON_OBJECT)
        return at_json_fail(p, NULL, "expected an object, got %s", at_json_type_name(obj->type));
    for (size_t i = 0; i < obj->count; i++) {
        int ok = 0;
        for (int j = 0; fields[j] && !ok; j++)
            ok = !strcmp(obj->keys[i], fields[j]);
        if (!ok)
            return at_json_fail(p, obj->keys[i], "unknown field");
    }
    for (int j = 0; fields[j]; j++)
        if (!at_json_member(obj, fields[j]))
            return at_json_fail(p, fields[j], "missing field");
    return AT_OK;
}

/* The member, or NULL after recording "missing field". */
static const at_json *member(const at_json_path *p, const at_json *obj, const char *key)
{
    const at_json *v = at_json_member(obj, key);
    if (!v)
        at_json_fail(p, key, "missing field");
    return v;
}

int at_json_get_string(const at_json_path *p, const at_json *obj, const char *key, char *dst, size_t cap)
{
    const at_json *v = member(p, obj, key);
    if (!v)
        return AT_ERR_USAGE;
    if (v->type != AT_JSON_STRING)
        return at_json_fail(p, key, "expected a string, got %s", at_json_type_name(v->type));
    if (v->length >= cap)
        return at_json_fail(p, key, "longer than %zu bytes", cap - 1);
    memcpy(dst, v->string, v->length + 1);
    return AT_OK;
}

int at_json_get_int(const at_json_path *p, const at_json *obj, const char *key, long long lo, long long hi,
                    long long *out)
{
    const at_json *v = member(p, obj, key);
    if (!v)
        return AT_ERR_USAGE;
    if (v->type != AT_JSON_NUMBER)
        return at_json_fail(p, key, "expected an integer, got %s", at_json_type_name(v->type));
    if (!v->is_int || v->integer < lo || v->integer > hi)
        return at_json_fail(p, key, "expected an integer in %lld..%lld", lo, hi);
    *out = v->integer;
    return AT_OK;
}

int at_json_get_number(const at_json_path *p, const at_json *obj, const char *key, double *out)
{
    const at_json *v = member(p, obj, key);
    if (!v)
        return AT_ERR_USAGE;
    if (v->type == AT_JSON_NULL) {
        *out = NAN;
        return AT_OK;
    }
    if (v->type != AT_JSON_NUMBER)
        return at_json_fail(p, key, "expected a number or null, got %s", at_json_type_name(v->type));
    *out = v->number;
    return AT_OK;
}

int at_json_get_uint3(const at_json_path *p, const at_json *obj, const char *key, unsigned out[3])
{
    const at_json *v = member(p, obj, key);
    if (!v)
        return AT_ERR_USAGE;
    if (v->type != AT_JSON_ARRAY || v->count != 3)
        return at_json_fail(p, key, "expected an array of 3 integers");
    for (int i = 0; i < 3; i++) {
        const at_json *x = &v->items[i];
        if (x->type != AT_JSON_NUMBER || !x->is_int || x->integer < 0 || x->integer > UINT_MAX)
            return at_json_fail(p, key, "expected an array of 3 integers in 0..%u", UINT_MAX);
        out[i] = (unsigned)x->integer;
    }
    return AT_OK;
}
