/*
** json.h — a small strict JSON reader (RFC 8259) for the exported tables, and
** the writer helpers the exports share (strings, numbers, base64 cubins).
** Invariant: a document is either accepted whole, as a tree the caller owns,
** or refused with one message "name:line:col: json: what" — never half-read.
*/
#ifndef AT_JSON_H
#define AT_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Limits that keep a hostile file from exhausting the stack or the CPU. */
#define AT_JSON_MAX_DEPTH 32       /* arrays + objects open at once      */
#define AT_JSON_MAX_MEMBERS 4096   /* members of one object              */
#define AT_JSON_MAX_NUMBER 64      /* characters of one number literal   */
#define AT_JSON_MAX_VALUES 1000000 /* values in one document (memory cap) */

typedef enum at_json_type {
    AT_JSON_NULL,
    AT_JSON_BOOL,
    AT_JSON_NUMBER,
    AT_JSON_STRING,
    AT_JSON_ARRAY,
    AT_JSON_OBJECT
} at_json_type;

/* One value. Children live in `items` (array elements, or object values with
** their names in `keys`, in document order). */
typedef struct at_json {
    at_json_type type;
    int boolean;           /* BOOL                                          */
    double number;         /* NUMBER, always finite                         */
    int is_int;            /* NUMBER written without fraction or exponent   */
    int64_t integer;       /*   and fitting int64: its exact value          */
    char *string;          /* STRING: NUL-terminated UTF-8 (never U+0000)   */
    size_t length;         /* STRING: bytes, without the NUL                */
    struct at_json *items; /* ARRAY / OBJECT children                       */
    char **keys;           /* OBJECT: keys[i] names items[i]; no duplicates */
    size_t count;          /* ARRAY / OBJECT: number of children            */
    int line, col;         /* where the value starts (1-based), for messages */
} at_json;

/* Parses text[0..len) as one JSON document (surrounding whitespace only).
** Strict: no comments, trailing commas, BOM, NUL bytes, invalid UTF-8, lone
** surrogates, \u0000, duplicate keys, leading zeros, numbers out of double
** range, nesting past AT_JSON_MAX_DEPTH, more than AT_JSON_MAX_VALUES values.
** `name` prefixes messages. *out is the tree (free with at_json_free), NULL
** on error (AT_ERR_USAGE, or AT_ERR_NOMEM). */
int at_json_parse(const char *text, size_t len, const char *name, at_json **out);
/* Frees a tree from at_json_parse; NULL is a no-op. */
void at_json_free(at_json *v);
/* The value of member `key` of an object, or NULL (also for a non-object). */
const at_json *at_json_member(const at_json *obj, const char *key);
/* "null", "boolean", "number", "string", "array", "object". */
const char *at_json_type_name(at_json_type t);

/* ------------------------------------------- typed access, for strict formats */

/* Where a value sits, for messages: "FILE: devices[0].entries[3].sms: ...".
** `where` is the caller's to extend and cut back as it descends. */
typedef struct at_json_path {
    const char *file;
    char where[64];
} at_json_path;

/* Records "FILE: WHERE.field: message" (field may be NULL) and returns
** AT_ERR_USAGE. */
int at_json_fail(const at_json_path *p, const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* obj must be an object with exactly the members `fields` (NULL-terminated):
** an unknown member or a missing one is an error naming it. */
int at_json_check_fields(const at_json_path *p, const at_json *obj, const char *const *fields);
/* Member `key` of obj, typed; every mismatch is an AT_ERR_USAGE naming the
** member. A string must fit dst[cap] with its NUL (never truncated). An
** integer must be written as one (no fraction or exponent) and lie in
** lo..hi. A number may be null, read as NaN ("not measured"). uint3 is an
** array of exactly three integers in 0..UINT_MAX. */
int at_json_get_string(const at_json_path *p, const at_json *obj, const char *key, char *dst, size_t cap);
int at_json_get_int(const at_json_path *p, const at_json *obj, const char *key, long long lo, long long hi,
                    long long *out);
int at_json_get_number(const at_json_path *p, const at_json *obj, const char *key, double *out);
int at_json_get_uint3(const at_json_path *p, const at_json *obj, const char *key, unsigned out[3]);

/* Length of the valid UTF-8 sequence at s (avail bytes left, at least 1),
** 0 if invalid: no overlong forms, no surrogates, nothing above U+10FFFF. */
size_t at_utf8_seq(const unsigned char *s, size_t avail);

/* ---------------------------------------------------------------- writers */

/* Writes s as a JSON string literal (quotes and escapes; UTF-8 passes through). */
void at_json_write_string(FILE *f, const char *s);
/* A whole number below 1e15 as "%.0f", else the shortest "%.{1..17}g" text
** that reads back (strtod) as exactly v, so a number written, read and
** written again gives the same bytes; "null" for NaN and infinities (JSON has
** neither). buf needs 32 bytes. */
void at_json_format_number(double v, char *buf, size_t len);

/* Standard base64 (RFC 4648, padded, one line) of data[0..n) to f. */
void at_json_write_base64(FILE *f, const void *data, size_t n);
/* Strict decoding of s[0..len): padded, no whitespace, no bits set in the
** padding (so each byte string has exactly one text). *out is malloc'ed
** (caller frees) with *n bytes; on error AT_ERR_USAGE (or AT_ERR_NOMEM) with
** *why a fixed phrase and *out NULL. */
int at_json_base64_decode(const char *s, size_t len, unsigned char **out, size_t *n, const char **why);

#endif /* AT_JSON_H */
