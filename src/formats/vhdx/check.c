/* VHDX: check.  qemu-img 7.2 checks a vhdx by replaying its log (with -r
 * all; counted as one corruption fixed) and by looking for blocks past the
 * end of the file.  This reports, as "ERROR: ..." lines counted as
 * corruptions: a log that still needs replaying, a damaged header or region
 * table copy, and every BAT entry the reader refuses (unknown state,
 * reserved bits, a block past the end of the file, over the metadata, or
 * over another block).  With -r all the log is replayed into the file
 * (then both headers are written anew without it), and a damaged header or
 * region table is rewritten from the good one; BAT problems are not
 * repaired.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vhdx/vhdx_int.h"
#include "io/bfile.h"
#include "util/diag.h"

static void corrupt(struct vhdx *v, struct bd_check_result *res, int64_t off,
                    const char *fmt, const char *what)
{
    char msg[400];

    snprintf(msg, sizeof(msg), fmt, what);
    diag_warn(v->bd.diag, v->bd.filename, off, "ERROR: %s", msg);
    res->corruptions++;
}

/* Rewrite the damaged copy of the region table from the one in use. */
static int fix_region(struct vhdx *v, int bad)
{
    uint8_t *b = malloc(VHDX_REGION_SIZE);
    int r;

    if (!b)
        return diag_fail(v->bd.diag, -ENOMEM, v->bd.filename, -1, "out of memory");
    uint64_t from = v->region_used ? VHDX_REGION2_OFF : VHDX_REGION1_OFF;
    uint64_t to = bad ? VHDX_REGION2_OFF : VHDX_REGION1_OFF;
    if ((r = vhdx_vread(v, b, VHDX_REGION_SIZE, from, "the region table")) == 0 &&
        (r = bfile_pwrite(v->bd.file, b, VHDX_REGION_SIZE, to)) == 0)
        r = bfile_sync(v->bd.file);
    free(b);
    return r;
}

/* Is region table `i` (as the file holds it, through the log) valid? */
static int region_ok(struct vhdx *v, int i, char *why, size_t len)
{
    uint8_t *b = malloc(VHDX_REGION_SIZE);
    struct vhdx_regions reg;
    int r;

    if (!b)
        return diag_fail(v->bd.diag, -ENOMEM, v->bd.filename, -1, "out of memory");
    r = vhdx_vread(v, b, VHDX_REGION_SIZE, i ? VHDX_REGION2_OFF : VHDX_REGION1_OFF,
                   "the region table");
    if (r == 0) {
        r = vhdx_regions_decode(b, &reg, why, len) == 0 ? 1 : 0;
        /* a valid copy must say what the one in use says */
        if (r && (reg.bat.off != v->reg.bat.off || reg.bat.len != v->reg.bat.len ||
                  reg.meta.off != v->reg.meta.off || reg.meta.len != v->reg.meta.len)) {
            snprintf(why, len, "it differs from the region table in use");
            r = 0;
        }
    }
    free(b);
    return r;
}

int vhdx_check(struct bd *bd, struct bd_check_result *res, unsigned fix)
{
    struct vhdx *v = to_vhdx(bd);
    bool fix_errors = fix & BD_CHECK_FIX_ERRORS;
    char why[200];
    int r;

    memset(res, 0, sizeof(*res));
    if (v->log.replayed && !v->log.written) {
        if (fix_errors) {
            if ((r = vhdx_log_commit(v)) < 0)
                return r;
            res->corruptions_fixed++;
        } else {
            snprintf(why, sizeof(why), "%u entries, sequence numbers %llu to %llu",
                     v->log.entries, (unsigned long long)v->log.tail_seq,
                     (unsigned long long)v->log.head_seq);
            corrupt(v, res, (int64_t)v->hdr.log_offset, "the log holds writes not yet "
                    "replayed into the file (%s); check -r all replays them", why);
        }
    }
    /* the other header: damaged, or still naming a log the current one
     * has left behind, is fine (an update in progress); damaged is not */
    int other = !v->cur;
    if (!v->hdr_ok[other]) {
        if (fix_errors && bd->file->writable) {
            /* the log, if any, is in the file by now */
            if ((r = vhdx_write_headers(v)) < 0)
                return r;
            res->corruptions_fixed++;
        } else {
            corrupt(v, res, VHDX_HEADER1_OFF + (int64_t)other * VHDX_HEADER_BLOCK,
                    "header %s", other ? "2 is damaged" : "1 is damaged");
            diag_warn(bd->diag, bd->filename, -1, "  (%s)", v->hdr_err[other]);
        }
    }
    for (int i = 0; i < 2; i++) {
        if (i == v->region_used)
            continue;
        if ((r = region_ok(v, i, why, sizeof(why))) < 0)
            return r;
        if (r)
            continue;
        if (fix_errors && bd->file->writable) {
            if ((r = fix_region(v, i)) < 0)
                return r;
            res->corruptions_fixed++;
        } else {
            corrupt(v, res, i ? VHDX_REGION2_OFF : VHDX_REGION1_OFF, "region table %s",
                    i ? "2 is damaged" : "1 is damaged");
            diag_warn(bd->diag, bd->filename, -1, "  (%s)", why);
        }
    }
    if (v->n_bad) {
        for (uint64_t i = 0; i < v->n_bat; i++) {
            if (!(v->bad[i / 8] >> (i % 8) & 1))
                continue;
            char msg[300];
            vhdx_bat_problem(v, i, why, sizeof(why));
            snprintf(msg, sizeof(msg), "BAT entry %llu: %s", (unsigned long long)i, why);
            corrupt(v, res, vhdx_bat_entry_off(v, i), "%s", msg);
        }
    }
    return 0;
}
