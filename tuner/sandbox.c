/*
** sandbox.c — the Lua state a search spec runs in: safe libraries only,
** text-only load, instruction and memory limits that spec code cannot
** catch, and reads of spec values that run no spec code. The instruction
** budgets (one per call into Lua, one per top-level entry point) also pay
** for work done in C: each library function is charged for the arguments,
** bytes and elements it goes through, and allocation for the bytes it
** grows. Invariant: every failure comes back as a status with a
** "path:line:" text.
*/
#include "sandbox.h"

#include "autotune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#define MEM_LIMIT ((size_t)64 << 20) /* bytes one spec's Lua state may hold */
#define STEP_LIMIT 50000000LL        /* instructions per call into Lua */
#define TOTAL_LIMIT 100000000LL      /* instructions per entry point (a whole expansion) */
#define HOOK_EVERY 1000              /* instructions between count hooks */
/* Wall seconds per entry point: the backstop for work inside single VM
** instructions (long string compares, vararg copies) that no count can see.
** fuzz/run.sh builds with a shorter one, so a slow input costs the fuzzer
** little. */
#ifndef AT_SANDBOX_TIME_LIMIT_S
#define AT_SANDBOX_TIME_LIMIT_S 20.0
#endif
#define TIME_LIMIT_S AT_SANDBOX_TIME_LIMIT_S
#define BYTES_PER_STEP 16            /* allocation costs a step per this many bytes */
#define CALL_STEPS 10                /* what C spends around each call into spec code */
#define LOAD_SQUARE 64               /* load() costs bytes^2 / this: the parser's jump lists */

enum { TRIP_NONE, TRIP_STEPS, TRIP_MEM };

/* Also the allocator's ud, so it never moves while the state is open. */
struct at_sandbox {
    lua_State *L;
    size_t used, limit;
    long long steps, total; /* spent in this call, and in this entry point */
    double deadline;        /* CLOCK_MONOTONIC seconds when the entry point must stop */
    int late;               /* the deadline passed */
    const char *what;       /* the entry point, for the whole budget's message */
    lua_Integer gen;        /* entry points so far: at_sandbox_is_list's memo */
    int tripped;            /* TRIP_*: a limit fired during this call */
    int mem_refused;        /* the allocator refused a block during this call */
    int line;               /* line being run (line hook): a memory error has none */
    const char *src;        /* its chunk: the called function's, then the count hook's */
    char src_buf[LUA_IDSIZE], mem_where[AT_SANDBOX_WHERE_LEN], trip_msg[256];
    char name[]; /* prefix of error messages */
};

/* ------------------------------------------------------------ the limits */

static void sb_spend(at_sandbox *sb, long long n)
{
    sb->steps += n;
    sb->total += n;
}

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
        sb_spend(sb, (long long)(sb->used / BYTES_PER_STEP)); /* Lua collects everything, retries */
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (!p)
        return nsize <= old ? ptr : NULL; /* Lua assumes shrinking never fails */
    if (nsize > old)
        sb_spend(sb, (long long)((nsize - old + BYTES_PER_STEP - 1) / BYTES_PER_STEP));
    sb->used = sb->used - old + nsize;
    return p;
}

static at_sandbox *sb_of(lua_State *L)
{
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return ud;
}

/* A fresh per-call budget; src names the called function's chunk (for a
** memory error's position), or is NULL. */
static void sb_reset_call(at_sandbox *sb, const char *src)
{
    sb->steps = 0;
    sb->tripped = TRIP_NONE;
    sb->mem_refused = 0;
    sb->line = 0;
    sb->src = src;
}

static double sb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int sb_over(const at_sandbox *sb)
{
    return sb->steps > STEP_LIMIT || sb->total > TOTAL_LIMIT || sb->late || sb->tripped == TRIP_STEPS;
}

/* Raises the instruction limit's error, "where" being "src:line"; once
** raised it stays raised (pcall cannot catch it). */
static void sb_raise(lua_State *L, at_sandbox *sb, const char *where)
{
    if (sb->tripped != TRIP_STEPS && sb->late)
        snprintf(sb->trip_msg, sizeof sb->trip_msg, "%s: time limit exceeded (%.0f s for the whole %s)", where,
                 TIME_LIMIT_S, sb->what);
    else if (sb->tripped != TRIP_STEPS && sb->steps > STEP_LIMIT)
        snprintf(sb->trip_msg, sizeof sb->trip_msg,
                 "%s: instruction limit exceeded (%lld instructions in one call)", where, STEP_LIMIT);
    else if (sb->tripped != TRIP_STEPS)
        snprintf(sb->trip_msg, sizeof sb->trip_msg,
                 "%s: instruction limit exceeded (whole %s) after %lld instructions", where, sb->what,
                 TOTAL_LIMIT);
    sb->tripped = TRIP_STEPS;
    lua_pushstring(L, sb->trip_msg);
    lua_error(L);
}

