/* qcow2 writer: -o options into validated parameters (messages as qemu-img
 * 7.2 words them, so scripts that match them keep working). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/format.h"
#include "formats/qcow2/write.h"
#include "util/kvopts.h"

static bool is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

static unsigned log2u(uint64_t v)
{
    unsigned n = 0;
    while (v > 1) {
        v >>= 1;
        n++;
    }
    return n;
}

static int bad(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static int parse_compat(struct kvopts *kv, struct qcow2w_params *p, char *err, size_t errlen)
{
    const char *s = kvopts_get(kv, "compat");

    if (!s)
        return 0;
    p->has_compat = true;
    if (!strcmp(s, "0.10") || !strcmp(s, "v2"))
        p->version = 2;
    else if (!strcmp(s, "1.1") || !strcmp(s, "v3"))
        p->version = 3;
    else
        return bad(err, errlen, "Parameter 'compat' does not accept value '%s' "
                   "(use 0.10 or 1.1)", s);
    return 0;
}

static int parse_refcount_bits(struct kvopts *kv, struct qcow2w_params *p,
                               char *err, size_t errlen)
{
    const char *s = kvopts_get(kv, "refcount_bits");
    char *end;

    if (!s)
        return 0;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-')
        return bad(err, errlen, "Parameter 'refcount_bits' expects a number, got '%s'", s);
    if (!is_pow2(v) || v > 64)
        return bad(err, errlen, "Refcount width must be a power of two and may not "
                   "exceed 64 bits");
    p->refcount_order = log2u(v);
    return 0;
}

static int parse_prealloc(struct kvopts *kv, struct qcow2w_params *p, char *err, size_t errlen)
{
    static const char *const names[] = { "off", "metadata", "falloc", "full" };
    const char *s = kvopts_get(kv, "preallocation");

    if (!s)
        return 0;
    p->has_prealloc = true;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (!strcmp(s, names[i])) {
            p->prealloc = (enum qcow2w_prealloc)i;
            return 0;
        }
    }
    return bad(err, errlen, "Parameter 'preallocation' does not accept value '%s'", s);
}

static int refuse_unsupported(struct kvopts *kv, char *err, size_t errlen)
{
    static const char *const crypt_keys[] = {
        "encryption", "encrypt.format", "encrypt.key-secret", "encrypt.cipher-alg",
        "encrypt.cipher-mode", "encrypt.hash-alg", "encrypt.iter-time",
        "encrypt.ivgen-alg", "encrypt.ivgen-hash-alg",
    };
    bool b;

    for (size_t i = 0; i < sizeof(crypt_keys) / sizeof(crypt_keys[0]); i++) {
        const char *s = kvopts_get(kv, crypt_keys[i]);
        if (s && !(i == 0 && kvopts_get_bool(kv, "encryption", &b, err, errlen) == 1 && !b))
            return bad(err, errlen, "encrypted images are not supported");
    }
    if (kvopts_get(kv, "data_file") || kvopts_get(kv, "data_file_raw"))
        return bad(err, errlen, "writing images with an external data file is not supported");
    return 0;
}

int qcow2w_parse_params(struct kvopts *kv, const struct bd_create_opts *co,
                        struct qcow2w_params *p, char *err, size_t errlen)
{
    uint64_t cs = 65536, sz;
    const char *s;
    int r;

    memset(p, 0, sizeof(*p));
    /* qemu rounds the virtual size up to whole 512-byte sectors */
    p->size = co->size + (uint64_t)(-co->size & 511);
    p->version = 3;
    p->refcount_order = 4;
    p->compression_type = QCOW2_COMPRESSION_ZLIB;
    p->backing_file = co->backing_file;
    p->backing_fmt = co->backing_fmt;

    if ((r = refuse_unsupported(kv, err, errlen)) < 0)
        return r;
    if ((r = parse_compat(kv, p, err, errlen)) < 0)
        return r;
    if ((r = kvopts_get_size(kv, "cluster_size", &cs, err, errlen)) < 0)
        return r;
    if (!is_pow2(cs) || cs < (1u << QCOW2_MIN_CLUSTER_BITS) ||
        cs > (1u << QCOW2_MAX_CLUSTER_BITS))
        return bad(err, errlen, "Cluster size must be a power of two between 512 and 2048k");
    p->cluster_bits = log2u(cs);
    if ((r = parse_refcount_bits(kv, p, err, errlen)) < 0)
        return r;
    if ((r = kvopts_get_bool(kv, "lazy_refcounts", &p->lazy_refcounts, err, errlen)) < 0)
        return r;
    if ((r = kvopts_get_bool(kv, "extended_l2", &p->extended_l2, err, errlen)) < 0)
        return r;
    if ((s = kvopts_get(kv, "compression_type"))) {
        if (!strcmp(s, "zlib"))
            p->compression_type = QCOW2_COMPRESSION_ZLIB;
        else if (!strcmp(s, "zstd"))
            p->compression_type = QCOW2_COMPRESSION_ZSTD;
        else
            return bad(err, errlen, "Parameter 'compression_type' does not accept value '%s'", s);
    }
    if ((r = parse_prealloc(kv, p, err, errlen)) < 0)
        return r;
    if ((s = kvopts_get(kv, "backing_file"))) {
        if (p->backing_file && strcmp(p->backing_file, s))
            return bad(err, errlen, "backing file given twice ('%s' and -o backing_file)",
                       p->backing_file);
        p->backing_file = s;
    }
    if ((s = kvopts_get(kv, "backing_fmt"))) {
        if (p->backing_fmt && strcmp(p->backing_fmt, s))
            return bad(err, errlen, "backing format given twice ('%s' and -o backing_fmt)",
                       p->backing_fmt);
        p->backing_fmt = s;
    }
    /* "size" is the command's business; a value here must still be a size */
    if ((r = kvopts_get_size(kv, "size", &sz, err, errlen)) < 0)
        return r;

    if (p->version < 3) {
        if (p->refcount_order != 4)
            return bad(err, errlen, "Different refcount widths than 16 bits require "
                       "compatibility level 1.1 or above (use compat=1.1)");
        if (p->lazy_refcounts)
            return bad(err, errlen, "Lazy refcounts only supported with compatibility "
                       "level 1.1 and above (use compat=1.1)");
        if (p->extended_l2)
            return bad(err, errlen, "Extended L2 entries are only supported with "
                       "compatibility level 1.1 and above (use compat=1.1)");
        if (p->compression_type != QCOW2_COMPRESSION_ZLIB)
            return bad(err, errlen, "Non-zlib compression type is only supported with "
                       "compatibility level 1.1 and above (use compat=1.1)");
    }
    if (p->extended_l2 && p->cluster_bits < QCOW2_EXTL2_MIN_CLUSTER_BITS)
        return bad(err, errlen, "Extended L2 entries are only supported with cluster "
                   "sizes of at least 16384 bytes");
    if (p->backing_fmt && !p->backing_file)
        return bad(err, errlen, "Backing format cannot be used without backing file");
    if (p->backing_file && strlen(p->backing_file) > QCOW2_MAX_BACKING_NAME)
        return bad(err, errlen, "Backing file name too long (more than 1023 bytes)");
    if (p->backing_fmt && strlen(p->backing_fmt) > QCOW2_MAX_BACKING_NAME)
        return bad(err, errlen, "Backing format name too long");
    if (p->backing_file && p->prealloc != QCOW2W_PREALLOC_OFF && !p->extended_l2)
        return bad(err, errlen, "Backing file and preallocation can only be used at the "
                   "same time if extended_l2 is on");
    if (co->compress && p->prealloc != QCOW2W_PREALLOC_OFF)
        return bad(err, errlen, "Compression and preallocation not supported at the same "
                   "time");
    if (co->size > (UINT64_C(1) << 62))
        return bad(err, errlen, "The image size is too large for file format 'qcow2'");
    return 0;
}

