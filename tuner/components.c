/*
** components.c — a fused op's components first. Baseline 0 of a fused op
** (op_fused.c) is the runtime's own unfused sequence over the cache: the
** norm, the GEMV (and a SiLU-mul). For that yardstick to be the best the
** project runs without fusion, the ops it is made of are tuned, or found in
** the cache, before the fused op's own search, with the same options
** (device, dtype, cache, effort, strategy, eps); a fused kernel then has to
** beat the tuned sequence to be stored.
** The fused op's answer holds only against those components: which
** kernels they are goes into its key (at_components_fold_key), so a
** component retuned to another winner makes the fused op's stored answer
** a miss, retuned on demand, as any other change of what the answer
** depends on. A suite's compile-ahead (compile_only) looks the components
** up as well, compiling those it does not find: a fused entry already
** answered is then found, and nothing of it compiles again.
*/
#include "search_run.h"

#include <stdlib.h>
#include <string.h>

/* The component's spec: the default file of its op (search/norm.lua,
** search/gemv.lua) in the folder of the fused op's spec. */
static void component_spec(const char *spec_path, const char *op, char *buf, size_t len)
{
    char def[256];
    at_spec_default_path("", op, def, sizeof def);
    const char *file = strrchr(def, '/') ? strrchr(def, '/') + 1 : def;
    const char *slash = spec_path ? strrchr(spec_path, '/') : NULL;
    if (slash)
        snprintf(buf, len, "%.*s/%s", (int)(slash - spec_path), spec_path, file);
    else
        snprintf(buf, len, "%s", file);
}

int at_components_fold_key(char space_sha[65], const char *idents)
{
    size_t cap = strlen(space_sha) + strlen(idents) + 32;
    char *buf;
    if (!idents[0])
        return AT_OK; /* no components: the space's digest alone */
    if (!(buf = malloc(cap)))
        return at_fail(AT_ERR_NOMEM, "out of memory");
    int n = snprintf(buf, cap, "%s\n--components\n%s", space_sha, idents);
    at_sha256_hex(buf, (size_t)n, space_sha);
    free(buf);
    return AT_OK;
}

int at_search_components(const at_search_opts *o, const at_op *op, at_progress *pg, char *tuned, size_t len,
                         char space_sha[65])
{
    at_op_component comp[AT_OP_MAX_COMPONENTS];
    char idents[AT_OP_MAX_COMPONENTS * 1200] = "";
    size_t used = 0, ilen = 0;
    int n, rc = AT_OK, all_cached = 1;
    if (len)
        tuned[0] = '\0';
    if (!op->components || o->dry_run || o->verify_only)
        return AT_OK; /* nothing timed: the cache's components serve as they are */
    n = op->components(o, comp, AT_OP_MAX_COMPONENTS);
    for (int i = 0; i < n && rc == AT_OK && !interrupted(o); i++) {
        const at_op *cop = at_op_find(comp[i].op);
        char spec[4200], shape[64];
        at_search_result cres;
        at_search_opts co = *o;
        if (!cop)
            return at_fail(AT_ERR_USAGE, "%s: unknown component op '%s'", op->name, comp[i].op);
        component_spec(o->spec_path, comp[i].op, spec, sizeof spec);
        at_shape_format(&comp[i].shape, shape, sizeof shape);
        co.op = comp[i].op;
        co.shape = comp[i].shape;
        co.spec_path = spec;
        co.eps = cop->takes_eps ? o->eps : 0.0;
        co.force = 0;          /* found in the cache when tuned before; --force retunes the fused op */
        co.before_gpu = NULL;  /* the fused op's own GPU phases start what the caller attached to them */
        at_progress_note(pg, "%s: component %d of %d first, %s %s (the unfused baseline runs it)", op->name, i + 1,
                         n, comp[i].op, shape);
        rc = at_search_run(&co, &cres);
        if (rc != AT_OK) {
            char msg[700];
            snprintf(msg, sizeof msg, "%s", at_errmsg());
            rc = at_fail(rc, "%s: its component %s %s: %s", op->name, comp[i].op, shape, msg);
        } else {
            all_cached &= cres.from_cache;
            at_progress_note(pg, "%s: component %s %s: %s (%s)", op->name, comp[i].op, shape,
                             cres.winner.strategy[0] ? cres.winner.strategy : "?",
                             cres.from_cache ? "from the cache" : "tuned now");
            /* the winner as the runtime will load it: its key (spec,
            ** templates, device ...), its kernel and cubin, or the baseline */
            int iw = snprintf(idents + ilen, sizeof idents - ilen, "%s %s %s %s %s %s\n", comp[i].op, shape,
                              cres.key_sha, cres.winner.strategy, cres.winner.params, cres.winner.cubin_sha);
            ilen += iw > 0 && (size_t)iw < sizeof idents - ilen ? (size_t)iw : 0;
            if (used < len) {
                int w = snprintf(tuned + used, len - used, "%s%s=%s", used ? " " : "", comp[i].op,
                                 cres.winner.strategy[0] ? cres.winner.strategy : "?");
                used += w > 0 ? (size_t)w : 0;
            }
        }
        at_search_result_free(&cres);
    }
    /* a compile-ahead (compile_only) tunes nothing: a component it did not
    ** find (only compiled) leaves the key without them, a miss, so the
    ** fused op's candidates compile too, as its real run will need them */
    if (rc == AT_OK && n > 0 && !interrupted(o) && (!o->compile_only || all_cached))
        rc = at_components_fold_key(space_sha, idents);
    return rc;
}
