/*
** sandbox.h — internal (not part of autotune.h): the Lua state a search spec
** runs in, and the only ways spec.c calls into it or reads its values.
** Invariant: spec code runs only under at_sandbox_pcall (one top-level entry
** point: one whole instruction budget), each call into Lua also on a fresh
** per-call budget, work done in C charged to both, and C reads spec values
** without running spec code.
*/
#ifndef AT_SANDBOX_H
#define AT_SANDBOX_H

#include <stddef.h>

#include <lua.h>

#define AT_SANDBOX_WHERE_LEN (LUA_IDSIZE + 16) /* "src:line" */

typedef struct at_sandbox at_sandbox;

/* A spec function that C holds and calls later, with its position. */
typedef struct at_sandbox_fn {
    int ref;                          /* registry reference; LUA_NOREF when absent */
    int line;                         /* line defined */
    char src[LUA_IDSIZE];             /* chunk, as Lua names it in messages */
    char where[AT_SANDBOX_WHERE_LEN]; /* "src:line" */
} at_sandbox_fn;

/* Creates a sandbox with the safe libraries open and sets *out (NULL on
** failure). name (copied) prefixes its error messages: the spec's path, or
** the chunk name of a string spec. Returns AT_OK, AT_ERR_NOMEM, or AT_ERR_SPEC
** with the message in at_errmsg(). Free it with at_sandbox_close. */
int at_sandbox_open(const char *name, at_sandbox **out);

/* Closes the Lua state and frees sb; NULL is a no-op. */
void at_sandbox_close(at_sandbox *sb);

/* The sandbox's Lua state, owned by sb. */
lua_State *at_sandbox_state(const at_sandbox *sb);

/* Compiles src (text only: bytecode is refused), turns the limit hooks on
** and runs it protected, with `arg` (when not NULL) as the chunk's `...`.
** Returns AT_OK with its one result on top of the stack, or the status of
** at_sandbox_failure. Call it once, first. */
int at_sandbox_run(at_sandbox *sb, const char *src, size_t len, const char *chunkname, const char *arg);

/* lua_pcall of the function below the nargs values on top: one top-level
** entry point (a load, an expansion, a bytes call). It starts the whole
** budget (100M instructions for everything the entry point runs) and a
** per-call one (50M); src names the called function's chunk (for a memory
** error's position) or is NULL, what names the entry point in the whole
** budget's message ("instruction limit exceeded (whole expansion)").
** Library functions and allocation charge the C work they do to both.
** Returns lua_pcall's status (LUA_*, not AT_*): on LUA_OK nresults values
** are on top, else the error object is, for at_sandbox_failure. */
int at_sandbox_pcall(at_sandbox *sb, int nargs, int nresults, const char *src, const char *what);

/* Turns a failed at_sandbox_pcall (status, error object on top) into
** AT_ERR_SPEC with "path:line: message" followed by context (may be ""),
** or the limit's message when a limit fired; AT_ERR_NOMEM when malloc
** itself failed. Clears the stack; the message is in at_errmsg(). */
int at_sandbox_failure(at_sandbox *sb, int status, const char *context);

/* Clears the stack and returns status with msg as the error, prefixed with
** the sandbox's name unless msg already starts with "name:". For errors
** that C found while Lua was running. */
int at_sandbox_fail(at_sandbox *sb, int status, const char *msg);

/* Makes s one line of printable text in place: tab, CR and LF become a
** space, every other control byte (ESC ...) '?'. Spec text reaches the
** terminal and the cache this way (errors, prune reasons), never raw. */
void at_sandbox_one_line(char *s);

/* ---- for C running inside at_sandbox_pcall: these may raise Lua errors */

/* Pops the value on top into fn: a function is referenced (until the state
** closes) and its position noted; anything else leaves fn->ref LUA_NOREF.
** Returns 1 for a function, or for nil when optional; else 0, for the
** caller to name the field. */
int at_sandbox_take_fn(at_sandbox *sb, at_sandbox_fn *fn, int optional);

/* Calls fn on the nargs values on top with a fresh per-call budget (the
** entry point's whole budget goes on), unprotected (inside the caller's
** pcall), leaving one result. */
void at_sandbox_call_fn(at_sandbox *sb, const at_sandbox_fn *fn, int nargs);

/* The reads below run no spec code: raw access, no __tostring. */

/* Pushes t[key] (raw); returns its type. */
int at_sandbox_rawfield(lua_State *L, int t, const char *key);

/* 1 when t is a table whose keys are exactly 1..#t, so that no entry is
** ignored; else 0. Each table is walked once per entry point (memoized). */
int at_sandbox_is_list(lua_State *L, int t);

/* The value on top as a string of 1..max-1 bytes without NULs, or NULL;
** valid while that value stays on the stack. */
const char *at_sandbox_tostring(lua_State *L, size_t max);

/* Pushes and returns a short text for the value at idx ("0", "'x'",
** "a table"), for messages. */
const char *at_sandbox_describe(lua_State *L, int idx);

#endif
