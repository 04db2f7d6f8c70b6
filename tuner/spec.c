/*
** spec.c — search specs: a Lua file that returns one table of strategies, run
** in a sandbox (safe libraries only, text-only load, instruction and memory
** limits) and expanded into candidates. Invariant: every call into Lua is a
** lua_pcall, and every failure comes back as a status with a "path:line:" text.
*/
#include "autotune.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#define MEM_LIMIT ((size_t)64 << 20) /* bytes one spec's Lua state may hold */
#define STEP_LIMIT 50000000LL        /* instructions per call into Lua */
#define HOOK_EVERY 1000              /* instructions between count hooks */
#define MAX_FILE ((size_t)8 << 20)   /* larger spec files are refused */
#define MAX_CANDIDATES 1000000.0
#define MAX_VALUES 4096 /* per parameter */
#define MAX_SMEM (227 * 1024)
#define TEMPLATE_LEN 128 /* at_winner.template_name */
#define OP_LEN 24        /* at_key.op */
#define WHERE_LEN (LUA_IDSIZE + 16)
#define IDENT "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

enum { TRIP_NONE, TRIP_STEPS, TRIP_MEM };

/* The allocator's ud, so it lives inside at_spec and never moves. */
typedef struct sandbox {
    size_t used, limit;
    long long steps;
    int tripped;     /* TRIP_*: a limit fired during this call */
    int mem_refused; /* the allocator refused a block during this call */
    int line;        /* line being run (line hook): a memory error has none */
    const char *src; /* its chunk: the called function's, then the count hook's */
    char src_buf[LUA_IDSIZE], mem_where[WHERE_LEN], trip_msg[256];
} sandbox;

typedef struct spec_fn {
    int ref;               /* registry reference; LUA_NOREF when absent */
    int line;              /* line defined */
    char src[LUA_IDSIZE];  /* chunk, as Lua names it in messages */
    char where[WHERE_LEN]; /* "src:line" */
} spec_fn;

typedef struct spec_param {
    char name[AT_NAME_LEN];
    int64_t *values;
    int nvalues;
} spec_param;

typedef struct spec_cons {
    char name[AT_NAME_LEN];
    spec_fn fn;
} spec_cons;

typedef struct spec_strategy {
    char name[AT_NAME_LEN], kernel[AT_NAME_LEN], template_name[TEMPLATE_LEN];
    int nparams, ncons;
    spec_param params[AT_MAX_PARAMS];
    spec_cons *cons;
    spec_fn grid, block, smem;
    double size; /* candidates in its space */
} spec_strategy;

struct at_spec {
    sandbox sb;
    lua_State *L;
    char *path; /* the file path, or the chunk name of a string spec */
    char op[OP_LEN];
    int nstrategies;
    spec_strategy *strategies;
    spec_fn bytes;
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
    int status;
    char msg[768];
    double bytes;
} body;

/* ------------------------------------------------------------ sandbox */

static void *sb_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    sandbox *sb = ud;
    size_t old = ptr ? osize : 0; /* with ptr NULL, osize is a type tag */
    if (nsize == 0) {
        sb->used -= old;
        free(ptr);
        return NULL;
    }
    if (nsize > old && nsize - old > sb->limit - sb->used) {
        if (!sb->mem_refused) /* the error Lua raises for this has no position */
            snprintf(sb->mem_where, sizeof sb->mem_where, sb->line > 0 ? "%s:%d" : "%s",
                     sb->src ? sb->src : "", sb->line);
        sb->mem_refused = 1;
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (!p)
        return nsize <= old ? ptr : NULL; /* Lua assumes shrinking never fails */
    sb->used = sb->used - old + nsize;
    return p;
}

static sandbox *sb_of(lua_State *L)
{
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return ud;
}

