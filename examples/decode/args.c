/*
** args.c — the decode example's command line (args.h). Pure C, no CUDA:
** the parser is tested without a GPU. Every error names the flag and the
** bad value, so `decode --batch 1,,4` says what is wrong and where.
*/
#include "args.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: decode [--batch B|B1,B2,...] [--trace M1,M2,...] [--modes 1,2,3,4] [--steps N]\n"
    "              [--json FILE|-] [--db FILE] [--templates DIR] [--device N] [--ops|--no-ops]\n"
    "              [--no-standins] [--help]\n"
    "  --batch LIST   batch sizes B (1..64): B tokens per step through every GEMV and\n"
    "                 norm; tokens/s of every mode per B (default 1)\n"
    "  --modes LIST   the modes to run (default 1,2,3,4; 1 must be among them: it is\n"
    "                 the reference every other mode is checked against):\n"
    "                 1 cuBLAS GEMVs + the unfused norm chain (8 kernels per add+norm)\n"
    "                 2 cuBLAS GEMVs + the naive fused add+norm\n"
    "                 3 atk: tuned GEMVs and add+norms (atk_gemv, atk_add_gemma_rmsnorm)\n"
    "                 4 atk fused: the norm in the GEMV's prologue, SwiGLU and the\n"
    "                   residual add in its epilogue (atk_gemma_rmsnorm_gemv,\n"
    "                   atk_gemma_rmsnorm_gemv_swiglu, atk_gemv_add)\n"
    "  --trace LIST   a sequence of batch sizes M (1..64, repeats allowed, at most 4096):\n"
    "                 one CUDA graph per distinct M, replayed in trace order, cycling\n"
    "                 through the trace for --steps steps\n"
    "  --steps N      graph replays per timing round (1..1000000, default 100; 5\n"
    "                 rounds, the modes interleaved, the median reported)\n"
    "  --json FILE    machine-readable results to FILE ('-': stdout; the text\n"
    "                 report then goes to stderr)\n"
    "  --db FILE      the tuned cache atk opens (default ~/.cache/autotune/tune.db)\n"
    "  --templates DIR  templates/ (the baseline norm kernels and shared headers)\n"
    "  --device N     CUDA device ordinal (default 0)\n"
    "  --ops          the per-op breakdown at every batch size (default: only when\n"
    "                 a single batch size and no trace is run); --no-ops: never\n"
    "  --no-standins  time the step without the attention and recurrence stand-ins\n"
    "                 and SiLU*mul (they still run in the warm-up step and the\n"
    "                 agreement check): the GEMVs and norms alone, to compare with\n"
    "                 another engine's stand-ins (mode 4 keeps SwiGLU: it is inside\n"
    "                 its gate/up GEMV)\n"
    "  --help         this text\n";

const char *decode_args_usage(void)
{
    return usage_text;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return 1;
}

