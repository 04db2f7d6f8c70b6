/*
** test_spec.c — the spec loader, its sandbox and the candidate expansion.
** Good specs must expand to an exact, ordered space; every bad spec must fail
** with AT_ERR_SPEC and a message that says "file:line:" (run from the repo root).
*/
#include "autotune.h"
#include "tinytest.h"

#include <stdlib.h>
#include <string.h>

#define GOOD "tests/fixtures/spec_good.lua"

static const at_problem gemv_pb = {"gemv", AT_BF16, {1, 4096, 4, 3}, 90, 2};

/* A one-strategy spec. Line 1 is `head`; the strategy's extra fields sit on
** line 3, params on line 4, constraints on line 5, grid/block/smem on line 6.
** NULL keeps the default piece. Returns a static buffer. */
static const char *spec_src(const char *head, const char *fields, const char *params, const char *constraints,
                            const char *launch)
{
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "%s\n"
             "return { op = \"gemv\", bytes = function(s) return 1 end, strategies = {\n"
             "  { name = \"s\", kernel = \"s\", %s\n"
             "    params = %s,\n"
             "    constraints = %s,\n"
             "    %s\n"
             "  } } }\n",
             head ? head : "", fields ? fields : "template = \"gemv/s.cu\",",
             params ? params : "{ { \"TP_X\", {1, 2, 3} } }", constraints ? constraints : "{}",
             launch ? launch
                    : "grid = function(p, s) return { 1 } end, block = function(p, s) return "
                      "{ 32 } end,");
    return buf;
}

/* Loads src as chunk "fixture"; returns the status (message in at_errmsg()). */
static int load_status(const char *src)
{
    at_spec *sp = NULL;
    int rc = at_spec_load_string(src, "fixture", &sp);
    if (rc != AT_OK)
        CHECK(sp == NULL);
    at_spec_free(sp);
    return rc;
}

/* Loads src (which must load) and expands it for gemv_pb; returns the status. */
static int expand_status(const char *src)
{
    at_spec *sp = NULL;
    at_candidate *c = NULL;
    int n = -1;
    int rc = at_spec_load_string(src, "fixture", &sp);
    CHECK_EQ_INT(rc, AT_OK);
    if (rc != AT_OK) {
        fprintf(stderr, "    unexpected load error: %s\n", at_errmsg());
        return rc;
    }
    rc = at_spec_expand(sp, &gemv_pb, &c, &n);
    if (rc != AT_OK) {
        CHECK(c == NULL);
        CHECK_EQ_INT(n, 0);
    }
    free(c);
    at_spec_free(sp);
    return rc;
}

static void check_cand(const at_candidate *c, int strategy, int64_t a, int64_t b, int64_t v,
                       const char *pruned_by, const char *reason)
{
    CHECK_EQ_INT(c->strategy, strategy);
    CHECK_EQ_INT(c->params[0].value, a);
    if (c->nparams > 1) {
        CHECK_EQ_INT(c->params[1].value, b);
        CHECK_EQ_INT(c->params[2].value, v);
    }
    CHECK(strcmp(c->pruned_by, pruned_by) == 0);
    CHECK(strcmp(c->prune_reason, reason) == 0);
}

/* ------------------------------------------------------------ good specs */

static void test_good_fixture_loads_with_names(void)
{
    at_spec *sp = NULL;
    CHECK_EQ_INT(at_spec_load(GOOD, &sp), AT_OK);
    if (!sp)
        return;
    CHECK(strcmp(at_spec_op(sp), "gemv") == 0);
    CHECK_EQ_INT(at_spec_nstrategies(sp), 2);
    CHECK(strcmp(at_spec_strategy_name(sp, 0), "warp_row") == 0);
    CHECK(strcmp(at_spec_strategy_template(sp, 0), "gemv/gemv_warp_row.cu") == 0);
    CHECK(strcmp(at_spec_strategy_kernel(sp, 0), "gemv_warp_row") == 0);
    CHECK(strcmp(at_spec_strategy_name(sp, 1), "splitk") == 0);
    CHECK(strcmp(at_spec_strategy_kernel(sp, 1), "gemv_splitk") == 0);
    CHECK(at_spec_strategy_name(sp, 2) == NULL);
    CHECK(at_spec_strategy_template(sp, -1) == NULL);
    at_spec_free(sp);
}

static void test_good_fixture_expands_in_order_with_prunes_and_launch(void)
{
    at_spec *sp = NULL;
    at_candidate *c = NULL;
    int n = 0;
    CHECK_EQ_INT(at_spec_load(GOOD, &sp), AT_OK);
    CHECK_EQ_INT(at_spec_expand(sp, &gemv_pb, &c, &n), AT_OK);
    CHECK_EQ_INT(n, 15);
    if (n != 15 || !c) {
        free(c);
        at_spec_free(sp);
        return;
    }
    /* warp_row: WARPS x ROWS x VEC, the last (VEC) varying fastest. K=4096 is
    ** not a multiple of 3; ROWS*WARPS > N=4 only for 4x2. */
    const char *rows = "more rows than N";
    check_cand(&c[0], 0, 2, 1, 8, "", "");
    check_cand(&c[1], 0, 2, 1, 4, "", "");
    check_cand(&c[2], 0, 2, 1, 3, "vec_divides_k", "");
    check_cand(&c[3], 0, 2, 2, 8, "", "");
    check_cand(&c[4], 0, 2, 2, 4, "", "");
    check_cand(&c[5], 0, 2, 2, 3, "vec_divides_k", "");
    check_cand(&c[6], 0, 4, 1, 8, "", "");
    check_cand(&c[7], 0, 4, 1, 4, "", "");
    check_cand(&c[8], 0, 4, 1, 3, "vec_divides_k", "");
    check_cand(&c[9], 0, 4, 2, 8, "rows_fit", rows);
    check_cand(&c[10], 0, 4, 2, 4, "rows_fit", rows);
    check_cand(&c[11], 0, 4, 2, 3, "vec_divides_k", ""); /* first failure wins */
    CHECK_EQ_INT(c[0].nparams, 3);
    CHECK(strcmp(c[0].params[0].name, "TP_WARPS") == 0);
    CHECK(strcmp(c[0].params[2].name, "TP_VEC") == 0);
    /* launch shape of live candidates: grid {ceil(N/(R*W)), M, 1}, block {32W,1,1} */
    CHECK_EQ_INT(c[0].grid[0], 2);
    CHECK_EQ_INT(c[0].grid[1], 1);
    CHECK_EQ_INT(c[0].grid[2], 1);
    CHECK_EQ_INT(c[0].block[0], 64);
    CHECK_EQ_INT(c[0].block[1], 1);
    CHECK_EQ_INT(c[0].smem, 32);
    CHECK_EQ_INT(c[6].grid[0], 1);
    CHECK_EQ_INT(c[6].block[0], 128);
    CHECK_EQ_INT(c[6].smem, 64);
    /* splitk: integral float 1.0 became 1; split 4 > sms=2 returns nil */
    CHECK_EQ_INT(c[12].nparams, 1);
    check_cand(&c[12], 1, 1, 0, 0, "", "");
    check_cand(&c[13], 1, 2, 0, 0, "", "");
    check_cand(&c[14], 1, 4, 0, 0, "split_fits", "");
    CHECK_EQ_INT(c[13].grid[0], 4);
    CHECK_EQ_INT(c[13].grid[1], 2);
    CHECK_EQ_INT(c[13].grid[2], 1); /* missing z defaults to 1 */
    CHECK_EQ_INT(c[13].block[0], 128);
    CHECK_EQ_INT(c[13].block[1], 1);
    CHECK_EQ_INT(c[13].smem, 0); /* no smem function */
    int live = 0;
    for (int i = 0; i < n; i++)
        live += c[i].pruned_by[0] == '\0';
    CHECK_EQ_INT(live, 8);
    free(c);
    at_spec_free(sp);
}