static void sb_raise_at(lua_State *L, at_sandbox *sb, const lua_Debug *ar)
{
    char where[AT_SANDBOX_WHERE_LEN];
    snprintf(where, sizeof where, ar->currentline > 0 ? "%s:%d" : "%s", ar->short_src, ar->currentline);
    sb_raise(L, sb, where);
}

/* Count events enforce the instruction limits (and note the chunk); line
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
    sb_spend(sb, HOOK_EVERY);
    if (sb_now() > sb->deadline)
        sb->late = 1;
    if (sb_over(sb))
        sb_raise_at(L, sb, ar);
}

/* Charges n steps of work done in C, raising the limit's error (at the
** nearest line of spec code) when a budget runs out. */
static void sb_charge(lua_State *L, lua_Integer n)
{
    at_sandbox *sb = sb_of(L);
    lua_Debug ar;
    int level = 1, found = 0;
    sb_spend(sb, n <= 0 ? 0 : n > TOTAL_LIMIT ? TOTAL_LIMIT + 1 : (long long)n);
    if (!sb_over(sb))
        return;
    while (!found && lua_getstack(L, level++, &ar))
        found = lua_getinfo(L, "Sl", &ar) && ar.currentline > 0;
    if (found)
        sb_raise_at(L, sb, &ar);
    sb_raise(L, sb, sb->name);
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
    sb_charge(L, lua_gettop(L)); /* the results move up one slot */
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

static int sb_noop(lua_State *L)
{
    (void)L;
    return 0;
}

/* How sb_metered charges a library function (its upvalue 2). Every call
** pays a step per argument and per byte of each string argument (coercing
** or scanning a string is linear in it); the flags add the rest. */
enum {
    M_SKIP1 = 1 << 0,   /* argument 1 is only indexed (len, sub, byte): not charged */
    M_RESULTS = 1 << 1, /* a step per result, after the call */
    M_FORWARD = 1 << 2, /* the original has upvalues: lua_call it instead of calling it */
    M_REP = 1 << 3,     /* string.rep: a step per repetition, after the call */
    M_INSERT = 1 << 4,  /* table.insert: the elements it shifts */
    M_REMOVE = 1 << 5,  /* table.remove: the same */
    M_CONCAT = 1 << 6,  /* table.concat: the elements it visits */
    M_SORT = 1 << 7,    /* table.sort: n log2 n comparisons */
    M_LOAD = 1 << 8,    /* load: text only, env defaults to the sandbox; bytes^2 */
    M_GC = 1 << 9,      /* collectgarbage: read or collect only; a collection walks the heap */
    M_DROP = 1 << 10,   /* removed from the sandbox */
};

/* What table.insert/remove/concat/sort will go through. No spec table has
** a metatable (setmetatable is gone), so their length is the raw one. */
static lua_Integer table_work(lua_State *L, int kind)
{
    if (lua_type(L, 1) != LUA_TTABLE)
        return 0; /* the original raises */
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1), pos, lg = 1;
    if (kind & M_INSERT) { /* insert(t, pos, v) shifts t[pos..n] up */
        pos = lua_gettop(L) == 3 ? lua_tointeger(L, 2) : n + 1;
        return pos >= 1 && pos <= n ? n + 1 - pos : 0;
    }
    if (kind & M_REMOVE) { /* remove(t, pos) shifts t[pos+1..n] down */
        pos = lua_isnoneornil(L, 2) ? n : lua_tointeger(L, 2);
        return pos >= 1 && pos <= n ? n - pos : 0;
    }
    if (kind & M_CONCAT) { /* concat(t, sep, i, j) visits t[i..j] */
        lua_Integer i = luaL_optinteger(L, 3, 1), j = luaL_optinteger(L, 4, n);
        lua_Unsigned span = (lua_Unsigned)j - (lua_Unsigned)i;
        return j < i ? 0 : span >= (lua_Unsigned)TOTAL_LIMIT ? TOTAL_LIMIT : (lua_Integer)span + 1;
    }
    for (lua_Integer m = n; m > 1; m >>= 1) /* sort */
        lg++;
    return n * lg;
}

