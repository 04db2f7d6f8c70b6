/*
** atk_open_path.c — opening a table from a file: an autotune SQLite cache or
** a JSON export, told apart by the first byte; and dry contexts (from a file
** or a compiled table). Kept apart from atk_open.c so that an engine linking
** the static library and calling only atk_open_table needs no SQLite.
*/
#include "atk_internal.h"

#include <ctype.h>
#include <stdio.h>

/* A JSON table starts with '{' (after whitespace); anything else is read
** as an SQLite cache (whose reader checks the magic). */
static int looks_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    int c = EOF;
    if (!f)
        return 0;
    while ((c = fgetc(f)) != EOF && isspace(c))
        ;
    fclose(f);
    return c == '{';
}

static int read_any(const char *path, const atk_table *t, const char *name, int cc, int sms, atk_rows *rows)
{
    if (path)
    {
        if (looks_json(path))
            return atk__read_json(path, name, cc, sms, rows);
        int st = atk__read_sqlite(path, name, cc, sms, rows);
        return st == ATK_OK ? atk__read_sqlite_overrides(path, name, cc, sms, rows) : st;
    }
    return atk__read_table(t, name, cc, sms, rows);
}

int atk_open(const char *path, int device, unsigned flags, atk_ctx **out)
{
    if (!path || !path[0]) {
        if (out)
            *out = NULL;
        return atk__fail(NULL, ATK_ERR_USAGE, "atk_open: no path");
    }
    return atk__open_common(path, NULL, read_any, device, NULL, flags, out);
}

int atk_open_dry(const char *path, const atk_table *table, const atk_gpu_id *gpu, unsigned flags, atk_ctx **out)
{
    if (!gpu || (!path && !table)) {
        if (out)
            *out = NULL;
        return atk__fail(NULL, ATK_ERR_USAGE, "atk_open_dry: needs a GPU and a path or a table");
    }
    return atk__open_common(path, path ? NULL : table, read_any, 0, gpu, flags, out);
}