/* A whole decimal integer ("-3" too, so the range check can name it),
** nothing else: no spaces, no '+', no trailing text. */
static int parse_int(const char *s, size_t len, long *out)
{
    char buf[32], *end = NULL;
    size_t i = 0;
    if (len == 0 || len >= sizeof buf)
        return 1;
    if (s[0] == '-')
        i = 1;
    if (i == len)
        return 1;
    for (; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return 1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    *out = strtol(buf, &end, 10);
    return errno != 0 || *end != '\0';
}

int decode_args_list(const char *flag, const char *s, int lo, int hi, int *out, int max, int *n, char *err,
                     size_t errlen)
{
    *n = 0;
    if (!s || !*s)
        return fail(err, errlen, "%s: empty list (expected e.g. 1,2,4)", flag);
    for (const char *p = s;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        long v = 0;
        if (len == 0)
            return fail(err, errlen, "%s '%s': empty item at position %d", flag, s, *n + 1);
        if (parse_int(p, len, &v))
            return fail(err, errlen, "%s '%s': '%.*s' is not a whole number", flag, s, (int)(len > 40 ? 40 : len),
                        p);
        if (v < lo || v > hi)
            return fail(err, errlen, "%s '%s': %ld is out of range %d..%d", flag, s, v, lo, hi);
        if (*n >= max)
            return fail(err, errlen, "%s: more than %d items", flag, max);
        out[(*n)++] = (int)v;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

static int one_int(const char *flag, const char *s, int lo, int hi, int *out, char *err, size_t errlen)
{
    long v = 0;
    if (parse_int(s, strlen(s), &v))
        return fail(err, errlen, "%s '%s': not a whole number", flag, s);
    if (v < lo || v > hi)
        return fail(err, errlen, "%s '%s': out of range %d..%d", flag, s, lo, hi);
    *out = (int)v;
    return 0;
}

int decode_args_parse(int argc, char **argv, decode_args *a, char *err, size_t errlen)
{
    int have_batch = 0;
    memset(a, 0, sizeof *a);
    a->steps = 100;
    a->ops = -1;
    a->modes = DECODE_ALL_MODES;
    if (err && errlen)
        err[0] = '\0';
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h"))
            return DECODE_ARGS_HELP;
        if (!strcmp(f, "--ops") || !strcmp(f, "--no-ops")) {
            a->ops = f[2] == 'o';
            continue;
        }
        if (!strcmp(f, "--no-standins")) {
            a->no_standins = 1;
            continue;
        }
        static const char *const with_value[] = {"--db",    "--templates", "--steps", "--device",
                                                 "--batch", "--trace",     "--json",  "--modes"};
        int known = 0;
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
            known |= !strcmp(f, with_value[k]);
        if (!known) {
            fail(err, errlen, "unknown argument '%s' (see --help)", f);
            return DECODE_ARGS_BAD;
        }
        if (i + 1 >= argc) {
            fail(err, errlen, "%s needs a value (see --help)", f);
            return DECODE_ARGS_BAD;
        }
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(f, "--db"))
            a->db = v;
        else if (!strcmp(f, "--templates"))
            a->templates = v;
        else if (!strcmp(f, "--json")) {
            if (!*v)
                bad = fail(err, errlen, "--json: empty file name ('-' for stdout)");
            a->json = v;
        } else if (!strcmp(f, "--steps"))
            bad = one_int(f, v, 1, DECODE_MAX_STEPS, &a->steps, err, errlen);
        else if (!strcmp(f, "--device"))
            bad = one_int(f, v, 0, 1023, &a->device, err, errlen);
        else if (!strcmp(f, "--modes")) {
            int list[DECODE_NMODES], n = 0;
            bad = decode_args_list(f, v, 1, DECODE_NMODES, list, DECODE_NMODES, &n, err, errlen);
            a->modes = 0;
            for (int j = 0; !bad && j < n; j++) {
                if (a->modes & (1u << list[j]))
                    bad = fail(err, errlen, "--modes '%s': %d given twice", v, list[j]);
                a->modes |= 1u << list[j];
            }
            if (!bad && !(a->modes & 2u))
                bad = fail(err, errlen, "--modes '%s': mode 1 must be among them (the reference of the agreement "
                                        "check)", v);
        } else if (!strcmp(f, "--trace"))
            bad = decode_args_list(f, v, 1, DECODE_MAX_BATCH, a->trace, DECODE_MAX_TRACE, &a->ntrace, err, errlen);
        else { /* --batch */
            bad = decode_args_list(f, v, 1, DECODE_MAX_BATCH, a->batch, DECODE_MAX_BATCH, &a->nbatch, err,
                                   errlen);
            for (int j = 0; !bad && j < a->nbatch; j++)
                for (int k = 0; !bad && k < j; k++)
                    if (a->batch[k] == a->batch[j])
                        bad = fail(err, errlen, "--batch '%s': %d given twice", v, a->batch[j]);
            have_batch = 1;
        }
        if (bad)
            return DECODE_ARGS_BAD;
    }
    if (!have_batch && a->ntrace == 0) {
        a->batch[0] = 1;
        a->nbatch = 1;
    }
    return DECODE_ARGS_OK;
}