static lua_Integer load_cost(lua_Integer bytes)
{
    return bytes > 100000000 ? TOTAL_LIMIT + 1 : bytes + bytes * bytes / LOAD_SQUARE;
}

/* load()'s chunk function, wrapped: each piece is charged as compiled. */
static int sb_reader(lua_State *L)
{
    lua_Integer before = lua_tointeger(L, lua_upvalueindex(2)), after;
    lua_settop(L, 0);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_call(L, 0, 1);
    if (lua_type(L, 1) == LUA_TSTRING) {
        after = before + (lua_Integer)lua_rawlen(L, 1);
        lua_pushinteger(L, after);
        lua_replace(L, lua_upvalueindex(2));
        sb_charge(L, load_cost(after) - load_cost(before));
    }
    return 1;
}

/* load(chunk [, name [, mode [, env]]]) made text-only, env the sandbox by
** default; returns the cost of compiling a string chunk. */
static lua_Integer load_args(lua_State *L)
{
    lua_settop(L, 4);
    lua_pushliteral(L, "t");
    lua_replace(L, 3);
    if (lua_type(L, 4) != LUA_TTABLE) {
        lua_pushglobaltable(L);
        lua_replace(L, 4);
    }
    if (lua_type(L, 1) == LUA_TFUNCTION) {
        lua_pushvalue(L, 1);
        lua_pushinteger(L, 0);
        lua_pushcclosure(L, sb_reader, 2);
        lua_replace(L, 1);
    }
    return lua_type(L, 1) == LUA_TSTRING ? load_cost((lua_Integer)lua_rawlen(L, 1)) : 0;
}

/* A library function (upvalue 1), charged as its kind (upvalue 2) says. */
static int sb_metered(lua_State *L)
{
    int kind = (int)lua_tointeger(L, lua_upvalueindex(2)), n = lua_gettop(L);
    lua_Integer cost = n, reps = 0;
    for (int i = kind & M_SKIP1 ? 2 : 1; i <= n; i++)
        if (lua_type(L, i) == LUA_TSTRING)
            cost += (lua_Integer)lua_rawlen(L, i);
    if (kind & (M_INSERT | M_REMOVE | M_CONCAT | M_SORT))
        cost += table_work(L, kind);
    else if (kind & M_LOAD)
        cost += load_args(L);
    else if (kind & M_GC) {
        static const char *const opts[] = {"collect", "count", "step", "isrunning", NULL};
        int o = luaL_checkoption(L, 1, "collect", opts);
        cost += o == 0 || o == 2 ? (lua_Integer)(sb_of(L)->used / BYTES_PER_STEP) : 0;
    } else if (kind & M_REP) {
        size_t l = 0, lsep = 0;
        luaL_checklstring(L, 1, &l);
        reps = luaL_checkinteger(L, 2);
        luaL_optlstring(L, 3, "", &lsep);
        if (reps > 0 && l + lsep == 0) { /* rep("", 2^40) loops in C for nothing */
            lua_pushliteral(L, "");
            return 1;
        }
    }
    sb_charge(L, cost);
    if (kind & M_FORWARD) {
        lua_pushvalue(L, lua_upvalueindex(1));
        lua_insert(L, 1);
        lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
        n = lua_gettop(L);
    } else /* called in this frame, so that its errors name it and its caller */
        n = lua_tocfunction(L, lua_upvalueindex(1))(L);
    sb_charge(L, (kind & M_RESULTS ? n : 0) + (kind & M_REP ? reps : 0));
    return n;
}

