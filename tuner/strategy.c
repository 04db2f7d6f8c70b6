/*
** strategy.c — which candidates the timing phase measures, and how long
** (exhaustive, random, annealing, successive halving), the effort table,
** the choice between them, and warm-start matching.
** Invariant: every measurement goes through measure_one(), which counts its
** cost and keeps each candidate's most precise time; no candidate is
** measured twice at one precision; failures rank last. Every strategy but exhaustive
** screens at reps below full (reps_min) and gives full reps to its best few.
*/
#include "strategy.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_REPS_MIN 2
#define DEFAULT_ETA 3
#define DEFAULT_FINALISTS 4
/* Anneal temperature, relative: a move 5% worse is taken with probability
** 1/e at the start, a move 0.2% worse at the end (geometric in between). */
#define ANNEAL_T0 0.05
#define ANNEAL_T1 0.002
#define MAX_NEIGHBOURS (2 * AT_MAX_PARAMS)

/* [STRATEGY_NAMES] spec.c checks search_strategy against the same words. */
static const char *const strategy_names[] = {"exhaustive", "random", "anneal", "halving"};

/* [EFFORT_TABLE] strategy.h documents this table: change both together. */
static const struct effort_row {
    const char *name;
    at_strategy_kind kind;
    int budget_div, budget_min; /* budget = max(ceil(n/div), min(n, min)); div 1: all */
    int eta, reps_min, reps_mul, finalists;
} efforts[] = {
    {"quick", AT_STRATEGY_HALVING, 4, 8, 3, 1, 1, 3},
    {"normal", AT_STRATEGY_HALVING, 1, 0, 3, 1, 1, 4},
    {"patient", AT_STRATEGY_HALVING, 1, 0, 2, 3, 2, 6},
    {"exhaustive", AT_STRATEGY_EXHAUSTIVE, 1, 0, 0, 0, 1, 0},
};

int at_strategy_parse(const char *text, at_strategy_kind *out)
{
    for (int i = 0; text && i < (int)(sizeof strategy_names / sizeof *strategy_names); i++)
        if (strcmp(text, strategy_names[i]) == 0) {
            *out = (at_strategy_kind)i;
            return AT_OK;
        }
    return at_fail(AT_ERR_USAGE, "unknown strategy '%s' (exhaustive, random, anneal, halving)",
                   text ? text : "(null)");
}

const char *at_strategy_name(at_strategy_kind k)
{
    return (unsigned)k < sizeof strategy_names / sizeof *strategy_names ? strategy_names[k] : "?";
}

int at_strategy_effort_parse(const char *text, at_effort *out)
{
    for (int i = 0; text && i < (int)(sizeof efforts / sizeof *efforts); i++)
        if (strcmp(text, efforts[i].name) == 0) {
            *out = (at_effort)i;
            return AT_OK;
        }
    return at_fail(AT_ERR_USAGE, "unknown effort '%s' (quick, normal, patient, exhaustive)",
                   text ? text : "(null)");
}

const char *at_strategy_effort_name(at_effort e)
{
    return (unsigned)e < sizeof efforts / sizeof *efforts ? efforts[e].name : "?";
}

int at_strategy_effort(at_effort effort, int n, int reps, at_strategy_opts *out)
{
    if ((unsigned)effort >= sizeof efforts / sizeof *efforts)
        return at_fail(AT_ERR_USAGE, "effort %d is not a level", (int)effort);
    if (n < 0 || reps < 1)
        return at_fail(AT_ERR_USAGE, "effort: need n >= 0 and reps >= 1 (n=%d, reps=%d)", n, reps);
    const struct effort_row *e = &efforts[effort];
    memset(out, 0, sizeof *out);
    out->kind = e->kind;
    if (e->budget_div > 1) {
        int b = n / e->budget_div + (n % e->budget_div != 0);
        int lo = n < e->budget_min ? n : e->budget_min;
        out->budget = b > lo ? b : lo;
    }
    out->reps = reps > INT_MAX / e->reps_mul ? INT_MAX : reps * e->reps_mul;
    out->eta = e->eta;
    out->reps_min = e->reps_min;
    out->finalists = e->finalists;
    return AT_OK;
}