static void test_good_fixture_bytes(void)
{
    at_spec *sp = NULL;
    double b = -1;
    CHECK_EQ_INT(at_spec_load(GOOD, &sp), AT_OK);
    CHECK_EQ_INT(at_spec_bytes(sp, &gemv_pb, &b), AT_OK);
    CHECK(b == 2.0 * (4 * 4096 + 1 * 4096 + 1 * 4));
    at_spec_free(sp);
}

static void test_shape_table_fields_reach_lua(void)
{
    const char *src = spec_src(NULL, NULL, NULL,
                               "{ { \"show\", function(p, s) return string.format("
                               "'%s %s %d %d %d %d %d %d %s %s', s.op, s.dtype, s.elem, s.arch, "
                               "s.sms, s.M, s.K, s.N, tostring(s.T), tostring(s.H)) end } }",
                               NULL);
    at_spec *sp = NULL;
    at_candidate *c = NULL;
    int n = 0;
    CHECK_EQ_INT(at_spec_load_string(src, "fixture", &sp), AT_OK);
    CHECK_EQ_INT(at_spec_expand(sp, &gemv_pb, &c, &n), AT_OK);
    CHECK_EQ_INT(n, 3);
    if (c)
        CHECK(strcmp(c[0].prune_reason, "gemv bf16 2 90 2 1 4096 4 nil nil") == 0);
    free(c);
    at_problem norm = {"rmsnorm", AT_FP16, {8, 4096, 0, 2}, 80, 132};
    CHECK_EQ_INT(at_spec_expand(sp, &norm, &c, &n), AT_OK);
    if (c)
        CHECK(strcmp(c[2].prune_reason, "rmsnorm fp16 2 80 132 8 4096 0 8 4096") == 0);
    free(c);
    at_spec_free(sp);
}

/* A constraint of scope "shape" rules its strategy out before crossing; one
** of a parameter's scope cuts that parameter's values; the live candidates
** are those the same constraints leave without scopes, and the count is
** what was crossed. A scope that names no param of the strategy is refused. */
static void test_scoped_constraints_cut_before_crossing(void)
{
    static const char *const pieces[][2] = {
        {"{ { \"m_is_one\", function(p, s) return s.M == 1 end, \"shape\" },"
         "  { \"x_divides_k\", function(p, s) return s.K % p.TP_X == 0 end, \"TP_X\" },"
         "  { \"pair\", function(p, s) return p.TP_X + p.TP_Y ~= 5 end } }",
         "{ { \"m_is_one\", function(p, s) return s.M == 1 end },"
         "  { \"x_divides_k\", function(p, s) return s.K % p.TP_X == 0 end },"
         "  { \"pair\", function(p, s) return p.TP_X + p.TP_Y ~= 5 end } }"},
    };
    const char *params = "{ { \"TP_X\", {1, 2, 3, 4} }, { \"TP_Y\", {1, 2, 3} } }";
    at_spec *scoped = NULL, *plain = NULL;
    char a[4096], text[256];
    snprintf(a, sizeof a, "%s", spec_src(NULL, NULL, params, pieces[0][0], NULL));
    CHECK_EQ_INT(at_spec_load_string(a, "scoped", &scoped), AT_OK);
    CHECK_EQ_INT(at_spec_load_string(spec_src(NULL, NULL, params, pieces[0][1], NULL), "plain", &plain), AT_OK);
    if (!scoped || !plain)
        return;
    const int64_t ks[] = {4096, 4098, 4099};
    for (int m = 1; m <= 2; m++)
        for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
            at_problem pb = gemv_pb;
            at_candidate *c1 = NULL, *c2 = NULL;
            int n1 = 0, n2 = 0, live1 = 0, live2 = 0, same = 1;
            pb.shape.M = m, pb.shape.K = ks[i];
            CHECK_EQ_INT(at_spec_expand(scoped, &pb, &c1, &n1), AT_OK);
            CHECK_EQ_INT(at_spec_expand(plain, &pb, &c2, &n2), AT_OK);
            CHECK_EQ_INT(n2, 12);
            for (int j = 0, k = 0; j < n2; j++) {
                if (c2[j].pruned_by[0])
                    continue;
                live2++;
                while (k < n1 && c1[k].pruned_by[0])
                    k++;
                same &= k < n1 && c1[k].params[0].value == c2[j].params[0].value &&
                        c1[k].params[1].value == c2[j].params[1].value;
                k++;
            }
            for (int j = 0; j < n1; j++)
                live1 += !c1[j].pruned_by[0];
            CHECK_EQ_INT(live1, live2);
            CHECK(same);
            at_spec_space_text(scoped, text, sizeof text);
            if (m == 2) { /* ruled out: nothing crossed */
                CHECK_EQ_INT(n1, 0);
                CHECK_STR_HAS(text, "ruled out: s (m_is_one)");
            } else if (ks[i] == 4096) { /* TP_X 3 cut: 3 values x 3 */
                CHECK_EQ_INT(n1, 9);
                CHECK_STR_HAS(text, "s 9; cut: s TP_X 3 (x_divides_k)");
            } else if (ks[i] == 4098) { /* 1, 2, 3 divide 4098 */
                CHECK_EQ_INT(n1, 9);
                CHECK_STR_HAS(text, "TP_X 4 (x_divides_k)");
            } else { /* 4099 is prime: TP_X = 1 alone */
                CHECK_EQ_INT(n1, 3);
                CHECK_STR_HAS(text, "TP_X 2,3,4 (x_divides_k)");
            }
            free(c1);
            free(c2);
        }
    at_spec_free(scoped);
    at_spec_free(plain);
    /* a scope must be "shape" or one of the strategy's params */
    CHECK_EQ_INT(load_status(spec_src(NULL, NULL, params,
                                      "{ { \"bad\", function(p, s) return true end, \"TP_Z\" } }", NULL)),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "scope must be");
}

static void test_later_constraints_are_not_evaluated_after_a_prune(void)
{
    const char *src =
        spec_src(NULL, NULL, NULL,
                 "{ { \"not_two\", function(p) return p.TP_X ~= 2 end }, { \"boom\", function(p) "
                 "if p.TP_X == 2 then error('evaluated') end return p.TP_X ~= 3 and true or "
                 "'three' end } }",
                 NULL);
    at_spec *sp = NULL;
    at_candidate *c = NULL;
    int n = 0;
    CHECK_EQ_INT(at_spec_load_string(src, "fixture", &sp), AT_OK);
    CHECK_EQ_INT(at_spec_expand(sp, &gemv_pb, &c, &n), AT_OK);
    CHECK_EQ_INT(n, 3);
    if (c && n == 3) {
        CHECK(c[0].pruned_by[0] == '\0');
        CHECK(strcmp(c[1].pruned_by, "not_two") == 0);
        CHECK(strcmp(c[2].pruned_by, "boom") == 0);
        CHECK(strcmp(c[2].prune_reason, "three") == 0);
    }
    free(c);
    at_spec_free(sp);
}

static void test_all_pruned_is_not_an_expand_error(void)
{
    const char *src = spec_src(NULL, NULL, NULL, "{ { \"never\", function() return false end } }", NULL);
    at_spec *sp = NULL;
    at_candidate *c = NULL;
    int n = 0;
    CHECK_EQ_INT(at_spec_load_string(src, "fixture", &sp), AT_OK);
    CHECK_EQ_INT(at_spec_expand(sp, &gemv_pb, &c, &n), AT_OK);
    CHECK_EQ_INT(n, 3);
    for (int i = 0; c && i < n; i++)
        CHECK(strcmp(c[i].pruned_by, "never") == 0);
    free(c);
    at_spec_free(sp);
}

