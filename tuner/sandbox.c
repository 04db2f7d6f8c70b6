/*
** sandbox.c — the Lua state a search spec runs in: safe libraries only,
** text-only load, per-call instruction and memory limits that spec code
** cannot catch, and reads of spec values that run no spec code. Invariant:
** each call into Lua starts a fresh budget inside a lua_pcall, and every
** failure comes back as a status with a "path:line:" text.
*/
#include "sandbox.h"

#include "autotune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#define MEM_LIMIT ((size_t)64 << 20) /* bytes one spec's Lua state may hold */
#define STEP_LIMIT 50000000LL        /* instructions per call into Lua */
#define HOOK_EVERY 1000              /* instructions between count hooks */

enum { TRIP_NONE, TRIP_STEPS, TRIP_MEM };

/* Also the allocator's ud, so it never moves while the state is open. */
struct at_sandbox {
    lua_State *L;
    size_t used, limit;
    long long steps;
    int tripped;     /* TRIP_*: a limit fired during this call */
    int mem_refused; /* the allocator refused a block during this call */
    int line;        /* line being run (line hook): a memory error has none */
    const char *src; /* its chunk: the called function's, then the count hook's */
    char src_buf[LUA_IDSIZE], mem_where[AT_SANDBOX_WHERE_LEN], trip_msg[256];
    char name[]; /* prefix of error messages */
};

/* ------------------------------------------------------------ the limits */

static void *sb_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    at_sandbox *sb = ud;
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

static at_sandbox *sb_of(lua_State *L)
{
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return ud;
}

void at_sandbox_reset(at_sandbox *sb, const char *src)
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
    at_sandbox *sb = sb_of(L);
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
                 "%s:%d: instruction limit exceeded (%lld instructions in one call)", ar->short_src,
                 ar->currentline, STEP_LIMIT);
    sb->tripped = TRIP_STEPS;
    lua_pushstring(L, sb->trip_msg);
    lua_error(L);
}

/* A memory error that the limit caused (not malloc) becomes a trip. */
static void sb_mem_trip(at_sandbox *sb, int status)
{
    if (status == LUA_ERRMEM && sb->mem_refused && sb->tripped == TRIP_NONE) {
        snprintf(sb->trip_msg, sizeof sb->trip_msg, "%s%smemory limit exceeded (%zu MiB)", sb->mem_where,
                 sb->mem_where[0] ? ": " : "", sb->limit >> 20);
        sb->tripped = TRIP_MEM;
    }
}

/* ------------------------------------------------- the patched library */

/* pcall and xpcall: the originals, except that a limit error cannot be
** caught (else `while true do pcall(loop) end` would never stop). */
static int sb_finish_pcall(lua_State *L, int status, int slot)
{
    at_sandbox *sb = sb_of(L);
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
        {LUA_GNAME, luaopen_base},       {LUA_STRLIBNAME, luaopen_string}, {LUA_TABLIBNAME, luaopen_table},
        {LUA_MATHLIBNAME, luaopen_math}, {LUA_UTF8LIBNAME, luaopen_utf8},
    };
    /* library ("" = base), name, replacement closed over the original (or nil);
    ** table.move loops in C over any integer range. */
    static const struct {
        const char *lib, *name;
        lua_CFunction fn;
    } patches[] = {
        {"", "dofile", NULL},
        {"", "loadfile", NULL},
        {"", "print", sb_noop},
        {"", "pcall", sb_pcall},
        {"", "xpcall", sb_xpcall},
        {"", "load", sb_load},
        {"", "setmetatable", sb_setmetatable},
        {"string", "dump", NULL},
        {"string", "rep", sb_rep},
        {"table", "move", NULL},
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

int at_sandbox_fail(at_sandbox *sb, int status, const char *msg)
{
    size_t n = strlen(sb->name);
    lua_settop(sb->L, 0);
    /* errors without a position, code from load() and paths that Lua
    ** shortened do not start with the name */
    if (strncmp(msg, sb->name, n) == 0 && msg[n] == ':')
        return at_fail(status, "%s", msg);
    return at_fail(status, "%s: %s", sb->name, msg);
}

int at_sandbox_failure(at_sandbox *sb, int status, const char *context)
{
    lua_State *L = sb->L;
    char msg[1024];
    const char *text;
    sb_mem_trip(sb, status);
    if (sb->tripped != TRIP_NONE)
        text = sb->trip_msg;
    else if (status == LUA_ERRMEM) {
        lua_settop(L, 0);
        return at_fail(AT_ERR_NOMEM, "%s: lua: out of memory", sb->name);
    } else if (lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER)
        text = lua_tostring(L, -1);
    else /* not __tostring: it would run spec code unprotected */
        text = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, -1));
    snprintf(msg, sizeof msg, "%s%s", text, context);
    return at_sandbox_fail(sb, AT_ERR_SPEC, msg);
}

