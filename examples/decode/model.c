/*
** model.c — the decode example's model: kernels compiled at start with
** NVRTC (the tuner's baseline norm kernels from templates/baseline/, and
** this file's stand-ins), synthetic weights generated on the GPU, and one
** decode step of M tokens enqueued in one of four modes; the bytes a step
** must move and the read ceiling they are held against. Invariant: every
** mode computes the same hidden state up to summation order: modes 1-3 run
** the same ops on the same buffers in the same order, only the GEMV and
** norm implementations differ (cuBLAS / unfused chain / naive fused / atk);
** mode 4 runs atk's fused ops, whose adds and norms round as the separate
** kernels do (residual = rne(residual + rne(acc)); xn = rne(norm(residual))).
** Activations are [M, width] row-major; the stand-ins take the token from
** blockIdx.y.
*/
#include "model.h"
#include "tuner/read_stream.h" /* the tuner's streaming-read kernel: the step's limit is held against its ceiling */

#include <math.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cu_check(CUresult r, const char *what)
{
    const char *name = NULL;
    if (r == CUDA_SUCCESS)
        return 0;
    cuGetErrorName(r, &name);
    fprintf(stderr, "decode: cuda: %s: %s\n", what, name ? name : "?");
    return 1;
}

static int blas_check(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 0;
    fprintf(stderr, "decode: cublas: %s: status %d\n", what, (int)s);
    return 1;
}

static int atk_check(int st, atk_ctx *ctx, const char *what)
{
    if (st == ATK_OK)
        return 0;
    fprintf(stderr, "decode: atk: %s: %s (%s)\n", what, atk_errstr(st), atk_errmsg(ctx));
    return 1;
}

