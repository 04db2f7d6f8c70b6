/*
** sha256.c — SHA-256 (FIPS 180-4), plain C, no external library.
** Used for the cache key digest, the search-space digest and to check that a
** stored cubin blob is the one that was written. Invariant: the output is
** always 64 lower-case hex digits and a NUL, for any input (len 0 included).
*/
#include "cache.h"

#include <string.h>

typedef struct sha256_ctx {
    uint32_t h[8];
    uint64_t total; /* bytes hashed so far */
    unsigned char block[64];
    size_t fill; /* bytes waiting in block */
} sha256_ctx;

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotr(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

/* One 64-byte block into the state (FIPS 180-4, 6.2.2). */
static void sha256_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    uint32_t e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = hh + S1 + ch + K[i] + w[i];
        uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

static void sha256_init(sha256_ctx *ctx)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(ctx->h, iv, sizeof iv);
    ctx->total = 0;
    ctx->fill = 0;
}

static void sha256_update(sha256_ctx *ctx, const unsigned char *p, size_t len)
{
    ctx->total += len;
    if (ctx->fill) {
        size_t take = 64 - ctx->fill < len ? 64 - ctx->fill : len;
        memcpy(ctx->block + ctx->fill, p, take);
        ctx->fill += take;
        p += take;
        len -= take;
        if (ctx->fill < 64)
            return;
        sha256_block(ctx->h, ctx->block);
        ctx->fill = 0;
    }
    for (; len >= 64; p += 64, len -= 64)
        sha256_block(ctx->h, p);
    if (len) {
        memcpy(ctx->block, p, len);
        ctx->fill = len;
    }
}

/* Pads with 0x80, zeros and the 64-bit big-endian bit length (5.1.1). */
static void sha256_final(sha256_ctx *ctx, unsigned char out[32])
{
    uint64_t bits = ctx->total * 8;
    unsigned char pad[72] = {0x80};
    size_t padlen = ctx->fill < 56 ? 56 - ctx->fill : 120 - ctx->fill;
    for (int i = 0; i < 8; i++)
        pad[padlen + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_update(ctx, pad, padlen + 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(ctx->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(ctx->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(ctx->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)ctx->h[i];
    }
}

void at_sha256_hex(const void *data, size_t len, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    sha256_ctx ctx;
    unsigned char md[32];
    sha256_init(&ctx);
    if (len)
        sha256_update(&ctx, data, len);
    sha256_final(&ctx, md);
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = '\0';
}