/* Before each call into Lua: a fresh instruction budget; src names the chunk. */
static void sb_reset(sandbox *sb, const char *src)
{
    sb->steps = 0;
    sb->tripped = TRIP_NONE;
    sb->mem_refused = 0;
    sb->line = 0;
    sb->src = src;
}

/* Count events enforce the instruction limit (and note the chunk); line
** events note the line, both for memory errors. */
static void sb_hook(lua_State *L, lua_Debug *ar)
{
    sandbox *sb = sb_of(L);
    if (ar->event == LUA_HOOKLINE) {
        sb->line = ar->currentline;
        return;
    }
    lua_getinfo(L, "Sl", ar);
    snprintf(sb->src_buf, sizeof sb->src_buf, "%s", ar->short_src);
    sb->src = sb->src_buf;
    sb->steps += HOOK_EVERY;
    if (sb->steps <= STEP_LIMIT && sb->tripped != TRIP_STEPS)
        return;
    if (sb->tripped != TRIP_STEPS)
        snprintf(sb->trip_msg, sizeof sb->trip_msg,
                 "%s:%d: instruction limit exceeded (%lld instructions in one call)",
                 ar->short_src, ar->currentline, STEP_LIMIT);
    sb->tripped = TRIP_STEPS;
    lua_pushstring(L, sb->trip_msg);
    lua_error(L);
}

/* A memory error that the limit caused (not malloc) becomes a trip. */
static void sb_mem_trip(sandbox *sb, int status)
{
    if (status == LUA_ERRMEM && sb->mem_refused && sb->tripped == TRIP_NONE) {
        snprintf(sb->trip_msg, sizeof sb->trip_msg, "%s%smemory limit exceeded (%zu MiB)",
                 sb->mem_where, sb->mem_where[0] ? ": " : "", sb->limit >> 20);
        sb->tripped = TRIP_MEM;
    }
}

/* pcall and xpcall: the originals, except that a limit error cannot be
** caught (else `while true do pcall(loop) end` would never stop). */
static int sb_finish_pcall(lua_State *L, int status, int slot)
{
    sandbox *sb = sb_of(L);
    sb_mem_trip(sb, status);
    if (sb->tripped != TRIP_NONE) {
        lua_pushstring(L, sb->trip_msg);
        return lua_error(L);
    }
    luaL_checkstack(L, 1, NULL);
    lua_pushboolean(L, status == LUA_OK);
    if (slot)
        lua_replace(L, slot);
    else
        lua_insert(L, 1);
    return lua_gettop(L);
}

static int sb_pcall(lua_State *L)
{
    luaL_checkany(L, 1);
    return sb_finish_pcall(L, lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0), 0);
}

static int sb_xpcall(lua_State *L)
{
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2); /* [f, msgh, args...] -> [msgh, f, args...] */
    lua_copy(L, 1, 2);
    lua_replace(L, 1);
    return sb_finish_pcall(L, lua_pcall(L, lua_gettop(L) - 2, LUA_MULTRET, 1), 1);
}

/* Calls the original (upvalue 1) with this call's arguments. */
static int sb_forward(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* load(chunk [, name [, mode [, env]]]): text only; env defaults to the sandbox. */
static int sb_load(lua_State *L)
{
    lua_settop(L, 4);
    lua_pushliteral(L, "t");
    lua_replace(L, 3);
    if (lua_type(L, 4) != LUA_TTABLE) {
        lua_pushglobaltable(L);
        lua_replace(L, 4);
    }
    return sb_forward(L);
}

/* A __gc finalizer would run with hooks off, out of the instruction limit. */
static int sb_setmetatable(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "setmetatable: __gc is not allowed in a spec");
        lua_pop(L, 1);
    }
    return sb_forward(L);
}