/* The stand-ins and the weight generator (see README.md). Layout of the
** full-attention projection: q [0,2048), gate [2048,4096), k [4096,4608),
** v [4608,5120) (8 query heads and 2 key/value heads of 256). Each stand-in
** handles token blockIdx.y of the step: its row of every activation, and
** for the recurrence its own sequence's state. The widths come from
** model.h, spelled into the source as macros (STR). */
#define STR_(x) #x
#define STR(x) STR_(x)
static const char standin_src[] =
    "#include \"common/dtype.cuh\"\n"
    "#include \"common/pdl.cuh\"\n"
    "#define HIDDEN " STR(HIDDEN) "\n"
    "#define QKVG " STR(QKVG) "\n"
    "#define QKVZ " STR(QKVZ) "\n"
    "#define QKVZBA " STR(QKVZBA) "\n"
    "#define LHEADS " STR(LHEADS) "\n"
    "#define LDIM " STR(LDIM) "\n"
    "#define AHEAD 256                  /* attention head size */\n"
    "#define KV ((QKVG - 2 * HIDDEN) / 2) /* k's and v's width: 2 heads */\n"
    "extern \"C\" __global__ void fill_random(at_elem *p, unsigned long long n, unsigned seed, float scale,\n"
    "                                        float offset)\n"
    "{\n"
    "    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "         i += (unsigned long long)gridDim.x * blockDim.x) {\n"
    "        unsigned h = (unsigned)i * 2654435761u ^ (unsigned)(i >> 32) * 40503u ^ seed;\n"
    "        h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;\n"
    "        float u = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;\n"
    "        p[i] = at_from_float(offset + scale * u);\n"
    "    }\n"
    "}\n"
    "/* attention at the first position: one key, softmax = 1, out = v (GQA) * sigmoid(gate) */\n"
    "extern \"C\" __global__ void standin_attn(const at_elem *qkvg, at_elem *out)\n"
    "{\n"
    "    at_pdl_wait();\n"
    "    at_pdl_trigger();\n"
    "    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);\n"
    "    if (i >= HIDDEN) return;\n"
    "    qkvg += (long long)blockIdx.y * QKVG; out += (long long)blockIdx.y * HIDDEN;\n"
    "    float v = at_to_float(qkvg[2 * HIDDEN + KV + (i / AHEAD / (HIDDEN / KV)) * AHEAD + i % AHEAD]);\n"
    "    float g = at_to_float(qkvg[HIDDEN + i]);\n"
    "    out[i] = at_from_float(v / (1.0f + __expf(-g)));\n"
    "}\n"
    "/* a gated linear recurrence per head (16 heads of 128), state 128x128 fp32:\n"
    "** S = decay*S + beta*k v^T; out = (q S) * silu(z). Block x = 8h + c: head h,\n"
    "** columns [16c, 16c+16) of its state; thread 16g + jj: column 16c + jj, rows\n"
    "** [16g, 16g+16), its 16 loads in flight at once; the 8 row groups' partial\n"
    "** sums meet in shared memory, added in row order. 128 blocks of 128 threads\n"
    "** per token, so the state's loads (1 MB per layer and token) are spread\n"
    "** over the GPU rather than 16 blocks. Its input is the row of the\n"
    "** concatenated projection: q, k, v, z [0, 8192), beta, decay [8192, 8224). */\n"
    "extern \"C\" __global__ void standin_linear(const at_elem *qkvz, float *state, at_elem *out)\n"
    "{\n"
    "    __shared__ float q[LDIM], k[LDIM], part[8][16];\n"
    "    const int h = (int)blockIdx.x / 8, c = (int)blockIdx.x % 8, t = (int)threadIdx.x;\n"
    "    const int g = t / 16, j = c * 16 + t % 16;\n"
    "    const long long tok = blockIdx.y;\n"
    "    float *S = state + (tok * LHEADS + h) * LDIM * LDIM;\n"
    "    /* the block's 128 row segments into L2 before the wait: L2 is where\n"
    "    ** every SM's writes meet, so a prefetch never reads a stale value */\n"
    "    asm volatile(\"prefetch.global.L2 [%0];\" ::\"l\"(S + t * LDIM + c * 16));\n"
    "    at_pdl_wait();\n"
    "    at_pdl_trigger();\n"
    "    qkvz += tok * QKVZBA; out += tok * HIDDEN;\n"
    "    const at_elem *ba = qkvz + QKVZ;\n"
    "    q[t] = at_to_float(qkvz[h * LDIM + t]) * 0.08838835f; /* 1 / sqrt(LDIM) */\n"
    "    k[t] = at_to_float(qkvz[HIDDEN + h * LDIM + t]) * 0.08838835f;\n"
    "    float s[16];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 16; i++)\n"
    "        s[i] = S[(g * 16 + i) * LDIM + j];\n"
    "    float v = at_to_float(qkvz[2 * HIDDEN + h * LDIM + j]);\n"
    "    float beta = 1.0f / (1.0f + __expf(-at_to_float(ba[h])));\n"
    "    float decay = 1.0f / (1.0f + __expf(-at_to_float(ba[LHEADS + h])));\n"
    "    __syncthreads();\n"
    "    float acc = 0.0f;\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 16; i++) {\n"
    "        s[i] = decay * s[i] + beta * k[g * 16 + i] * v;\n"
    "        S[(g * 16 + i) * LDIM + j] = s[i];\n"
    "        acc += q[g * 16 + i] * s[i];\n"
    "    }\n"
    "    part[g][t % 16] = acc;\n"
    "    __syncthreads();\n"
    "    if (t < 16) {\n"
    "        float a = 0.0f;\n"
    "        for (int r = 0; r < 8; r++)\n"
    "            a += part[r][t];\n"
    "        float z = at_to_float(qkvz[3 * HIDDEN + h * LDIM + c * 16 + t]);\n"
    "        out[h * LDIM + c * 16 + t] = at_from_float(a * z / (1.0f + __expf(-z)));\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void silu_mul(const at_elem *gu, at_elem *act, int n)\n"
    "{\n"
    "    at_pdl_wait();\n"
    "    at_pdl_trigger();\n"
    "    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);\n"
    "    if (i >= n) return;\n"
    "    gu += (long long)blockIdx.y * 2 * n; act += (long long)blockIdx.y * n;\n"
    "    float g = at_to_float(gu[i]), u = at_to_float(gu[n + i]);\n"
    "    act[i] = at_from_float(g / (1.0f + __expf(-g)) * u);\n"
    "}\n";

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
        buf[n] = '\0';
    else if (buf) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* Compiles `src` (named `name`) with the shared headers for sm_<arch> and
** loads it into m->mods. */
static int compile(model *m, const char *templates, const char *name, const char *src, int arch, const char *extra,
                   CUmodule *out)
{
    static const char *const hnames[] = {"common/dtype.cuh", "common/vec.cuh", "common/pdl.cuh", "common/norm.cuh"};
    char *htext[4] = {NULL, NULL, NULL, NULL}, path[4096], archopt[64];
    nvrtcProgram prog = NULL;
    int rc = 1;
    void *cubin = NULL;
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", templates, hnames[i]);
        if (!(htext[i] = slurp(path))) {
            fprintf(stderr, "decode: cannot read %s (use --templates DIR)\n", path);
            goto done;
        }
    }
    snprintf(archopt, sizeof archopt, "--gpu-architecture=sm_%d", arch);
    const char *opts[] = {archopt, "-std=c++17", "-DTP_DTYPE=1", "-DTP_WFP32=0", extra};
    nvrtcResult r = nvrtcCreateProgram(&prog, src, name, 4, (const char *const *)htext, hnames);
    if (r != NVRTC_SUCCESS) {
        fprintf(stderr, "decode: nvrtc: nvrtcCreateProgram(%s): %s\n", name, nvrtcGetErrorString(r));
        goto done;
    }
    if ((r = nvrtcCompileProgram(prog, extra ? 5 : 4, opts)) != NVRTC_SUCCESS) {
        size_t n = 0;
        nvrtcGetProgramLogSize(prog, &n);
        char *log = malloc(n + 1);
        fprintf(stderr, "decode: nvrtc: %s does not compile for sm_%d: %s\n%s\n", name, arch, nvrtcGetErrorString(r),
                log && nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS ? log : "(no log)");
        free(log);
        goto done;
    }
    size_t n = 0;
    if (nvrtcGetCUBINSize(prog, &n) != NVRTC_SUCCESS || !n || !(cubin = malloc(n)) ||
        nvrtcGetCUBIN(prog, cubin) != NVRTC_SUCCESS) {
        fprintf(stderr, "decode: nvrtc: %s: no cubin\n", name);
        goto done;
    }
    if (cu_check(cuModuleLoadData(out, cubin), name))
        goto done;
    m->mods[m->nmods++] = *out;
    rc = 0;
done:
    nvrtcDestroyProgram(&prog);
    free(cubin);
    for (int i = 0; i < 4; i++)
        free(htext[i]);
    return rc;
}

