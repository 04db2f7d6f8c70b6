/*
** spec.c — search specs: a Lua file that returns one table of strategies,
** run in a sandbox (sandbox.c), validated raw and expanded into candidates.
** Invariant: spec code runs only inside at_sandbox_pcall, and every failure
** comes back as a status with a "path:line:" text.
*/
#include "autotune.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#define MAX_FILE ((size_t)128 << 10) /* larger specs are refused: compiling is superlinear */
#define MAX_CANDIDATES 1000000.0
#define MAX_VALUES 4096      /* per parameter */
#define MAX_CONS 1000        /* per strategy */
#define MAX_CONS_TOTAL 10000 /* in all strategies */
#define MAX_SMEM (227 * 1024)
#define TEMPLATE_LEN 128 /* at_winner.template_name */
#define OP_LEN 32        /* at_key.op */
#define IDENT "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

/* [STRATEGY_NAMES] strategy.c's strategy_names, spelled again here so that
** the spec loader links alone (fuzz/run.sh builds it without strategy.c). */
static const char *const search_strategies[] = {"exhaustive", "random", "anneal", "halving", NULL};

typedef struct spec_param {
    char name[AT_NAME_LEN];
    int64_t *values;
    int nvalues;
} spec_param;

/* A constraint reads the candidate and the shape (scope ""), the shape only
** (scope "shape": it rules the whole strategy in or out before crossing),
** or one parameter and the shape (scope "TP_X": it cuts that parameter's
** values before crossing). The pre-crossing cuts keep exactly the
** candidates the constraint would have passed, so the live set is the same
** and the space counts only what is crossed. */
typedef struct spec_cons {
    char name[AT_NAME_LEN];
    at_sandbox_fn fn;
    char scope[AT_NAME_LEN];
} spec_cons;

typedef struct spec_strategy {
    char name[AT_NAME_LEN], kernel[AT_NAME_LEN], template_name[TEMPLATE_LEN];
    int nparams, ncons;
    spec_param params[AT_MAX_PARAMS];
    spec_cons *cons;
    at_sandbox_fn grid, block, smem;
    double size; /* candidates in its space, every value crossed */
    char cut[192]; /* the last expansion's pre-crossing cuts ("" for none) */
    int crossed;   /* and the candidates it crossed */
    int ruled_out; /* by a shape constraint (cut names it), or no value left */
} spec_strategy;

struct at_spec {
    at_sandbox *sb;
    char *path; /* the file path, or the chunk name of a string spec */
    char op[OP_LEN];
    char sha[65]; /* sha256 of the source text: part of the cache key */
    char search_strategy[16]; /* the timing phase's default strategy; "" when unset */
    int allow_spills;         /* allow_spills = true: candidates that spill are still timed */
    double min_occupancy;     /* min_occupancy = 0.25: lower ones are not timed (0: none) */
    int nstrategies;
    spec_strategy *strategies;
    at_sandbox_fn bytes;
};

/* A C function run protected (validation, expansion, bytes): what it is
** doing, for Lua errors, and the error that C itself found. */
typedef struct body {
    at_spec *sp;
    lua_State *L;
    const at_problem *pb;
    at_candidate *cands;
    const at_candidate *cur;
    const char *phase, *phase_name;
    char who[96]; /* "strategy 2 (splitk)" while validating it */
    double space; /* candidates in the strategies validated so far */
    int ncons;    /* their constraints */
    int status;
    char msg[768];
    double bytes;
    int ncands; /* candidates the expansion crossed */
} body;

/* ------------------------------------------------------------- bodies */

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF_LIKE(f, a)
#endif