/* string.rep("", 2^40) loops in C for hours without running an instruction. */
static int sb_rep(lua_State *L)
{
    size_t l = 0, lsep = 0;
    luaL_checklstring(L, 1, &l);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_optlstring(L, 3, "", &lsep);
    if (n > 0 && l + lsep == 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    return sb_forward(L);
}

static int sb_noop(lua_State *L)
{
    (void)L;
    return 0;
}

/* Opens the safe libraries and patches them (protected: it allocates). */
static int sb_open(lua_State *L)
{
    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base},       {LUA_STRLIBNAME, luaopen_string},
        {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
        {LUA_UTF8LIBNAME, luaopen_utf8},
    };
    /* library ("" = base), name, replacement closed over the original (or nil);
    ** table.move loops in C over any integer range. */
    static const struct { const char *lib, *name; lua_CFunction fn; } patches[] = {
        {"", "dofile", NULL},       {"", "loadfile", NULL},  {"", "print", sb_noop},
        {"", "pcall", sb_pcall},    {"", "xpcall", sb_xpcall}, {"", "load", sb_load},
        {"", "setmetatable", sb_setmetatable}, {"string", "dump", NULL},
        {"string", "rep", sb_rep},  {"table", "move", NULL},
    };
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        luaL_requiref(L, libs[i].name, libs[i].func, 1);
    for (size_t i = 0; i < sizeof patches / sizeof patches[0]; i++) {
        lua_settop(L, 0);
        lua_pushglobaltable(L);
        if (patches[i].lib[0])
            lua_getfield(L, -1, patches[i].lib);
        if (patches[i].fn) {
            lua_getfield(L, -1, patches[i].name);
            lua_pushcclosure(L, patches[i].fn, 1);
        } else
            lua_pushnil(L);
        lua_setfield(L, -2, patches[i].name);
    }
    /* A fixed seed: a spec using math.random expands the same way each run. */
    lua_getglobal(L, LUA_MATHLIBNAME);
    lua_getfield(L, -1, "randomseed");
    lua_pushinteger(L, 0);
    lua_call(L, 1, 0);
    return 0;
}

/* -------------------------------------------------------------- errors */

/* Records msg, prefixed with the spec's path unless it starts with it
** (errors without a position, code from load(), paths Lua shortened). */
static int spec_fail(const at_spec *sp, int status, const char *msg)
{
    size_t n = strlen(sp->path);
    if (strncmp(msg, sp->path, n) == 0 && msg[n] == ':')
        return at_fail(status, "%s", msg);
    return at_fail(status, "%s: %s", sp->path, msg);
}

/* Turns a failed lua_pcall (error object on top) into a status. */
static int lua_failure(at_spec *sp, int status, const char *context)
{
    lua_State *L = sp->L;
    char msg[1024];
    const char *text;
    sb_mem_trip(&sp->sb, status);
    if (sp->sb.tripped != TRIP_NONE)
        text = sp->sb.trip_msg;
    else if (status == LUA_ERRMEM) {
        lua_settop(L, 0);
        return at_fail(AT_ERR_NOMEM, "%s: lua: out of memory", sp->path);
    } else if (lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER)
        text = lua_tostring(L, -1);
    else /* not __tostring: it would run spec code unprotected */
        text = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, -1));
    snprintf(msg, sizeof msg, "%s%s", text, context);
    lua_settop(L, 0);
    return spec_fail(sp, AT_ERR_SPEC, msg);
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
/* Ends a body with an error that C found: the message stays in b (prefixed
** with b->who) and lua_error unwinds to run_body. C memory that the body
** allocated already belongs to the spec, so nothing leaks. */
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

