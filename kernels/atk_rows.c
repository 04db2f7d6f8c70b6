/*
** atk_rows.c — the list of rows a table reader fills, and the reader of a
** table compiled into the engine (atk_table, from `autotune export --format
** c`). Rows copy the key's strings (at most the tuner's field sizes, so the
** digest is rebuilt from the same bytes) and borrow the table's cubins.
*/
#include "atk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

atk_row *atk__rows_push(atk_rows *rows)
{
    if (rows->n == rows->cap) {
        size_t cap = rows->cap ? 2 * rows->cap : 16;
        atk_row *v = realloc(rows->v, cap * sizeof *v);
        if (!v)
            return NULL;
        rows->v = v;
        rows->cap = cap;
    }
    atk_row *r = &rows->v[rows->n++];
    memset(r, 0, sizeof *r);
    return r;
}

void atk__rows_free(atk_rows *rows)
{
    for (size_t i = 0; i < rows->n; i++)
        if (rows->v[i].cubin_owned)
            free((void *)rows->v[i].cubin);
    free(rows->v);
    free(rows->ov);
    memset(rows, 0, sizeof *rows);
}

/* A copy that never reads past cap bytes of a string that may be longer:
** the tuner's key fields are that long at most, so a longer one will not
** digest to its key_sha and the row is refused there. */
static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%.*s", (int)(cap - 1), src ? src : "");
}

int atk__read_table(const atk_table *t, const char *name, int cc, int sms, atk_rows *rows)
{
    if (t->version != 1)
        return atk__fail(NULL, ATK_ERR_TABLE, "atk: compiled table has version %d (this atk reads 1)", t->version);
    rows->total = t->nentries;
    for (size_t i = 0; i < t->nentries; i++) {
        const atk_table_entry *e = &t->entries[i];
        if (e->device < 0 || (size_t)e->device >= t->ndevices)
            return atk__fail(NULL, ATK_ERR_TABLE, "atk: compiled table: entry %zu names device %d of %zu", i,
                             e->device, t->ndevices);
        const atk_table_device *d = &t->devices[e->device];
        if (!d->name || strcmp(d->name, name) || 10 * d->cc_major + d->cc_minor != cc || d->sms != sms)
            continue;
        atk_row *r = atk__rows_push(rows);
        if (!r)
            return atk__fail(NULL, ATK_ERR_NOMEM, "atk: out of memory");
        copy(r->key_sha, sizeof r->key_sha, e->key_sha);
        copy(r->op, sizeof r->op, e->op);
        copy(r->dtype, sizeof r->dtype, e->dtype);
        copy(r->shape, sizeof r->shape, e->shape);
        copy(r->device, sizeof r->device, d->name);
        r->cc = cc;
        r->sms = d->sms;
        r->driver_version = e->driver_version;
        r->nvrtc_version = e->nvrtc_version;
        copy(r->space_sha, sizeof r->space_sha, e->space_sha);
        copy(r->options, sizeof r->options, e->options);
        copy(r->tuner_version, sizeof r->tuner_version, e->tuner_version);
        copy(r->strategy, sizeof r->strategy, e->strategy);
        copy(r->kernel, sizeof r->kernel, e->kernel);
        copy(r->template_name, sizeof r->template_name, e->template_name);
        copy(r->params, sizeof r->params, e->params);
        r->us = e->us;
        memcpy(r->grid, e->grid, sizeof r->grid);
        memcpy(r->block, e->block, sizeof r->block);
        r->smem = e->smem;
        r->cubin = e->cubin;
        r->cubin_size = e->cubin ? e->cubin_size : 0;
        copy(r->cubin_sha, sizeof r->cubin_sha, e->cubin_sha256);
        if (e->source >= 0 && (size_t)e->source < t->nsources && t->sources[e->source].name &&
            e->template_name && !strcmp(t->sources[e->source].name, e->template_name))
            r->source = t->sources[e->source].text;
    }
    return ATK_OK;
}