/* Ends a body with an error that C found: the message stays in b (prefixed
** with b->who) and lua_error unwinds to run_body. C memory that the body
** allocated already belongs to the spec, so nothing leaks. */
static int body_fail(body *b, const char *fmt, ...) PRINTF_LIKE(2, 3);
static int body_fail(body *b, const char *fmt, ...)
{
    char text[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    snprintf(b->msg, sizeof b->msg, "%s%s%s", b->who, b->who[0] ? ": " : "", text);
    if (b->status == AT_OK)
        b->status = AT_ERR_SPEC;
    return lua_error(b->L); /* the object is unused: b->status wins */
}

/* Calls fn(b, args...) protected, with the nargs values on top as args: one
** entry point, named what in the whole instruction budget's message. */
static int run_body(at_spec *sp, lua_CFunction fn, body *b, int nargs, const char *what)
{
    lua_State *L = b->L = at_sandbox_state(sp->sb);
    lua_pushcfunction(L, fn);
    lua_pushlightuserdata(L, b);
    lua_rotate(L, -nargs - 2, 2);
    int status = at_sandbox_pcall(sp->sb, nargs + 1, 0, NULL, what);
    if (b->status != AT_OK)
        return at_sandbox_fail(sp->sb, b->status, b->msg);
    if (status == LUA_OK)
        return AT_OK;
    char where[512] = "", params[256] = "";
    if (b->cur)
        at_candidate_params_string(b->cur, params, sizeof params);
    if (b->phase && b->cur)
        snprintf(where, sizeof where, " (in %s%s%s%s of strategy %d (%s) at %s)", b->phase,
                 b->phase_name ? " '" : "", b->phase_name ? b->phase_name : "", b->phase_name ? "'" : "",
                 b->cur->strategy + 1, sp->strategies[b->cur->strategy].name,
                 params[0] ? params : "no params");
    else if (b->phase)
        snprintf(where, sizeof where, " (in %s)", b->phase);
    return at_sandbox_failure(sp->sb, status, where);
}

/* ------------------------------------------------------------ loading */
/* Validation reads the spec's tables raw (at_sandbox_rawfield): no
** metamethod, so no spec code, runs. */

static int is_ident(const char *s)
{
    return *s && !(*s >= '0' && *s <= '9') && !s[strspn(s, IDENT)];
}

static int is_param_name(const char *s) /* TP_[A-Z0-9_]+ */
{
    return strncmp(s, "TP_", 3) == 0 && s[3] && !s[3 + strspn(s + 3, &IDENT[26])];
}

/* Fails on a key of table t that is not in known: a typo ("contraints")
** would silently change the space. */
static void check_fields(body *b, int t, const char *const *known)
{
    lua_State *L = b->L;
    for (lua_pushnil(L); lua_next(L, t);) {
        lua_pop(L, 1);
        int ok = 0;
        for (int i = 0; lua_type(L, -1) == LUA_TSTRING && known[i]; i++)
            ok |= strcmp(lua_tostring(L, -1), known[i]) == 0;
        if (!ok)
            body_fail(b, "unknown field '%s'",
                      lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1));
    }
}

static int cmp_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* 1 with *twice set when v[0..n) holds a value twice (found in a sorted
** copy: pairwise, 4096 values in each of thousands of params are slow), 0
** when not, -1 when out of memory. */
static int find_repeat(const int64_t *v, int n, int64_t *twice)
{
    int64_t *s = malloc((size_t)n * sizeof *s);
    int i = 1;
    if (!s)
        return -1;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_int64);
    while (i < n && s[i] != s[i - 1])
        i++;
    *twice = i < n ? s[i] : 0;
    free(s);
    return i < n;
}

/* params[i] = {"TP_NAME", {v1, v2, ...}}, on top of the stack (popped). */
static void load_param(body *b, spec_strategy *st, int i)
{
    lua_State *L = b->L;
    int e = lua_gettop(L);
    spec_param *pm = &st->params[i - 1];
    if (!at_sandbox_is_list(L, e) || lua_rawlen(L, e) != 2)
        body_fail(b, "params[%d] must be a pair {\"TP_NAME\", {values...}}", i);
    lua_rawgeti(L, e, 1);
    const char *name = at_sandbox_tostring(L, AT_NAME_LEN);
    if (!name || !is_param_name(name))
        body_fail(b, "params[%d] name must match TP_[A-Z0-9_]+ (under %d chars)", i, AT_NAME_LEN);
    for (int j = 0; j < i - 1; j++)
        if (strcmp(st->params[j].name, name) == 0)
            body_fail(b, "params[%d] repeats %s", i, name);
    strcpy(pm->name, name);
    size_t n = lua_rawgeti(L, e, 2) == LUA_TTABLE ? lua_rawlen(L, -1) : 0;
    if (n == 0 || n > MAX_VALUES || !at_sandbox_is_list(L, -1))
        body_fail(b, "params[%d] (%s) values must be a list of 1..%d integers", i, name, MAX_VALUES);
    if (!(pm->values = malloc(n * sizeof *pm->values))) { /* the spec owns it at once */
        b->status = AT_ERR_NOMEM;
        body_fail(b, "out of memory");
    }
    for (int k = 0; k < (int)n; k++) {
        int isint = 0;
        lua_rawgeti(L, e + 2, k + 1);
        pm->values[k] = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
        lua_pop(L, 1);
        if (!isint)
            body_fail(b, "params[%d] (%s) values must be integers", i, name);
        pm->nvalues = k + 1;
    }
    int64_t twice;
    int rc = find_repeat(pm->values, pm->nvalues, &twice); /* a repeat would repeat candidates */
    if (rc > 0)
        body_fail(b, "params[%d] (%s) lists %lld twice", i, name, (long long)twice);
    if (rc < 0) {
        b->status = AT_ERR_NOMEM;
        body_fail(b, "out of memory");
    }
    lua_settop(L, e - 1);
}