/* Calls fn(b, args...) protected, with the nargs values on top as args. */
static int run_body(at_spec *sp, lua_CFunction fn, body *b, int nargs)
{
    lua_State *L = b->L = sp->L;
    lua_pushcfunction(L, fn);
    lua_pushlightuserdata(L, b);
    lua_rotate(L, -nargs - 2, 2);
    sb_reset(&sp->sb, NULL);
    int status = lua_pcall(L, nargs + 1, 0, 0);
    if (b->status != AT_OK) {
        lua_settop(L, 0);
        return spec_fail(sp, b->status, b->msg);
    }
    if (status == LUA_OK)
        return AT_OK;
    char where[512] = "", params[256] = "";
    if (b->cur)
        at_candidate_params_string(b->cur, params, sizeof params);
    if (b->phase && b->cur)
        snprintf(where, sizeof where, " (in %s%s%s%s of strategy %d (%s) at %s)", b->phase,
                 b->phase_name ? " '" : "", b->phase_name ? b->phase_name : "",
                 b->phase_name ? "'" : "", b->cur->strategy + 1,
                 sp->strategies[b->cur->strategy].name, params[0] ? params : "no params");
    else if (b->phase)
        snprintf(where, sizeof where, " (in %s)", b->phase);
    return lua_failure(sp, status, where);
}

/* ------------------------------------------------------------ loading */
/* Validation reads the spec's tables raw: no metamethod, so no spec code, runs. */

static int is_ident(const char *s)
{
    return *s && !(*s >= '0' && *s <= '9') && !s[strspn(s, IDENT)];
}

static int is_param_name(const char *s) /* TP_[A-Z0-9_]+ */
{
    return strncmp(s, "TP_", 3) == 0 && s[3] && !s[3 + strspn(s + 3, IDENT + 26)];
}

/* The value on top as a string of length 1..max-1 without NULs, or NULL. */
static const char *top_str(lua_State *L, size_t max)
{
    size_t len = 0;
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
    return s && len > 0 && len < max && strlen(s) == len ? s : NULL;
}

/* Pushes t[key]; returns its type. */
static int raw_field(lua_State *L, int t, const char *key)
{
    t = lua_absindex(L, t);
    lua_pushstring(L, key);
    return lua_rawget(L, t);
}

/* A table whose keys are exactly 1..#t, so that no entry is ignored. */
static int is_list(lua_State *L, int t)
{
    lua_Integer n = 0;
    t = lua_absindex(L, t);
    if (lua_type(L, t) != LUA_TTABLE)
        return 0;
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1))
        n++;
    return n == (lua_Integer)lua_rawlen(L, t);
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
            body_fail(b, "unknown field '%s'", lua_type(L, -1) == LUA_TSTRING
                                                   ? lua_tostring(L, -1)
                                                   : luaL_typename(L, -1));
    }
}

/* Pops a function into fn (nil allowed when optional); returns 0 when
** neither, for the caller to name the field. */
static int take_fn(lua_State *L, spec_fn *fn, int optional)
{
    lua_Debug ar;
    fn->ref = LUA_NOREF;
    if (lua_type(L, -1) != LUA_TFUNCTION) {
        int nil = lua_isnil(L, -1);
        lua_pop(L, 1);
        return nil && optional;
    }
    lua_pushvalue(L, -1);
    lua_getinfo(L, ">S", &ar);
    fn->line = ar.linedefined;
    snprintf(fn->src, sizeof fn->src, "%s", ar.short_src);
    snprintf(fn->where, sizeof fn->where, fn->line > 0 ? "%s:%d" : "%s", fn->src, fn->line);
    fn->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 1;
}

/* params[i] = {"TP_NAME", {v1, v2, ...}}, on top of the stack (popped). */
static void load_param(body *b, spec_strategy *st, int i)
{
    lua_State *L = b->L;
    int e = lua_gettop(L);
    spec_param *pm = &st->params[i - 1];
    if (!is_list(L, e) || lua_rawlen(L, e) != 2)
        body_fail(b, "params[%d] must be a pair {\"TP_NAME\", {values...}}", i);
    lua_rawgeti(L, e, 1);
    const char *name = top_str(L, AT_NAME_LEN);
    if (!name || !is_param_name(name))
        body_fail(b, "params[%d] name must match TP_[A-Z0-9_]+ (under %d chars)", i,
                  AT_NAME_LEN);
    for (int j = 0; j < i - 1; j++)
        if (strcmp(st->params[j].name, name) == 0)
            body_fail(b, "params[%d] repeats %s", i, name);
    strcpy(pm->name, name);
    lua_rawgeti(L, e, 2);
    size_t n = lua_rawlen(L, -1);
    if (!is_list(L, -1) || n == 0 || n > MAX_VALUES)
        body_fail(b, "params[%d] (%s) values must be a list of 1..%d integers", i, name,
                  MAX_VALUES);
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
        for (int j = 0; j < k; j++) /* a repeat would repeat candidates */
            if (pm->values[j] == pm->values[k])
                body_fail(b, "params[%d] (%s) lists %lld twice", i, name,
                          (long long)pm->values[k]);
        pm->nvalues = k + 1;
    }
    lua_settop(L, e - 1);
}