static int compile_file(model *m, const char *templates, const char *file, int arch, const char *fn, CUfunction *out)
{
    char path[4096];
    CUmodule mod;
    snprintf(path, sizeof path, "%s/baseline/%s", templates, file);
    char *src = slurp(path);
    if (!src) {
        fprintf(stderr, "decode: cannot read %s (use --templates DIR)\n", path);
        return 1;
    }
    int rc = compile(m, templates, file, src, arch, "-DTP_OP=3", &mod) ||
             cu_check(cuModuleGetFunction(out, mod, fn), fn);
    free(src);
    return rc;
}

static int alloc(model *m, CUdeviceptr *p, size_t bytes, int weight)
{
    if (cu_check(cuMemAlloc(p, bytes), "cuMemAlloc"))
        return 1;
    if (weight)
        m->weight_bytes += bytes;
    return 0;
}

static unsigned seed_counter = 1;

/* n bf16 values uniform in offset +- scale. */
static int fill(model *m, CUdeviceptr p, size_t n, float scale, float offset)
{
    unsigned long long nn = n;
    unsigned seed = seed_counter++ * 0x9e3779b9u;
    void *args[] = {&p, &nn, &seed, &scale, &offset};
    return cu_check(cuLaunchKernel(m->k_fill, 1024, 1, 1, 256, 1, 1, 0, m->stream, args, NULL), "fill_random");
}

/* A weight [N, K] with variance 1/K, so activations keep their scale. */
static int weight(model *m, CUdeviceptr *p, size_t N, size_t K)
{
    return alloc(m, p, N * K * 2, 1) || fill(m, *p, N * K, (float)sqrt(3.0 / (double)K), 0.0f);
}

/* Layer L's input projection's outputs: q/k/v/gate, or q/k/v/z and beta/decay. */
static int in_width(const layer *L) { return L->linear ? QKVZBA : QKVG; }

