/*
** table_only.c — an engine that uses only a compiled-in table: linked
** against the static libatk without SQLite (tests/atk_install_test.sh), it
** proves atk_open_table pulls in no SQLite code. Without a GPU atk_open_table
** says so (ATK_ERR_NOGPU); with one it opens on fallback (the table is empty).
*/
#include <atk.h>
#include <stdio.h>

int main(void)
{
    static const atk_table table = {.version = 1};
    atk_ctx *ctx = NULL;
    int rc = atk_open_table(&table, 0, 0, &ctx);
    printf("atk_open_table: %s\n", rc == ATK_OK ? atk_report(ctx) : atk_errmsg(NULL));
    atk_close(ctx);
    return rc == ATK_OK || rc == ATK_ERR_NOGPU ? 0 : 1;
}
