/*
** test_report.c — the decode example's per-op tables (report.c), on the
** CPU: a result with known figures in, the text and JSON out. The kinds'
** cost inside the step (--ops) must be listed only where measured, summed
** per mode, and the step less that sum shown; "-" for a mode not run; the
** JSON carries null where nothing was measured.
*/
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinytest.h"

static result R; /* large: not on the stack */

/* Modes 1 and 4 run; every in-step cost unmeasured but four. */
static void fill(void)
{
    memset(&R, 0, sizeof R);
    R.B = 1;
    R.have_ops = 1;
    report_cfg.modes = (1u << 1) | (1u << 4);
    R.t[1].med = 1000.0;
    R.t[4].med = 500.0;
    R.op_us[1][K_NORM] = 380.0;
    R.op_us[4][K_NORM_SWIGLU] = 290.0;
    for (int mode = 0; mode <= NMODES; mode++)
        for (int k = 0; k < K_COUNT; k++)
            R.op_in_step_us[mode][k] = NAN;
    R.op_in_step_us[1][K_NORM] = 400.0;
    R.op_in_step_us[1][K_ATTN] = 30.0;
    R.op_in_step_us[4][K_NORM_SWIGLU] = 300.5;
    R.op_in_step_us[4][K_LINEAR] = 60.2;
}

/* What `print` writes for R, in a buffer the caller frees. */
static char *render(void (*print)(FILE *, const result *))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    print(f, &R);
    fclose(f);
    return buf;
}

static void json_of(FILE *f, const result *r) { report_json(f, r, 1.0); }

/* The line of `text` that starts (after blanks) with `label`, or NULL. */
static const char *line_of(const char *text, const char *label)
{
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        const char *q = p;
        while (*q == ' ')
            q++;
        if (!strncmp(q, label, strlen(label)))
            return p;
    }
    return NULL;
}

/* Whether the line at p holds `want` as one of its blank-separated cells. */
static int has_cell(const char *p, const char *want)
{
    char line[512];
    size_t n = strcspn(p, "\n");
    if (n >= sizeof line)
        n = sizeof line - 1;
    memcpy(line, p, n);
    line[n] = '\0';
    for (char *tok = strtok(line, " "); tok; tok = strtok(NULL, " "))
        if (!strcmp(tok, want))
            return 1;
    return 0;
}

static void in_step_table(void)
{
    fill();
    char *out = render(report_ops);
    CHECK(out != NULL);
    if (!out)
        return;
    const char *sec = strstr(out, "per op kind in the step");
    CHECK(sec != NULL);
    if (sec) {
        const char *norm = line_of(sec, "add + gemma rmsnorm");
        CHECK(norm && has_cell(norm, "400.0") && has_cell(norm, "-"));
        const char *sw = line_of(sec, "norm+gemv+swiglu");
        CHECK(sw && has_cell(sw, "300.5"));
        CHECK(line_of(sec, "silu * mul") == NULL); /* measured in no mode: not listed */
        const char *sum = line_of(sec, "sum of the kinds");
        CHECK(sum && has_cell(sum, "430.0") && has_cell(sum, "360.7"));
        const char *rest = line_of(sec, "the step less that sum");
        CHECK(rest && has_cell(rest, "570.0") && has_cell(rest, "139.3"));
        /* modes 2 and 3 ran nothing: their cells are "-" */
        CHECK(rest && strstr(rest, "570.0") && strstr(strstr(rest, "570.0"), " - "));
    }
    /* the kinds alone come first, unchanged */
    CHECK(sec && strstr(out, "each kind alone") && strstr(out, "each kind alone") < sec);
    free(out);
}

static void in_step_json(void)
{
    fill();
    char *js = render(json_of);
    CHECK(js != NULL);
    if (!js)
        return;
    const char *p = strstr(js, "\"op_in_step_us\": {\"cublas_unfused\": [");
    CHECK(p != NULL);
    if (p) {
        /* kinds in enum order: K_NORM's slot holds 400, the stand-in's 30, the rest null */
        CHECK(strstr(p, "400") != NULL && strstr(p, "30") != NULL);
        CHECK(strstr(p, "null") != NULL);
        const char *fused = strstr(p, "\"atk_fused\": [");
        CHECK(fused && strstr(fused, "300.5") && strstr(fused, "60.2"));
    }
    free(js);
}

int main(void)
{
    TT_RUN(in_step_table);
    TT_RUN(in_step_json);
    return TT_DONE();
}