/* constraints = {{name, function}, ...} or nil, on top of the stack (popped). */
static void load_constraints(body *b, spec_strategy *st)
{
    lua_State *L = b->L;
    int ct = lua_gettop(L), nil = lua_isnil(L, ct);
    if (!nil && !is_list(L, ct))
        body_fail(b, "constraints must be a list of {name, function}");
    int n = nil ? 0 : (int)lua_rawlen(L, ct);
    if (n > 1000)
        body_fail(b, "more than 1000 constraints");
    if (!(st->cons = calloc(n ? (size_t)n : 1, sizeof *st->cons))) {
        b->status = AT_ERR_NOMEM;
        body_fail(b, "out of memory");
    }
    for (int i = 1; i <= n; i++) {
        spec_cons *k = &st->cons[i - 1];
        lua_rawgeti(L, ct, i);
        if (!is_list(L, -1) || lua_rawlen(L, -1) != 2)
            body_fail(b, "constraints[%d] must be {name, function}", i);
        lua_rawgeti(L, ct + 1, 1);
        const char *name = top_str(L, AT_NAME_LEN);
        if (!name || !is_ident(name))
            body_fail(b, "constraints[%d] name must be an identifier (under %d chars)", i,
                      AT_NAME_LEN);
        for (int j = 0; j < i - 1; j++)
            if (strcmp(st->cons[j].name, name) == 0)
                body_fail(b, "constraint '%s' is named twice", name);
        strcpy(k->name, name);
        lua_rawgeti(L, ct + 1, 2);
        if (!take_fn(L, &k->fn, 0))
            body_fail(b, "constraint '%s' must be a function", name);
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
    raw_field(L, s, "name");
    if (!(str = top_str(L, AT_NAME_LEN)) || !is_ident(str))
        body_fail(b, "strategy %d: name must be an identifier (under %d chars)", si,
                  AT_NAME_LEN);
    strcpy(st->name, str);
    snprintf(b->who, sizeof b->who, "strategy %d (%s)", si, st->name);
    for (int j = 0; j < si - 1; j++)
        if (strcmp(b->sp->strategies[j].name, st->name) == 0)
            body_fail(b, "name repeats strategy %d", j + 1);
    check_fields(b, s, known);
    raw_field(L, s, "kernel");
    if (!(str = top_str(L, AT_NAME_LEN)) || !is_ident(str))
        body_fail(b, "kernel must be an identifier (under %d chars)", AT_NAME_LEN);
    strcpy(st->kernel, str);
    raw_field(L, s, "template");
    if (!(str = top_str(L, TEMPLATE_LEN)))
        body_fail(b, "template must be a path string (under %d chars)", TEMPLATE_LEN);
    if (str[0] == '/' || str[0] == '\\' || strstr(str, ".."))
        body_fail(b, "template path '%s' leaves the templates folder", str);
    strcpy(st->template_name, str);
    if (raw_field(L, s, "params") != LUA_TTABLE || !is_list(L, -1))
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
    }
    raw_field(L, s, "constraints");
    load_constraints(b, st);
    spec_fn *dst[] = {&st->grid, &st->block, &st->smem};
    for (int i = 0; i < 3; i++) {
        raw_field(L, s, fns[i]);
        if (!take_fn(L, dst[i], i == 2))
            body_fail(b, "%s must be a function%s", fns[i], i == 2 ? " (or absent)" : "");
    }
    b->who[0] = '\0';
    lua_settop(L, s);
}