int model_init(model *m, const char *templates, int arch, int max_batch)
{
    CUmodule mod;
    if (max_batch < 1 || max_batch > 64) {
        fprintf(stderr, "decode: max batch %d out of range 1..64\n", max_batch);
        return 1;
    }
    m->max_batch = max_batch;
    const size_t B = (size_t)max_batch;
    /* sm_90+: the engine's own kernels (stand-ins, SiLU*mul) chain with
    ** programmatic dependent launch, as atk's do (common/pdl.cuh) */
    m->pdl = arch >= 90;
    if (compile(m, templates, "standin.cu", standin_src, arch, m->pdl ? "-DTP_PDL=1" : NULL, &mod) ||
        cu_check(cuModuleGetFunction(&m->k_fill, mod, "fill_random"), "fill_random") ||
        cu_check(cuModuleGetFunction(&m->k_attn, mod, "standin_attn"), "standin_attn") ||
        cu_check(cuModuleGetFunction(&m->k_linear, mod, "standin_linear"), "standin_linear") ||
        cu_check(cuModuleGetFunction(&m->k_silu_mul, mod, "silu_mul"), "silu_mul") ||
        compile_file(m, templates, "norm_naive.cu", arch, "norm_naive", &m->k_naive) ||
        compile_file(m, templates, "norm_add.cu", arch, "norm_add", &m->k_add) ||
        compile_file(m, templates, "norm_cast_f32.cu", arch, "norm_cast_f32", &m->k_cast_f32) ||
        compile_file(m, templates, "norm_square.cu", arch, "norm_square", &m->k_square) ||
        compile_file(m, templates, "norm_mean.cu", arch, "norm_mean", &m->k_mean) ||
        compile_file(m, templates, "norm_rsqrt_eps.cu", arch, "norm_rsqrt_eps", &m->k_rsqrt) ||
        compile_file(m, templates, "norm_mul_rows.cu", arch, "norm_mul_rows", &m->k_mul_rows) ||
        compile_file(m, templates, "norm_mul_weight.cu", arch, "norm_mul_weight", &m->k_mul_weight) ||
        compile_file(m, templates, "norm_cast_back.cu", arch, "norm_cast_back", &m->k_cast_back) ||
        compile(m, templates, "read_stream4.cu", at_read_stream_src, arch, "-DREAD_UNROLL=4", &mod) ||
        cu_check(cuModuleGetFunction(&m->k_read[0], mod, "read_stream"), "read_stream") ||
        compile(m, templates, "read_stream8.cu", at_read_stream_src, arch, "-DREAD_UNROLL=8", &mod) ||
        cu_check(cuModuleGetFunction(&m->k_read[1], mod, "read_stream"), "read_stream"))
        return 1;
    for (int l = 0; l < LAYERS; l++) {
        layer *L = &m->layers[l];
        L->linear = l % 4 != 3; /* three linear-attention layers, then one full */
        if (weight(m, &L->w_in, (size_t)in_width(L), HIDDEN) || weight(m, &L->w_out, HIDDEN, HIDDEN) ||
            weight(m, &L->w_gate_up, 2 * INTER, HIDDEN) || weight(m, &L->w_down, HIDDEN, INTER) ||
            alloc(m, &L->norm1, HIDDEN * 2, 1) || fill(m, L->norm1, HIDDEN, 0.1f, 0.0f) ||
            alloc(m, &L->norm2, HIDDEN * 2, 1) || fill(m, L->norm2, HIDDEN, 0.1f, 0.0f))
            return 1;
        if (L->linear && alloc(m, &L->state, B * LHEADS * LDIM * LDIM * 4, 0))
            return 1;
    }
    if (weight(m, &m->w_lm, VOCAB, HIDDEN) || alloc(m, &m->norm_final, HIDDEN * 2, 1) ||
        fill(m, m->norm_final, HIDDEN, 0.1f, 0.0f) || alloc(m, &m->embed, B * HIDDEN * 2, 0) ||
        fill(m, m->embed, B * HIDDEN, 1.0f, 0.0f))
        return 1;
    /* every activation holds max_batch rows */
    const size_t big = 2 * INTER > QKVZBA ? 2 * INTER : QKVZBA;
    if (alloc(m, &m->delta, B * HIDDEN * 2, 0) || alloc(m, &m->residual, B * HIDDEN * 2, 0) ||
        alloc(m, &m->normed, B * HIDDEN * 2, 0) || alloc(m, &m->big, B * big * 2, 0) ||
        alloc(m, &m->act, B * INTER * 2, 0) || alloc(m, &m->out, B * HIDDEN * 2, 0) ||
        alloc(m, &m->logits, B * VOCAB * 2, 0))
        return 1;
    CUdeviceptr *f[] = {&m->f_x, &m->f_sq, &m->f_xn, &m->f_yw};
    for (int i = 0; i < 4; i++)
        if (alloc(m, f[i], B * HIDDEN * 4, 0))
            return 1;
    /* one fp32 per row (256 bytes at least, as before) */
    const size_t rows = B * 4 > 256 ? B * 4 : 256;
    if (alloc(m, &m->f_ms, rows, 0) || alloc(m, &m->f_rs, rows, 0))
        return 1;
    /* mode 4: one scratch for every fused call, the largest any of them
    ** needs at max_batch (a call may fall back to the unfused sequence) */
    const int64_t fused_n[] = {QKVG, QKVZBA, VOCAB};
    m->fused_scratch_bytes = atk_fused_scratch_bytes(ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU, ATK_BF16, max_batch, HIDDEN,
                                                     INTER);
    for (size_t i = 0; i < sizeof fused_n / sizeof fused_n[0]; i++) {
        size_t b = atk_fused_scratch_bytes(ATK_OP_GEMMA_RMSNORM_GEMV, ATK_BF16, max_batch, HIDDEN, fused_n[i]);
        m->fused_scratch_bytes = b > m->fused_scratch_bytes ? b : m->fused_scratch_bytes;
    }
    if (m->fused_scratch_bytes == 0) {
        fprintf(stderr, "decode: atk_fused_scratch_bytes: 0 for the fused decode ops (runtime without them?)\n");
        return 1;
    }
    /* zeroed once, as atk.h asks (the residual-add forms keep counters there) */
    if (alloc(m, &m->fused_scratch, m->fused_scratch_bytes, 0) ||
        cu_check(cuMemsetD32Async(m->fused_scratch, 0, m->fused_scratch_bytes / 4, m->stream), "cuMemsetD32Async"))
        return 1;
    return model_reset_state(m) || cu_check(cuStreamSynchronize(m->stream), "weights");
}

int model_reset_state(model *m)
{
    for (int l = 0; l < LAYERS; l++)
        if (m->layers[l].linear &&
            cu_check(cuMemsetD32Async(m->layers[l].state, 0, (size_t)m->max_batch * LHEADS * LDIM * LDIM,
                                      m->stream),
                     "memset"))
            return 1;
    return 0;
}

