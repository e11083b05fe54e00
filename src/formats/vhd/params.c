/* VHD writer: -o options, qemu-img's help and "Formatting ..." wording,
 * the new footer, unique ids. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "formats/vhd/vhd_int.h"
#include "formats/vhd/write.h"
#include "util/kvopts.h"

const char vhdw_options_help[] =
    "Supported vpc options:\n"
    "  azure=<bool (on/off)>  - An image Azure accepts: subformat=fixed,force_size=on, "
    "the size a whole MiB\n"
    "  force_size=<bool (on/off)> - Force disk size calculation to use the actual size "
    "specified, rather than using the nearest CHS-based calculation\n"
    "  size=<size>            - Virtual disk size\n"
    "  subformat=<str>        - Type of virtual hard disk format. Supported formats are "
    "{dynamic (default) | fixed} \n";

int vhdw_parse_params(struct kvopts *kv, uint64_t size, struct vhdw_params *p, char *err,
                      size_t errlen)
{
    const char *s;
    int r;

    memset(p, 0, sizeof(*p));
    p->asked = size;
    p->block_size = VHD_DEFAULT_BLOCK;
    if (kv) {
        if ((s = kvopts_get(kv, "subformat"))) {
            if (!strcmp(s, "fixed"))
                p->fixed = true;
            else if (strcmp(s, "dynamic") != 0) {
                snprintf(err, errlen, "Invalid subformat '%s' (subformat is dynamic or fixed)", s);
                return -EINVAL;
            }
        }
        if ((r = kvopts_get_bool(kv, "force_size", &p->force_size, err, errlen)) < 0 ||
            (r = kvopts_get_bool(kv, "azure", &p->azure, err, errlen)) < 0)
            return r;
        uint64_t sz;
        if (kvopts_get_size(kv, "size", &sz, err, errlen) < 0)
            return -EINVAL;
        if ((s = kvopts_get(kv, "preallocation")) && strcmp(s, "off") != 0) {
            snprintf(err, errlen, "vpc output supports preallocation=off only");
            return -EINVAL;
        }
    }
    if (p->azure) {
        if ((kv && (s = kvopts_get(kv, "subformat")) && strcmp(s, "fixed") != 0) ||
            (kv && kvopts_get(kv, "force_size") && !p->force_size)) {
            snprintf(err, errlen, "azure=on is subformat=fixed,force_size=on");
            return -EINVAL;
        }
        p->fixed = p->force_size = true;
        if (size % (UINT64_C(1) << 20)) {
            uint64_t up = (size | ((UINT64_C(1) << 20) - 1)) + 1;
            snprintf(err, errlen, "azure=on: the size %llu is not a whole MiB, and Azure "
                     "refuses such images (resize the source to %llu bytes, %llu MiB, first)",
                     (unsigned long long)size, (unsigned long long)up,
                     (unsigned long long)(up >> 20));
            return -EINVAL;
        }
    }
    if (vhd_create_geometry(size, p->force_size, &p->size, &p->cyls, &p->heads,
                            &p->secs) < 0) {
        snprintf(err, errlen, "The image size is too large for file format 'vpc' (at most "
                 "2040 GiB)");
        return -EFBIG;
    }
    return 0;
}

void vhdw_describe_create(const struct bd_create_opts *co, char *buf, size_t len)
{
    const struct kvopts *kv = co->o;
    static const char *const keys[] = { "subformat", "force_size", "azure" };
    size_t used;
    int n;

    if (!len)
        return;
    if ((n = snprintf(buf, len, " size=%llu", (unsigned long long)co->size)) < 0)
        return;
    used = (size_t)n;
    for (size_t i = 0; i < 3 && used < len; i++) {
        const char *v = NULL;
        for (size_t j = 0; kv && j < kv->n; j++)
            if (!strcmp(kv->v[j].key, keys[i]))
                v = kv->v[j].val;
        if (v && i > 0)
            v = (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "yes")) ? "on" : "off";
        if (v && (n = snprintf(buf + used, len - used, " %s=%s", keys[i], v)) > 0)
            used += (size_t)n;
    }
}

void vhd_new_uuid(uint8_t u[16])
{
    if (getrandom(u, 16, GRND_NONBLOCK) != 16) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t a = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
        uint64_t b = a * 0xbf58476d1ce4e5b9ull ^ (uint64_t)getpid();
        memcpy(u, &a, 8);
        memcpy(u + 8, &b, 8);
    }
    u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);    /* version 4 */
    u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
}

void vhdw_footer(const struct vhdw_params *p, uint8_t uuid[16], struct vhd_footer *f)
{
    memset(f, 0, sizeof(*f));
    f->features = VHD_FEATURE_RESERVED;
    f->version = VHD_VERSION;
    f->data_offset = p->fixed ? VHD_NO_OFFSET : VHD_FOOTER_SIZE;
    time_t now = time(NULL);
    f->timestamp = (uint64_t)now > VHD_EPOCH ? (uint32_t)((uint64_t)now - VHD_EPOCH) : 0;
    memcpy(f->creator_app, p->force_size ? "qem2" : "qemu", 4);
    f->creator_version = 0x00050003;
    f->creator_os = 0x5769326b;                 /* 'Wi2k' */
    f->orig_size = f->current_size = p->size;
    f->cyls = p->cyls;
    f->heads = p->heads;
    f->secs = p->secs;
    f->type = p->fixed ? VHD_TYPE_FIXED : VHD_TYPE_DYNAMIC;
    memcpy(f->uuid, uuid, 16);
}
