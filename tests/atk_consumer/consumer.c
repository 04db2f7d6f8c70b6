/*
** consumer.c — the smallest engine that links an installed atk (built by
** tests/atk_install_test.sh through pkg-config and through find_package):
** it opens a table that does not exist, dry, and dispatches one GEMV on the
** fallback path. Prints "atk consumer ok" and exits 0 when all is as expected.
*/
#include <atk.h>
#include <stdio.h>

int main(void)
{
    atk_gpu_id gpu = {"NVIDIA H200", 90, 132, 13000};
    atk_ctx *ctx = NULL;
    atk_op_stats s;
    int x = 0;
    if (atk_open_dry("/nonexistent/tune.db", NULL, &gpu, 0, &ctx) != ATK_OK)
        return 1;
    if (atk_gemv(ctx, NULL, ATK_BF16, 1, 2048, 8192, &x, &x, &x) != ATK_OK ||
        atk_stats(ctx, ATK_OP_GEMV, &s) != ATK_OK || s.fallback != 1)
        return 2;
    atk_close(ctx);
    atk_close(NULL);
    printf("atk consumer ok (%s)\n", atk_errstr(ATK_OK));
    return 0;
}
