/*
** suite.c — loading suite files: a sandboxed Lua chunk (sandbox.c, the same
** limits as a search spec) that returns {name, dtype, entries}, entries made
** by tune(op, shapes [, note_or_fields]). Invariant: one validator checks a
** group both inside tune() (so an error carries the line of the call) and in
** the returned table, and a suite is returned only when all of it is valid.
*/
#include "suite.h"

#include "sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#define MAX_FILE ((size_t)64 << 10)

/* [OP_TABLE] */
static const struct {
    const char *name;
    int rank;
} ops[] = {
    {"gemv", 3}, {"rmsnorm", 2}, {"add_rmsnorm", 2}, {"gemma_rmsnorm", 2}, {"add_gemma_rmsnorm", 2},
    {"gemv_add", 3}, {"rmsnorm_gemv", 3}, {"gemma_rmsnorm_gemv", 3}, {"gemv_swiglu", 3},
    {"rmsnorm_gemv_swiglu", 3}, {"gemma_rmsnorm_gemv_swiglu", 3}, {"add_rmsnorm_gemv", 3},
    {"add_gemma_rmsnorm_gemv", 3},
};

int at_suite_op_rank(const char *op)
{
    for (size_t i = 0; op && i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(ops[i].name, op) == 0)
            return ops[i].rank;
    return 0;
}

const char *at_suite_known_ops(void)
{
    return "gemv, gemv_add, rmsnorm, add_rmsnorm, gemma_rmsnorm, add_gemma_rmsnorm, rmsnorm_gemv, "
           "gemma_rmsnorm_gemv, gemv_swiglu, rmsnorm_gemv_swiglu, gemma_rmsnorm_gemv_swiglu, add_rmsnorm_gemv, "
           "add_gemma_rmsnorm_gemv";
}

/* What loading holds while Lua runs. */
typedef struct loader {
    at_suite *s;
    const char *dir; /* for relative spec paths; NULL: as written */
    at_dtype dtype;  /* the suite's default */
    int status;
    char msg[1024];
} loader;

/* Registry key of the loader (tune() needs the folder for spec paths). */
static const char loader_key = 'l';

static const char *const group_fields[] = {"op", "shape", "shapes", "note", "dtype", "spec", "line", NULL};
static const char *const top_fields[] = {"name", "dtype", "entries", NULL};

/* The first key of table t that is not in known (raw: lua_next runs no
** metamethod), copied into buf; 0 when every key is known. */
static int unknown_field(lua_State *L, int t, const char *const *known, char *buf, size_t n)
{
    t = lua_absindex(L, t);
    for (lua_pushnil(L); lua_next(L, t);) {
        lua_pop(L, 1);
        int ok = 0;
        for (int i = 0; lua_type(L, -1) == LUA_TSTRING && known[i]; i++)
            ok |= strcmp(lua_tostring(L, -1), known[i]) == 0;
        if (!ok) {
            snprintf(buf, n, "%s", lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1));
            lua_pop(L, 1);
            return 1;
        }
    }
    return 0;
}

/* t[key] as a string of 1..max-1 bytes into dst; 1 when absent (dst
** unchanged), 0 with *bad set when present but not such a string. */
static int opt_string(lua_State *L, int t, const char *key, char *dst, size_t max, int *bad)
{
    int ty = at_sandbox_rawfield(L, t, key);
    const char *s = at_sandbox_tostring(L, max);
    if (ty != LUA_TNIL && !s)
        *bad = 1;
    else if (s)
        snprintf(dst, max, "%s", s);
    lua_pop(L, 1);
    return !*bad;
}