uint64_t qcow2w_l1_entries(const struct qcow2w_params *p, char *err, size_t errlen)
{
    uint64_t cs = UINT64_C(1) << p->cluster_bits;
    uint64_t l2_entries = cs / (p->extended_l2 ? 16 : 8);
    uint64_t clusters = (p->size + cs - 1) / cs;
    uint64_t l1 = (clusters + l2_entries - 1) / l2_entries;

    if (l1 > QCOW2_MAX_L1_BYTES / 8) {
        snprintf(err, errlen, "The image size is too large for file format 'qcow2' "
                 "(try using a larger cluster size)");
        return 0;
    }
    return l1 ? l1 : 1;
}

const char qcow2w_options_help[] =
    "Supported qcow2 options:\n"
    "  backing_file=<str>     - File name of a base image\n"
    "  backing_fmt=<str>      - Image format of the base image\n"
    "  cluster_size=<size>    - qcow2 cluster size (512 to 2M, a power of two; default 64K)\n"
    "  compat=<str>           - Compatibility level (0.10 [v2] or 1.1 [v3], default 1.1)\n"
    "  compression_type=<str> - Compression method for -c: zlib (default) or zstd\n"
    "  extended_l2=<bool (on/off)> - Extended L2 tables (cluster_size >= 16K)\n"
    "  lazy_refcounts=<bool (on/off)> - Postpone refcount updates\n"
    "  preallocation=<str>    - Preallocation mode (allowed values: off, metadata, falloc, full)\n"
    "  refcount_bits=<num>    - Width of a reference count entry in bits (1..64, default 16)\n"
    "  size=<size>            - Virtual disk size\n";

