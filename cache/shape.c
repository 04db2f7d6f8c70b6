/*
** shape.c — parsing and printing of problem shapes ("MxKxN", "TxH").
** A parsed shape is always valid: every dimension in 1..AT_SHAPE_MAX_DIM and
** every operand's element count within AT_SHAPE_MAX_ELEMS, so later size
** arithmetic in int64 cannot overflow.
*/
#include "cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads one decimal dimension at *p; advances *p past it. */
static int parse_dim(const char **p, const char *text, int64_t *out)
{
    const char *s = *p;
    int64_t v = 0;
    if (*s == '-' || *s == '+')
        return at_fail(AT_ERR_USAGE, "bad shape '%s': dimensions must be positive integers", text);
    if (*s < '0' || *s > '9')
        return at_fail(AT_ERR_USAGE, "bad shape '%s': expected a number at '%s'", text, s);
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s - '0');
        if (v > AT_SHAPE_MAX_DIM)
            return at_fail(AT_ERR_USAGE, "bad shape '%s': dimension larger than %lld", text,
                           (long long)AT_SHAPE_MAX_DIM);
        s++;
    }
    if (v == 0)
        return at_fail(AT_ERR_USAGE, "bad shape '%s': dimensions must be at least 1", text);
    *p = s;
    *out = v;
    return AT_OK;
}

static int check_elems(const char *text, const char *what, int64_t a, int64_t b)
{
    /* a, b <= 2^31-1, so the product fits in int64 */
    if (a * b > AT_SHAPE_MAX_ELEMS)
        return at_fail(AT_ERR_USAGE, "bad shape '%s': %s has %lld elements, more than %lld", text,
                       what, (long long)(a * b), (long long)AT_SHAPE_MAX_ELEMS);
    return AT_OK;
}

int at_shape_parse(const char *text, int rank, at_shape *out)
{
    int64_t d[3] = {0, 0, 0};
    const char *p = text;
    int rc;
    if (!text || !*text)
        return at_fail(AT_ERR_USAGE, "bad shape '': expected %s", rank == 3 ? "MxKxN" : "TxH");
    for (int i = 0; i < rank; i++) {
        if (i > 0) {
            if (*p != 'x' && *p != 'X')
                return at_fail(AT_ERR_USAGE, "bad shape '%s': expected %s", text,
                               rank == 3 ? "MxKxN, e.g. 1x2048x8192" : "TxH, e.g. 1x2048");
            p++;
        }
        if ((rc = parse_dim(&p, text, &d[i])) != AT_OK)
            return rc;
    }
    if (*p != '\0')
        return at_fail(AT_ERR_USAGE, "bad shape '%s': expected %s with %d dimensions", text,
                       rank == 3 ? "MxKxN" : "TxH", rank);
    if (rank == 3) {
        if ((rc = check_elems(text, "x (MxK)", d[0], d[1])) != AT_OK ||
            (rc = check_elems(text, "W (NxK)", d[2], d[1])) != AT_OK ||
            (rc = check_elems(text, "y (MxN)", d[0], d[2])) != AT_OK)
            return rc;
    } else if ((rc = check_elems(text, "x (TxH)", d[0], d[1])) != AT_OK) {
        return rc;
    }
    out->M = d[0];
    out->K = d[1];
    out->N = rank == 3 ? d[2] : 0;
    out->rank = rank;
    return AT_OK;
}

void at_shape_format(const at_shape *s, char *buf, size_t len)
{
    if (s->rank == 3)
        snprintf(buf, len, "%lldx%lldx%lld", (long long)s->M, (long long)s->K, (long long)s->N);
    else
        snprintf(buf, len, "%lldx%lld", (long long)s->M, (long long)s->K);
}

/* "A..B" at the head of text: 1 with *lo, *hi and *rest (past the range),
** 0 when text does not start with a range. */
static int range_head(const char *text, int64_t *lo, int64_t *hi, const char **rest)
{
    const char *p = text, *q;
    if (!(q = strstr(text, "..")))
        return 0;
    for (; p < q; p++)
        if (*p < '0' || *p > '9')
            return 0;
    *lo = strtoll(text, NULL, 10);
    *hi = strtoll(q + 2, (char **)rest, 10);
    return 1;
}

int at_shape_buckets(const char *text, int rank, at_shape *out, int max, int *n)
{
    int64_t lo = 0, hi = 0;
    const char *rest = NULL;
    char one[96];
    int rc;
    *n = 0;
    if (!text || !range_head(text, &lo, &hi, &rest)) {
        if ((rc = at_shape_parse(text, rank, &out[0])) == AT_OK)
            *n = 1;
        return rc;
    }
    if (lo < 1 || hi <= lo || hi > 65535 || !rest || (*rest != 'x' && *rest != 'X'))
        return at_fail(AT_ERR_USAGE,
                       "bad shape '%s': a range of %s is LO..HI with 1 <= LO < HI <= 65535, e.g. %s", text,
                       rank == 3 ? "M" : "T", rank == 3 ? "1..16x2048x8192" : "1..16x2048");
    /* LO, the powers of two between, HI */
    for (int64_t m = lo;;) {
        if (*n == max)
            return at_fail(AT_ERR_USAGE, "bad shape '%s': more than %d buckets", text, max);
        snprintf(one, sizeof one, "%lld%s", (long long)m, rest);
        if ((rc = at_shape_parse(one, rank, &out[*n])) != AT_OK)
            return rc;
        (*n)++;
        if (m == hi)
            return AT_OK;
        int64_t p = 1;
        while (p <= m)
            p *= 2;
        m = p < hi ? p : hi;
    }
}
