/* dd_plan (qemu-img dd's size rules) and bd_window (a part of an image as
 * an image): the range and size for count/skip at and around the input's
 * end and the overflow bounds; a window reads the inner image's bytes at
 * its offset, zeros past the copied part, passes holes through, and
 * refuses a range outside the inner image. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dd.h"
#include "formats/bd.h"
#include "formats/bd_window.h"
#include "io/bfile.h"
#include "util/diag.h"

static void plan(uint64_t bs, int has_count, uint64_t count, int has_skip, uint64_t skip,
                 uint64_t in_size, uint64_t start, uint64_t len, uint64_t out, bool past)
{
    struct dd_params p = { .bs = bs, .has_count = has_count, .count = count,
                           .has_skip = has_skip, .skip = skip };
    struct dd_plan pl;

    dd_plan(&p, in_size, &pl);
    CHECK(pl.start == start && pl.data_len == len && pl.out_size == out &&
          pl.skip_past_end == past,
          "bs=%llu count=%d:%llu skip=%d:%llu size=%llu: start %llu len %llu out %llu past %d",
          (unsigned long long)bs, has_count, (unsigned long long)count, has_skip,
          (unsigned long long)skip, (unsigned long long)in_size,
          (unsigned long long)pl.start, (unsigned long long)pl.data_len,
          (unsigned long long)pl.out_size, pl.skip_past_end);
}

static void test_plan(void)
{
    const uint64_t M = 1 << 20, MAX = INT64_MAX;

    plan(512, 0, 0, 0, 0, 10 * M, 0, 10 * M, 10 * M, false);       /* everything */
    plan(M, 1, 3, 1, 1, 10 * M, M, 2 * M, 2 * M, false);            /* count from 0 */
    plan(M, 1, 3, 1, 5, 10 * M, 0, 0, 0, true);                     /* skip past count */
    plan(M, 1, 3, 1, 3, 10 * M, 3 * M, 0, 0, false);                /* skip = count: empty, no warning */
    plan(M, 0, 0, 1, 10, 10 * M, 10 * M, 0, 0, false);              /* skip = end */
    plan(M, 0, 0, 1, 11, 10 * M, 0, 0, 0, true);
    plan(1000, 1, 1, 0, 0, 10 * M, 0, 1000, 1024, false);           /* a sector's rest */
    plan(7, 1, 143000, 1, 142857, 3073000, 999999, 1001, 1024, false);
    plan(M, 1, 100, 0, 0, 10 * M + 5, 0, 10 * M + 5, 10 * M + 512, false);
    plan(512, 1, 0, 0, 0, 10 * M, 0, 0, 0, false);                  /* count=0 */
    plan(512, 1, MAX, 0, 0, 10 * M, 0, 10 * M, 10 * M, false);      /* count x bs overflows */
    plan(INT32_MAX, 1, MAX / INT32_MAX + 1, 0, 0, 10 * M, 0, 10 * M, 10 * M, false);
    plan(512, 0, 0, 1, MAX, 10 * M, 0, 0, 0, true);                 /* skip x bs overflows */
    plan(512, 0, 0, 1, MAX / 512, 10 * M, 0, 0, 0, true);
    plan(512, 0, 0, 0, 0, 0, 0, 0, 0, false);                       /* an empty input */
    plan(512, 0, 0, 1, 1, 0, 0, 0, 0, true);
}

static struct bd *raw_mem(const uint8_t *buf, size_t len, struct diag *d)
{
    struct bfile *f;
    struct bd *bd = NULL;
    static const struct bd_open_opts o = { .format = "raw" };

    if (bfile_open_mem(&f, "mem.raw", buf, len, d) < 0 || bd_open_bfile(&bd, f, &o, NULL, d) < 0)
        return NULL;
    return bd;
}

static void test_window(void)
{
    enum { LEN = 64 * 1024 };
    uint8_t *img = malloc(LEN), buf[LEN];
    struct diag d;
    struct bd *in, *w;
    struct bd_extent e;

    diag_init(&d);
    for (size_t i = 0; i < LEN; i++)
        img[i] = (uint8_t)(i * 7 + 1);
    CHECK((in = raw_mem(img, LEN, &d)) != NULL);
    /* bytes [1000, 1000 + 5000) of the image, then zeros up to 8192 */
    CHECK(bd_window_open(&w, in, 1000, 5000, 8192, &d) == 0);
    CHECK(w->size == 8192);
    memset(buf, 0xee, sizeof(buf));
    CHECK(bd_pread(w, buf, 8192, 0) == 0);
    CHECK(memcmp(buf, img + 1000, 5000) == 0, "window bytes");
    bool zeros = true;
    for (size_t i = 5000; i < 8192; i++)
        zeros &= buf[i] == 0;
    CHECK(zeros, "the padding reads as zeros");
    CHECK(bd_pread(w, buf, 100, 4950) == 0 && memcmp(buf, img + 5950, 50) == 0 && buf[50] == 0,
          "a read across the end of the copied part");
    CHECK(bd_block_status(w, 0, 8192, &e) == 0 && e.len == 5000 && (e.flags & BD_DATA),
          "block status of the copied part: len %llu flags %u", (unsigned long long)e.len,
          e.flags);
    CHECK(bd_block_status(w, 5000, 3192, &e) == 0 && e.len == 3192 &&
          (e.flags & BD_ZERO) && !(e.flags & BD_DATA), "block status of the padding");
    CHECK(bd_pread(w, buf, 1, 8192) < 0, "a read past the window's end");
    bd_close(w);                    /* closes `in` too (ASan: no leak) */

    /* a range outside the inner image is refused (and inner closed) */
    diag_init(&d);
    CHECK((in = raw_mem(img, LEN, &d)) != NULL);
    CHECK(bd_window_open(&w, in, LEN - 10, 11, 512, &d) == -EINVAL && w == NULL);
    diag_init(&d);
    CHECK((in = raw_mem(img, LEN, &d)) != NULL);
    CHECK(bd_window_open(&w, in, LEN + 1, 0, 512, &d) == -EINVAL);
    diag_init(&d);
    CHECK((in = raw_mem(img, LEN, &d)) != NULL);
    CHECK(bd_window_open(&w, in, 0, 1024, 512, &d) == -EINVAL, "data longer than the size");
    free(img);
}

int main(void)
{
    test_plan();
    test_window();
    return failures != 0;
}