/* constraints = {{name, function}, ...} or nil, on top of the stack (popped). */
static void load_constraints(body *b, spec_strategy *st)
{
    lua_State *L = b->L;
    int ct = lua_gettop(L), nil = lua_isnil(L, ct);
    if (!nil && !at_sandbox_is_list(L, ct))
        body_fail(b, "constraints must be a list of {name, function}");
    int n = nil ? 0 : (int)lua_rawlen(L, ct);
    if (n > MAX_CONS)
        body_fail(b, "more than %d constraints", MAX_CONS);
    b->ncons += n;
    if (b->ncons > MAX_CONS_TOTAL)
        body_fail(b, "more than %d constraints in all strategies", MAX_CONS_TOTAL);
    if (!(st->cons = calloc(n ? (size_t)n : 1, sizeof *st->cons))) {
        b->status = AT_ERR_NOMEM;
        body_fail(b, "out of memory");
    }
    for (int i = 1; i <= n; i++) {
        spec_cons *k = &st->cons[i - 1];
        lua_rawgeti(L, ct, i);
        size_t len = at_sandbox_is_list(L, -1) ? lua_rawlen(L, -1) : 0;
        if (len != 2 && len != 3)
            body_fail(b, "constraints[%d] must be {name, function} or {name, function, scope}", i);
        lua_rawgeti(L, ct + 1, 1);
        const char *name = at_sandbox_tostring(L, AT_NAME_LEN);
        if (!name || !is_ident(name))
            body_fail(b, "constraints[%d] name must be an identifier (under %d chars)", i, AT_NAME_LEN);
        for (int j = 0; j < i - 1; j++)
            if (strcmp(st->cons[j].name, name) == 0)
                body_fail(b, "constraint '%s' is named twice", name);
        strcpy(k->name, name);
        lua_rawgeti(L, ct + 1, 2);
        if (!at_sandbox_take_fn(b->sp->sb, &k->fn, 0))
            body_fail(b, "constraint '%s' must be a function", name);
        if (len == 3) { /* "shape", or the one parameter it reads */
            lua_rawgeti(L, ct + 1, 3);
            const char *scope = at_sandbox_tostring(L, AT_NAME_LEN);
            int known = scope && !strcmp(scope, "shape");
            for (int j = 0; scope && !known && j < st->nparams; j++)
                known = !strcmp(st->params[j].name, scope);
            if (!known)
                body_fail(b, "constraint '%s': scope must be \"shape\" or one of the strategy's params", name);
            strcpy(k->scope, scope);
        }
        st->ncons = i;
        lua_settop(L, ct);
    }
    lua_settop(L, ct - 1);
}

/* strategies[si], at stack index s. */
static void load_strategy(body *b, int s, int si)
{
    static const char *const known[] = {"name", "template", "kernel", "params", "constraints",
                                        "grid", "block",    "smem",   NULL};
    static const char *const fns[] = {"grid", "block", "smem"};
    lua_State *L = b->L;
    spec_strategy *st = &b->sp->strategies[si - 1];
    const char *str;
    if (lua_type(L, s) != LUA_TTABLE)
        body_fail(b, "strategy %d must be a table", si);
    at_sandbox_rawfield(L, s, "name");
    if (!(str = at_sandbox_tostring(L, AT_NAME_LEN)) || !is_ident(str))
        body_fail(b, "strategy %d: name must be an identifier (under %d chars)", si, AT_NAME_LEN);
    strcpy(st->name, str);
    snprintf(b->who, sizeof b->who, "strategy %d (%s)", si, st->name);
    for (int j = 0; j < si - 1; j++)
        if (strcmp(b->sp->strategies[j].name, st->name) == 0)
            body_fail(b, "name repeats strategy %d", j + 1);
    check_fields(b, s, known);
    at_sandbox_rawfield(L, s, "kernel");
    if (!(str = at_sandbox_tostring(L, AT_NAME_LEN)) || !is_ident(str))
        body_fail(b, "kernel must be an identifier (under %d chars)", AT_NAME_LEN);
    strcpy(st->kernel, str);
    at_sandbox_rawfield(L, s, "template");
    if (!(str = at_sandbox_tostring(L, TEMPLATE_LEN)))
        body_fail(b, "template must be a path string (under %d chars)", TEMPLATE_LEN);
    if (str[0] == '/' || str[0] == '\\' || strstr(str, ".."))
        body_fail(b, "template path '%s' leaves the templates folder", str);
    strcpy(st->template_name, str);
    if (at_sandbox_rawfield(L, s, "params") != LUA_TTABLE || !at_sandbox_is_list(L, -1))
        body_fail(b, "params must be a list of {\"TP_NAME\", {values...}}");
    int p = lua_gettop(L), np = (int)lua_rawlen(L, p);
    if (np > AT_MAX_PARAMS)
        body_fail(b, "more than %d params", AT_MAX_PARAMS);
    st->size = 1;
    for (int i = 1; i <= np; i++) {
        lua_rawgeti(L, p, i);
        load_param(b, st, i);
        st->nparams = i;
        st->size *= st->params[i - 1].nvalues;
        if (b->space + st->size > MAX_CANDIDATES) /* before reading more */
            body_fail(b, "space too large: %.0f candidates%s (limit %.0f)", b->space + st->size,
                      b->space > 0 ? " with the strategies before" : "", MAX_CANDIDATES);
    }
    b->space += st->size;
    at_sandbox_rawfield(L, s, "constraints");
    load_constraints(b, st);
    at_sandbox_fn *dst[] = {&st->grid, &st->block, &st->smem};
    for (int i = 0; i < 3; i++) {
        at_sandbox_rawfield(L, s, fns[i]);
        if (!at_sandbox_take_fn(b->sp->sb, dst[i], i == 2))
            body_fail(b, "%s must be a function%s", fns[i], i == 2 ? " (or absent)" : "");
    }
    b->who[0] = '\0';
    lua_settop(L, s);
}

