/* The VHDX writer's -o options and layout: qemu-img 7.2's default block
 * sizes at their boundaries (values qemu-img create wrote), its rounding
 * of block_size and log_size and its refusals with its messages, and the
 * layout of a new image (regions a MiB apart, the BAT large enough, the
 * sector bitmap entries counted). */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "formats/vhdx/format.h"
#include "formats/vhdx/write.h"
#include "util/kvopts.h"

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define TIB (UINT64_C(1) << 40)

static int parse(const char *opts, uint64_t size, struct vhdxw_params *p, char *err)
{
    struct kvopts o = { 0 };
    int r;

    if (opts && kvopts_parse(&o, opts, err, 256) < 0)
        return -100;
    r = vhdxw_parse_params(opts ? &o : NULL, size, p, err, 256);
    kvopts_free(&o);
    return r;
}

static void default_block(void)
{
    /* disk size, block size qemu-img create chose */
    static const struct { uint64_t size; uint32_t block; } t[] = {
        { 1, 8 << 20 },
        { GIB, 8 << 20 },
        { GIB + 1, 16 << 20 },
        { 100 * GIB, 16 << 20 },
        { 100 * GIB + 1, 32 << 20 },
        { 32 * TIB, 32 << 20 },
        { 32 * TIB + 1, 64u << 20 },
        { 64 * TIB, 64u << 20 },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        struct vhdxw_params p;
        char err[256];
        CHECK(parse(NULL, t[i].size, &p, err) == 0, "%s", err);
        CHECK(p.block_size == t[i].block, "%llu: %u", (unsigned long long)t[i].size,
              p.block_size);
        CHECK(p.log_size == MIB && p.zero_state && !p.fixed);
    }
}

static void options(void)
{
    /* option list, block size and log size qemu-img wrote (0: refused with
     * this message) */
    static const struct { const char *o; uint32_t block, log; const char *msg; } t[] = {
        { "block_size=1", 1 << 20, 1 << 20, NULL },
        { "block_size=512K", 1 << 20, 1 << 20, NULL },
        { "block_size=1536K", 2 << 20, 1 << 20, NULL },
        { "block_size=256M", 256u << 20, 1 << 20, NULL },
        { "block_size=300M", 256u << 20, 1 << 20, NULL },
        { "block_size=3M", 0, 0, "Block size must be a power of two" },
        { "block_size=2097153", 0, 0, "Block size must be a power of two" },
        { "log_size=1", 8 << 20, 1 << 20, NULL },
        { "log_size=1536K", 8 << 20, 2 << 20, NULL },
        { "log_size=4095M", 8 << 20, 4095u << 20, NULL },
        { "log_size=0", 0, 0, "Log size must be a multiple of 1 MB" },
        { "log_size=4G", 0, 0, "Log size must be smaller than 4 GB" },
        /* qemu-img's order: the log size before the block size */
        { "log_size=0,block_size=3M", 0, 0, "Log size must be a multiple of 1 MB" },
        { "subformat=foo", 0, 0, "Parameter 'subformat' does not accept value 'foo'" },
        { "block_state_zero=maybe", 0, 0, "expects 'on' or 'off'" },
        { "preallocation=full", 0, 0, "preallocation=off only" },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        struct vhdxw_params p;
        char err[256] = "";
        int r = parse(t[i].o, GIB, &p, err);
        if (t[i].msg) {
            CHECK(r == -EINVAL && strstr(err, t[i].msg), "%s: %d '%s'", t[i].o, r, err);
            continue;
        }
        CHECK(r == 0, "%s: %s", t[i].o, err);
        CHECK(p.block_size == t[i].block && p.log_size == t[i].log, "%s: %u %u", t[i].o,
              p.block_size, p.log_size);
    }
    struct vhdxw_params p;
    char err[256];
    CHECK(parse("subformat=fixed,block_state_zero=off", GIB, &p, err) == 0);
    CHECK(p.fixed && !p.zero_state);
    CHECK(parse(NULL, 64 * TIB + 1, &p, err) == -EFBIG &&
          strstr(err, "Image size too large; max of 64TB"));
    /* the size check comes first */
    CHECK(parse("log_size=0", 65 * TIB, &p, err) == -EFBIG);
    CHECK(parse(NULL, 0, &p, err) == -EINVAL);
    /* the size in whole sectors, as qemu-img rounds it */
    CHECK(parse(NULL, 1000, &p, err) == 0 && p.size == 1024 && p.asked == 1000);
    CHECK(parse(NULL, MIB + 1, &p, err) == 0 && p.size == MIB + 512);
}

static void layout(void)
{
    struct vhdxw_params p;
    struct vhdxw_layout l;
    char err[256];

    /* qemu-img's places: log at 1 MiB, BAT, metadata */
    CHECK(parse(NULL, 100 * MIB, &p, err) == 0);
    vhdxw_layout(&p, &l);
    CHECK(l.blocks == 13 && l.chunk_ratio == 512 && l.bat_entries == 13);
    CHECK(l.log_off == MIB && l.bat_off == 2 * MIB && l.bat_len == MIB &&
          l.meta_off == 3 * MIB && l.meta_len == MIB && l.data_off == 4 * MIB);
    /* 4097 blocks of 1 MiB: one sector bitmap entry after the first 4096 */
    CHECK(parse("block_size=1M,log_size=3M", 4097 * MIB, &p, err) == 0);
    vhdxw_layout(&p, &l);
    CHECK(l.blocks == 4097 && l.chunk_ratio == 4096 && l.bat_entries == 4098);
    CHECK(l.bat_off == 4 * MIB && l.meta_off == 5 * MIB && l.data_off == 6 * MIB);
    CHECK(l.bat_entries == vhdx_bat_entries(p.size, p.block_size, 512, false));
    /* the largest BAT: 64 TiB of 1 MiB blocks */
    CHECK(parse("block_size=1M", 64 * TIB, &p, err) == 0);
    vhdxw_layout(&p, &l);
    CHECK(l.bat_entries == (64 << 20) + (64 << 20) / 4096 - 1);
    CHECK(l.bat_len >= l.bat_entries * 8 && l.bat_len % MIB == 0 && l.bat_len <= UINT32_MAX);
    CHECK(vhdxw_default_block(GIB) == 8 << 20);
}

int main(void)
{
    default_block();
    options();
    layout();
    return failures != 0;
}