/* ----------------------------------------------------- state and calls */

int at_sandbox_pcall(at_sandbox *sb, int nargs, int nresults, const char *src)
{
    at_sandbox_reset(sb, src);
    return lua_pcall(sb->L, nargs, nresults, 0);
}

int at_sandbox_open(const char *name, at_sandbox **out)
{
    size_t len = strlen(name);
    *out = NULL;
    at_sandbox *sb = calloc(1, sizeof *sb + len + 1);
    if (!sb)
        return at_fail(AT_ERR_NOMEM, "spec: out of memory");
    memcpy(sb->name, name, len + 1);
    sb->limit = MEM_LIMIT;
    if (!(sb->L = lua_newstate(sb_alloc, sb))) {
        free(sb);
        return at_fail(AT_ERR_NOMEM, "spec: cannot create a Lua state");
    }
    lua_pushcfunction(sb->L, sb_open);
    int status = at_sandbox_pcall(sb, 0, 0, NULL);
    if (status != LUA_OK) {
        int rc = at_sandbox_failure(sb, status, "");
        at_sandbox_close(sb);
        return rc;
    }
    *out = sb;
    return AT_OK;
}

int at_sandbox_run(at_sandbox *sb, const char *src, size_t len, const char *chunkname)
{
    int status = luaL_loadbufferx(sb->L, src, len, chunkname, "t");
    if (status == LUA_OK) {
        lua_sethook(sb->L, sb_hook, LUA_MASKCOUNT | LUA_MASKLINE, HOOK_EVERY);
        status = at_sandbox_pcall(sb, 0, 1, sb->name);
    }
    return status == LUA_OK ? AT_OK : at_sandbox_failure(sb, status, "");
}

lua_State *at_sandbox_state(const at_sandbox *sb)
{
    return sb->L;
}

void at_sandbox_close(at_sandbox *sb)
{
    if (!sb)
        return;
    lua_close(sb->L);
    free(sb);
}

/* ---------------------------------------------- C touching spec values */

int at_sandbox_take_fn(at_sandbox *sb, at_sandbox_fn *fn, int optional)
{
    lua_State *L = sb->L;
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

void at_sandbox_call_fn(at_sandbox *sb, const at_sandbox_fn *fn, int nargs)
{
    lua_State *L = sb->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, fn->ref);
    lua_insert(L, -nargs - 1);
    at_sandbox_reset(sb, fn->src); /* the instruction limit counts per call */
    lua_call(L, nargs, 1);
}

int at_sandbox_rawfield(lua_State *L, int t, const char *key)
{
    t = lua_absindex(L, t);
    lua_pushstring(L, key);
    return lua_rawget(L, t);
}

int at_sandbox_is_list(lua_State *L, int t)
{
    lua_Integer n = 0;
    t = lua_absindex(L, t);
    if (lua_type(L, t) != LUA_TTABLE)
        return 0;
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1))
        n++;
    return n == (lua_Integer)lua_rawlen(L, t);
}

const char *at_sandbox_tostring(lua_State *L, size_t max)
{
    size_t len = 0;
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
    return s && len > 0 && len < max && strlen(s) == len ? s : NULL;
}

const char *at_sandbox_describe(lua_State *L, int idx)
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