/* Validates the table the chunk returned (argument 2) into the spec. */
static int load_body(lua_State *L)
{
    static const char *const known[] = {"op", "strategies", "bytes", "search_strategy", "allow_spills",
                                        "min_occupancy", NULL};
    body *b = lua_touserdata(L, 1);
    at_spec *sp = b->sp;
    const char *str;
    luaL_checkstack(L, 40, NULL);
    if (lua_type(L, 2) != LUA_TTABLE)
        body_fail(b, "the chunk must return a table (it returned %s)", luaL_typename(L, 2));
    check_fields(b, 2, known);
    at_sandbox_rawfield(L, 2, "op");
    if (!(str = at_sandbox_tostring(L, OP_LEN)) || !is_ident(str))
        body_fail(b, "op must be an identifier (under %d chars)", OP_LEN);
    strcpy(sp->op, str);
    /* search_strategy = "halving": how the timing phase searches this space
    ** unless --strategy says otherwise (strategy.h) */
    if (at_sandbox_rawfield(L, 2, "search_strategy") != LUA_TNIL) {
        int named = 0;
        str = at_sandbox_tostring(L, sizeof sp->search_strategy);
        for (int i = 0; str && search_strategies[i]; i++)
            named |= strcmp(str, search_strategies[i]) == 0;
        if (!named)
            body_fail(b, "search_strategy must be one of \"exhaustive\", \"random\", \"anneal\", \"halving\" "
                         "(got %s)",
                      at_sandbox_describe(L, -1));
        strcpy(sp->search_strategy, str);
    }
    lua_pop(L, 1);
    /* allow_spills = true: candidates whose registers spill are still timed */
    int t = at_sandbox_rawfield(L, 2, "allow_spills");
    if (t != LUA_TNIL && t != LUA_TBOOLEAN)
        body_fail(b, "allow_spills must be true or false (got %s)", at_sandbox_describe(L, -1));
    sp->allow_spills = lua_toboolean(L, -1);
    lua_pop(L, 1);
    /* min_occupancy = 0.25: compiled candidates estimated below it are not timed */
    t = at_sandbox_rawfield(L, 2, "min_occupancy");
    if (t != LUA_TNIL) {
        lua_Number v = t == LUA_TNUMBER ? lua_tonumber(L, -1) : -1.0;
        if (!(v >= 0.0 && v <= 1.0))
            body_fail(b, "min_occupancy must be a number from 0 to 1 (got %s)", at_sandbox_describe(L, -1));
        sp->min_occupancy = (double)v;
    }
    lua_pop(L, 1);
    if (at_sandbox_rawfield(L, 2, "strategies") != LUA_TTABLE || !at_sandbox_is_list(L, -1))
        body_fail(b, "strategies must be a list of tables");
    int ss = lua_gettop(L), n = (int)lua_rawlen(L, ss);
    if (n == 0 || n > 1000)
        body_fail(b, "%s", n ? "more than 1000 strategies" : "the spec has no strategies");
    if (!(sp->strategies = calloc((size_t)n, sizeof *sp->strategies))) {
        b->status = AT_ERR_NOMEM;
        body_fail(b, "out of memory");
    }
    sp->nstrategies = n; /* at_spec_free reads them all after any failure */
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, ss, i);
        load_strategy(b, lua_gettop(L), i);
        lua_settop(L, ss);
    }
    at_sandbox_rawfield(L, 2, "bytes");
    if (!at_sandbox_take_fn(sp->sb, &sp->bytes, 0))
        body_fail(b, "bytes must be a function(shape)");
    return 0;
}

/* Runs the chunk src in a fresh sandbox and validates what it returns. */
static int load_chunk(const char *src, size_t len, const char *chunkname, const char *display, const char *op,
                      at_spec **out)
{
    size_t dlen = strlen(display);
    at_spec *sp = calloc(1, sizeof *sp);
    if (!sp || !(sp->path = malloc(dlen + 1))) {
        free(sp);
        return at_fail(AT_ERR_NOMEM, "spec: out of memory");
    }
    memcpy(sp->path, display, dlen + 1);
    at_sha256_hex(src, len, sp->sha);
    int rc = len > MAX_FILE ? at_fail(AT_ERR_SPEC, "%s: spec larger than %zu KiB", display, MAX_FILE >> 10)
                            : at_sandbox_open(sp->path, &sp->sb);
    if (rc == AT_OK)
        rc = at_sandbox_run(sp->sb, src, len, chunkname, op);
    if (rc == AT_OK) {
        body b = {.sp = sp};
        rc = run_body(sp, load_body, &b, 1, "load");
    }
    if (rc != AT_OK) {
        at_spec_free(sp);
        return rc;
    }
    *out = sp;
    return AT_OK;
}

int at_spec_load_string(const char *source, const char *chunkname, at_spec **out)
{
    if (out)
        *out = NULL;
    if (!out || !source)
        return at_fail(AT_ERR_USAGE, "spec: NULL argument to at_spec_load_string");
    char name[LUA_IDSIZE]; /* Lua shows at most this much of "=name" */
    snprintf(name, sizeof name, "=%s", chunkname && chunkname[0] ? chunkname : "spec");
    return load_chunk(source, strlen(source), name, name + 1, NULL, out);
}