/* Checks the entry group at t; with s, appends its entries. On failure
** writes the reason to err and returns 0. The group's line (its tune()
** call) goes to *line when present. */
static int check_group(lua_State *L, int t, const loader *ld, at_suite *s, int *line, char *err, size_t n)
{
    at_suite_entry e = {0};
    char field[64], dt[16] = "";
    int bad = 0, rank;
    t = lua_absindex(L, t);
    *line = 0;
    if (lua_type(L, t) != LUA_TTABLE) {
        snprintf(err, n, "an entry must be a table (tune(op, shapes) makes one), not %s", luaL_typename(L, t));
        return 0;
    }
    if (at_sandbox_rawfield(L, t, "line") == LUA_TNUMBER)
        *line = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (unknown_field(L, t, group_fields, field, sizeof field)) {
        snprintf(err, n, "unknown field '%s' (known: op, shape, shapes, note, dtype, spec)", field);
        return 0;
    }
    if (!opt_string(L, t, "op", e.op, sizeof e.op, &bad) || !e.op[0]) {
        snprintf(err, n, "op must be a string naming an op (%s)", at_suite_known_ops());
        return 0;
    }
    if (!(rank = at_suite_op_rank(e.op))) {
        snprintf(err, n, "unknown op '%s' (known: %s)", e.op, at_suite_known_ops());
        return 0;
    }
    if (!opt_string(L, t, "note", e.note, sizeof e.note, &bad)) {
        snprintf(err, n, "note must be a string of under %zu bytes", sizeof e.note);
        return 0;
    }
    e.dtype = ld->dtype;
    if (!opt_string(L, t, "dtype", dt, sizeof dt, &bad) || (dt[0] && at_dtype_parse(dt, &e.dtype) != AT_OK)) {
        snprintf(err, n, "dtype must be \"bf16\" or \"fp16\"");
        return 0;
    }
    char spec[AT_SUITE_PATH_LEN] = "";
    if (!opt_string(L, t, "spec", spec, sizeof spec, &bad)) {
        snprintf(err, n, "spec must be a path string");
        return 0;
    }
    if (spec[0] && spec[0] != '/' && ld->dir && ld->dir[0]) {
        if ((size_t)snprintf(e.spec, sizeof e.spec, "%s/%s", ld->dir, spec) >= sizeof e.spec) {
            snprintf(err, n, "spec path too long");
            return 0;
        }
    } else
        snprintf(e.spec, sizeof e.spec, "%s", spec);

    int ts = at_sandbox_rawfield(L, t, "shape"), tl = at_sandbox_rawfield(L, t, "shapes");
    int list = lua_absindex(L, -1), count;
    if ((ts == LUA_TNIL) == (tl == LUA_TNIL)) {
        snprintf(err, n, "give exactly one of shape = \"...\" and shapes = {...}");
        lua_pop(L, 2);
        return 0;
    }
    if (tl != LUA_TNIL && (tl != LUA_TTABLE || !at_sandbox_is_list(L, list) || lua_rawlen(L, list) == 0)) {
        snprintf(err, n, "shapes must be a non-empty list of shape strings");
        lua_pop(L, 2);
        return 0;
    }
    count = tl != LUA_TNIL ? (int)lua_rawlen(L, list) : 1;
    for (int i = 1; i <= count; i++) {
        at_shape buckets[AT_SHAPE_MAX_BUCKETS];
        int nb = 0;
        if (tl != LUA_TNIL)
            lua_rawgeti(L, list, i);
        else
            lua_pushvalue(L, list - 1);
        /* a shape, or a range of batch buckets as --shape takes it */
        const char *text = at_sandbox_tostring(L, sizeof e.shape_text);
        int ok = text && at_shape_buckets(text, rank, buckets, AT_SHAPE_MAX_BUCKETS, &nb) == AT_OK;
        if (!ok) {
            if (text)
                snprintf(err, n, "%s: %s (op %s takes %s)", e.op, at_errmsg(), e.op,
                         rank == 3 ? "MxKxN or LO..HIxKxN" : "TxH or LO..HIxH");
            else
                snprintf(err, n, "%s: shape %d is not a shape string", e.op, i);
            lua_pop(L, 3);
            return 0;
        }
        lua_pop(L, 1);
        for (int b = 0; s && b < nb; b++) {
            if (s->nentries >= AT_SUITE_MAX_ENTRIES) {
                snprintf(err, n, "more than %d entries", AT_SUITE_MAX_ENTRIES);
                lua_pop(L, 2);
                return 0;
            }
            e.shape = buckets[b];
            at_shape_format(&e.shape, e.shape_text, sizeof e.shape_text);
            e.line = *line;
            s->entries[s->nentries++] = e;
        }
    }
    lua_pop(L, 2);
    return 1;
}