/* Library functions that differ from "charged for arguments and bytes";
** lib "" is the base library. Removed: patterns (backtracking and
** #s x #p scans in C), pack/unpack formats, table.move (any integer range),
** metatables (__index chains and __call chains loop in C, __gc runs
** outside the limits), next/pairs (next() scans empty slots), utf8.codes. */
static const struct {
    const char *lib, *name;
    int kind;
} patches[] = {
    {"", "dofile", M_DROP},
    {"", "loadfile", M_DROP},
    {"", "getmetatable", M_DROP},
    {"", "setmetatable", M_DROP},
    {"", "next", M_DROP},
    {"", "pairs", M_DROP},
    {"", "load", M_LOAD},
    {"", "collectgarbage", M_GC},
    {"string", "dump", M_DROP},
    {"string", "find", M_DROP},
    {"string", "match", M_DROP},
    {"string", "gmatch", M_DROP},
    {"string", "gsub", M_DROP},
    {"string", "pack", M_DROP},
    {"string", "packsize", M_DROP},
    {"string", "unpack", M_DROP},
    {"string", "len", M_SKIP1},
    {"string", "sub", M_SKIP1},
    {"string", "byte", M_SKIP1 | M_RESULTS},
    {"string", "rep", M_REP},
    {"table", "move", M_DROP},
    {"table", "insert", M_INSERT},
    {"table", "remove", M_REMOVE},
    {"table", "concat", M_CONCAT},
    {"table", "sort", M_SORT},
    {"table", "unpack", M_RESULTS},
    {"utf8", "codes", M_DROP},
    {"utf8", "codepoint", M_RESULTS},
};

/* Meters (or drops) every C function in the table on top, library lib. */
static void meter_table(lua_State *L, const char *lib)
{
    int t = lua_gettop(L);
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING || !lua_iscfunction(L, -1))
            continue;
        int kind = 0;
        for (size_t i = 0; i < sizeof patches / sizeof patches[0]; i++)
            if (strcmp(patches[i].lib, lib) == 0 && strcmp(patches[i].name, lua_tostring(L, -2)) == 0)
                kind = patches[i].kind;
        lua_pushvalue(L, -2); /* [key, fn] -> [key, fn, key, value] */
        if (kind & M_DROP)
            lua_pushnil(L);
        else {
            lua_pushvalue(L, -2);
            if (lua_getupvalue(L, -1, 1)) { /* math.random's state */
                lua_pop(L, 1);
                kind |= M_FORWARD;
            }
            lua_pushinteger(L, kind);
            lua_pushcclosure(L, sb_metered, 2);
        }
        lua_rawset(L, t); /* an existing field: the traversal goes on */
    }
}

/* Opens the safe libraries and patches them (protected: it allocates). */
static int sb_open(lua_State *L)
{
    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base},       {LUA_STRLIBNAME, luaopen_string}, {LUA_TABLIBNAME, luaopen_table},
        {LUA_MATHLIBNAME, luaopen_math}, {LUA_UTF8LIBNAME, luaopen_utf8},
    };
    static const luaL_Reg own[] = {{"print", sb_noop}, {"pcall", sb_pcall}, {"xpcall", sb_xpcall}};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        luaL_requiref(L, libs[i].name, libs[i].func, 1);
        meter_table(L, i ? libs[i].name : "");
        lua_settop(L, 0);
    }
    lua_pushliteral(L, ""); /* the string metatable's arithmetic (coercion) */
    lua_getmetatable(L, 1);
    meter_table(L, "string metatable");
    lua_settop(L, 0);
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        lua_pushcfunction(L, own[i].func);
        lua_setglobal(L, own[i].name);
    }
    /* A fixed seed: a spec using math.random expands the same way each run. */
    lua_getglobal(L, LUA_MATHLIBNAME);
    lua_getfield(L, -1, "randomseed");
    lua_pushinteger(L, 0);
    lua_call(L, 1, 0);
    return 0;
}

/* -------------------------------------------------------------- errors */