int at_spec_load(const char *path, at_spec **out)
{
    return at_spec_load_op(path, NULL, out);
}

int at_spec_load_op(const char *path, const char *op, at_spec **out)
{
    if (out)
        *out = NULL;
    if (!out || !path)
        return at_fail(AT_ERR_USAGE, "spec: NULL argument to at_spec_load");
    int rc;
    char *buf = NULL, *name = NULL;
    /* O_NONBLOCK: opening a FIFO that no process writes would otherwise wait
    ** forever; cleared again so a pipe that has a writer (--spec <(gen)) is
    ** read to its end, and one without reads as empty. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    FILE *f = fd >= 0 && fcntl(fd, F_SETFL, 0) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        rc = at_fail(AT_ERR_IO, "cannot read spec %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    if (!(buf = malloc(MAX_FILE + 1)) || !(name = malloc(strlen(path) + 2))) {
        rc = at_fail(AT_ERR_NOMEM, "spec: out of memory");
        goto done;
    }
    size_t len = fread(buf, 1, MAX_FILE + 1, f);
    if (ferror(f))
        rc = at_fail(AT_ERR_IO, "cannot read spec %s: %s", path, strerror(errno));
    else {
        name[0] = '@'; /* Lua then reports "path:line:" */
        strcpy(name + 1, path);
        rc = load_chunk(buf, len, name, path, op, out);
    }
done:
    fclose(f);
    free(buf);
    free(name);
    return rc;
}

void at_spec_free(at_spec *spec)
{
    if (!spec)
        return;
    at_sandbox_close(spec->sb);
    for (int i = 0; i < spec->nstrategies; i++) {
        for (int j = 0; j < AT_MAX_PARAMS; j++)
            free(spec->strategies[i].params[j].values);
        free(spec->strategies[i].cons);
    }
    free(spec->strategies);
    free(spec->path);
    free(spec);
}

/* ----------------------------------------------------------- accessors */
/* NULL for a NULL spec or an index outside 0..nstrategies-1. */

const char *at_spec_sha256(const at_spec *spec)
{
    return spec ? spec->sha : NULL;
}

const char *at_spec_op(const at_spec *spec)
{
    return spec ? spec->op : NULL;
}

const char *at_spec_search_strategy(const at_spec *spec)
{
    return spec && spec->search_strategy[0] ? spec->search_strategy : NULL;
}

int at_spec_allow_spills(const at_spec *spec)
{
    return spec ? spec->allow_spills : 0;
}

double at_spec_min_occupancy(const at_spec *spec)
{
    return spec ? spec->min_occupancy : 0.0;
}

int at_spec_nstrategies(const at_spec *spec)
{
    return spec ? spec->nstrategies : 0;
}

#define STRATEGY_FIELD(i, field)                                                                             \
    (spec && (i) >= 0 && (i) < spec->nstrategies ? spec->strategies[i].field : NULL)

const char *at_spec_strategy_name(const at_spec *spec, int i)
{
    return STRATEGY_FIELD(i, name);
}

const char *at_spec_strategy_template(const at_spec *spec, int i)
{
    return STRATEGY_FIELD(i, template_name);
}

const char *at_spec_strategy_kernel(const at_spec *spec, int i)
{
    return STRATEGY_FIELD(i, kernel);
}

/* ---------------------------------------------------------- expansion */