/* tune(op, shapes [, note_or_fields]) -> a group table, checked here so an
** error names the line of the call. */
static int lua_tune(lua_State *L)
{
    lua_Debug ar;
    char err[512];
    int line = 0, extra = lua_type(L, 3);
    if (lua_gettop(L) > 3)
        return luaL_error(L, "tune takes (op, shapes [, note_or_fields])");
    lua_rawgetp(L, LUA_REGISTRYINDEX, &loader_key);
    const loader *ld = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "l", &ar))
        line = ar.currentline;
    luaL_checkstack(L, 20, NULL);
    lua_createtable(L, 0, 6);
    int g = lua_gettop(L);
    lua_pushvalue(L, 1);
    lua_setfield(L, g, "op");
    lua_pushvalue(L, 2);
    lua_setfield(L, g, lua_type(L, 2) == LUA_TTABLE ? "shapes" : "shape");
    lua_pushinteger(L, line);
    lua_setfield(L, g, "line");
    if (extra == LUA_TSTRING) {
        lua_pushvalue(L, 3);
        lua_setfield(L, g, "note");
    } else if (extra == LUA_TTABLE) {
        static const char *const f[] = {"note", "dtype", "spec", NULL};
        char field[64];
        if (unknown_field(L, 3, f, field, sizeof field))
            return luaL_error(L, "tune: unknown field '%s' (known: note, dtype, spec)", field);
        for (int i = 0; f[i]; i++) {
            at_sandbox_rawfield(L, 3, f[i]);
            lua_setfield(L, g, f[i]);
        }
    } else if (extra != LUA_TNONE && extra != LUA_TNIL)
        return luaL_error(L, "tune: argument 3 must be a note string or a table {note, dtype, spec}");
    if (!check_group(L, g, ld, NULL, &line, err, sizeof err))
        return luaL_error(L, "tune: %s", err);
    lua_settop(L, g);
    return 1;
}

static int setup_body(lua_State *L)
{
    lua_pushvalue(L, 1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &loader_key);
    lua_pushcfunction(L, lua_tune);
    lua_setglobal(L, "tune");
    return 0;
}

/* Records "path:line: text" (or "path: text" when line is 0). */
static void fail_at(loader *ld, int line, const char *text)
{
    if (line > 0)
        snprintf(ld->msg, sizeof ld->msg, "%s:%d: %.*s", ld->s->path, line, 400, text);
    else
        snprintf(ld->msg, sizeof ld->msg, "%s: %.*s", ld->s->path, 400, text);
    if (ld->status == AT_OK)
        ld->status = AT_ERR_SPEC;
}

/* Validates the returned table (argument 2) into the suite. */
static int load_body(lua_State *L)
{
    loader *ld = lua_touserdata(L, 1);
    at_suite *s = ld->s;
    char field[64], dt[16] = "", err[512];
    int bad = 0, line = 0;
    luaL_checkstack(L, 40, NULL);
    if (lua_type(L, 2) != LUA_TTABLE) {
        snprintf(err, sizeof err, "the file must return a table {name, entries} (it returned %s)", luaL_typename(L, 2));
        fail_at(ld, 0, err);
        return 0;
    }
    if (unknown_field(L, 2, top_fields, field, sizeof field)) {
        snprintf(err, sizeof err, "unknown field '%s' (known: name, dtype, entries)", field);
        fail_at(ld, 0, err);
        return 0;
    }
    if (!opt_string(L, 2, "name", s->name, sizeof s->name, &bad)) {
        fail_at(ld, 0, "name must be a string of under 64 bytes");
        return 0;
    }
    if (!opt_string(L, 2, "dtype", dt, sizeof dt, &bad) || (dt[0] && at_dtype_parse(dt, &ld->dtype) != AT_OK)) {
        fail_at(ld, 0, "dtype must be \"bf16\" or \"fp16\"");
        return 0;
    }
    if (at_sandbox_rawfield(L, 2, "entries") != LUA_TTABLE || !at_sandbox_is_list(L, -1)) {
        fail_at(ld, 0, "entries must be a list of tune(op, shapes) groups");
        return 0;
    }
    int list = lua_gettop(L), n = (int)lua_rawlen(L, list);
    if (n == 0) {
        fail_at(ld, 0, "the suite has no entries");
        return 0;
    }
    if (n > AT_SUITE_MAX_ENTRIES || !(s->entries = calloc(AT_SUITE_MAX_ENTRIES, sizeof *s->entries))) {
        if (n <= AT_SUITE_MAX_ENTRIES)
            ld->status = AT_ERR_NOMEM;
        fail_at(ld, 0, n > AT_SUITE_MAX_ENTRIES ? "more than 4096 entries" : "out of memory");
        return 0;
    }
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, list, i);
        if (!check_group(L, -1, ld, s, &line, err, sizeof err)) {
            char text[600];
            snprintf(text, sizeof text, "entries[%d]: %s", i, err);
            fail_at(ld, line, text);
            return 0;
        }
        lua_pop(L, 1);
    }
    for (int i = 1; i < s->nentries; i++) /* the same key twice would be tuned twice at once */
        for (int j = 0; j < i; j++) {
            const at_suite_entry *a = &s->entries[j], *b = &s->entries[i];
            if (strcmp(a->op, b->op) == 0 && a->dtype == b->dtype && strcmp(a->shape_text, b->shape_text) == 0) {
                snprintf(err, sizeof err, "%s %s %s is listed twice (first %s %d)", a->op,
                         at_dtype_name(a->dtype), a->shape_text, a->line > 0 ? "at line" : "as entry",
                         a->line > 0 ? a->line : j + 1);
                fail_at(ld, b->line, err);
                return 0;
            }
        }
    return 0;
}

