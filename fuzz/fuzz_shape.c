/*
** fuzz_shape.c — libFuzzer harness for the CLI's text parsers: at_shape_parse
** (rank 3 and rank 2) and at_dtype_parse on arbitrary bytes. Invariant: a parsed
** shape is in range and round-trips through at_shape_format; a refusal is
** AT_ERR_USAGE with a message that names the problem. Violations abort().
*/
#include "autotune.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reports which invariant broke, for the crash log, then aborts. */
static void fail(const char *what, const char *text)
{
    fprintf(stderr, "fuzz_shape: invariant broken: %s (input '%s', errmsg '%s')\n", what, text,
            at_errmsg());
    abort();
}

static int dim_ok(int64_t d) { return d >= 1 && d <= AT_SHAPE_MAX_DIM; }

static void check_shape(const char *text, int rank)
{
    at_shape s, back;
    char buf[96];
    memset(&s, 0xA5, sizeof s); /* a field parse forgot to set shows as garbage */
    at_fail(AT_OK, "%s", "");
    int rc = at_shape_parse(text, rank, &s);
    if (rc != AT_OK) {
        if (rc != AT_ERR_USAGE)
            fail("refusal is not AT_ERR_USAGE", text);
        if (strncmp(at_errmsg(), "bad shape", 9) != 0)
            fail("refusal message does not start with \"bad shape\"", text);
        return;
    }
    if (s.rank != rank || !dim_ok(s.M) || !dim_ok(s.K))
        fail("rank or M/K out of range", text);
    if (rank == 3) {
        /* each operand within the limit: x (MxK), W (NxK), y (MxN); dims < 2^31
        ** so the products cannot overflow int64 */
        if (!dim_ok(s.N) || s.M * s.K > AT_SHAPE_MAX_ELEMS || s.N * s.K > AT_SHAPE_MAX_ELEMS ||
            s.M * s.N > AT_SHAPE_MAX_ELEMS)
            fail("rank-3 N or an operand out of range", text);
    } else if (s.N != 0 || s.M * s.K > AT_SHAPE_MAX_ELEMS) {
        fail("rank-2 N not 0 or T*H out of range", text);
    }
    at_shape_format(&s, buf, sizeof buf);
    if (at_shape_parse(buf, rank, &back) != AT_OK)
        fail("formatted shape does not parse", buf);
    if (back.M != s.M || back.K != s.K || back.N != s.N || back.rank != s.rank)
        fail("formatted shape parses to another shape", buf);
}

static void check_dtype(const char *text)
{
    at_dtype d = (at_dtype)0;
    at_fail(AT_OK, "%s", "");
    int rc = at_dtype_parse(text, &d);
    if (rc == AT_OK) {
        if ((d != AT_BF16 && d != AT_FP16) || strcmp(at_dtype_name(d), text) != 0)
            fail("accepted dtype does not name itself", text);
    } else if (rc != AT_ERR_USAGE || !at_errmsg()[0]) {
        fail("dtype refusal is not AT_ERR_USAGE with a message", text);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1); /* the parsers take C strings */
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    check_shape(text, 3);
    check_shape(text, 2);
    check_dtype(text);
    free(text);
    return 0;
}
