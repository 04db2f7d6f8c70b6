/*
** table.h — tuned tables outside the cache: export (JSON, CSV, a C header),
** import of a JSON export, merge of another cache, and `autotune show`.
** Invariant: an import or merge changes the cache in one transaction or not
** at all; per key the entry with the lower measured µs is kept.
*/
#ifndef AT_TABLE_H
#define AT_TABLE_H

#include "cache.h"
#include "cache_validation.h"

#include <stdio.h>

/* Version of the JSON/C table format ("version" in JSON, atk_table.version
** in C). [TABLE_FORMAT] the runtime's atk_open_table reads the same: change
** both together and bump this. */
#define AT_TABLE_VERSION 1
/* Largest JSON table `import` reads (bytes). */
#define AT_TABLE_MAX_BYTES (256L * 1024 * 1024)

typedef enum at_table_format { AT_TABLE_JSON = 1, AT_TABLE_CSV, AT_TABLE_C } at_table_format;

/* One tuned key: its full key (device fields equal its device's), the
** digest recomputed from it, and the winner (cubin owned). */
typedef struct at_table_entry {
    at_key key;
    char key_sha[65];
    at_winner w;
} at_table_entry;

/* One GPU, its ceilings (NaN where not measured) and its entries. */
typedef struct at_table_device {
    at_device_info info;
    at_table_entry *entries;
    size_t nentries;
    at_validation *validations; /* what `autotune validate` measured on it (may be none) */
    size_t nvalidations;
} at_table_device;

/* Devices sorted by (name, cc, sms); entries by (op, dtype, shape, key). */
typedef struct at_table {
    at_table_device *devices;
    size_t ndevices;
} at_table;

/* Frees everything *t owns and zeroes it; NULL is a no-op. */
void at_table_free(at_table *t);

/* "json" / "csv" / "c" -> format; AT_ERR_USAGE otherwise. */
int at_table_format_parse(const char *text, at_table_format *out);

/* ------------------------------------------ against a cache (cache_table.c) */

/* Opens an existing cache read-only (export, show, the other side of a
** merge): nothing is created or written. A missing file, a file that is not
** an autotune cache, or a newer schema is AT_ERR_CACHE naming the path.
** Close with at_cache_close. */
int at_cache_open_readonly(const char *path, at_cache **out);
/* Every device of the cache (rows of `devices`, plus any device that only
** appears in winners' keys, with NaN ceilings) and all their winners, sorted
** as at_table says; only devices named `device` when it is not NULL. A
** winner whose cubin does not match its sha256 is AT_ERR_CACHE. *out is
** zeroed first; free with at_table_free (also after an error). */
int at_cache_read_table(at_cache *c, const char *device, at_table *out);
/* Writes t into the cache in one transaction: a device row where none is
** (an existing one keeps its ceilings unless it has none), and per entry: a new key is added; a
** key already present keeps the entry with the lower µs (a NaN µs loses,
** a tie keeps the local one) and a line saying which goes to `report`; an
** identical entry is left alone. Then one line per device: "imported N
** entries for NAME (sm_XX) ...". `source` names the input in those lines.
** Any failure rolls back: the cache is as before. report may be NULL. */
int at_cache_apply_table(at_cache *c, const at_table *t, const char *source, FILE *report);

/* Writes the winners of one GPU of the cache at db_path (opened read-only)
** in `fmt` to f: `device` NULL means the cache's only GPU, `all` every GPU
** that has winners. AT_ERR_USAGE names an unknown device, a GPU with nothing
** tuned, or the GPUs to choose from when there are several. */
int at_table_export(const char *db_path, const char *device, int all, at_table_format fmt, FILE *f);
/* The same into out_path through a temporary file in its folder and a
** rename(), so the file is whole or absent, never half-written. */
int at_table_export_file(const char *db_path, const char *device, int all, at_table_format fmt,
                         const char *out_path);
/* Reads the JSON table at `file`, then opens (creating if needed) the cache
** at db_path and applies the table (at_cache_apply_table). A bad file
** changes nothing, not even creating the cache. */
int at_table_import(const char *db_path, const char *file, FILE *report);
/* Reads every device and winner of the cache at other_path (read-only; a
** foreign or newer file is AT_ERR_CACHE), then applies them to db_path as
** import does. The local cache is unchanged on any error. */
int at_table_merge(const char *db_path, const char *other_path, FILE *report);
/* Per GPU of the cache at db_path: its ceilings, then one line per tuned key
** ("op dtype shape -> strategy (params)  us, baseline us, speedup"), or
** "nothing tuned yet"; `device` (may be NULL) picks GPUs by name,
** AT_ERR_USAGE when none has it. A missing cache prints "nothing tuned yet". */
int at_table_show(const char *db_path, const char *device, FILE *f);
/* Deletes, per shape of one GPU under one driver, NVRTC version and set of
** compile options, every winner but the one the runtime serves (lowest µs,
** then key_sha), in one transaction, printing a line for each and a
** summary; dry_run prints the same and deletes nothing (the cache opened
** read-only). A missing cache prints "nothing to prune" and is not made
** (cache_prune.c). */
int at_table_prune(const char *db_path, int dry_run, FILE *report);
/* How many winners of the open cache prune would delete (read-only). */
int at_cache_count_unserved(at_cache *c, int *n);
/* One line on f saying how many winners are never served and that prune
** removes them; nothing when there are none (or on a read error). */
void at_cache_hint_unserved(at_cache *c, FILE *f);

/* ------------------------------------------------------ formats (table.c) */

/* Writes devices sel[0..n) and their entries to f in `fmt` (the formats: [TABLE_FORMAT]
** in table.c). Deterministic: same rows, same bytes. */
void at_table_write(FILE *f, at_table_format fmt, const at_table_device *const *sel, size_t n);
/* Reads the JSON table at `path` strictly into *out: every error is
** AT_ERR_USAGE (AT_ERR_IO if unreadable) naming the file and the field.
** Keys are re-digested and cubins re-hashed. Free with at_table_free. */
int at_table_read_json(const char *path, at_table *out);

/* `autotune export|import|merge|show ...`: argv[0] is the subcommand. Prints
** "autotune: <message>" on stderr on failure and returns the at_status. */
int at_table_main(int argc, char **argv);

#endif /* AT_TABLE_H */