static void set_int(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

/* Pushes a fresh shape table: no call can change what the next one sees. */
static void push_shape(lua_State *L, const at_spec *sp, const at_problem *pb)
{
    int rank2 = pb->shape.rank == 2;
    lua_createtable(L, 0, 10);
    set_int(L, "M", pb->shape.M);
    set_int(L, "K", pb->shape.K);
    set_int(L, "N", rank2 ? 0 : pb->shape.N);
    if (rank2) {
        set_int(L, "T", pb->shape.M);
        set_int(L, "H", pb->shape.K);
    }
    lua_pushstring(L, pb->op ? pb->op : sp->op);
    lua_setfield(L, -2, "op");
    lua_pushstring(L, pb->dtype == AT_FP16 ? "fp16" : "bf16");
    lua_setfield(L, -2, "dtype");
    set_int(L, "elem", 2);
    set_int(L, "arch", pb->arch);
    set_int(L, "sms", pb->sms);
}

/* body_fail for the current candidate: "src:line: strategy N (name): ... at PARAMS". */
static int cand_fail(body *b, const at_sandbox_fn *fn, const char *fmt, ...) PRINTF_LIKE(3, 4);
static int cand_fail(body *b, const at_sandbox_fn *fn, const char *fmt, ...)
{
    char what[400], params[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    at_candidate_params_string(b->cur, params, sizeof params);
    return body_fail(b, "%s: strategy %d (%s): %s at %s", fn->where, b->cur->strategy + 1,
                     b->sp->strategies[b->cur->strategy].name, what, params[0] ? params : "no params");
}

/* Reads the {x [, y [, z]]} that grid or block left on top into d (popped). */
static void take_dims(body *b, const at_sandbox_fn *fn, const char *what, unsigned d[3])
{
    static const long long grid_max[3] = {2147483647LL, 65535, 65535};
    static const long long block_max[3] = {1024, 1024, 64};
    const long long *max = what[0] == 'g' ? grid_max : block_max;
    lua_State *L = b->L;
    int t = lua_gettop(L);
    if (lua_type(L, t) != LUA_TTABLE || lua_rawlen(L, t) > 3 || lua_rawlen(L, t) < 1)
        cand_fail(b, fn, "%s must return a table of 1-3 positive integers (got %s)", what,
                  at_sandbox_describe(L, t));
    for (int i = 0; i < 3; i++) {
        int isint = 0, ty = lua_rawgeti(L, t, i + 1);
        lua_Integer v = ty == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
        if (ty == LUA_TNIL && i > 0) /* a missing y or z is 1 */
            v = isint = 1;
        if (!isint || v < 1 || v > max[i])
            cand_fail(b, fn, "%s[%d] = %s is not an integer in 1..%lld (CUDA limit)", what, i + 1,
                      at_sandbox_describe(L, -1), max[i]);
        lua_pop(L, 1);
        d[i] = (unsigned)v;
    }
    lua_pop(L, 1);
    unsigned long long threads = (unsigned long long)d[0] * d[1] * d[2];
    if (what[0] == 'b' && threads > 1024)
        cand_fail(b, fn, "block {%u, %u, %u} has %llu threads (CUDA limit 1024)", d[0], d[1], d[2], threads);
}

/* Evaluates candidate k (params filled in): constraints, then launch shape. */
static void eval_candidate(body *b, const spec_strategy *st, at_candidate *k)
{
    lua_State *L = b->L;
    int base = lua_gettop(L);
    lua_createtable(L, 0, k->nparams);
    for (int i = 0; i < k->nparams; i++)
        set_int(L, k->params[i].name, k->params[i].value);
    push_shape(L, b->sp, b->pb);
    b->cur = k;
    b->phase = "constraint";
    for (int i = 0; i < st->ncons; i++) {
        const spec_cons *ct = &st->cons[i];
        b->phase_name = ct->name;
        lua_pushvalue(L, base + 1);
        lua_pushvalue(L, base + 2);
        at_sandbox_call_fn(b->sp->sb, &ct->fn, 2);
        int t = lua_type(L, -1);
        if (t == LUA_TBOOLEAN && lua_toboolean(L, -1)) {
            lua_pop(L, 1);
            continue;
        }
        if (t != LUA_TNIL && t != LUA_TBOOLEAN && t != LUA_TSTRING)
            cand_fail(b, &ct->fn,
                      "constraint '%s' returned a %s (expected true, false, nil "
                      "or a reason string)",
                      ct->name, lua_typename(L, t));
        snprintf(k->pruned_by, sizeof k->pruned_by, "%s", ct->name);
        if (t == LUA_TSTRING) /* %.*s: "%s" would measure a long reason whole */
            snprintf(k->prune_reason, sizeof k->prune_reason, "%.*s", (int)sizeof k->prune_reason - 1,
                     lua_tostring(L, -1));
        at_sandbox_one_line(k->prune_reason); /* printed in the table, stored in the cache */
        lua_settop(L, base);
        return;
    }
    b->phase_name = NULL;
    const at_sandbox_fn *fns[3] = {&st->grid, &st->block, &st->smem};
    static const char *const names[3] = {"grid", "block", "smem"};
    for (int i = 0; i < 3 && fns[i]->ref != LUA_NOREF; i++) {
        b->phase = names[i];
        lua_pushvalue(L, base + 1);
        lua_pushvalue(L, base + 2);
        at_sandbox_call_fn(b->sp->sb, fns[i], 2);
        if (i < 2)
            take_dims(b, fns[i], names[i], i ? k->block : k->grid);
    }
    if (st->smem.ref != LUA_NOREF) { /* its result is still on top */
        int isint = 0;
        lua_Integer v = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
        if (!isint || v < 0 || v > MAX_SMEM)
            cand_fail(b, &st->smem, "smem must return an integer in 0..%d (got %s)", MAX_SMEM,
                      at_sandbox_describe(L, -1));
        k->smem = (unsigned)v;
    }
    lua_settop(L, base);
}

/* Runs the constraints of scope `scope` with p = {param = value} (or {} for
** "shape"): NULL when all pass, else the first failing one's name, its
** reason (if it gave one) into why[len]. */
static const char *scoped_fail(body *b, spec_strategy *st, const char *scope, int64_t value, char *why,
                               size_t len)
{
    lua_State *L = b->L;
    int base = lua_gettop(L);
    static at_candidate none; /* messages name "no params" */
    b->cur = &none;
    b->phase = "constraint";
    for (int i = 0; i < st->ncons; i++) {
        const spec_cons *ct = &st->cons[i];
        if (strcmp(ct->scope, scope))
            continue;
        b->phase_name = ct->name;
        lua_createtable(L, 0, 1);
        if (strcmp(scope, "shape"))
            set_int(L, scope, value);
        push_shape(L, b->sp, b->pb);
        at_sandbox_call_fn(b->sp->sb, &ct->fn, 2);
        int t = lua_type(L, -1);
        if (t == LUA_TBOOLEAN && lua_toboolean(L, -1)) {
            lua_settop(L, base);
            continue;
        }
        if (t != LUA_TNIL && t != LUA_TBOOLEAN && t != LUA_TSTRING)
            body_fail(b, "%s: constraint '%s' returned a %s (expected true, false, nil or a reason string)",
                      ct->fn.where, ct->name, lua_typename(L, t));
        snprintf(why, len, "%.*s", (int)len - 1, t == LUA_TSTRING ? lua_tostring(L, -1) : "");
        at_sandbox_one_line(why);
        lua_settop(L, base);
        b->phase_name = NULL;
        return ct->name;
    }
    b->phase_name = NULL;
    return NULL;
}

/* The values of st's params that pass their one-parameter constraints
** (keep[i][v]), and st->cut saying what was not crossed. 0 when the
** strategy is ruled out for the shape. */
static int precross(body *b, spec_strategy *st, unsigned char keep[AT_MAX_PARAMS][MAX_VALUES])
{
    char why[128];
    size_t used = 0;
    st->cut[0] = '\0';
    st->ruled_out = 1;
    const char *name = scoped_fail(b, st, "shape", 0, why, sizeof why);
    if (name) {
        snprintf(st->cut, sizeof st->cut, "%s", name);
        return 0;
    }
    for (int i = 0; i < st->nparams; i++) {
        const spec_param *pm = &st->params[i];
        int kept = 0;
        const char *by = NULL;
        for (int v = 0; v < pm->nvalues; v++) {
            const char *n = scoped_fail(b, st, pm->name, pm->values[v], why, sizeof why);
            keep[i][v] = n == NULL;
            kept += keep[i][v];
            if (n && !by)
                by = n;
        }
        if (!kept) {
            snprintf(st->cut, sizeof st->cut, "no %s passes %s", pm->name, by);
            return 0;
        }
        if (kept == pm->nvalues || used + 1 >= sizeof st->cut)
            continue;
        used += (size_t)snprintf(st->cut + used, sizeof st->cut - used, "%s%s", used ? ", " : "", pm->name);
        for (int v = 0, first = 1; v < pm->nvalues && used + 1 < sizeof st->cut; v++)
            if (!keep[i][v]) {
                used += (size_t)snprintf(st->cut + used, sizeof st->cut - used, "%s%lld", first ? " " : ",",
                                         (long long)pm->values[v]);
                first = 0;
            }
        if (used + 1 < sizeof st->cut)
            used += (size_t)snprintf(st->cut + used, sizeof st->cut - used, " (%s)", by);
    }
    st->ruled_out = 0;
    return 1;
}

static int expand_body(lua_State *L)
{
    body *b = lua_touserdata(L, 1);
    at_candidate *k = b->cands;
    static unsigned char keep[AT_MAX_PARAMS][MAX_VALUES];
    luaL_checkstack(L, 40, NULL);
    for (int s = 0; s < b->sp->nstrategies; s++) {
        spec_strategy *st = &b->sp->strategies[s];
        at_candidate *first = k;
        int idx[AT_MAX_PARAMS] = {0}, i;
        st->crossed = 0;
        if (!precross(b, st, keep))
            continue;
        for (i = 0; i < st->nparams; i++) /* the first kept value of each */
            while (!keep[i][idx[i]])
                idx[i]++;
        do {
            k->strategy = s;
            k->nparams = st->nparams;
            for (i = 0; i < st->nparams; i++) {
                memcpy(k->params[i].name, st->params[i].name, AT_NAME_LEN);
                k->params[i].value = st->params[i].values[idx[i]];
            }
            eval_candidate(b, st, k++);
            /* an odometer over the kept values: the last param varies fastest */
            for (i = st->nparams - 1; i >= 0; i--) {
                do
                    idx[i]++;
                while (idx[i] < st->params[i].nvalues && !keep[i][idx[i]]);
                if (idx[i] < st->params[i].nvalues)
                    break;
                for (idx[i] = 0; !keep[i][idx[i]];)
                    idx[i]++;
            }
        } while (i >= 0);
        st->crossed = (int)(k - first);
    }
    b->ncands = (int)(k - b->cands);
    return 0;
}

int at_spec_expand(at_spec *spec, const at_problem *pb, at_candidate **out, int *count)
{
    if (out)
        *out = NULL;
    if (count)
        *count = 0;
    if (!spec || !pb || !out || !count)
        return at_fail(AT_ERR_USAGE, "spec: NULL argument to at_spec_expand");
    double total = 0;
    for (int s = 0; s < spec->nstrategies; s++)
        total += spec->strategies[s].size;
    if (total < 1) /* load refuses these already */
        return at_fail(AT_ERR_SPEC, "%s: the search space is empty", spec->path);
    if (total > MAX_CANDIDATES)
        return at_fail(AT_ERR_SPEC, "%s: space too large: %.0f candidates (limit %.0f)", spec->path, total,
                       MAX_CANDIDATES);
    at_candidate *cands = calloc((size_t)total, sizeof *cands);
    if (!cands)
        return at_fail(AT_ERR_NOMEM, "spec: cannot allocate %.0f candidates", total);
    body b = {.sp = spec, .pb = pb, .cands = cands};
    int rc = run_body(spec, expand_body, &b, 0, "expansion");
    if (rc != AT_OK) {
        free(cands);
        return rc;
    }
    *out = cands;
    *count = b.ncands;
    return AT_OK;
}

/* Ops whose spec is a file named after another: one text serves a family,
** told its op through the chunk's `...` (at_spec_load_op). */
static const struct {
    const char *op, *file;
} SPEC_FILES[] = {
    {"gemv_add", "gemv"}, /* the GEMV space with TP_ADD=1 */
    {"rmsnorm_gemv", "gemv"}, /* the fused ops: TP_NORM / TP_SWIGLU set */
    {"gemma_rmsnorm_gemv", "gemv"},
    {"gemv_swiglu", "gemv"},
    {"rmsnorm_gemv_swiglu", "gemv"},
    {"gemma_rmsnorm_gemv_swiglu", "gemv"},
    {"add_rmsnorm_gemv", "gemv"}, /* TP_RES: the residual-add forms */
    {"add_gemma_rmsnorm_gemv", "gemv"},
    {"rmsnorm", "norm"},
    {"add_rmsnorm", "norm"},
    {"gemma_rmsnorm", "norm"},
    {"add_gemma_rmsnorm", "norm"},
};

void at_spec_default_path(const char *home, const char *op, char *buf, size_t len)
{
    const char *file = op ? op : "";
    for (size_t i = 0; i < sizeof SPEC_FILES / sizeof SPEC_FILES[0]; i++)
        if (strcmp(file, SPEC_FILES[i].op) == 0)
            file = SPEC_FILES[i].file;
    snprintf(buf, len, "%s/search/%s.lua", home, file);
}

void at_spec_space_text(const at_spec *spec, char *buf, size_t len)
{
    size_t used = 0;
    if (!len)
        return;
    buf[0] = '\0';
    /* the crossed; the strategies ruled out; the values cut */
    for (int pass = 0; pass < 3; pass++) {
        int any = 0;
        for (int s = 0; spec && s < spec->nstrategies && used + 1 < len; s++) {
            const spec_strategy *st = &spec->strategies[s];
            const char *sep = any ? ", " : pass == 0 ? "" : pass == 1 ? "; ruled out: " : "; cut: ";
            int n = 0;
            if (pass == 0 && st->crossed)
                n = snprintf(buf + used, len - used, "%s%s %d", sep, st->name, st->crossed);
            else if (pass == 1 && st->ruled_out && st->cut[0])
                n = snprintf(buf + used, len - used, "%s%s (%s)", sep, st->name, st->cut);
            else if (pass == 2 && !st->ruled_out && st->cut[0])
                n = snprintf(buf + used, len - used, "%s%s %s", sep, st->name, st->cut);
            if (n > 0) {
                used += (size_t)n;
                any = 1;
            }
        }
    }
}

static int bytes_body(lua_State *L)
{
    body *b = lua_touserdata(L, 1);
    b->phase = "bytes";
    push_shape(L, b->sp, b->pb);
    at_sandbox_call_fn(b->sp->sb, &b->sp->bytes, 1);
    double v = lua_type(L, -1) == LUA_TNUMBER ? (double)lua_tonumber(L, -1) : NAN;
    if (!(v > 0) || !isfinite(v))
        body_fail(b, "%s: bytes must return a positive number (got %s)", b->sp->bytes.where,
                  at_sandbox_describe(L, -1));
    b->bytes = v;
    return 0;
}

int at_spec_bytes(at_spec *spec, const at_problem *pb, double *bytes)
{
    if (bytes)
        *bytes = 0;
    if (!spec || !pb || !bytes)
        return at_fail(AT_ERR_USAGE, "spec: NULL argument to at_spec_bytes");
    body b = {.sp = spec, .pb = pb};
    int rc = run_body(spec, bytes_body, &b, 0, "bytes call");
    if (rc == AT_OK)
        *bytes = b.bytes;
    return rc;
}

/* ---------------------------------------------------------- candidates */

void at_candidate_params_string(const at_candidate *c, char *buf, size_t len)
{
    size_t used = 0;
    if (!buf || len == 0)
        return;
    buf[0] = '\0';
    for (int i = 0; c && i < c->nparams && used + 1 < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%s=%lld", i ? " " : "", c->params[i].name,
                         (long long)c->params[i].value);
        if (n < 0)
            break;
        used += (size_t)n; /* may pass len on truncation: the loop test stops */
    }
}

int64_t at_candidate_param(const at_candidate *c, const char *name, int64_t fallback)
{
    for (int i = 0; c && name && i < c->nparams; i++)
        if (strcmp(c->params[i].name, name) == 0)
            return c->params[i].value;
    return fallback;
}