void model_free(model *m)
{
    CUdeviceptr all[] = {m->w_lm, m->norm_final, m->embed, m->delta, m->residual, m->normed, m->big, m->act,
                         m->out, m->logits, m->f_x, m->f_sq, m->f_ms, m->f_rs, m->f_xn, m->f_yw,
                         m->fused_scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i])
            cuMemFree(all[i]);
    for (int l = 0; l < LAYERS; l++) {
        layer *L = &m->layers[l];
        CUdeviceptr w[] = {L->w_in, L->w_out, L->w_gate_up, L->w_down, L->norm1, L->norm2, L->state};
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
            if (w[i])
                cuMemFree(w[i]);
    }
    for (int i = 0; i < m->nmods; i++)
        cuModuleUnload(m->mods[i]);
}

/* --------------------------------------------------------------- a step */

static int launch(model *m, CUfunction fn, unsigned grid, unsigned grid_y, unsigned block, void **args)
{
    return cu_check(cuLaunchKernel(fn, grid, grid_y, 1, block, 1, 1, 0, m->stream, args, NULL), "cuLaunchKernel");
}

/* The engine's own kernels (stand-ins, SiLU*mul: they wait with
** griddepcontrol before reading anything an earlier kernel writes), the
** same launch in every mode: with programmatic stream serialization on
** sm_90+, so they may start while the previous kernel drains and let the
** next one start early. */
static int launch_own(model *m, CUfunction fn, unsigned grid, unsigned grid_y, unsigned block, void **args)
{
    if (!m->pdl)
        return launch(m, fn, grid, grid_y, block, args);
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg = {.gridDimX = grid, .gridDimY = grid_y, .gridDimZ = 1, .blockDimX = block, .blockDimY = 1,
                          .blockDimZ = 1, .sharedMemBytes = 0, .hStream = m->stream, .attrs = &attr, .numAttrs = 1};
    return cu_check(cuLaunchKernelEx(&cfg, fn, args, NULL), "cuLaunchKernelEx");
}

