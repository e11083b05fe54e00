/* The VHDX log's overlay (vhdx_ov_build, vhdx_ov_find): random writes of
 * data and zeros, overlapping in every way, against a byte map the writes
 * are applied to in order (the last write wins); the segments must be
 * sorted, non-empty, non-overlapping, cover exactly the bytes written,
 * and hold each byte's last value; lookups find the first segment that
 * meets a range. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "formats/vhdx/vhdx_int.h"

#define SPACE 65536
#define MAXOPS 64

static void one_round(unsigned seed)
{
    static uint8_t data[MAXOPS][SPACE];
    static uint8_t ref[SPACE], written[SPACE];
    struct vhdx_ov_op ops[MAXOPS];
    struct vhdx_overlay ov = { 0 };

    srand(seed);
    size_t n = (size_t)(rand() % MAXOPS);
    memset(ref, 0, sizeof(ref));
    memset(written, 0, sizeof(written));
    for (size_t i = 0; i < n; i++) {
        /* 512-byte granules mostly, sometimes 4 KiB aligned ranges */
        uint64_t g = rand() % 4 ? 512 : 4096;
        uint64_t off = (uint64_t)(rand() % (SPACE / g)) * g;
        uint64_t len = (uint64_t)(1 + rand() % 8) * g;
        if (off + len > SPACE)
            len = SPACE - off;
        bool zero = rand() % 3 == 0;
        for (uint64_t k = 0; k < len; k++)
            data[i][k] = (uint8_t)(i * 37 + k * 7 + 1) | 1;  /* never 0 */
        ops[i] = (struct vhdx_ov_op){ off, off + len, zero ? NULL : data[i], (uint32_t)i };
        for (uint64_t k = 0; k < len; k++) {
            ref[off + k] = zero ? 0 : data[i][k];
            written[off + k] = 1;
        }
    }
    CHECK(vhdx_ov_build(ops, n, &ov) == 0);
    uint64_t prev_end = 0;
    for (size_t s = 0; s < ov.n; s++) {
        const struct vhdx_ov_seg *g = &ov.seg[s];
        CHECK(g->len > 0, "seed %u: empty segment", seed);
        CHECK(s == 0 || g->off >= prev_end, "seed %u: segments overlap or are out of order", seed);
        CHECK(g->off + g->len <= SPACE);
        for (uint64_t k = 0; k < g->len && g->off + k < SPACE; k++) {
            uint64_t b = g->off + k;
            uint8_t v = g->data ? g->data[k] : 0;
            if (!written[b] || v != ref[b]) {
                CHECK(0, "seed %u: byte %llu: %u, want %u (written %d)", seed,
                      (unsigned long long)b, v, ref[b], written[b]);
                break;
            }
            written[b] = 2;
        }
        prev_end = g->off + g->len;
    }
    for (uint64_t b = 0; b < SPACE; b++)
        if (written[b] == 1) {
            CHECK(0, "seed %u: byte %llu written but in no segment", seed, (unsigned long long)b);
            break;
        }
    /* lookups */
    for (int t = 0; t < 200; t++) {
        uint64_t off = (uint64_t)(rand() % SPACE), len = (uint64_t)(1 + rand() % 8192);
        const struct vhdx_ov_seg *f = vhdx_ov_find(&ov, off, len);
        const struct vhdx_ov_seg *want = NULL;
        for (size_t s = 0; s < ov.n && !want; s++)
            if (ov.seg[s].off < off + len && off < ov.seg[s].off + ov.seg[s].len)
                want = &ov.seg[s];
        CHECK(f == want, "seed %u: find(%llu, %llu)", seed, (unsigned long long)off,
              (unsigned long long)len);
    }
    free(ov.seg);
}

int main(void)
{
    for (unsigned seed = 1; seed <= 400 && failures < 10; seed++)
        one_round(seed);
    /* no writes: no segments */
    struct vhdx_overlay ov = { 0 };
    CHECK(vhdx_ov_build(NULL, 0, &ov) == 0 && ov.n == 0);
    free(ov.seg);
    return failures != 0;
}