/* Validates the table the chunk returned (argument 2) into the spec. */
static int load_body(lua_State *L)
{
    static const char *const known[] = {"op", "strategies", "bytes", NULL};
    body *b = lua_touserdata(L, 1);
    at_spec *sp = b->sp;
    const char *str;
    luaL_checkstack(L, 40, NULL);
    if (lua_type(L, 2) != LUA_TTABLE)
        body_fail(b, "the chunk must return a table (it returned %s)", luaL_typename(L, 2));
    check_fields(b, 2, known);
    raw_field(L, 2, "op");
    if (!(str = top_str(L, OP_LEN)) || !is_ident(str))
        body_fail(b, "op must be an identifier (under %d chars)", OP_LEN);
    strcpy(sp->op, str);
    if (raw_field(L, 2, "strategies") != LUA_TTABLE || !is_list(L, -1))
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
    raw_field(L, 2, "bytes");
    if (!take_fn(L, &sp->bytes, 0))
        body_fail(b, "bytes must be a function(shape)");
    return 0;
}

/* Runs the chunk src in a fresh sandbox and validates what it returns. */
static int load_chunk(const char *src, size_t len, const char *chunkname, const char *display,
                      at_spec **out)
{
    size_t dlen = strlen(display);
    at_spec *sp = calloc(1, sizeof *sp);
    if (!sp || !(sp->path = malloc(dlen + 1))) {
        free(sp);
        return at_fail(AT_ERR_NOMEM, "spec: out of memory");
    }
    memcpy(sp->path, display, dlen + 1);
    sp->sb.limit = MEM_LIMIT;
    lua_State *L = sp->L = lua_newstate(sb_alloc, &sp->sb);
    if (!L) {
        at_spec_free(sp);
        return at_fail(AT_ERR_NOMEM, "spec: cannot create a Lua state");
    }
    lua_pushcfunction(L, sb_open);
    sb_reset(&sp->sb, NULL);
    int rc, status = lua_pcall(L, 0, 0, 0);
    if (status == LUA_OK)
        status = luaL_loadbufferx(L, src, len, chunkname, "t");
    if (status == LUA_OK) {
        lua_sethook(L, sb_hook, LUA_MASKCOUNT | LUA_MASKLINE, HOOK_EVERY);
        sb_reset(&sp->sb, sp->path);
        status = lua_pcall(L, 0, 1, 0);
    }
    if (status != LUA_OK)
        rc = lua_failure(sp, status, "");
    else {
        body b = {.sp = sp};
        rc = run_body(sp, load_body, &b, 1);
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
    return load_chunk(source, strlen(source), name, name + 1, out);
}

int at_spec_load(const char *path, at_spec **out)
{
    if (out)
        *out = NULL;
    if (!out || !path)
        return at_fail(AT_ERR_USAGE, "spec: NULL argument to at_spec_load");
    int rc;
    char *buf = NULL, *name = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return at_fail(AT_ERR_IO, "cannot read spec %s: %s", path, strerror(errno));
    if (!(buf = malloc(MAX_FILE + 1)) || !(name = malloc(strlen(path) + 2))) {
        rc = at_fail(AT_ERR_NOMEM, "spec: out of memory");
        goto done;
    }
    size_t len = fread(buf, 1, MAX_FILE + 1, f);
    if (ferror(f))
        rc = at_fail(AT_ERR_IO, "cannot read spec %s: %s", path, strerror(errno));
    else if (len > MAX_FILE)
        rc = at_fail(AT_ERR_SPEC, "%s: spec larger than %zu MiB", path, MAX_FILE >> 20);
    else {
        name[0] = '@'; /* Lua then reports "path:line:" */
        strcpy(name + 1, path);
        rc = load_chunk(buf, len, name, path, out);
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
    if (spec->L)
        lua_close(spec->L);
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

const char *at_spec_op(const at_spec *spec) { return spec ? spec->op : NULL; }

int at_spec_nstrategies(const at_spec *spec) { return spec ? spec->nstrategies : 0; }

#define STRATEGY_FIELD(i, field) \
    (spec && (i) >= 0 && (i) < spec->nstrategies ? spec->strategies[i].field : NULL)

const char *at_spec_strategy_name(const at_spec *spec, int i) { return STRATEGY_FIELD(i, name); }

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

/* Calls fn on the nargs values on top, leaving one result. */
static void call_fn(lua_State *L, at_spec *sp, const spec_fn *fn, int nargs)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, fn->ref);
    lua_insert(L, -nargs - 1);
    sb_reset(&sp->sb, fn->src); /* the instruction limit counts per call */
    lua_call(L, nargs, 1);
}

/* A short text for the value at idx ("0", "'x'", "a table"), for messages. */
static const char *describe(lua_State *L, int idx)
{
    int t = lua_type(L, idx);
    if (t == LUA_TNUMBER) {
        lua_pushvalue(L, idx);
        return lua_tostring(L, -1);
    }
    if (t == LUA_TSTRING)
        return lua_pushfstring(L, "'%s'", lua_tostring(L, idx));
    return lua_pushfstring(L, "a %s", lua_typename(L, t));
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
/* body_fail for the current candidate: "src:line: strategy N (name): ... at PARAMS". */
static int cand_fail(body *b, const spec_fn *fn, const char *fmt, ...)
{
    char what[400], params[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    at_candidate_params_string(b->cur, params, sizeof params);
    return body_fail(b, "%s: strategy %d (%s): %s at %s", fn->where, b->cur->strategy + 1,
                     b->sp->strategies[b->cur->strategy].name, what,
                     params[0] ? params : "no params");
}

/* Reads the {x [, y [, z]]} that grid or block left on top into d (popped). */
static void take_dims(body *b, const spec_fn *fn, const char *what, unsigned d[3])
{
    static const long long grid_max[3] = {2147483647LL, 65535, 65535};
    static const long long block_max[3] = {1024, 1024, 64};
    const long long *max = what[0] == 'g' ? grid_max : block_max;
    lua_State *L = b->L;
    int t = lua_gettop(L);
    if (lua_type(L, t) != LUA_TTABLE || lua_rawlen(L, t) > 3 || lua_rawlen(L, t) < 1)
        cand_fail(b, fn, "%s must return a table of 1-3 positive integers (got %s)", what,
                  describe(L, t));
    for (int i = 0; i < 3; i++) {
        int isint = 0, ty = lua_rawgeti(L, t, i + 1);
        lua_Integer v = ty == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
        if (ty == LUA_TNIL && i > 0) /* a missing y or z is 1 */
            v = isint = 1;
        if (!isint || v < 1 || v > max[i])
            cand_fail(b, fn, "%s[%d] = %s is not an integer in 1..%lld (CUDA limit)", what,
                      i + 1, describe(L, -1), max[i]);
        lua_pop(L, 1);
        d[i] = (unsigned)v;
    }
    lua_pop(L, 1);
    unsigned long long threads = (unsigned long long)d[0] * d[1] * d[2];
    if (what[0] == 'b' && threads > 1024)
        cand_fail(b, fn, "block {%u, %u, %u} has %llu threads (CUDA limit 1024)", d[0], d[1],
                  d[2], threads);
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
        call_fn(L, b->sp, &ct->fn, 2);
        int t = lua_type(L, -1);
        if (t == LUA_TBOOLEAN && lua_toboolean(L, -1)) {
            lua_pop(L, 1);
            continue;
        }
        if (t != LUA_TNIL && t != LUA_TBOOLEAN && t != LUA_TSTRING)
            cand_fail(b, &ct->fn, "constraint '%s' returned a %s (expected true, false, nil "
                      "or a reason string)", ct->name, lua_typename(L, t));
        snprintf(k->pruned_by, sizeof k->pruned_by, "%s", ct->name);
        if (t == LUA_TSTRING)
            snprintf(k->prune_reason, sizeof k->prune_reason, "%s", lua_tostring(L, -1));
        lua_settop(L, base);
        return;
    }
    b->phase_name = NULL;
    const spec_fn *fns[3] = {&st->grid, &st->block, &st->smem};
    static const char *const names[3] = {"grid", "block", "smem"};
    for (int i = 0; i < 3 && fns[i]->ref != LUA_NOREF; i++) {
        b->phase = names[i];
        lua_pushvalue(L, base + 1);
        lua_pushvalue(L, base + 2);
        call_fn(L, b->sp, fns[i], 2);
        if (i < 2)
            take_dims(b, fns[i], names[i], i ? k->block : k->grid);
    }
    if (st->smem.ref != LUA_NOREF) { /* its result is still on top */
        int isint = 0;
        lua_Integer v = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
        if (!isint || v < 0 || v > MAX_SMEM)
            cand_fail(b, &st->smem, "smem must return an integer in 0..%d (got %s)", MAX_SMEM,
                      describe(L, -1));
        k->smem = (unsigned)v;
    }
    lua_settop(L, base);
}

static int expand_body(lua_State *L)
{
    body *b = lua_touserdata(L, 1);
    at_candidate *k = b->cands;
    luaL_checkstack(L, 40, NULL);
    for (int s = 0; s < b->sp->nstrategies; s++) {
        const spec_strategy *st = &b->sp->strategies[s];
        int idx[AT_MAX_PARAMS] = {0}, i;
        do {
            k->strategy = s;
            k->nparams = st->nparams;
            for (i = 0; i < st->nparams; i++) {
                memcpy(k->params[i].name, st->params[i].name, AT_NAME_LEN);
                k->params[i].value = st->params[i].values[idx[i]];
            }
            eval_candidate(b, st, k++);
            for (i = st->nparams - 1; i >= 0 && ++idx[i] == st->params[i].nvalues; i--)
                idx[i] = 0; /* an odometer: the last param varies fastest */
        } while (i >= 0);
    }
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
    if (total < 1) /* load refuses this already */
        return at_fail(AT_ERR_SPEC, "%s: the search space is empty", spec->path);
    if (total > MAX_CANDIDATES)
        return at_fail(AT_ERR_SPEC, "%s: space too large: %.0f candidates (limit %.0f)",
                       spec->path, total, MAX_CANDIDATES);
    at_candidate *cands = calloc((size_t)total, sizeof *cands);
    if (!cands)
        return at_fail(AT_ERR_NOMEM, "spec: cannot allocate %.0f candidates", total);
    body b = {.sp = spec, .pb = pb, .cands = cands};
    int rc = run_body(spec, expand_body, &b, 0);
    if (rc != AT_OK) {
        free(cands);
        return rc;
    }
    *out = cands;
    *count = (int)total;
    return AT_OK;
}

static int bytes_body(lua_State *L)
{
    body *b = lua_touserdata(L, 1);
    b->phase = "bytes";
    push_shape(L, b->sp, b->pb);
    call_fn(L, b->sp, &b->sp->bytes, 1);
    double v = lua_type(L, -1) == LUA_TNUMBER ? (double)lua_tonumber(L, -1) : NAN;
    if (!(v > 0) || !isfinite(v))
        body_fail(b, "%s: bytes must return a positive number (got %s)", b->sp->bytes.where,
                  describe(L, -1));
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
    int rc = run_body(spec, bytes_body, &b, 0);
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