int at_strategy_choose(const char *strategy, const char *effort, const char *spec_strategy, int budget,
                       int n, int reps, at_strategy_opts *out, const char **from)
{
    at_effort e = AT_EFFORT_NORMAL;
    at_strategy_kind k = AT_STRATEGY_EXHAUSTIVE; /* set by at_strategy_parse before use */
    const char *src = "default";
    int rc;
    if (effort && (rc = at_strategy_effort_parse(effort, &e)) != AT_OK)
        return rc;
    if ((rc = at_strategy_effort(e, n, reps, out)) != AT_OK)
        return rc;
    if (strategy) {
        if ((rc = at_strategy_parse(strategy, &k)) != AT_OK)
            return rc;
        out->kind = k;
        src = "--strategy";
    } else if (effort) {
        src = "--effort"; /* the effort's own kind, set above */
    } else if (spec_strategy) {
        if ((rc = at_strategy_parse(spec_strategy, &k)) != AT_OK)
            return rc;
        out->kind = k;
        src = "spec";
    }
    if (budget > 0)
        out->budget = budget;
    if (from)
        *from = src;
    return AT_OK;
}

/* Halving's reps for the next rung: eta times more, but below full
** precision (R) until at most the finalists are left, so that every rung
** before the last is a screening measurement (search_gpu.c times those
** with short graphs); the last rung is at R. A rung capped at R - 1 twice
** is a cut by the times already measured (run_halving). */
static int next_rung_reps(int r, int eta, int R, int last)
{
    int64_t next = (int64_t)r * eta;
    if (last)
        return R;
    if (next > R - 1)
        next = R - 1;
    return next > r ? (int)next : r;
}

int at_strategy_estimate_calls(const at_strategy_opts *o, int n)
{
    int b = o->budget <= 0 || o->budget > n ? n : o->budget;
    if (b < o->nwarm)
        b = o->nwarm < n ? o->nwarm : n;
    if (o->kind == AT_STRATEGY_EXHAUSTIVE)
        return n;
    int R = o->reps, eta = o->eta ? o->eta : DEFAULT_ETA, fin = o->finalists ? o->finalists : DEFAULT_FINALISTS;
    int rmin = o->reps_min ? o->reps_min : DEFAULT_REPS_MIN;
    int r = rmin < R ? rmin : R, m = b, calls = 0;
    if (o->kind != AT_STRATEGY_HALVING) /* screened picks, then the finalists at R */
        return b + (r < R && b > fin ? fin : 0);
    /* the rungs of run_halving, with its defaults */
    if (eta < 2)
        eta = 2;
    if (m <= fin)
        r = R;
    for (int prev = 0; m > 0;) {
        calls += r != prev ? m : 0;
        prev = r;
        if (r >= R)
            break;
        m = m / eta + (m % eta != 0);
        r = next_rung_reps(r, eta, R, m <= fin);
    }
    return calls;
}

/* |ln(a/b)| summed over the dimensions of the rank. */
static double shape_distance(const at_shape *a, const at_shape *b)
{
    double d = fabs(log((double)a->M / (double)b->M)) + fabs(log((double)a->K / (double)b->K));
    if (a->rank == 3)
        d += fabs(log((double)a->N / (double)b->N));
    return d;
}

typedef struct ref_at { /* a parsed ref, for sorting by distance */
    int i;
    double d;
    const char *shape;
} ref_at;

/* Nearer first; one shape's refs together (newest first, as stored). */
static int cmp_ref_at(const void *a, const void *b)
{
    const ref_at *x = a, *y = b;
    int c;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    if ((c = strcmp(x->shape, y->shape)) != 0)
        return c;
    return (x->i > y->i) - (x->i < y->i);
}

int at_strategy_warm_seeds(const at_winner_ref *refs, int nrefs, const at_shape *shape, int nearest,
                           const char *const *names, const char *const *params, int n, int *seeds,
                           int *nseeds, int *nshapes)
{
    ref_at *ra = malloc((size_t)(nrefs > 0 ? nrefs : 1) * sizeof *ra);
    char *taken = calloc((size_t)(n > 0 ? n : 1), 1);
    int m = 0, shapes = 0;
    *nseeds = 0;
    if (nshapes)
        *nshapes = 0;
    if (!ra || !taken) {
        free(ra);
        free(taken);
        return at_fail(AT_ERR_NOMEM, "strategy: out of memory for warm start");
    }
    for (int i = 0; i < nrefs; i++) {
        at_shape s;
        if (at_shape_parse(refs[i].shape, shape->rank, &s) == AT_OK)
            ra[m++] = (ref_at){i, shape_distance(&s, shape), refs[i].shape};
    }
    qsort(ra, (size_t)m, sizeof *ra, cmp_ref_at);
    /* shape by shape, nearest first; a shape whose winner is no candidate
    ** here (the baseline won, or another space) does not count */
    for (int k = 0; k < m && shapes < nearest;) {
        int found = 0, j = k;
        for (; j < m && strcmp(ra[j].shape, ra[k].shape) == 0; j++) {
            const at_winner_ref *w = &refs[ra[j].i];
            for (int c = 0; c < n; c++)
                if (!taken[c] && strcmp(names[c], w->strategy) == 0 && strcmp(params[c], w->params) == 0) {
                    taken[c] = 1;
                    seeds[(*nseeds)++] = c;
                    found = 1;
                }
        }
        shapes += found;
        k = j;
    }
    if (nshapes)
        *nshapes = shapes;
    free(ra);
    free(taken);
    return AT_OK;
}