static void test_params_string_and_param_lookup(void)
{
    at_candidate c;
    memset(&c, 0, sizeof c);
    c.nparams = 3;
    strcpy(c.params[0].name, "TP_WARPS");
    c.params[0].value = 4;
    strcpy(c.params[1].name, "TP_ROWS");
    c.params[1].value = 2;
    strcpy(c.params[2].name, "TP_VEC");
    c.params[2].value = -8;
    char buf[64];
    at_candidate_params_string(&c, buf, sizeof buf);
    CHECK(strcmp(buf, "TP_WARPS=4 TP_ROWS=2 TP_VEC=-8") == 0);
    char small[12];
    memset(small, 'x', sizeof small);
    at_candidate_params_string(&c, small, sizeof small);
    CHECK(strcmp(small, "TP_WARPS=4 ") == 0); /* truncated, still terminated */
    at_candidate_params_string(&c, small, 1);
    CHECK(small[0] == '\0');
    CHECK_EQ_INT(at_candidate_param(&c, "TP_ROWS", 99), 2);
    CHECK_EQ_INT(at_candidate_param(&c, "TP_NOPE", 99), 99);
    CHECK_EQ_INT(at_candidate_param(NULL, "TP_ROWS", 7), 7);
}

static void test_sandbox_keeps_safe_library_and_text_load(void)
{
    /* print is a no-op; load() of text works and sees the sandbox globals */
    const char *src =
        spec_src("print('hi') local three = load('return math.max(1, 3)')()", NULL,
                 "{ { \"TP_X\", { three, utf8.len('ab'), #table.concat({'a'}) } } }", NULL, NULL);
    at_spec *sp = NULL;
    at_candidate *c = NULL;
    int n = 0;
    CHECK_EQ_INT(at_spec_load_string(src, "fixture", &sp), AT_OK);
    CHECK_EQ_INT(at_spec_expand(sp, &gemv_pb, &c, &n), AT_OK);
    CHECK_EQ_INT(n, 3);
    if (c && n == 3) {
        CHECK_EQ_INT(c[0].params[0].value, 3);
        CHECK_EQ_INT(c[1].params[0].value, 2);
        CHECK_EQ_INT(c[2].params[0].value, 1);
    }
    free(c);
    at_spec_free(sp);
    /* string.rep("", huge) would loop in C for hours: it must return at once */
    CHECK_EQ_INT(load_status(spec_src("assert(string.rep('', 1 << 40) == '')", NULL, NULL, NULL, NULL)),
                 AT_OK);
}

static void test_null_arguments(void)
{
    at_spec *sp = (at_spec *)1;
    at_spec_free(NULL);
    CHECK_EQ_INT(at_spec_load_string(NULL, "x", &sp), AT_ERR_USAGE);
    CHECK(sp == NULL);
    CHECK_EQ_INT(at_spec_load(NULL, &sp), AT_ERR_USAGE);
    CHECK(at_spec_op(NULL) == NULL);
    CHECK_EQ_INT(at_spec_nstrategies(NULL), 0);
}

/* ------------------------------------------------- failing fixture files */

static void test_missing_file_is_an_io_error(void)
{
    at_spec *sp = NULL;
    CHECK_EQ_INT(at_spec_load("tests/fixtures/no_such_spec.lua", &sp), AT_ERR_IO);
    CHECK_STR_HAS(at_errmsg(), "cannot read spec tests/fixtures/no_such_spec.lua: ");
    CHECK_STR_HAS(at_errmsg(), "No such file");
    CHECK(sp == NULL);
    CHECK_EQ_INT(at_spec_load("tests/fixtures", &sp), AT_ERR_IO);
}

static void test_fixture_syntax_error_names_file_and_line(void)
{
    at_spec *sp = NULL;
    CHECK_EQ_INT(at_spec_load("tests/fixtures/spec_syntax.lua", &sp), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "tests/fixtures/spec_syntax.lua:5:");
    CHECK(sp == NULL);
}

static void test_fixture_runtime_error_names_file_and_line(void)
{
    at_spec *sp = NULL;
    CHECK_EQ_INT(at_spec_load("tests/fixtures/spec_runtime.lua", &sp), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "tests/fixtures/spec_runtime.lua:3: attempt to index a nil");
}

static void test_fixture_constraint_error_names_file_line_and_candidate(void)
{
    at_spec *sp = NULL;
    at_candidate *c = NULL;
    int n = 0;
    CHECK_EQ_INT(at_spec_load("tests/fixtures/spec_constraint_error.lua", &sp), AT_OK);
    CHECK_EQ_INT(at_spec_expand(sp, &gemv_pb, &c, &n), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "tests/fixtures/spec_constraint_error.lua:10: attempt to index");
    CHECK_STR_HAS(at_errmsg(), "constraint 'calls_nil' of strategy 1 (s) at TP_X=1");
    CHECK(c == NULL);
    at_spec_free(sp);
}

static void test_fixture_top_level_loop_hits_instruction_limit(void)
{
    at_spec *sp = NULL;
    CHECK_EQ_INT(at_spec_load("tests/fixtures/spec_loop.lua", &sp), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "tests/fixtures/spec_loop.lua:");
    CHECK_STR_HAS(at_errmsg(), "instruction limit exceeded");
}

/* ----------------------------------------------- failing string specs */