void at_sandbox_one_line(char *s)
{
    for (unsigned char *p = (unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = (*p == '\t' || *p == '\n' || *p == '\r') ? ' ' : '?';
}

int at_sandbox_fail(at_sandbox *sb, int status, const char *msg)
{
    char line[1024];
    size_t n = strlen(sb->name);
    lua_settop(sb->L, 0);
    /* errors without a position, code from load() and paths that Lua
    ** shortened do not start with the name */
    if (strncmp(msg, sb->name, n) == 0 && msg[n] == ':')
        snprintf(line, sizeof line, "%s", msg);
    else
        snprintf(line, sizeof line, "%s: %s", sb->name, msg);
    at_sandbox_one_line(line); /* error("a\nb") is still one line of text */
    return at_fail(status, "%s", line);
}

/* Runs unprotected: it creates no Lua object (allocation could not fail
** safely here), so numbers and type names are written into C buffers. */
int at_sandbox_failure(at_sandbox *sb, int status, const char *context)
{
    lua_State *L = sb->L;
    char msg[1024], buf[96];
    const char *text = buf;
    sb_mem_trip(sb, status);
    if (sb->tripped != TRIP_NONE)
        text = sb->trip_msg;
    else if (status == LUA_ERRMEM) {
        lua_settop(L, 0);
        return at_fail(AT_ERR_NOMEM, "%s: lua: out of memory", sb->name);
    } else if (lua_type(L, -1) == LUA_TSTRING)
        text = lua_tolstring(L, -1, NULL); /* already a string: converts nothing */
    else if (lua_isinteger(L, -1))
        snprintf(buf, sizeof buf, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, -1));
    else if (lua_type(L, -1) == LUA_TNUMBER) {
        snprintf(buf, sizeof buf, LUA_NUMBER_FMT, (LUAI_UACNUMBER)lua_tonumber(L, -1));
        if (buf[strspn(buf, "-0123456789")] == '\0') /* as Lua writes 1.0 */
            strcat(buf, ".0");
    } else /* not __tostring: it would run spec code unprotected */
        snprintf(buf, sizeof buf, "(error object is a %s value)", luaL_typename(L, -1));
    snprintf(msg, sizeof msg, "%.*s%s", (int)(sizeof msg - 1), text, context);
    return at_sandbox_fail(sb, AT_ERR_SPEC, msg);
}

/* ----------------------------------------------------- state and calls */

int at_sandbox_pcall(at_sandbox *sb, int nargs, int nresults, const char *src, const char *what)
{
    sb_reset_call(sb, src);
    sb->total = 0;
    sb->late = 0;
    sb->deadline = sb_now() + TIME_LIMIT_S;
    sb->what = what;
    sb->gen++;
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
    int status = at_sandbox_pcall(sb, 0, 0, NULL, "setup");
    if (status != LUA_OK) {
        int rc = at_sandbox_failure(sb, status, "");
        at_sandbox_close(sb);
        return rc;
    }
    *out = sb;
    return AT_OK;
}

int at_sandbox_run(at_sandbox *sb, const char *src, size_t len, const char *chunkname, const char *arg)
{
    int status = luaL_loadbufferx(sb->L, src, len, chunkname, "t");
    if (status == LUA_OK) {
        if (arg) /* the chunk's `...` */
            lua_pushstring(sb->L, arg);
        lua_sethook(sb->L, sb_hook, LUA_MASKCOUNT | LUA_MASKLINE, HOOK_EVERY);
        status = at_sandbox_pcall(sb, arg ? 1 : 0, 1, sb->name, "load");
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
    sb_reset_call(sb, fn->src); /* a fresh budget per call; the whole one goes on */
    sb_spend(sb, CALL_STEPS);
    if (sb_over(sb))
        sb_raise(L, sb, fn->where);
    lua_call(L, nargs, 1);
}

int at_sandbox_rawfield(lua_State *L, int t, const char *key)
{
    t = lua_absindex(L, t);
    lua_pushstring(L, key);
    return lua_rawget(L, t);
}

/* Registry key of is_list's memo (weak keys): table -> entry point * 2 +
** answer. A traversal also walks a table's empty slots, and one table may
** be listed thousands of times (shared params): each is walked once per
** entry point. */
static const char memo_key = 'm';

int at_sandbox_is_list(lua_State *L, int t)
{
    lua_Integer n = 0, stamp = sb_of(L)->gen * 2;
    t = lua_absindex(L, t);
    if (lua_type(L, t) != LUA_TTABLE)
        return 0;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &memo_key) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_createtable(L, 0, 1);
        lua_pushliteral(L, "k");
        lua_setfield(L, -2, "__mode");
        lua_setmetatable(L, -2);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &memo_key);
    }
    lua_pushvalue(L, t);
    if (lua_rawget(L, -2) == LUA_TNUMBER && (lua_tointeger(L, -1) & ~(lua_Integer)1) == stamp) {
        n = lua_tointeger(L, -1) & 1;
        lua_pop(L, 2);
        return (int)n;
    }
    lua_pop(L, 1);
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1))
        n++;
    int list = n == (lua_Integer)lua_rawlen(L, t);
    lua_pushvalue(L, t);
    lua_pushinteger(L, stamp + list);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    return list;
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