static int load_chunk(const char *src, size_t len, const char *chunkname, const char *display, const char *dir,
                      at_suite **out)
{
    at_sandbox *sb = NULL;
    at_suite *s = calloc(1, sizeof *s);
    loader ld = {.s = s, .dir = dir, .dtype = AT_BF16};
    int rc;
    *out = NULL;
    if (!s || !(s->path = strdup(display))) {
        free(s);
        return at_fail(AT_ERR_NOMEM, "suite: out of memory");
    }
    if (len > MAX_FILE) {
        rc = at_fail(AT_ERR_SPEC, "%s: suite larger than %zu KiB", display, MAX_FILE >> 10);
        goto done;
    }
    if ((rc = at_sandbox_open(display, &sb)) != AT_OK)
        goto done;
    lua_State *L = at_sandbox_state(sb);
    lua_pushcfunction(L, setup_body);
    lua_pushlightuserdata(L, &ld);
    int st = at_sandbox_pcall(sb, 1, 0, NULL, "setup");
    if (st != LUA_OK) {
        rc = at_sandbox_failure(sb, st, "");
        goto done;
    }
    if ((rc = at_sandbox_run(sb, src, len, chunkname, NULL)) != AT_OK)
        goto done;
    lua_pushcfunction(L, load_body);
    lua_insert(L, -2);
    lua_pushlightuserdata(L, &ld);
    lua_insert(L, -2);
    st = at_sandbox_pcall(sb, 2, 0, NULL, "load");
    if (st != LUA_OK)
        rc = at_sandbox_failure(sb, st, "");
    else if (ld.status != AT_OK)
        rc = at_fail(ld.status, "%s", ld.msg);
    if (rc == AT_OK && !s->name[0]) { /* the file name without folder and .lua */
        const char *base = strrchr(display, '/');
        base = base ? base + 1 : display;
        size_t k = strlen(base);
        if (k > 4 && strcmp(base + k - 4, ".lua") == 0)
            k -= 4;
        snprintf(s->name, sizeof s->name, "%.*s", (int)k, base);
    }
done:
    at_sandbox_close(sb);
    if (rc != AT_OK) {
        at_suite_free(s);
        return rc;
    }
    *out = s;
    return AT_OK;
}

int at_suite_load_string(const char *source, const char *chunkname, const char *dir, at_suite **out)
{
    char name[LUA_IDSIZE];
    if (!out || !source)
        return at_fail(AT_ERR_USAGE, "suite: NULL argument to at_suite_load_string");
    snprintf(name, sizeof name, "=%s", chunkname && chunkname[0] ? chunkname : "suite");
    return load_chunk(source, strlen(source), name, name + 1, dir, out);
}

int at_suite_load(const char *path, at_suite **out)
{
    char *buf = NULL, *name = NULL, *dir = NULL;
    FILE *f = NULL;
    int rc;
    if (!out || !path)
        return at_fail(AT_ERR_USAGE, "suite: NULL argument to at_suite_load");
    *out = NULL;
    if (!(f = fopen(path, "rb")))
        return at_fail(AT_ERR_SPEC, "cannot read suite %s: %s", path, strerror(errno));
    if (!(buf = malloc(MAX_FILE + 1)) || !(name = malloc(strlen(path) + 2)) || !(dir = strdup(path))) {
        rc = at_fail(AT_ERR_NOMEM, "suite: out of memory");
        goto done;
    }
    size_t len = fread(buf, 1, MAX_FILE + 1, f);
    if (ferror(f)) {
        rc = at_fail(AT_ERR_SPEC, "cannot read suite %s: %s", path, strerror(errno));
        goto done;
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        slash == dir ? (void)(slash[1] = '\0') : (void)(*slash = '\0');
    else
        dir[0] = '\0';
    name[0] = '@'; /* Lua then reports "path:line:" */
    strcpy(name + 1, path);
    rc = load_chunk(buf, len, name, path, dir, out);
done:
    fclose(f);
    free(buf);
    free(name);
    free(dir);
    return rc;
}

void at_suite_free(at_suite *s)
{
    if (!s)
        return;
    free(s->entries);
    free(s->path);
    free(s);
}