static void test_string_spec_errors_use_the_chunk_name(void)
{
    CHECK_EQ_INT(load_status("return {\n  op = = 1 }"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2:");
    CHECK_EQ_INT(load_status("error({})"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: (error object is a table value)");
    CHECK_EQ_INT(load_status("\n\nerror('bad shape')"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:3: bad shape");
}

static void test_limits_inside_constraints(void)
{
    CHECK_EQ_INT(
        expand_status(spec_src(NULL, NULL, NULL, "{ { \"spin\", function() while true do end end } }", NULL)),
        AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:5: instruction limit exceeded");
    CHECK_STR_HAS(at_errmsg(), "constraint 'spin'");
    CHECK_EQ_INT(expand_status(spec_src(NULL, NULL, NULL,
                                        "{ { \"hog\", function() return #string.rep('x', 1 << 30) "
                                        "> 0 end } }",
                                        NULL)),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:5: memory limit exceeded");
    CHECK_EQ_INT(expand_status(spec_src(NULL, NULL, NULL,
                                        "{ { \"hog\", function()\n local x = 1\n"
                                        " return #string.rep('x', 1 << 30) > 0 end } }",
                                        NULL)),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:7: memory limit exceeded (64 MiB) (in constraint 'hog'");
}

static void test_limits_at_top_level(void)
{
    CHECK_EQ_INT(load_status("local x = 0\nwhile true do x = x + 1 end"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2: instruction limit exceeded");
    CHECK_EQ_INT(load_status("local a = 1\nlocal s = string.rep('x', 1 << 30)"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2: memory limit exceeded (64 MiB)");
    /* memory that grows step by step, not in one request */
    CHECK_EQ_INT(load_status("local t = {}\nfor i = 1, 1e9 do t[i] = {i} end"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2: memory limit exceeded");
    /* a spec may not catch a limit with pcall/xpcall and go on */
    CHECK_EQ_INT(load_status("while true do\n pcall(function() while true do end end) end"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2: instruction limit exceeded");
    CHECK_EQ_INT(load_status("local ok = pcall(string.rep, 'x', 1 << 30)\nreturn 1"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:1: memory limit exceeded");
    CHECK_EQ_INT(load_status("xpcall(function() while true do end end, function(m) return m "
                             "end)"),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "instruction limit exceeded");
    /* ordinary errors can still be caught */
    CHECK_EQ_INT(load_status("local ok, e = pcall(error, 'x', 0)\nassert(not ok and e == 'x')\n"
                             "ok, e = xpcall(error, function(m) return 'h:' .. m end, 'y', 0)\n"
                             "assert(not ok and e == 'h:y')"),
                 AT_ERR_SPEC); /* runs to the end, but returns nothing */
    CHECK_STR_HAS(at_errmsg(), "fixture: the chunk must return a table (it returned nil)");
}

static void test_instruction_budget_is_per_call(void)
{
    /* two candidates of 30M instructions each: 60M in all, over one budget */
    const char *src = spec_src(NULL, NULL, "{ { 'TP_X', {1, 2} } }",
                               "{ { \"busy\", function() for i = 1, 3e7 do end return true end } }", NULL);
    CHECK_EQ_INT(expand_status(src), AT_OK);
}

static void test_sandbox_refuses_unsafe_globals(void)
{
    static const char *const cases[][2] = {
        {"os.execute('true')", "global 'os'"},
        {"io.open('/etc/passwd')", "global 'io'"},
        {"require('os')", "global 'require'"},
        {"dofile('/etc/passwd')", "global 'dofile'"},
        {"loadfile('/etc/passwd')", "global 'loadfile'"},
        {"debug.traceback()", "global 'debug'"},
        {"package.loadlib('x', 'y')", "global 'package'"},
        {"string.dump(function() end)", "field 'dump'"},
        {"collectgarbage('collect') table.move({}, 1, 1 << 40, 1, {})", "field 'move'"},
        /* metatables: __call and __index chains loop in C, __gc runs outside the limits */
        {"setmetatable({}, { __gc = function() while true do end end })", "global 'setmetatable'"},
        {"getmetatable('').__call = 1", "global 'getmetatable'"},
        /* next() walks empty slots in C */
        {"for k in pairs({}) do end", "global 'pairs'"},
        {"next({})", "global 'next'"},
        {"string.pack('i4', 1)", "field 'pack'"},
        {"string.unpack('z', 'x')", "field 'unpack'"},
        {"string.packsize('i4')", "field 'packsize'"},
        {"for p, c in utf8.codes('ab') do end", "field 'codes'"},
        {"collectgarbage('stop')", "bad argument #1 to 'collectgarbage' (invalid option 'stop')"},
        {"collectgarbage('setpause', 0)", "invalid option 'setpause'"},
        {"local f, e = load('\\27Lua\\84\\0\\25\\147\\r\\n\\26\\n') if not f then error(e) end",
         "attempt to load a binary chunk"},
        {"local f, e = load('\\27LuaT', 'x', 'b') if not f then error(e) end",
         "attempt to load a binary chunk"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_INT(load_status(cases[i][0]), AT_ERR_SPEC);
        CHECK_STR_HAS(at_errmsg(), "fixture:1:");
        CHECK_STR_HAS(at_errmsg(), cases[i][1]);
    }
}

static void test_missing_fields(void)
{
    CHECK_EQ_INT(load_status(spec_src(NULL, "", NULL, NULL, NULL)), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: strategy 1 (s): template must be a path string");
    CHECK_EQ_INT(load_status(spec_src(NULL, NULL, NULL, NULL, "block = function() return {1} end")),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: strategy 1 (s): grid must be a function");
    CHECK_EQ_INT(load_status("return { op = 'gemv', strategies = { { name = 's', template = "
                             "'a.cu', params = {}, grid = print, block = print } }, bytes = print }"),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: strategy 1 (s): kernel must be an identifier");
    CHECK_EQ_INT(load_status("return { strategies = {} }"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: op must be an identifier");
    CHECK_EQ_INT(load_status("return { op = 'gemv', strategies = { { template = 'a.cu' } } }"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: strategy 1: name must be an identifier");
    const char *no_bytes = "return { op = 'gemv', strategies = { { name = 's', kernel = 's', "
                           "template = 'a.cu', params = {}, grid = print, block = print } } }";
    CHECK_EQ_INT(load_status(no_bytes), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: bytes must be a function");
}

static void test_wrong_types(void)
{
    static const char *const cases[][2] = {
        {"{ { \"TP_X\", {1, \"2\"} } }", "fixture: strategy 1 (s): params[1] (TP_X) values must be integers"},
        {"{ { \"TP_X\", {1, 2.5} } }", "params[1] (TP_X) values must be integers"},
        {"{ { \"TP_X\", {} } }", "params[1] (TP_X) values must be a list of 1..4096 integers"},
        {"{ { \"TP_X\", {1, nil, 3} } }", "params[1] (TP_X) values must be a list of 1..4096"},
        {"{ { \"TP_X\", {1, 2, 1} } }", "params[1] (TP_X) lists 1 twice"},
        {"{ { \"TP_X\", {1} }, { \"TP_vec\", {1} } }", "params[2] name must match TP_[A-Z0-9_]+"},
        {"{ { \"VEC\", {1} } }", "params[1] name must match"},
        {"{ { \"TP_X\", {1} }, { \"TP_X\", {2} } }", "params[2] repeats TP_X"},
        {"{ TP_X = {1, 2} }", "params must be a list"},
        {"{ { \"TP_X\" } }", "params[1] must be a pair"},
        {"\"TP_X\"", "params must be a list"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_INT(load_status(spec_src(NULL, NULL, cases[i][0], NULL, NULL)), AT_ERR_SPEC);
        CHECK_STR_HAS(at_errmsg(), cases[i][1]);
    }
    char many[1024] = "{";
    for (int i = 0; i <= AT_MAX_PARAMS; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "{'TP_%c', {1}},", 'A' + i);
    strcat(many, "}");
    CHECK_EQ_INT(load_status(spec_src(NULL, NULL, many, NULL, NULL)), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "more than 16 params");
    CHECK_EQ_INT(load_status(spec_src("local v = {} for i = 1, 4097 do v[i] = i end", NULL,
                                      "{ { 'TP_X', v } }", NULL, NULL)),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "params[1] (TP_X) values must be a list of 1..4096 integers");
    static const char *const cons[][2] = {
        {"{ \"c\" }", "constraints[1] must be {name, function}"},
        {"{ { \"c\", 42 } }", "constraint 'c' must be a function"},
        {"{ { \"has space\", print } }", "constraints[1] name must be an identifier"},
        {"{ { \"c\", print }, { \"c\", print } }", "constraint 'c' is named twice"},
        {"print", "constraints must be a list"},
    };
    for (size_t i = 0; i < sizeof cons / sizeof cons[0]; i++) {
        CHECK_EQ_INT(load_status(spec_src(NULL, NULL, NULL, cons[i][0], NULL)), AT_ERR_SPEC);
        CHECK_STR_HAS(at_errmsg(), cons[i][1]);
    }
    CHECK_EQ_INT(load_status(spec_src(NULL, "template = 7,", NULL, NULL, NULL)), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "template must be a path string");
    CHECK_EQ_INT(load_status(spec_src(NULL, "template = 'a.cu', smem = 0,", NULL, NULL, NULL)), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "smem must be a function (or absent)");
    CHECK_EQ_INT(load_status("return { op = 'gemv', strategies = { 'warp_row' }, bytes = print }"),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: strategy 1 must be a table");
    CHECK_EQ_INT(load_status("return 42"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: the chunk must return a table (it returned number)");
}

static void test_typos_and_duplicates_are_refused(void)
{
    CHECK_EQ_INT(load_status(spec_src(NULL, "template = 'a.cu', contraints = {},", NULL, NULL, NULL)),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: strategy 1 (s): unknown field 'contraints'");
    CHECK_EQ_INT(load_status("return { op = 'gemv', strategy = {} }"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: unknown field 'strategy'");
    const char *twice = "local s = { name = 's', kernel = 's', template = 'a.cu', params = {}, grid = print, "
                        "block = print }\nreturn { op = 'gemv', strategies = { s, s }, bytes = print }";
    CHECK_EQ_INT(load_status(twice), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "strategy 2 (s): name repeats strategy 1");
}

static void test_empty_strategies(void)
{
    CHECK_EQ_INT(load_status("return { op = 'gemv', strategies = {}, bytes = print }"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: the spec has no strategies");
}

static void test_template_paths_stay_in_the_templates_folder(void)
{
    CHECK_EQ_INT(load_status(spec_src(NULL, "template = 'gemv/../../etc/passwd',", NULL, NULL, NULL)),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: strategy 1 (s): template path 'gemv/../../etc/passwd' leaves the "
                               "templates folder");
    CHECK_EQ_INT(load_status(spec_src(NULL, "template = '/etc/passwd',", NULL, NULL, NULL)), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "template path '/etc/passwd' leaves the templates folder");
}

static void test_constraint_returning_a_number(void)
{
    CHECK_EQ_INT(
        expand_status(spec_src(NULL, NULL, NULL, "{ { \"counts\", function(p) return 42 end } }", NULL)),
        AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:5: strategy 1 (s): constraint 'counts' returned a number (expected");
    CHECK_STR_HAS(at_errmsg(), "at TP_X=1");
}

static void test_launch_shapes_are_checked(void)
{
    static const char *const cases[][2] = {
        {"grid = function() return { 0 } end, block = function() return { 32 } end,",
         "fixture:6: strategy 1 (s): grid[1] = 0 is not an integer in 1..2147483647"},
        {"grid = function() return { 1, 70000 } end, block = function() return { 32 } end,",
         "grid[2] = 70000 is not an integer in 1..65535"},
        {"grid = function() return { 1 } end, block = function() return { 64, 32 } end,",
         "block {64, 32, 1} has 2048 threads (CUDA limit 1024) at TP_X=1"},
        {"grid = function() return { 1 } end, block = function() return { 2.5 } end,",
         "block[1] = 2.5 is not an integer"},
        {"grid = function() return 7 end, block = function() return { 32 } end,",
         "grid must return a table of 1-3 positive integers (got 7)"},
        {"grid = function() return { 1, 1, 1, 1 } end, block = function() return { 32 } end,",
         "grid must return a table of 1-3"},
        {"grid = function() return {1} end, block = function() return {32} end, smem = function() "
         "return 300000 end,",
         "smem must return an integer in 0..232448 (got 300000)"},
        {"grid = function() return {1} end, block = function() return {32} end, smem = function() "
         "return 'x' end,",
         "smem must return an integer in 0..232448 (got 'x')"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_INT(expand_status(spec_src(NULL, NULL, NULL, NULL, cases[i][0])), AT_ERR_SPEC);
        CHECK_STR_HAS(at_errmsg(), cases[i][1]);
    }
    CHECK_EQ_INT(expand_status(spec_src(NULL, NULL, NULL, NULL,
                                        "grid = function() error('no grid') end, block = print,")),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:6: no grid (in grid of strategy 1 (s) at TP_X=1)");
    /* a pruned candidate never runs grid/block */
    CHECK_EQ_INT(expand_status(spec_src(NULL, NULL, NULL, "{ { \"no\", function() end } }",
                                        "grid = function() return 0 end, block = print,")),
                 AT_OK);
}

static void test_space_too_large(void)
{
    /* refused while loading, before the rest is read */
    const char *src = spec_src("local v = {} for i = 1, 101 do v[i] = i end", NULL,
                               "{ { 'TP_A', v }, { 'TP_B', v }, { 'TP_C', {1, 2, 3, 4, 5, 6, 7, "
                               "8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, "
                               "25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, "
                               "41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, "
                               "57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, "
                               "73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, "
                               "89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99} } }",
                               NULL, NULL);
    CHECK_EQ_INT(load_status(src), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(),
                  "fixture: strategy 1 (s): space too large: 1009899 candidates (limit 1000000)");
    /* and across strategies: 4 x 300000 */
    const char *many = "local a, b = {}, {} for i = 1, 600 do a[i] = i end for i = 1, 500 do b[i] = i end\n"
                       "local function s(n) return { name = n, kernel = 'k', template = 'a.cu', "
                       "params = { { 'TP_A', a }, { 'TP_B', b } }, grid = print, block = print } end\n"
                       "return { op = 'gemv', bytes = print, strategies = { s'a', s'b', s'c', s'd' } }";
    CHECK_EQ_INT(load_status(many), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(),
                  "fixture: strategy 4 (d): space too large: 1200000 candidates with the strategies "
                  "before (limit 1000000)");
}

static void test_bytes_must_be_a_positive_number(void)
{
    at_spec *sp = NULL;
    double b = 1;
    const char *src = "return { op = 'gemv', strategies = { { name = 's', kernel = 's', template "
                      "= 'a.cu', params = {}, grid = print, block = print } },\n"
                      "bytes = function(s) return s.N - s.N end }";
    CHECK_EQ_INT(at_spec_load_string(src, "fixture", &sp), AT_OK);
    CHECK_EQ_INT(at_spec_bytes(sp, &gemv_pb, &b), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2: bytes must return a positive number (got 0)");
    CHECK(b == 0);
    at_spec_free(sp);
    src = "return { op = 'gemv', strategies = { { name = 's', kernel = 's', template = 'a.cu', "
          "params = {}, grid = print, block = print } },\nbytes = function(s) return s.X * 2 end }";
    CHECK_EQ_INT(at_spec_load_string(src, "fixture", &sp), AT_OK);
    CHECK_EQ_INT(at_spec_bytes(sp, &gemv_pb, &b), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2: attempt to perform arithmetic");
    CHECK_STR_HAS(at_errmsg(), "(in bytes)");
    at_spec_free(sp);
}

/* ------------------------------------ work done in C counts against the limits */
/* Each case below was a hang; fuzz/regressions/spec/ holds its reproducer. */

/* c_loop_pattern.lua, c_loop_plain_find.lua: pattern matching backtracks in
** C, and even a plain find is #s x #p compares: the functions are gone. */
static void test_string_patterns_are_refused(void)
{
    CHECK_EQ_INT(load_status("local s = ('a'):rep(3000)\nlocal hit = s:find('.-.-.-.-b')"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2: attempt to call a nil value (method 'find')");
    CHECK_EQ_INT(load_status("local s = ('a'):rep(1 << 22)\n"
                             "local hit = s:find(('a'):rep(1 << 20) .. 'b', 1, true)"),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2: attempt to call a nil value (method 'find')");
    static const char *const gone[] = {"find", "match", "gmatch", "gsub"};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        char src[64], want[80];
        snprintf(src, sizeof src, "return string.%s('ab', 'b')", gone[i]);
        snprintf(want, sizeof want, "fixture:1: attempt to call a nil value (field '%s')", gone[i]);
        CHECK_EQ_INT(load_status(src), AT_ERR_SPEC);
        CHECK_STR_HAS(at_errmsg(), want);
    }
}

/* c_loop_table_remove.lua: table.remove(t, 1) shifts the whole array in C;
** the elements it and table.insert move are charged as instructions. */
static void test_table_shifts_are_charged(void)
{
    CHECK_EQ_INT(load_status("local t = {} for i = 1, 300000 do t[i] = i end\n"
                             "for _ = 1, #t do table.remove(t, 1) end"),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2: instruction limit exceeded (50000000 instructions in one call)");
    CHECK_EQ_INT(load_status("local t = {}\nfor i = 1, 300000 do table.insert(t, 1, i) end"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2: instruction limit exceeded");
    /* both still work */
    CHECK_EQ_INT(
        load_status("local t = {1, 2, 3}\ntable.insert(t, 1, 0) table.insert(t, 9)\n"
                    "assert(table.remove(t, 1) == 0 and table.remove(t) == 9 and table.remove(t, 2) == 2)\n"
                    "assert(#t == 2 and t[1] == 1 and t[2] == 3 and table.remove({}) == nil)\n"
                    "error('ran')"),
        AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:5: ran");
}

/* Other library functions that loop in C are charged for what they go
** through: elements, results, bytes scanned or coerced, bytes allocated,
** the heap a collection walks, and a chunk that load() compiles (squared). */
static void test_library_c_work_is_charged(void)
{
    static const char *const cases[] = {
        "local t = {} for i = 1, 1e6 do t[i] = '' end\nfor _ = 1, 1e9 do table.concat(t) end",
        "local t = {} for i = 1, 1e5 do t[i] = i end\nfor _ = 1, 1e9 do table.unpack(t) end",
        "local t = {} for i = 1, 1e5 do t[i] = i end\nfor _ = 1, 1e9 do table.sort(t) end",
        "local s = ('x'):rep(1e5)\nfor _ = 1, 1e9 do s:byte(1, -1) end",
        "local s = ('x'):rep(1e5)\nfor _ = 1, 1e9 do utf8.codepoint(s, 1, -1) end",
        "local x = 0\nfor _ = 1, 1e9 do x = #('x'):rep(1 << 20) end",
        "local s = ('x'):rep(1 << 20)\nfor _ = 1, 1e9 do local t = s .. 'y' end",
        "local s = ('x'):rep(1 << 20)\nfor _ = 1, 1e9 do local t = s:upper() end",
        "local s = ('x'):rep(1 << 20)\nfor _ = 1, 1e9 do local t = string.format('%.1s', s) end",
        "local s = ('x'):rep(1 << 20)\nfor _ = 1, 1e9 do local n = utf8.len(s) end",
        "local s = ('1'):rep(1 << 20)\nfor _ = 1, 1e9 do local n = tonumber(s) end",
        "local s = (' '):rep(1 << 20)\nfor _ = 1, 1e9 do pcall(math.floor, s) end",
        "local s = (' '):rep(1 << 20)\nfor _ = 1, 1e9 do pcall(function() return s + 1 end) end",
        "local t = {} for i = 1, 1e5 do t[i] = {} end\nfor _ = 1, 1e9 do collectgarbage() end",
        "local src = 'return ' .. ('a and '):rep(40000) .. 'a'\nlocal f = load(src)",
        ("local src, i = 'return ' .. ('a and '):rep(40000) .. 'a', 0\n"
         "local f = load(function() i = i + 1 return i == 1 and src or nil end)"),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_INT(load_status(cases[i]), AT_ERR_SPEC);
        CHECK_STR_HAS(at_errmsg(), "fixture:2: instruction limit exceeded");
    }
    /* charged functions still run in their caller's frame: errors name them */
    CHECK_EQ_INT(load_status("local x = 1\nreturn math.floor('x')"), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2: bad argument #1 to 'floor' (number expected, got string)");
    CHECK_EQ_INT(
        load_status("local t = {3, 1, 2} table.sort(t, function(a, b) return a > b end)\n"
                    "assert(table.concat(t, ',') == '3,2,1' and select('#', table.unpack(t)) == 3)\n"
                    "assert(select('#', ('abc'):byte(1, -1)) == 3 and ('ab'):rep(2, '-') == 'ab-ab')\n"
                    "assert(collectgarbage('count') > 0 and tonumber('12') == 12 and '2' + 1 == 3)\n"
                    "error('ran', 0)"),
        AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: ran");
}

/* expand_budget.lua: each call stays under its own budget, but the whole
** expansion has one too (100M instructions). */
static void test_whole_expansion_budget(void)
{
    const char *loop =
        "local cons = {}\n"
        "for i = 1, 1000 do cons[i] = { 'c' .. i, function() for _ = 1, 12000000 do end return true end } "
        "end\n"
        "return { op = 'gemv', bytes = function(s) return 1 end,\n"
        "  strategies = { { name = 'a', template = 'a.cu', kernel = 'a', params = {}, constraints = cons,\n"
        "    grid = function() return { 1 } end, block = function() return { 1 } end } } }";
    CHECK_EQ_INT(expand_status(loop), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2: instruction limit exceeded (whole expansion) after 100000000 "
                               "instructions (in constraint 'c");
    /* C work counts too: each constraint copies 4 MiB (about 5M steps) */
    const char *copy =
        "local big = ('x'):rep(1 << 22)\n"
        "local cons = {} for i = 1, 1000 do cons[i] = { 'c' .. i, function() return #big:rep(2) > 0 end } "
        "end\n"
        "return { op = 'gemv', bytes = function(s) return 1 end,\n"
        "  strategies = { { name = 'a', template = 'a.cu', kernel = 'a', params = {}, constraints = cons,\n"
        "    grid = function() return { 1 } end, block = function() return { 1 } end } } }";
    CHECK_EQ_INT(expand_status(copy), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture:2: instruction limit exceeded (whole expansion)");
    /* the whole budget is per entry point: 3 x 20M fits, twice over */
    const char *fits = spec_src(
        "local big = ('x'):rep(1 << 22)", NULL, NULL,
        "{ { \"copies\", function() for _ = 1, 4 do local x = big:rep(2) end return true end } }", NULL);
    at_spec *sp = NULL;
    at_candidate *c = NULL;
    int n = 0;
    double bytes = 0;
    CHECK_EQ_INT(at_spec_load_string(fits, "fixture", &sp), AT_OK);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(at_spec_expand(sp, &gemv_pb, &c, &n), AT_OK);
        CHECK_EQ_INT(n, 3);
        free(c);
        c = NULL;
    }
    CHECK_EQ_INT(at_spec_bytes(sp, &gemv_pb, &bytes), AT_OK);
    at_spec_free(sp);
}

/* load_duplicate_scan.lua: a space over the candidate cap is refused while
** loading, before the values it would scan; repeats are found by sorting. */
static void test_load_stops_at_the_space_cap(void)
{
    const char *src =
        "local v = {} for i = 1, 4096 do v[i] = i end\n"
        "local params = {} for i = 1, 16 do params[i] = { 'TP_P' .. i, v } end\n"
        "local st = {}\n"
        "for i = 1, 1000 do\n"
        "  st[i] = { name = 's' .. i, template = 'a.cu', kernel = 'a', params = params,\n"
        "            grid = function() return { 1 } end, block = function() return { 1 } end }\n"
        "end\n"
        "return { op = 'gemv', bytes = function(s) return 1 end, strategies = st }";
    CHECK_EQ_INT(load_status(src), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(),
                  "fixture: strategy 1 (s1): space too large: 16777216 candidates (limit 1000000)");
    CHECK_EQ_INT(load_status(spec_src("local v = {} for i = 1, 4096 do v[i] = 5000 - i end v[4096] = 4000",
                                      NULL, "{ { 'TP_X', v } }", NULL, NULL)),
                 AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: strategy 1 (s): params[1] (TP_X) lists 4000 twice");
    /* one mostly empty table listed 16000 times is walked once per load */
    const char *sparse =
        "local v = { 1 } for i = 2, 1 << 20 do v[i] = true end for i = 2, 1 << 20 do v[i] = nil end\n"
        "local params = {} for i = 1, 16 do params[i] = { 'TP_P' .. i, v } end\n"
        "local st = {}\n"
        "for i = 1, 1000 do\n"
        "  st[i] = { name = 's' .. i, template = 'a.cu', kernel = 'a', params = params,\n"
        "            grid = function() return { 1 } end, block = function() return { 1 } end }\n"
        "end\n"
        "return { op = 'gemv', bytes = function(s) return 1 end, strategies = st }";
    CHECK_EQ_INT(expand_status(sparse), AT_OK);
    /* constraints: at most 10000 in all */
    const char *cons =
        "local cons = {} for i = 1, 1000 do cons[i] = { 'c' .. i, print } end\n"
        "local st = {}\n"
        "for i = 1, 11 do st[i] = { name = 's' .. i, template = 'a.cu', kernel = 'a', params = {},\n"
        "  constraints = cons, grid = print, block = print } end\n"
        "return { op = 'gemv', bytes = print, strategies = st }";
    CHECK_EQ_INT(load_status(cons), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: strategy 11 (s11): more than 10000 constraints in all strategies");
}

/* Errors are formatted without creating Lua objects; long texts are cut. */
static void test_error_objects_and_long_texts(void)
{
    static const char *const cases[][2] = {
        {"error(42)", "fixture: 42"},
        {"error(1.5)", "fixture: 1.5"},
        {"error(2.0)", "fixture: 2.0"},
        {"error(true)", "fixture: (error object is a boolean value)"},
        {"error()", "fixture: (error object is a nil value)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_INT(load_status(cases[i][0]), AT_ERR_SPEC);
        CHECK(strcmp(at_errmsg(), cases[i][1]) == 0);
    }
    at_spec *sp = NULL;
    at_candidate *c = NULL;
    int n = 0;
    const char *src =
        spec_src(NULL, NULL, NULL, "{ { \"long\", function() return ('r'):rep(1 << 20) end } }", NULL);
    CHECK_EQ_INT(at_spec_load_string(src, "fixture", &sp), AT_OK);
    CHECK_EQ_INT(at_spec_expand(sp, &gemv_pb, &c, &n), AT_OK);
    if (c && n == 3)
        CHECK_EQ_INT(strlen(c[2].prune_reason), sizeof c[2].prune_reason - 1);
    free(c);
    at_spec_free(sp);
    /* compiling is superlinear in the source: specs are at most 128 KiB */
    char *big = malloc((128 << 10) + 32);
    if (!big)
        return;
    memset(big, ' ', (128 << 10) + 8);
    strcpy(big + (128 << 10) + 8, "return 1");
    CHECK_EQ_INT(load_status(big), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: spec larger than 128 KiB");
    big[(128 << 10) - 16] = '\0';
    CHECK_EQ_INT(load_status(big), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: the chunk must return a table");
    free(big);
}


/* search_strategy: the timing phase's default strategy, checked at load. */
static void test_search_strategy_field(void)
{
    at_spec *sp = NULL;
    const char *base = "return { op = 'gemv', search_strategy = %s, bytes = print, strategies = { { name = 's', "
                       "kernel = 's', template = 'a.cu', params = {}, grid = print, block = print } } }";
    char src[512];
    snprintf(src, sizeof src, base, "'halving'");
    CHECK_EQ_INT(at_spec_load_string(src, "fixture", &sp), AT_OK);
    CHECK(sp && at_spec_search_strategy(sp) && strcmp(at_spec_search_strategy(sp), "halving") == 0);
    at_spec_free(sp);
    sp = NULL;
    snprintf(src, sizeof src, base, "nil");
    CHECK_EQ_INT(at_spec_load_string(src, "fixture", &sp), AT_OK);
    CHECK(sp && at_spec_search_strategy(sp) == NULL);
    at_spec_free(sp);
    CHECK(at_spec_search_strategy(NULL) == NULL);
    snprintf(src, sizeof src, base, "'greedy'");
    CHECK_EQ_INT(load_status(src), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: search_strategy must be one of");
    CHECK_STR_HAS(at_errmsg(), "'greedy'");
    snprintf(src, sizeof src, base, "3");
    CHECK_EQ_INT(load_status(src), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "(got 3)");
}

/* allow_spills: a boolean, absent = false (spilling candidates not timed). */
static void test_allow_spills_field(void)
{
    at_spec *sp = NULL;
    const char *base = "return { op = 'gemv', allow_spills = %s, bytes = print, strategies = { { name = 's', "
                       "kernel = 's', template = 'a.cu', params = {}, grid = print, block = print } } }";
    char src[512];
    const char *vals[] = {"true", "false", "nil"};
    for (int i = 0; i < 3; i++) {
        snprintf(src, sizeof src, base, vals[i]);
        CHECK_EQ_INT(at_spec_load_string(src, "fixture", &sp), AT_OK);
        CHECK_EQ_INT(at_spec_allow_spills(sp), i == 0);
        at_spec_free(sp);
        sp = NULL;
    }
    CHECK_EQ_INT(at_spec_allow_spills(NULL), 0);
    snprintf(src, sizeof src, base, "'yes'");
    CHECK_EQ_INT(load_status(src), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "fixture: allow_spills must be true or false");
}

/* search/gemv.lua serves gemv and gemv_add: the loader hands it the op;
** gemv_add's candidates are gemv's with TP_ADD=1 appended (gemv's keep
** their parameter strings), and in warp_row and splitk TP_PF 0 and 1, its bytes count the residual read and write,
** another op is refused by name, and the default path maps gemv_add to
** gemv.lua. */
static void test_gemv_spec_serves_gemv_add(void)
{
    char path[256];
    at_spec_default_path("/h", "gemv_add", path, sizeof path);
    CHECK(strcmp(path, "/h/search/gemv.lua") == 0);
    at_spec_default_path("/h", "gemv", path, sizeof path);
    CHECK(strcmp(path, "/h/search/gemv.lua") == 0);
    at_spec_default_path("/h", "add_gemma_rmsnorm", path, sizeof path);
    CHECK(strcmp(path, "/h/search/norm.lua") == 0);
    at_spec_default_path("/h", "no_such_op", path, sizeof path);
    CHECK(strcmp(path, "/h/search/no_such_op.lua") == 0);

    static const char *const shapes[] = {"1x2048x2048", "4x2048x2048"};
    for (int i = 0; i < 2; i++) {
        at_spec *g = NULL, *a = NULL;
        at_candidate *cg = NULL, *ca = NULL;
        int ng = 0, na = 0;
        at_problem pb = {.op = "gemv", .dtype = AT_BF16, .arch = 90, .sms = 132};
        CHECK_EQ_INT(at_shape_parse(shapes[i], 3, &pb.shape), AT_OK);
        CHECK_EQ_INT(at_spec_load_op("search/gemv.lua", "gemv", &g), AT_OK);
        CHECK_EQ_INT(at_spec_load_op("search/gemv.lua", "gemv_add", &a), AT_OK);
        if (!g || !a)
            return;
        CHECK(strcmp(at_spec_op(g), "gemv") == 0);
        CHECK(strcmp(at_spec_op(a), "gemv_add") == 0);
        CHECK_EQ_INT(at_spec_expand(g, &pb, &cg, &ng), AT_OK);
        pb.op = "gemv_add";
        CHECK_EQ_INT(at_spec_expand(a, &pb, &ca, &na), AT_OK);
        CHECK(ng > 0);
        /* gemv's space with TP_ADD=1, and TP_PF 0 and 1 in warp_row and
        ** splitk (strategies 0 and 1): gemv's candidate k, then a's in
        ** order, each pruned alike */
        int live = 0, j = 0, pf_seen[2] = {0, 0};
        char (*sa)[256] = calloc((size_t)na + 1, 256);
        CHECK(sa != NULL);
        if (!sa)
            return;
        for (int t = 0; t < na; t++)
            at_candidate_params_string(&ca[t], sa[t], 256);
        for (int k = 0; k < ng; k++) {
            const int npf = cg[k].strategy <= 1 ? 2 : 1;
            CHECK_EQ_INT((int)at_candidate_param(&cg[k], "TP_ADD", -1), -1);
            CHECK_EQ_INT((int)at_candidate_param(&cg[k], "TP_PF", -1), -1);
            char pg[256];
            at_candidate_params_string(&cg[k], pg, sizeof pg);
            for (int f = 0; f < npf; f++) {
                const at_candidate *c = NULL;
                char want[300];
                if (npf == 2)
                    snprintf(want, sizeof want, "%s TP_ADD=1 TP_PF=%d", pg, f);
                else
                    snprintf(want, sizeof want, "%s TP_ADD=1", pg);
                for (int t = 0; t < na && !c; t++) /* wherever the expansion put it */
                    if (strcmp(sa[t], want) == 0)
                        c = &ca[t];
                CHECK(c != NULL);
                if (!c)
                    continue;
                j++;
                CHECK(strcmp(cg[k].pruned_by, c->pruned_by) == 0);
                live += !c->pruned_by[0];
                if (npf == 2)
                    pf_seen[f]++;
            }
        }
        free(sa);
        CHECK_EQ_INT(na, j);
        CHECK_EQ_INT(pf_seen[0], pf_seen[1]);
        CHECK(i == 0 ? pf_seen[0] > 0 : pf_seen[0] == 0); /* M = 4: no warp_row, no splitk (one_token) */
        CHECK(live > 0);
        double bg = 0, ba = 0;
        CHECK_EQ_INT(at_spec_bytes(g, &pb, &bg), AT_OK);
        CHECK_EQ_INT(at_spec_bytes(a, &pb, &ba), AT_OK);
        CHECK(ba == bg + 2.0 * (double)(pb.shape.M * 2048));
        free(cg);
        free(ca);
        at_spec_free(g);
        at_spec_free(a);
    }
    at_spec *bad = NULL;
    CHECK_EQ_INT(at_spec_load_op("search/gemv.lua", "gemv_mul", &bad), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "not gemv_mul");
    CHECK(bad == NULL);
}

/* search/gemv.lua serves the seven fused ops too: each candidate carries the
** op's TP_NORM, TP_SWIGLU and TP_RES (and no TP_ADD), only the CUDA-core templates
** (warp_row, splitk, multi_token: the mma ones have no fused form) are
** live, the default path maps each op to gemv.lua, and an op gemv.lua does
** not know is refused by name. */
static void test_gemv_spec_serves_the_fused_ops(void)
{
    static const struct {
        const char *op;
        int norm, swiglu, res;
    } ops[] = {{"rmsnorm_gemv", 1, 0, 0},        {"gemma_rmsnorm_gemv", 2, 0, 0},
               {"gemv_swiglu", 0, 1, 0},         {"rmsnorm_gemv_swiglu", 1, 1, 0},
               {"gemma_rmsnorm_gemv_swiglu", 2, 1, 0}, {"add_rmsnorm_gemv", 1, 0, 1},
               {"add_gemma_rmsnorm_gemv", 2, 0, 1}};
    static const char *const shapes[] = {"1x2048x6144", "4x2048x6144", "16x2560x9216"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char path[256];
        at_spec_default_path("/h", ops[i].op, path, sizeof path);
        CHECK(strcmp(path, "/h/search/gemv.lua") == 0);
        at_spec *sp = NULL;
        CHECK_EQ_INT(at_spec_load_op("search/gemv.lua", ops[i].op, &sp), AT_OK);
        if (!sp)
            continue;
        CHECK(strcmp(at_spec_op(sp), ops[i].op) == 0);
        for (int k = 0; k < 3; k++) {
            at_problem pb = {.op = ops[i].op, .dtype = AT_BF16, .arch = 90, .sms = 132};
            at_candidate *c = NULL;
            int n = 0, live = 0, bad_param = 0, bad_template = 0;
            CHECK_EQ_INT(at_shape_parse(shapes[k], 3, &pb.shape), AT_OK);
            CHECK_EQ_INT(at_spec_expand(sp, &pb, &c, &n), AT_OK);
            for (int j = 0; j < n; j++) {
                bad_param += at_candidate_param(&c[j], "TP_NORM", 0) != ops[i].norm ||
                             at_candidate_param(&c[j], "TP_SWIGLU", 0) != ops[i].swiglu ||
                             (at_candidate_param(&c[j], "TP_RES", 0) != 0) != ops[i].res ||
                             at_candidate_param(&c[j], "TP_ADD", 0) != 0;
                if (c[j].pruned_by[0])
                    continue;
                live++;
                const char *t = at_spec_strategy_template(sp, c[j].strategy);
                bad_template += !t || (strcmp(t, "gemv/gemv_warp_row.cu") && strcmp(t, "gemv/gemv_splitk.cu") &&
                                       strcmp(t, "gemv/gemv_multi_token.cu"));
            }
            CHECK(live > 0);
            CHECK_EQ_INT(bad_param, 0);
            CHECK_EQ_INT(bad_template, 0);
            printf("  %s %s: %d candidates, %d live\n", ops[i].op, shapes[k], n, live);
            free(c);
        }
        at_spec_free(sp);
    }
    at_spec *bad = NULL;
    CHECK_EQ_INT(at_spec_load_op("search/gemv.lua", "rmsnorm_gemv_add", &bad), AT_ERR_SPEC);
    CHECK_STR_HAS(at_errmsg(), "not rmsnorm_gemv_add");
    CHECK(bad == NULL);
}

int main(void)
{
    TT_RUN(test_good_fixture_loads_with_names);
    TT_RUN(test_good_fixture_expands_in_order_with_prunes_and_launch);
    TT_RUN(test_good_fixture_bytes);
    TT_RUN(test_shape_table_fields_reach_lua);
    TT_RUN(test_later_constraints_are_not_evaluated_after_a_prune);
    TT_RUN(test_scoped_constraints_cut_before_crossing);
    TT_RUN(test_all_pruned_is_not_an_expand_error);
    TT_RUN(test_params_string_and_param_lookup);
    TT_RUN(test_sandbox_keeps_safe_library_and_text_load);
    TT_RUN(test_null_arguments);
    TT_RUN(test_missing_file_is_an_io_error);
    TT_RUN(test_fixture_syntax_error_names_file_and_line);
    TT_RUN(test_fixture_runtime_error_names_file_and_line);
    TT_RUN(test_fixture_constraint_error_names_file_line_and_candidate);
    TT_RUN(test_fixture_top_level_loop_hits_instruction_limit);
    TT_RUN(test_string_spec_errors_use_the_chunk_name);
    TT_RUN(test_limits_inside_constraints);
    TT_RUN(test_limits_at_top_level);
    TT_RUN(test_instruction_budget_is_per_call);
    TT_RUN(test_sandbox_refuses_unsafe_globals);
    TT_RUN(test_missing_fields);
    TT_RUN(test_wrong_types);
    TT_RUN(test_typos_and_duplicates_are_refused);
    TT_RUN(test_empty_strategies);
    TT_RUN(test_template_paths_stay_in_the_templates_folder);
    TT_RUN(test_constraint_returning_a_number);
    TT_RUN(test_launch_shapes_are_checked);
    TT_RUN(test_space_too_large);
    TT_RUN(test_bytes_must_be_a_positive_number);
    TT_RUN(test_string_patterns_are_refused);
    TT_RUN(test_table_shifts_are_charged);
    TT_RUN(test_library_c_work_is_charged);
    TT_RUN(test_whole_expansion_budget);
    TT_RUN(test_load_stops_at_the_space_cap);
    TT_RUN(test_error_objects_and_long_texts);
    TT_RUN(test_search_strategy_field);
    TT_RUN(test_allow_spills_field);
    TT_RUN(test_gemv_spec_serves_gemv_add);
    TT_RUN(test_gemv_spec_serves_the_fused_ops);
    return TT_DONE();
}