/* Appends to buf like snprintf at buf + *used; stops quietly when full. */
__attribute__((format(printf, 4, 5)))
static void put(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
    va_list ap;

    if (*used >= len)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used += (size_t)n < len - *used ? (size_t)n : len - *used;
}

void qcow2w_describe_create(const struct bd_create_opts *co, char *buf, size_t len)
{
    static const char *const pre[] = { "off", "metadata", "falloc", "full" };
    /* parse a copy: the keys the real parse takes must stay unmarked */
    struct kvopts o = { 0 };
    struct qcow2w_params p;
    char err[256];
    size_t used = 0;
    int r = 0;

    if (!len)
        return;
    buf[0] = 0;
    for (size_t i = 0; co->o && i < co->o->n && r == 0; i++)
        r = kvopts_set(&o, co->o->v[i].key, co->o->v[i].val);
    if (r == 0 && qcow2w_parse_params(&o, co, &p, err, sizeof(err)) == 0) {
        put(buf, len, &used, " cluster_size=%u extended_l2=%s", 1u << p.cluster_bits,
            p.extended_l2 ? "on" : "off");
        if (p.has_prealloc)
            put(buf, len, &used, " preallocation=%s", pre[p.prealloc]);
        put(buf, len, &used, " compression_type=%s size=%llu",
            p.compression_type ? "zstd" : "zlib", (unsigned long long)co->size);
        if (p.backing_file)
            put(buf, len, &used, " backing_file=%s", p.backing_file);
        if (p.backing_fmt)
            put(buf, len, &used, " backing_fmt=%s", p.backing_fmt);
        if (p.has_compat)
            put(buf, len, &used, " compat=%s", p.version >= 3 ? "1.1" : "0.10");
        put(buf, len, &used, " lazy_refcounts=%s refcount_bits=%u",
            p.lazy_refcounts ? "on" : "off", 1u << p.refcount_order);
    } else {
        put(buf, len, &used, " size=%llu", (unsigned long long)co->size);
    }
    kvopts_free(&o);
}