/* ------------------------------------------------------------------ state */

typedef struct node { /* a candidate's place in the parameter lattice */
    int idx, strategy, np;
    int r[AT_MAX_PARAMS]; /* position of each value in its sorted value list */
} node;

typedef struct entry { /* for sorting candidates by time */
    int i, reps;
    double us;
} entry;

typedef struct search {
    const at_candidate *c;
    int n;
    at_strategy_opts o; /* defaults filled in */
    at_measure_fn measure;
    void *arg;
    at_strategy_result *res;
    uint64_t rng;
    int *pool, *pos, npool; /* candidates not measured (or chosen) yet; pos -1: gone */
    int *warm, nwarm;       /* deduplicated seeds */
    char *is_warm, *flag;   /* flag: per-strategy scratch mark */
    int *set;               /* halving: the current rung */
    entry *ent;
    node *nodes;  /* NULL until the lattice is needed; sorted by key */
    int *node_of; /* [n] candidate -> its place in nodes */
    int *nval;    /* [n * AT_MAX_PARAMS] size of each value list */
} search;

/* splitmix64: small, seedable, good enough to pick candidates. */
static uint64_t rng_next(search *s)
{
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int rng_below(search *s, int n)
{
    return (int)(rng_next(s) % (uint64_t)n);
}
static double rng_unit(search *s)
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

static void pool_remove(search *s, int i)
{
    int p = s->pos[i];
    if (p < 0)
        return;
    int last = s->pool[--s->npool];
    s->pool[p] = last;
    s->pos[last] = p;
    s->pos[i] = -1;
}

static int pool_pick(search *s)
{
    return s->pool[rng_below(s, s->npool)];
}

/* A random unmeasured candidate of spec strategy k modulo the strategies
** present (the next one that has any left; any candidate if none has). */
static int pool_pick_strategy(search *s, int k)
{
    int nst = 0;
    for (int i = 0; i < s->n; i++)
        if (s->c[i].strategy >= nst)
            nst = s->c[i].strategy + 1;
    for (int t = 0; t < nst; t++) {
        int want = (k + t) % nst, m = 0;
        for (int j = 0; j < s->npool; j++)
            m += s->c[s->pool[j]].strategy == want;
        if (m == 0)
            continue;
        int r = rng_below(s, m);
        for (int j = 0; j < s->npool; j++)
            if (s->c[s->pool[j]].strategy == want && r-- == 0)
                return s->pool[j];
    }
    return pool_pick(s);
}

int at_strategy_anneal_starts(int budget)
{
    return budget / 4 > AT_STRATEGY_STARTS ? budget / 4 : AT_STRATEGY_STARTS;
}

static int budget_of(const search *s)
{
    int b = s->o.budget;
    if (b <= 0 || b > s->n)
        b = s->n;
    return b < s->nwarm ? s->nwarm : b;
}

/* The one place a candidate is measured. Keeps the most precise time (the
** latest among equals); NAN means failed; a negative time is our bug. */
static int measure_one(search *s, int i, int reps)
{
    at_strategy_result *res = s->res;
    double us = NAN;
    res->calls++;
    res->cost += reps;
    int rc = s->measure(s->arg, i, reps, &us);
    if (rc != AT_OK)
        return rc;
    if (isnan(us))
        us = INFINITY;
    if (us < 0)
        return at_fail(AT_ERR_HARNESS, "strategy: candidate %d measured %g us", i, us);
    if (res->reps[i] == 0) {
        res->order[res->nmeasured++] = i;
        pool_remove(s, i);
    }
    if (reps >= res->reps[i]) {
        res->us[i] = us;
        res->reps[i] = reps;
    }
    return AT_OK;
}

/* Finite before failed, then more reps, then faster, then lower index. */
static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    int fx = isfinite(x->us), fy = isfinite(y->us);
    if (fx != fy)
        return fy - fx;
    if (x->reps != y->reps)
        return x->reps > y->reps ? -1 : 1;
    if (fx && x->us != y->us)
        return x->us < y->us ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Sorts idx[0..m) by their current time, fastest first. */
static void sort_by_time(search *s, int *idx, int m)
{
    for (int k = 0; k < m; k++)
        s->ent[k] = (entry){idx[k], s->res->reps[idx[k]], s->res->us[idx[k]]};
    qsort(s->ent, (size_t)m, sizeof *s->ent, cmp_entry);
    for (int k = 0; k < m; k++)
        idx[k] = s->ent[k].i;
}

/* ---------------------------------------------------------------- lattice */

typedef struct sv {
    int s;
    int64_t v;
} sv;

static int cmp_sv(const void *a, const void *b)
{
    const sv *x = a, *y = b;
    if (x->s != y->s)
        return x->s < y->s ? -1 : 1;
    return (x->v > y->v) - (x->v < y->v);
}

/* First k in the sorted a[0..m) with a[k] >= (st, v); `after_st` looks for
** the first entry of a later strategy instead. */
static int sv_lower(const sv *a, int m, int st, int64_t v, int after_st)
{
    int lo = 0, hi = m;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int less = a[mid].s < st || (a[mid].s == st && (after_st || a[mid].v < v));
        if (less)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int cmp_node(const void *a, const void *b)
{
    const node *x = a, *y = b;
    if (x->strategy != y->strategy)
        return x->strategy < y->strategy ? -1 : 1;
    if (x->np != y->np)
        return x->np < y->np ? -1 : 1;
    for (int p = 0; p < x->np; p++)
        if (x->r[p] != y->r[p])
            return x->r[p] < y->r[p] ? -1 : 1;
    return 0;
}

/* Places every candidate in the lattice of its spec strategy: parameter p's
** coordinate is the position of its value among the values present in the
** live set, so pruned combinations are simply absent. */
static int build_lattice(search *s)
{
    int n = s->n, rc = AT_OK;
    sv *vals = malloc((size_t)n * sizeof *vals);
    s->nodes = calloc((size_t)n, sizeof *s->nodes);
    s->nval = calloc((size_t)n * AT_MAX_PARAMS, sizeof *s->nval);
    s->node_of = malloc((size_t)n * sizeof *s->node_of);
    if (!vals || !s->nodes || !s->nval || !s->node_of) {
        rc = at_fail(AT_ERR_NOMEM, "strategy: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++)
        s->nodes[i] = (node){.idx = i, .strategy = s->c[i].strategy, .np = s->c[i].nparams};
    for (int p = 0; p < AT_MAX_PARAMS; p++) {
        int m = 0, u = 0;
        for (int i = 0; i < n; i++)
            if (s->c[i].nparams > p)
                vals[m++] = (sv){s->c[i].strategy, s->c[i].params[p].value};
        if (m == 0)
            break;
        qsort(vals, (size_t)m, sizeof *vals, cmp_sv);
        for (int k = 0; k < m; k++)
            if (u == 0 || cmp_sv(&vals[u - 1], &vals[k]) != 0)
                vals[u++] = vals[k];
        for (int i = 0; i < n; i++) {
            if (s->c[i].nparams <= p)
                continue;
            int st = s->c[i].strategy;
            int lo = sv_lower(vals, u, st, INT64_MIN, 0), hi = sv_lower(vals, u, st, 0, 1);
            s->nodes[i].r[p] = sv_lower(vals, u, st, s->c[i].params[p].value, 0) - lo;
            s->nval[(size_t)i * AT_MAX_PARAMS + (size_t)p] = hi - lo;
        }
    }
    qsort(s->nodes, (size_t)n, sizeof *s->nodes, cmp_node);
    for (int k = 0; k < n; k++)
        s->node_of[s->nodes[k].idx] = k;
done:
    free(vals);
    return rc;
}

/* The candidates one step away from i in exactly one parameter, into
** out[0..MAX_NEIGHBOURS); returns how many. */
static int neighbours(const search *s, int i, int *out)
{
    const node *self = &s->nodes[s->node_of[i]];
    node key = *self;
    int k = 0;
    for (int p = 0; p < key.np; p++)
        for (int d = -1; d <= 1; d += 2) {
            int r = self->r[p] + d;
            if (r < 0 || r >= s->nval[(size_t)i * AT_MAX_PARAMS + (size_t)p])
                continue;
            key.r[p] = r;
            const node *hit = bsearch(&key, s->nodes, (size_t)s->n, sizeof *s->nodes, cmp_node);
            if (hit)
                out[k++] = hit->idx;
            key.r[p] = self->r[p];
        }
    return k;
}

/* --------------------------------------------------------------- searches */

static int measure_warm(search *s, int reps, int limit)
{
    int rc = AT_OK;
    for (int k = 0; k < s->nwarm && s->res->nmeasured < limit && rc == AT_OK; k++)
        if (s->res->reps[s->warm[k]] == 0)
            rc = measure_one(s, s->warm[k], reps);
    return rc;
}

static int run_exhaustive(search *s)
{
    int rc = measure_warm(s, s->o.reps, s->n);
    for (int i = 0; i < s->n && rc == AT_OK; i++)
        if (s->res->reps[i] == 0)
            rc = measure_one(s, i, s->o.reps);
    return rc;
}

/* The screening precision of random and anneal: halving's rung-0 reps;
** as in halving, full reps at once when no more than the finalists fit. */
static int screen_reps(const search *s)
{
    if (budget_of(s) <= s->o.finalists)
        return s->o.reps;
    return s->o.reps_min < s->o.reps ? s->o.reps_min : s->o.reps;
}

/* random and anneal end so: the `finalists` fastest of what they screened
** are measured again at full reps (a fresh draw, as halving's last rung),
** so that the ranking they hand on starts with precise times. */
static int retime_finalists(search *s)
{
    at_strategy_result *res = s->res;
    int m = res->nmeasured, rc = AT_OK;
    memcpy(s->set, res->order, (size_t)m * sizeof *s->set);
    sort_by_time(s, s->set, m);
    for (int k = 0; k < m && k < s->o.finalists && rc == AT_OK; k++)
        if (isfinite(res->us[s->set[k]]) && res->reps[s->set[k]] < s->o.reps)
            rc = measure_one(s, s->set[k], s->o.reps);
    return rc;
}

static int run_random(search *s)
{
    int b = budget_of(s), r = screen_reps(s), rc = measure_warm(s, r, b);
    while (rc == AT_OK && s->res->nmeasured < b && s->npool > 0)
        rc = measure_one(s, pool_pick(s), r);
    return rc == AT_OK ? retime_finalists(s) : rc;
}

/* The fastest measured candidate that still has an unmeasured neighbour, or
** -1. s->flag marks candidates found exhausted (that never reverts). */
static int frontier_best(search *s)
{
    const at_strategy_result *res = s->res;
    int nb[MAX_NEIGHBOURS];
    for (;;) {
        int best = -1;
        for (int k = 0; k < res->nmeasured; k++) {
            int i = res->order[k];
            if (!s->flag[i] && isfinite(res->us[i]) && (best < 0 || res->us[i] < res->us[best]))
                best = i;
        }
        if (best < 0)
            return -1;
        int m = neighbours(s, best, nb);
        for (int k = 0; k < m; k++)
            if (res->reps[nb[k]] == 0)
                return best;
        s->flag[best] = 1;
    }
}

static int run_anneal(search *s)
{
    at_strategy_result *res = s->res;
    int b = budget_of(s), R = screen_reps(s), cur = -1, rc; /* R: the walk's reps */
    int nb[MAX_NEIGHBOURS], cand[MAX_NEIGHBOURS];
    if ((rc = build_lattice(s)) != AT_OK || (rc = measure_warm(s, R, b)) != AT_OK)
        return rc;
    /* the walk starts from the best of the seeds and the spread picks */
    for (int k = 0, starts = at_strategy_anneal_starts(b); k < starts && res->nmeasured < b && s->npool > 0; k++)
        if ((rc = measure_one(s, pool_pick_strategy(s, k), R)) != AT_OK)
            return rc;
    for (int k = 0; k < res->nmeasured; k++) {
        int i = res->order[k];
        if (isfinite(res->us[i]) && (cur < 0 || res->us[i] < res->us[cur]))
            cur = i;
    }
    while (res->nmeasured < b && s->npool > 0) {
        int m = 0;
        if (cur >= 0) {
            int nn = neighbours(s, cur, nb);
            for (int k = 0; k < nn; k++)
                if (res->reps[nb[k]] == 0)
                    cand[m++] = nb[k];
        }
        if (m == 0) { /* stuck: go back to the best point with room, else jump */
            int f = frontier_best(s);
            if (f >= 0) {
                cur = f;
                continue;
            }
            int i = pool_pick(s);
            res->restarts++;
            if ((rc = measure_one(s, i, R)) != AT_OK)
                return rc;
            if (isfinite(res->us[i]))
                cur = i;
            continue;
        }
        int j = cand[rng_below(s, m)];
        if ((rc = measure_one(s, j, R)) != AT_OK)
            return rc;
        res->from[j] = cur;
        if (!isfinite(res->us[j]))
            continue;
        double t = ANNEAL_T0 * pow(ANNEAL_T1 / ANNEAL_T0, (double)res->nmeasured / (double)b);
        double d = res->us[j] / res->us[cur] - 1.0;
        if (d <= 0.0 || rng_unit(s) < exp(-d / t))
            cur = j;
    }
    return retime_finalists(s);
}

/* Rung 0's members: the seeds, then (when only part of the space fits) the
** seeds' neighbours, then random picks. Returns the rung size. */
static int halving_rung0(search *s, int b, int *rc)
{
    int m = 0, nb[MAX_NEIGHBOURS];
    *rc = AT_OK;
    for (int k = 0; k < s->nwarm; k++) {
        s->set[m++] = s->warm[k];
        pool_remove(s, s->warm[k]);
    }
    if (b >= s->n) {
        for (int i = 0; i < s->n; i++)
            if (!s->is_warm[i])
                s->set[m++] = i;
        return m;
    }
    if (s->nwarm > 0 && (*rc = build_lattice(s)) != AT_OK)
        return 0;
    for (int k = 0; k < s->nwarm && m < b; k++) {
        int nn = neighbours(s, s->warm[k], nb);
        for (int j = 0; j < nn && m < b; j++)
            if (s->pos[nb[j]] >= 0) {
                s->set[m++] = nb[j];
                pool_remove(s, nb[j]);
            }
    }
    while (m < b && s->npool > 0) {
        int i = pool_pick(s);
        s->set[m++] = i;
        pool_remove(s, i);
    }
    return m;
}

static int run_halving(search *s)
{
    at_strategy_result *res = s->res;
    int R = s->o.reps, eta = s->o.eta, rc;
    int m = halving_rung0(s, budget_of(s), &rc);
    int r = s->o.reps_min < R ? s->o.reps_min : R;
    if (rc != AT_OK)
        return rc;
    if (m <= s->o.finalists)
        r = R;
    res->rungs = 0;
    for (int prev = 0; m > 0;) {
        /* a rung capped at the last one's reps cuts again by its times: no
        ** candidate is measured twice at one precision */
        for (int k = 0; k < m && r != prev; k++)
            if ((rc = measure_one(s, s->set[k], r)) != AT_OK)
                return rc;
        res->rungs += r != prev;
        prev = r;
        if (r >= R)
            break;
        sort_by_time(s, s->set, m);
        int keep = m / eta + (m % eta != 0), nfinite = 0;
        while (nfinite < m && isfinite(res->us[s->set[nfinite]]))
            nfinite++;
        if (keep > nfinite)
            keep = nfinite;
        if (res->rungs == 1) /* a seed won a nearby shape: worth a precise look */
            for (int k = keep; k < nfinite; k++)
                if (s->is_warm[s->set[k]]) {
                    int t = s->set[keep];
                    s->set[keep++] = s->set[k];
                    s->set[k] = t;
                }
        m = keep;
        r = next_rung_reps(r, eta, R, m <= s->o.finalists);
    }
    return AT_OK;
}

/* ------------------------------------------------------------------- API */

static int check_opts(search *s, const at_candidate *cands, at_measure_fn measure)
{
    at_strategy_opts *o = &s->o;
    if (s->n < 0 || (s->n > 0 && !cands) || !measure)
        return at_fail(AT_ERR_USAGE, "strategy: need candidates and a measure callback (n=%d)", s->n);
    if ((unsigned)o->kind >= sizeof strategy_names / sizeof *strategy_names)
        return at_fail(AT_ERR_USAGE, "strategy: %d is not a strategy", (int)o->kind);
    if (o->reps_min == 0)
        o->reps_min = DEFAULT_REPS_MIN;
    if (o->eta == 0)
        o->eta = DEFAULT_ETA;
    if (o->finalists == 0)
        o->finalists = DEFAULT_FINALISTS;
    if (o->reps < 1 || o->reps_min < 1 || o->eta < 2 || o->finalists < 1)
        return at_fail(AT_ERR_USAGE,
                       "strategy: need reps >= 1, reps_min >= 1, eta >= 2, finalists >= 1 "
                       "(got %d, %d, %d, %d)",
                       o->reps, o->reps_min, o->eta, o->finalists);
    if (o->nwarm < 0 || (o->nwarm > 0 && !o->warm))
        return at_fail(AT_ERR_USAGE, "strategy: bad warm-start list (%d seeds)", o->nwarm);
    for (int k = 0; k < o->nwarm; k++)
        if (o->warm[k] < 0 || o->warm[k] >= s->n)
            return at_fail(AT_ERR_USAGE, "strategy: warm-start seed %d is not a candidate (0..%d)",
                           o->warm[k], s->n - 1);
    for (int i = 0; i < s->n; i++)
        if (cands[i].nparams < 0 || cands[i].nparams > AT_MAX_PARAMS)
            return at_fail(AT_ERR_USAGE, "strategy: candidate %d has %d params", i, cands[i].nparams);
    return AT_OK;
}

int at_strategy_run(const at_candidate *cands, int n, const at_strategy_opts *o, at_measure_fn measure,
                    void *arg, at_strategy_result *res)
{
    search s = {.c = cands, .n = n, .o = *o, .measure = measure, .arg = arg, .res = res};
    size_t un = n > 0 ? (size_t)n : 1;
    int rc;
    memset(res, 0, sizeof *res);
    res->best = -1;
    if ((rc = check_opts(&s, cands, measure)) != AT_OK)
        return rc;
    s.rng = o->rng_seed;
    res->n = n;
    res->us = malloc(un * sizeof *res->us);
    res->reps = calloc(un, sizeof *res->reps);
    res->from = malloc(un * sizeof *res->from);
    res->order = malloc(un * sizeof *res->order);
    res->rank = malloc(un * sizeof *res->rank);
    s.pool = malloc(un * sizeof *s.pool);
    s.pos = malloc(un * sizeof *s.pos);
    s.warm = malloc(un * sizeof *s.warm);
    s.set = malloc(un * sizeof *s.set);
    s.is_warm = calloc(un, 1);
    s.flag = calloc(un, 1);
    s.ent = malloc(un * sizeof *s.ent);
    if (!res->us || !res->reps || !res->from || !res->order || !res->rank || !s.pool || !s.pos || !s.warm ||
        !s.set || !s.is_warm || !s.flag || !s.ent) {
        rc = at_fail(AT_ERR_NOMEM, "strategy: out of memory for %d candidates", n);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        res->us[i] = NAN;
        res->from[i] = -1;
        s.pool[i] = s.pos[i] = i;
    }
    s.npool = n;
    for (int k = 0; k < o->nwarm; k++)
        if (!s.is_warm[o->warm[k]]) {
            s.is_warm[o->warm[k]] = 1;
            s.warm[s.nwarm++] = o->warm[k];
        }
    res->rungs = 1;
    static int (*const runs[])(search *) = {run_exhaustive, run_random, run_anneal, run_halving};
    rc = runs[s.o.kind](&s); /* in at_strategy_kind order */
    /* the ranking, also after a failure part-way */
    memcpy(res->rank, res->order, (size_t)res->nmeasured * sizeof *res->rank);
    sort_by_time(&s, res->rank, res->nmeasured);
    if (res->nmeasured > 0 && isfinite(res->us[res->rank[0]]))
        res->best = res->rank[0];
done:
    free(s.pool);
    free(s.pos);
    free(s.warm);
    free(s.set);
    free(s.is_warm);
    free(s.flag);
    free(s.ent);
    free(s.nodes);
    free(s.nval);
    free(s.node_of);
    return rc;
}

void at_strategy_result_free(at_strategy_result *res)
{
    if (!res)
        return;
    free(res->us);
    free(res->reps);
    free(res->from);
    free(res->order);
    free(res->rank);
    memset(res, 0, sizeof *res);
    res->best = -1;
}
