/* VHDX writer: the -o options with qemu-img's defaults, rules and messages,
 * the "Formatting ..." wording, the layout of a new image, new GUIDs. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "formats/vhdx/format.h"
#include "formats/vhdx/write.h"
#include "util/kvopts.h"

const char vhdxw_options_help[] =
    "Supported vhdx options:\n"
    "  block_size=<size>      - Block Size; min 1MB, max 256MB. 0 means auto-calculate "
    "based on image size.\n"
    "  block_state_zero=<bool (on/off)> - Force use of payload blocks of type 'ZERO'. "
    "Non-standard, but default.  Do not set to 'off' when using 'qemu-img convert' with "
    "subformat=dynamic.\n"
    "  log_size=<size>        - Log size; min 1MB.\n"
    "  size=<size>            - Virtual disk size; max of 64TB.\n"
    "  subformat=<str>        - VHDX format type, can be either 'dynamic' or 'fixed'. "
    "Default is 'dynamic'.\n";

uint32_t vhdxw_default_block(uint64_t size)
{
    if (size > (UINT64_C(32) << 40))
        return 64u << 20;
    if (size > (UINT64_C(100) << 30))
        return 32u << 20;
    if (size > (UINT64_C(1) << 30))
        return 16u << 20;
    return 8u << 20;
}

static uint64_t round_mib(uint64_t v)
{
    return v > UINT64_MAX - (VHDX_MIB - 1) ? UINT64_MAX : (v + VHDX_MIB - 1) / VHDX_MIB * VHDX_MIB;
}

int vhdxw_parse_params(struct kvopts *kv, uint64_t size, struct vhdxw_params *p, char *err,
                       size_t errlen)
{
    uint64_t log = VHDX_MIB, block = 0, sz;
    const char *s;
    int r;

    memset(p, 0, sizeof(*p));
    p->asked = size;
    p->zero_state = true;
    if (kv) {
        /* bools and sizes first: qemu-img refuses a bad one before anything */
        if ((r = kvopts_get_bool(kv, "block_state_zero", &p->zero_state, err, errlen)) < 0 ||
            (r = kvopts_get_size(kv, "log_size", &log, err, errlen)) < 0 ||
            (r = kvopts_get_size(kv, "block_size", &block, err, errlen)) < 0 ||
            (r = kvopts_get_size(kv, "size", &sz, err, errlen)) < 0)
            return -EINVAL;
        if ((s = kvopts_get(kv, "preallocation")) && strcmp(s, "off") != 0) {
            snprintf(err, errlen, "vhdx output supports preallocation=off only");
            return -EINVAL;
        }
        if ((s = kvopts_get(kv, "subformat"))) {
            if (!strcmp(s, "fixed"))
                p->fixed = true;
            else if (strcmp(s, "dynamic") != 0) {
                snprintf(err, errlen, "Parameter 'subformat' does not accept value '%s'", s);
                return -EINVAL;
            }
        }
    }
    if (size > VHDX_MAX_SIZE) {
        snprintf(err, errlen, "Image size too large; max of 64TB");
        return -EFBIG;
    }
    /* qemu-img makes one (its BAT count wraps below zero and it writes a
     * 64 MiB BAT to match), but opens no other layout of it, and the
     * reader here refuses a disk of size 0: refused rather than written */
    if (size == 0) {
        snprintf(err, errlen, "a vhdx image cannot be empty (size 0)");
        return -EINVAL;
    }
    log = round_mib(log);
    if (log == 0) {
        snprintf(err, errlen, "Log size must be a multiple of 1 MB");
        return -EINVAL;
    }
    if (log > UINT32_MAX) {
        snprintf(err, errlen, "Log size must be smaller than 4 GB");
        return -EINVAL;
    }
    if (block == 0)
        block = vhdxw_default_block(size);
    block = round_mib(block);
    if (block > VHDX_MAX_BLOCK)
        block = VHDX_MAX_BLOCK;
    if (block & (block - 1)) {
        snprintf(err, errlen, "Block size must be a power of two");
        return -EINVAL;
    }
    p->block_size = (uint32_t)block;
    p->log_size = (uint32_t)log;
    /* a whole number of logical sectors, as qemu-img rounds it */
    p->size = (size + 511) / 512 * 512;
    return 0;
}

void vhdxw_layout(const struct vhdxw_params *p, struct vhdxw_layout *l)
{
    memset(l, 0, sizeof(*l));
    l->blocks = vhdx_data_blocks(p->size, p->block_size);
    l->chunk_ratio = vhdx_chunk_ratio(p->block_size, 512);
    l->bat_entries = l->blocks ? l->blocks + (l->blocks - 1) / l->chunk_ratio : 0;
    l->log_off = VHDX_HEADER_AREA;
    l->bat_off = l->log_off + p->log_size;
    l->bat_len = (l->bat_entries * VHDX_BAT_ENTRY_SIZE + VHDX_MIB - 1) / VHDX_MIB * VHDX_MIB;
    if (l->bat_len == 0)
        l->bat_len = VHDX_MIB;
    l->meta_off = l->bat_off + l->bat_len;
    l->meta_len = VHDX_MIB;
    l->data_off = l->meta_off + l->meta_len;
}

/* qemu-img's "Formatting" line: size, log_size and block_size always (as
 * numbers), then subformat and block_state_zero as given. */
void vhdxw_describe_create(const struct bd_create_opts *co, char *buf, size_t len)
{
    const struct kvopts *kv = co->o;
    const char *given[4] = { NULL, NULL, NULL, NULL };
    static const char *const keys[] = { "log_size", "block_size", "subformat",
                                        "block_state_zero" };
    size_t used;
    int n;

    if (!len)
        return;
    for (size_t j = 0; kv && j < kv->n; j++)
        for (size_t i = 0; i < 4; i++)
            if (!strcmp(kv->v[j].key, keys[i]))
                given[i] = kv->v[j].val;
    uint64_t num[2] = { VHDX_MIB, 0 };
    for (size_t i = 0; i < 2; i++) {
        struct kvopts one = { 0 };
        char e[8];
        if (given[i] && kvopts_set(&one, keys[i], given[i]) == 0)
            kvopts_get_size(&one, keys[i], &num[i], e, sizeof(e));
        kvopts_free(&one);
    }
    n = snprintf(buf, len, " size=%llu log_size=%llu block_size=%llu",
                 (unsigned long long)co->size, (unsigned long long)num[0],
                 (unsigned long long)num[1]);
    if (n < 0)
        return;
    used = (size_t)n;
    for (size_t i = 2; i < 4 && used < len; i++)
        if (given[i] && (n = snprintf(buf + used, len - used, " %s=%s", keys[i], given[i])) > 0)
            used += (size_t)n;
}

void vhdxw_new_guid(uint8_t g[16])
{
    if (getrandom(g, 16, GRND_NONBLOCK) != 16) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t a = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
        uint64_t b = a * 0xbf58476d1ce4e5b9ull ^ (uint64_t)getpid();
        memcpy(g, &a, 8);
        memcpy(g + 8, &b, 8);
    }
    /* version 4 in the third group, stored little-endian: its high byte is 7 */
    g[7] = (uint8_t)((g[7] & 0x0f) | 0x40);
    g[8] = (uint8_t)((g[8] & 0x3f) | 0x80);
}
