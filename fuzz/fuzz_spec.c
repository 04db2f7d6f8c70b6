/*
** fuzz_spec.c — libFuzzer harness for the spec loader: arbitrary bytes run as
** Lua source through at_spec_load_string, then at_spec_expand/at_spec_bytes for
** one fixed GEMV problem. Invariant: only AT_OK, AT_ERR_SPEC or AT_ERR_NOMEM, a
** spec error names the chunk, results in range, no leak or crash (else abort).
*/
#include "autotune.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The problem every loaded spec is expanded for (sizes as the CLI passes). */
static const at_problem problem = {"gemv", AT_BF16, {1, 64, 64, 3}, 90, 132};

static void fail(const char *what, int rc)
{
    fprintf(stderr, "fuzz_spec: invariant broken: %s (status %d, errmsg '%s')\n", what, rc, at_errmsg());
    abort();
}

/* A status from a spec call: only these three may come back. */
static void check_status(const char *call, int rc)
{
    if (rc != AT_OK && rc != AT_ERR_SPEC && rc != AT_ERR_NOMEM)
        fail(call, rc);
    /* non-empty, and names where it came from: the chunk ("fuzz:3: ...") */
    if (rc == AT_ERR_SPEC && strncmp(at_errmsg(), "fuzz", 4) != 0)
        fail("AT_ERR_SPEC message empty or not starting with the chunk name", rc);
}

/* Candidates that at_spec_expand returned: in range, as the contract says. */
static void check_candidates(const at_spec *sp, const at_candidate *c, int n)
{
    if (n < 1 || !c)
        fail("expand returned AT_OK without candidates", n);
    for (int i = 0; i < n; i++) {
        const at_candidate *k = &c[i];
        if (k->strategy < 0 || k->strategy >= at_spec_nstrategies(sp) || k->nparams < 0 ||
            k->nparams > AT_MAX_PARAMS)
            fail("candidate strategy or nparams out of range", i);
        if (k->pruned_by[0]) /* pruned: no launch shape */
            continue;
        unsigned long long threads = (unsigned long long)k->block[0] * k->block[1] * k->block[2];
        if (!k->grid[0] || !k->grid[1] || !k->grid[2] || !k->block[0] || !k->block[1] || !k->block[2] ||
            threads > 1024)
            fail("live candidate with an invalid grid/block", i);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = malloc(size + 1); /* at_spec_load_string takes a C string */
    if (!src)
        return 0;
    memcpy(src, data, size);
    src[size] = '\0';

    at_spec *sp = (at_spec *)&problem; /* must be reset to NULL by a failed load */
    at_fail(AT_OK, "%s", "");
    int rc = at_spec_load_string(src, "fuzz", &sp);
    check_status("at_spec_load_string", rc);
    if (rc != AT_OK) {
        if (sp)
            fail("failed load left *out set", rc);
        goto done;
    }
    if (!sp || !at_spec_op(sp) || at_spec_nstrategies(sp) < 1)
        fail("loaded spec without an op or strategies", rc);
    for (int i = 0; i < at_spec_nstrategies(sp); i++)
        if (!at_spec_strategy_name(sp, i) || !at_spec_strategy_template(sp, i) ||
            !at_spec_strategy_kernel(sp, i))
            fail("strategy accessor returned NULL", i);

    at_candidate *cands = NULL;
    int n = -1;
    at_fail(AT_OK, "%s", "");
    rc = at_spec_expand(sp, &problem, &cands, &n);
    check_status("at_spec_expand", rc);
    if (rc == AT_OK)
        check_candidates(sp, cands, n);
    else if (cands || n != 0)
        fail("failed expand left outputs set", rc);
    free(cands);

    double bytes = -1;
    at_fail(AT_OK, "%s", "");
    rc = at_spec_bytes(sp, &problem, &bytes);
    check_status("at_spec_bytes", rc);
    if (rc == AT_OK && !(bytes > 0 && isfinite(bytes)))
        fail("bytes not a positive finite number", rc);
done:
    at_spec_free(sp);
    free(src);
    return 0;
}
