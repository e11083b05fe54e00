/* Fuzz target: the command-line value parsers, which see text from users
 * and scripts: `-o` option lists (kvopts), sizes (size_parse, size_human)
 * and the qcow2 and vhdx writers' option validation on top of them.
 * Input: any bytes; a NUL splits it into an option list and a size. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/write.h"
#include "formats/vhdx/format.h"
#include "formats/vhdx/write.h"
#include "fuzz_common.h"
#include "util/kvopts.h"
#include "util/size.h"

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz: %s\n", what);
        abort();
    }
}

static void fuzz_size(const char *s)
{
    static const uint64_t units[] = { 1, 512, 1u << 20 };
    char human[64];

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        uint64_t v = 0;
        int r = size_parse(s, units[i], &v);
        check(r == 0 || r == -EINVAL || r == -ERANGE, "size_parse: unexpected error");
        if (r == 0) {
            check(v <= (uint64_t)INT64_MAX, "size_parse: value past 2^63-1");
            size_human(v, human, sizeof(human));
            check(memchr(human, '\0', sizeof(human)) != NULL, "size_human: no NUL");
        }
    }
}

static void fuzz_kvopts(const char *s)
{
    struct kvopts o = { 0 };
    char err[256];
    int r = kvopts_parse(&o, s, err, sizeof(err));

    check(r == 0 || r == -EINVAL, "kvopts_parse: unexpected error");
    if (r == 0) {
        for (size_t i = 0; i < o.n; i++) {
            uint64_t v;
            bool b;
            check(o.v[i].key && o.v[i].val, "kvopts: NULL key or value");
            kvopts_get_size(&o, o.v[i].key, &v, err, sizeof(err));
            kvopts_get_bool(&o, o.v[i].key, &b, err, sizeof(err));
            o.v[i].used = false;
        }
        kvopts_wants_help(&o);
        /* the qcow2 writer's validation of the same list */
        struct bd_create_opts co = { 0 };
        struct qcow2w_params p;
        co.size = 1u << 30;
        co.o = &o;
        if (qcow2w_parse_params(&o, &co, &p, err, sizeof(err)) == 0)
            qcow2w_l1_entries(&p, err, sizeof(err));
        /* the vhdx writer's: what it accepts is a layout it can write */
        static const uint64_t sizes[] = { 1, 1000, UINT64_C(1) << 30, VHDX_MAX_SIZE,
                                          VHDX_MAX_SIZE + 1 };
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            struct vhdxw_params vp;
            struct vhdxw_layout l;
            char line[512];
            for (size_t j = 0; j < o.n; j++)
                o.v[j].used = false;
            co.size = sizes[i];
            vhdxw_describe_create(&co, line, sizeof(line));
            check(memchr(line, '\0', sizeof(line)) != NULL, "vhdx describe: no NUL");
            if (vhdxw_parse_params(&o, sizes[i], &vp, err, sizeof(err)) != 0)
                continue;
            check(vp.block_size >= VHDX_MIN_BLOCK && vp.block_size <= VHDX_MAX_BLOCK &&
                  !(vp.block_size & (vp.block_size - 1)), "vhdx: block size");
            check(vp.log_size >= VHDX_MIB && vp.log_size % VHDX_MIB == 0, "vhdx: log size");
            check(vp.size >= sizes[i] && vp.size % 512 == 0 && vp.size <= VHDX_MAX_SIZE,
                  "vhdx: size");
            vhdxw_layout(&vp, &l);
            check(l.bat_entries * VHDX_BAT_ENTRY_SIZE <= l.bat_len && l.bat_len <= UINT32_MAX &&
                  l.meta_off == l.bat_off + l.bat_len && l.data_off % VHDX_MIB == 0,
                  "vhdx: layout");
        }
        kvopts_unused(&o);
    }
    kvopts_free(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    fuzz_kvopts(s);
    fuzz_size(s);
    /* the part after the first NUL, if any, as a size too */
    size_t n = strlen(s);
    if (n < size)
        fuzz_size(s + n + 1);
    free(s);
    return 0;
}