/* y[M,N] = x[M,K] . W[N,K]^T */
static int gemv(model *m, enum mode mode, int M, CUdeviceptr x, CUdeviceptr W, CUdeviceptr y, int K, int N)
{
    if (mode == MODE_ATK)
        return atk_check(atk_gemv(m->atk, (atk_stream)m->stream, ATK_BF16, M, K, N, (void *)x, (void *)W, (void *)y),
                         m->atk, "atk_gemv");
    /* tuner/bench.c's baseline call; column-major, y^T[N,M] = W^T . x^T: W
    ** ([N,K] row-major) is K x N with ld K, x ([M,K]) is K x M with ld K,
    ** y ([M,N]) is N x M with ld N */
    const float one = 1.0f, zero = 0.0f;
    return blas_check(cublasGemmEx(m->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, (const void *)W, CUDA_R_16BF,
                                   K, (const void *)x, CUDA_R_16BF, K, &zero, (void *)y, CUDA_R_16BF, N,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      "cublasGemmEx");
}

/* per row of M: residual += x (rounded); y = rmsnorm(residual) * (1 + w) */
static int norm(model *m, enum mode mode, int M, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y)
{
    float eps = 1e-6f;
    int T = M, H = HIDDEN;
    long long n = (long long)M * HIDDEN;
    if (mode == MODE_ATK)
        return atk_check(atk_add_gemma_rmsnorm(m->atk, (atk_stream)m->stream, ATK_BF16, T, H, (void *)x,
                                               (void *)m->residual, (void *)w, (void *)y, eps),
                         m->atk, "atk_add_gemma_rmsnorm");
    if (mode == MODE_CUBLAS_NAIVE) {
        void *a[] = {&x, &m->residual, &w, &y, &T, &H, &eps};
        return launch(m, m->k_naive, (unsigned)T, 1, 256, a); /* a block per row */
    }
    /* the unfused chain, one elementary op per kernel (templates/baseline/) */
    unsigned g = (unsigned)((n + 1023) / 1024), gt = (unsigned)((T + 1023) / 1024);
    long long nt = T;
    void *a1[] = {&x, &m->residual, &n}, *a2[] = {&m->residual, &m->f_x, &n}, *a3[] = {&m->f_x, &m->f_sq, &n},
         *a4[] = {&m->f_sq, &m->f_ms, &T, &H}, *a5[] = {&m->f_ms, &m->f_rs, &nt, &eps},
         *a6[] = {&m->f_x, &m->f_rs, &m->f_xn, &n, &H}, *a7[] = {&m->f_xn, &w, &m->f_yw, &n, &H},
         *a8[] = {&m->f_yw, &y, &n};
    return launch(m, m->k_add, g, 1, 256, a1) || launch(m, m->k_cast_f32, g, 1, 256, a2) ||
           launch(m, m->k_square, g, 1, 256, a3) || launch(m, m->k_mean, (unsigned)T, 1, 256, a4) ||
           launch(m, m->k_rsqrt, gt, 1, 256, a5) || launch(m, m->k_mul_rows, g, 1, 256, a6) ||
           launch(m, m->k_mul_weight, g, 1, 256, a7) || launch(m, m->k_cast_back, g, 1, 256, a8);
}

#define ON(k) (mask & (1u << (k)))

int kind_in_mode(enum op_kind k, enum mode mode)
{
    if (k == K_ATTN || k == K_LINEAR)
        return 1;
    return (mode == MODE_FUSED) == (k >= K_NORM_QKVG);
}

/* Layer L's mixer stand-in over its projections in m->big (the recurrence:
** q, k, v, z, beta and decay, a row of QKVZBA per token) into m->out, the
** same in every mode: the recurrence 8 blocks per head (standin_linear's
** 16-column slices), the attention 256 outputs a block. */
static int standin_mixer(model *m, unsigned mask, layer *L, unsigned rows)
{
    if (L->linear) {
        void *a[] = {&m->big, &L->state, &m->out};
        return ON(K_LINEAR) && launch_own(m, m->k_linear, LHEADS * 8, rows, LDIM, a);
    }
    void *a[] = {&m->big, &m->out};
    return ON(K_ATTN) && launch_own(m, m->k_attn, HIDDEN / 256, rows, 256, a);
}

/* mode 4: y[M,N] = rne(gemma_rmsnorm(residual) . W^T) */
static int norm_gemv(model *m, int M, CUdeviceptr w, CUdeviceptr W, CUdeviceptr y, int N)
{
    return atk_check(atk_gemma_rmsnorm_gemv(m->atk, (atk_stream)m->stream, ATK_BF16, M, HIDDEN, N,
                                            (void *)m->residual, (void *)w, (void *)W, (void *)y, 1e-6f,
                                            (void *)m->fused_scratch),
                     m->atk, "atk_gemma_rmsnorm_gemv");
}

/* mode 4: residual[M,HIDDEN] += x[M,K] . W^T, rounded as the GEMV and the add */
static int gemv_add(model *m, int M, CUdeviceptr x, CUdeviceptr W, int K)
{
    return atk_check(atk_gemv_add(m->atk, (atk_stream)m->stream, ATK_BF16, M, K, HIDDEN, (void *)x, (void *)W,
                                  (void *)m->residual),
                     m->atk, "atk_gemv_add");
}

/* Whether atk serves fused op `op` at M x HIDDEN x N with a fused kernel
** (not its unfused sequence: the fallback or a stored "unfused" answer);
** always under DECODE_BOUNDARIES=fused. */
static int fused_here(model *m, int op, int M, int N)
{
    atk_choice ch;
    if (m->always_fused)
        return 1;
    return atk_explain(m->atk, op, ATK_BF16, M, HIDDEN, N, &ch) == ATK_OK && ch.path != ATK_PATH_FALLBACK &&
           strcmp(ch.strategy, "unfused") != 0;
}

/* mode 4, a boundary whose fused op runs unfused: the normalized residual
** into m->normed, the delta the GEMV before left in m->delta added first
** (atk_add_gemma_rmsnorm, as mode 3) when one is pending. */
static int norm_into(model *m, int M, int *pending, CUdeviceptr w)
{
    if (*pending) {
        *pending = 0;
        return norm(m, MODE_ATK, M, m->delta, w, m->normed);
    }
    return atk_check(atk_gemma_rmsnorm(m->atk, (atk_stream)m->stream, ATK_BF16, M, HIDDEN, (void *)m->residual,
                                       (void *)w, (void *)m->normed, 1e-6f),
                     m->atk, "atk_gemma_rmsnorm");
}

/* mode 4, the GEMV whose output is the residual's delta: the add in its
** epilogue (gemv_add) when the fused op after it runs fused; else into
** m->delta, the add left to that op's norm (*pending): where the fused op
** runs unfused anyway, the plain GEMV and the add+norm kernel beat the add
** epilogue and a plain norm (on the H200 at M >= 4: gemv_add 2048 -> 2048
** is 0.8 us slower than the gemv at M = 16, add+norm 0.2 us slower than
** the norm). */
static int delta_gemv(model *m, int M, CUdeviceptr x, CUdeviceptr W, int K, int next_fused, int *pending)
{
    if (next_fused)
        return gemv_add(m, M, x, W, K);
    *pending = 1;
    return gemv(m, MODE_ATK, M, x, W, m->delta, K, HIDDEN);
}

/* Mode 4: the residual stream lives in m->residual from the embeddings on;
** every norm is in the prologue of the GEMV that reads it, SwiGLU in the
** gate/up GEMV's epilogue, every residual add in the epilogue of the GEMV
** that produces the delta: per layer 3 (linear: 4) atk calls and the
** stand-in, no add, norm or SiLU*mul kernel between them. Where atk runs a
** boundary's fused op unfused at this M (fused_here), that boundary runs
** as mode 3 does: the GEMV before it into m->delta, atk_add_gemma_rmsnorm
** into m->normed, the GEMV after it on m->normed; each kind of the
** breakdown keeps the kernels of its boundary. */
static int step_fused(model *m, unsigned mask, int M)
{
    const unsigned rows = (unsigned)M;
    const int f_qkvg = fused_here(m, ATK_OP_GEMMA_RMSNORM_GEMV, M, QKVG),
              f_qkvzba = fused_here(m, ATK_OP_GEMMA_RMSNORM_GEMV, M, QKVZBA),
              f_swiglu = fused_here(m, ATK_OP_GEMMA_RMSNORM_GEMV_SWIGLU, M, INTER),
              f_lm = fused_here(m, ATK_OP_GEMMA_RMSNORM_GEMV, M, VOCAB);
    int pending = 0; /* m->delta holds a delta the next norm must add */
    if (cu_check(cuMemcpyDtoDAsync(m->residual, m->embed, (size_t)M * HIDDEN * 2, m->stream), "copy"))
        return 1;
    for (int l = 0; l < LAYERS; l++) {
        layer *L = &m->layers[l];
        const int swap_norms = m->fault == FAULT_SWAP_NORMS;
        CUdeviceptr n1 = swap_norms ? L->norm2 : L->norm1, n2 = swap_norms ? L->norm1 : L->norm2;
        const int n_in = in_width(L), f_in = L->linear ? f_qkvzba : f_qkvg;
        if (ON(L->linear ? K_NORM_QKVZBA : K_NORM_QKVG) &&
            (f_in ? norm_gemv(m, M, n1, L->w_in, m->big, n_in)
                  : norm_into(m, M, &pending, n1) || gemv(m, MODE_ATK, M, m->normed, L->w_in, m->big, HIDDEN, n_in)))
            return 1;
        if (standin_mixer(m, mask, L, rows))
            return 1;
        if (ON(K_ATTN_O_ADD) && delta_gemv(m, M, m->out, L->w_out, HIDDEN, f_swiglu, &pending))
            return 1;
        /* w_gate_up is [2 * INTER, HIDDEN]: the gate rows, then the up rows
        ** (silu_mul reads gate at i, up at INTER + i of the GEMV's row) */
        CUdeviceptr wg = L->w_gate_up, wu = L->w_gate_up + (CUdeviceptr)INTER * HIDDEN * 2;
        if (m->fault == FAULT_SWAP_GATE_UP) {
            CUdeviceptr t = wg;
            wg = wu;
            wu = t;
        }
        if (ON(K_NORM_SWIGLU) &&
            (f_swiglu ? atk_check(atk_gemma_rmsnorm_gemv_swiglu(m->atk, (atk_stream)m->stream, ATK_BF16, M, HIDDEN,
                                                                 INTER, (void *)m->residual, (void *)n2, (void *)wg,
                                                                 (void *)wu, (void *)m->act, 1e-6f,
                                                                 (void *)m->fused_scratch),
                                  m->atk, "atk_gemma_rmsnorm_gemv_swiglu")
                      : norm_into(m, M, &pending, n2) ||
                            atk_check(atk_gemv_swiglu(m->atk, (atk_stream)m->stream, ATK_BF16, M, HIDDEN, INTER,
                                                      (void *)m->normed, (void *)wg, (void *)wu, (void *)m->act,
                                                      (void *)m->fused_scratch),
                                      m->atk, "atk_gemv_swiglu")))
            return 1;
        if (m->fault == FAULT_DROP_ADD && l == LAYERS - 1)
            continue;
        const int next_fused = l + 1 < LAYERS ? (m->layers[l + 1].linear ? f_qkvzba : f_qkvg) : f_lm;
        if (ON(K_DOWN_ADD) && delta_gemv(m, M, m->act, L->w_down, INTER, next_fused, &pending))
            return 1;
    }
    return ON(K_NORM_LM_HEAD) && (f_lm ? norm_gemv(m, M, m->norm_final, m->w_lm, m->logits, VOCAB)
                                       : norm_into(m, M, &pending, m->norm_final) ||
                                             gemv(m, MODE_ATK, M, m->normed, m->w_lm, m->logits, HIDDEN, VOCAB));
}

int model_step(model *m, enum mode mode, unsigned mask, int M)
{
    if (M < 1 || M > m->max_batch) {
        fprintf(stderr, "decode: a step of %d tokens: out of range 1..%d\n", M, m->max_batch);
        return 1;
    }
    if (mode == MODE_FUSED)
        return step_fused(m, mask, M);
    const unsigned rows = (unsigned)M;
    /* fresh tokens: residual = 0, the first norm adds the embeddings (row t
    ** of embed is token t's) */
    if (cu_check(cuMemsetD16Async(m->residual, 0, (size_t)M * HIDDEN, m->stream), "memset") ||
        cu_check(cuMemcpyDtoDAsync(m->delta, m->embed, (size_t)M * HIDDEN * 2, m->stream), "copy"))
        return 1;
    for (int l = 0; l < LAYERS; l++) {
        layer *L = &m->layers[l];
        if (ON(K_NORM) && norm(m, mode, M, m->delta, L->norm1, m->normed))
            return 1;
        if (ON(L->linear ? K_QKVZBA : K_QKVG) && gemv(m, mode, M, m->normed, L->w_in, m->big, HIDDEN, in_width(L)))
            return 1;
        if (standin_mixer(m, mask, L, rows))
            return 1;
        if ((ON(K_ATTN_O) && gemv(m, mode, M, m->out, L->w_out, m->delta, HIDDEN, HIDDEN)) ||
            (ON(K_NORM) && norm(m, mode, M, m->delta, L->norm2, m->normed)) ||
            (ON(K_GATE_UP) && gemv(m, mode, M, m->normed, L->w_gate_up, m->big, HIDDEN, 2 * INTER)))
            return 1;
        int inter = INTER;
        void *a[] = {&m->big, &m->act, &inter};
        if ((ON(K_SILU_MUL) && launch_own(m, m->k_silu_mul, INTER / 256, rows, 256, a)) ||
            (ON(K_DOWN) && gemv(m, mode, M, m->act, L->w_down, m->delta, INTER, HIDDEN)))
            return 1;
    }
    return (ON(K_NORM) && norm(m, mode, M, m->delta, m->norm_final, m->normed)) ||
           (ON(K_LM_HEAD) && gemv(m, mode, M, m->normed, m->w_lm, m->logits, HIDDEN, VOCAB));
}

/* ------------------------------------------------------ the step's limit */

void model_step_bytes(const model *m, double M, step_bytes *b)
{
    const double e = 2.0 * M; /* bytes per activation element, all rows */
    const int linear = LAYERS / 4 * 3, full = LAYERS - linear;
    b->weights = (double)m->weight_bytes;
    /* per layer: the input GEMVs read the residual and write their outputs;
    ** o_proj reads out, reads and writes the residual; gate_up reads the
    ** residual, writes act (SwiGLU in its epilogue); down reads act, reads
    ** and writes the residual. Then the embeddings in, the final norm's
    ** read of the residual and the logits out. */
    const double common = e * (HIDDEN + 2.0 * HIDDEN) + e * (HIDDEN + INTER) + e * (INTER + 2.0 * HIDDEN);
    b->activations = linear * (e * (HIDDEN + QKVZBA) + common) +
                     full * (e * (HIDDEN + QKVG) + common) + e * HIDDEN + e * (HIDDEN + VOCAB);
    /* the stand-ins: the recurrence reads q, k, v, z, beta, decay and its
    ** fp32 state, writes the state and out; the attention reads v and the
    ** gate and writes out */
    b->standins = linear * (e * (QKVZ + BA + HIDDEN) + 2.0 * M * LHEADS * LDIM * LDIM * 4.0) +
                  full * (e * (HIDDEN + 512 + HIDDEN));
}

int model_read_ceiling(model *m, int sms, double *gbps)
{
    CUdeviceptr src = m->w_lm, sink = m->f_ms; /* sink: never written (no word xors to the magic) */
    long long words = (long long)((size_t)VOCAB * HIDDEN * 2 / 16);
    CUevent a = NULL, b = NULL;
    double best = 1e30;
    int rc = cu_check(cuEventCreate(&a, CU_EVENT_DEFAULT), "event") ||
             cu_check(cuEventCreate(&b, CU_EVENT_DEFAULT), "event");
    for (int u = 0; u < 2 && !rc; u++)
        for (int per_sm = 1; per_sm <= 8 && !rc; per_sm *= 2) {
            CUgraph g = NULL;
            CUgraphExec exec = NULL;
            void *args[] = {&src, &words, &sink};
            rc = cu_check(cuStreamBeginCapture(m->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "begin capture");
            for (int i = 0; i < 4 && !rc; i++)
                rc = launch(m, m->k_read[u], (unsigned)(sms * per_sm), 1, 512, args);
            int rc2 = cu_check(cuStreamEndCapture(m->stream, &g), "end capture");
            rc = rc || rc2 || cu_check(cuGraphInstantiate(&exec, g, 0), "cuGraphInstantiate") ||
                 cu_check(cuGraphLaunch(exec, m->stream), "cuGraphLaunch"); /* warm-up */
            for (int r = 0; r < 5 && !rc; r++) {
                float ms = 0.0f;
                rc = cu_check(cuEventRecord(a, m->stream), "record") ||
                     cu_check(cuGraphLaunch(exec, m->stream), "cuGraphLaunch") ||
                     cu_check(cuEventRecord(b, m->stream), "record") || cu_check(cuEventSynchronize(b), "sync") ||
                     cu_check(cuEventElapsedTime(&ms, a, b), "elapsed");
                if (!rc && 1000.0 * ms / 4 < best)
                    best = 1000.0 * ms / 4;
            }
            if (exec)
                cuGraphExecDestroy(exec);
            if (g)
                cuGraphDestroy(g);
        }
    if (a)
        cuEventDestroy(a);
    if (b)
        cuEventDestroy(b);
    *gbps = rc ? 0.0 : (double)words * 16.0 / (best * 1e3);
    return rc;
}
