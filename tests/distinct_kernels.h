/*
** distinct_kernels.h — for the nvrtc tests that compile an op's live GEMV
** candidates (test_gemv_add, test_gemv_fused): the candidates deduplicated
** after folding the parameters that shape only the weight stream and the
** main loop (each test names its list), then compiled with NVRTC, every
** compile checked. Include after tinytest.h (it uses CHECK).
*/
#ifndef DISTINCT_KERNELS_H
#define DISTINCT_KERNELS_H

#include "autotune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int strategy;
    char options[512]; /* as compiled */
    char folded[512];  /* the folded parameters' values blanked: the dedup key */
} distinct_cand;

/* options with the values of the parameters in folded[] (NULL-terminated)
** replaced by '*'. */
static void dk_fold(const char *options, const char *const *folded, char *out, size_t n)
{
    size_t used = 0;
    out[0] = '\0';
    for (const char *p = options; *p && used + 1 < n;) {
        const char *end = strchr(p, ' '), *eq;
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char tok[128];
        snprintf(tok, sizeof tok, "%.*s", (int)len, p);
        if (!strncmp(tok, "-D", 2) && (eq = strchr(tok, '=')) != NULL)
            for (size_t i = 0; folded[i]; i++)
                if ((size_t)(eq - tok - 2) == strlen(folded[i]) && !strncmp(tok + 2, folded[i], strlen(folded[i])))
                    snprintf(tok + (eq - tok) + 1, sizeof tok - (size_t)(eq - tok) - 1, "*");
        int w = snprintf(out + used, n - used, "%s%s", used ? " " : "", tok);
        if (w < 0)
            break;
        used += (size_t)w;
        p += len;
        while (*p == ' ')
            p++;
    }
}

/* Appends d to list[*n] unless a candidate of its strategy with the same
** folded options is there (or the list is full). */
static void dk_add(distinct_cand *list, int *n, int cap, const distinct_cand *d)
{
    for (int j = 0; j < *n; j++)
        if (list[j].strategy == d->strategy && strcmp(list[j].folded, d->folded) == 0)
            return;
    if (*n < cap)
        list[(*n)++] = *d;
}

/* Compiles list[0..n) for arch and dtype (the templates named by spec's
** strategies), checks that every one compiled and reported its registers,
** counts them per strategy into per[8] and returns the NVRTC seconds. */
static double dk_compile(const at_spec *spec, at_templates *tpl, const distinct_cand *list, int n, int arch,
                         at_dtype dtype, int per[8])
{
    at_compile_job *jobs = calloc((size_t)(n ? n : 1), sizeof *jobs);
    double t = 0;
    CHECK(jobs != NULL);
    if (!jobs)
        return 0;
    for (int i = 0; i < n; i++) {
        const char *name = at_spec_strategy_template(spec, list[i].strategy), *src = NULL;
        CHECK_EQ_INT(at_templates_source(tpl, name, &src), AT_OK);
        jobs[i] = (at_compile_job){.tpl = tpl, .name = name, .source = src, .arch = arch, .dtype = dtype};
        memcpy(jobs[i].options, list[i].options, sizeof jobs[i].options);
        if (list[i].strategy < 8)
            per[list[i].strategy]++;
    }
    CHECK_EQ_INT(at_nvrtc_compile_all(jobs, n, 0, NULL, NULL), AT_OK);
    int failed = 0, noregs = 0;
    for (int i = 0; i < n; i++) {
        if (!jobs[i].ok && failed++ < 3)
            fprintf(stderr, "  compile failed: %s %s\n%s\n", jobs[i].name, jobs[i].options,
                    jobs[i].log ? jobs[i].log : "");
        noregs += jobs[i].ok && jobs[i].regs <= 0;
        t += jobs[i].seconds;
        at_compile_job_clear(&jobs[i]);
    }
    CHECK_EQ_INT(failed, 0);
    CHECK_EQ_INT(noregs, 0);
    free(jobs);
    return t;
}

#endif
