/* qcow2 internal snapshots: the snapshot table, and reading one snapshot.
 *
 * A snapshot is a saved L1 table; reading it means walking that table
 * instead of the active one (read-only, like `qemu-img convert -l`).  The
 * virtual size stays the image's current size, as in qemu.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/read_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

/* Length of an entry without its padding (the last entry of a table may
 * end the file, unpadded). */
static size_t entry_size(const uint8_t *fixed)
{
    return QS_FIXED_LENGTH + (size_t)be32_get(fixed + QS_EXTRA_DATA_SIZE) +
           be16_get(fixed + QS_ID_STR_SIZE) + be16_get(fixed + QS_NAME_SIZE);
}

static char *dup_str(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

void qcow2_snapshot_clear(struct qcow2_snapshot *sn)
{
    free(sn->id);
    free(sn->name);
    sn->id = sn->name = NULL;
}

int qcow2_snapshot_decode(const struct qcow2_header *h, const uint8_t *buf, size_t len,
                          uint64_t where, struct qcow2_snapshot *sn, size_t *entry_len,
                          struct diag *d, const char *path)
{
    memset(sn, 0, sizeof(*sn));
    if (len < QS_FIXED_LENGTH)
        return diag_fail(d, -EINVAL, path, (int64_t)where,
                         "snapshot table entry at offset %" PRIu64 " is cut off", where);
    uint32_t extra = be32_get(buf + QS_EXTRA_DATA_SIZE);
    uint16_t id_len = be16_get(buf + QS_ID_STR_SIZE);
    uint16_t name_len = be16_get(buf + QS_NAME_SIZE);
    if (extra > QCOW2_MAX_SNAPSHOT_EXTRA)
        return diag_fail(d, -EINVAL, path, (int64_t)where + QS_EXTRA_DATA_SIZE,
                         "snapshot table entry at offset %" PRIu64 " has %" PRIu32
                         " bytes of extra data (max %d)", where, extra,
                         QCOW2_MAX_SNAPSHOT_EXTRA);
    size_t need = entry_size(buf);
    if (len < need)
        return diag_fail(d, -EINVAL, path, (int64_t)where,
                         "snapshot table entry at offset %" PRIu64 " (%zu bytes) is cut off",
                         where, need);
    const uint8_t *ex = buf + QS_FIXED_LENGTH;
    const uint8_t *id = ex + extra, *name = id + id_len;
    if (id_len == 0)
        return diag_fail(d, -EINVAL, path, (int64_t)where + QS_ID_STR_SIZE,
                         "snapshot table entry at offset %" PRIu64 " has an empty ID",
                         where);
    if (memchr(id, '\0', id_len) || memchr(name, '\0', name_len))
        return diag_fail(d, -EINVAL, path, (int64_t)where,
                         "snapshot table entry at offset %" PRIu64
                         " has a NUL byte in its ID or name", where);
    sn->entry_offset = where;
    sn->l1_table_offset = be64_get(buf + QS_L1_TABLE_OFFSET);
    sn->l1_size = be32_get(buf + QS_L1_SIZE);
    sn->date_sec = be32_get(buf + QS_DATE_SEC);
    sn->date_nsec = be32_get(buf + QS_DATE_NSEC);
    sn->vm_clock_nsec = be64_get(buf + QS_VM_CLOCK_NSEC);
    sn->vm_state_size = be32_get(buf + QS_VM_STATE_SIZE);
    sn->extra_size = extra;
    if (extra >= 8)
        sn->vm_state_size = be64_get(ex);
    if (extra >= 16) {
        sn->has_disk_size = true;
        sn->disk_size = be64_get(ex + 8);
    } else {
        sn->disk_size = h->size;
    }
    /* icount -1 means "not recorded" */
    if (extra >= 24 && be64_get(ex + 16) != UINT64_MAX) {
        sn->has_icount = true;
        sn->icount = be64_get(ex + 16);
    }
    sn->id = dup_str(id, id_len);
    sn->name = dup_str(name, name_len);
    if (!sn->id || !sn->name) {
        qcow2_snapshot_clear(sn);
        return diag_fail(d, -ENOMEM, path, -1, "out of memory");
    }
    *entry_len = need;
    return 0;
}

int qcow2_read_snapshots(struct qcow2 *q)
{
    struct bd *bd = &q->bd;
    const struct qcow2_header *h = &q->h;
    uint64_t off = h->snapshots_offset, end = off;
    uint8_t *buf = NULL;
    size_t cap = 0;
    int r = 0;

    if (h->nb_snapshots == 0)
        return 0;
    /* the table is kept while the image is open: the chain's budget */
    r = bd_table_budget(bd, (uint64_t)h->nb_snapshots * sizeof(*q->snaps), bd->filename,
                        "snapshot tables and other tables");
    if (r < 0)
        return r;
    q->snaps = calloc(h->nb_snapshots, sizeof(*q->snaps));
    if (!q->snaps)
        return diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
    for (uint32_t i = 0; i < h->nb_snapshots; i++) {
        uint8_t fixed[QS_FIXED_LENGTH];
        off = (end + 7) & ~7ULL;    /* entries start 8-aligned */
        if (off >= q->file_size || q->file_size - off < QS_FIXED_LENGTH) {
            r = diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                          "snapshot table entry %" PRIu32 " at offset %" PRIu64
                          " is past the end of the file (%" PRIu64 " bytes)", i, off,
                          q->file_size);
            break;
        }
        r = bfile_pread(bd->file, fixed, sizeof(fixed), off);
        if (r < 0)
            break;
        size_t n = entry_size(fixed);
        if (be32_get(fixed + QS_EXTRA_DATA_SIZE) > QCOW2_MAX_SNAPSHOT_EXTRA) {
            /* the decoder names the field at fault */
            size_t unused;
            r = qcow2_snapshot_decode(h, fixed, sizeof(fixed), off, &q->snaps[i], &unused,
                                      bd->diag, bd->filename);
            break;
        }
        if (off + n - h->snapshots_offset > QCOW2_MAX_SNAPSHOT_TABLE) {
            r = diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                          "snapshot table is larger than %u bytes (entry %" PRIu32 ")",
                          QCOW2_MAX_SNAPSHOT_TABLE, i);
            break;
        }
        if (n > q->file_size - off) {
            r = diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                          "snapshot table entry %" PRIu32 " at offset %" PRIu64
                          " (%zu bytes) runs past the end of the file", i, off, n);
            break;
        }
        if (n > cap) {
            uint8_t *nb = realloc(buf, n);
            if (!nb) {
                r = diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
                break;
            }
            buf = nb;
            cap = n;
        }
        r = bfile_pread(bd->file, buf, n, off);
        if (r < 0)
            break;
        size_t used;
        r = qcow2_snapshot_decode(h, buf, n, off, &q->snaps[i], &used, bd->diag,
                                  bd->filename);
        if (r < 0)
            break;
        q->nsnaps = i + 1;
        end = off + used;
    }
    free(buf);
    q->snapshots_size = end - h->snapshots_offset;
    /* the names and ids kept: at most the table's size */
    if (r == 0)
        r = bd_table_budget(bd, q->snapshots_size, bd->filename,
                            "snapshot tables and other tables");
    return r;
}

static int find_snapshot(struct qcow2 *q, const char *id, const char *name)
{
    for (uint32_t i = 0; i < q->nsnaps; i++) {
        if (id && strcmp(q->snaps[i].id, id) != 0)
            continue;
        if (name && strcmp(q->snaps[i].name, name) != 0)
            continue;
        return (int)i;
    }
    return -1;
}

int qcow2_find_snapshot(const struct qcow2 *q, const char *s)
{
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < q->nsnaps; i++)
            if (strcmp(pass ? q->snaps[i].name : q->snaps[i].id, s) == 0)
                return (int)i;
    return -1;
}

/* "snapshot.id=1,snapshot.name=x" -> id, name (malloc'd); 1 if the spec is
 * of that form, 0 if it is a plain NAME, <0 on a malformed list. */
static int parse_spec(const char *spec, char **id, char **name)
{
    *id = *name = NULL;
    if (strncmp(spec, "snapshot.", 9) != 0)
        return 0;
    char *copy = strdup(spec), *save = NULL;
    if (!copy)
        return -ENOMEM;
    int r = 1;
    for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char **dst = NULL;
        if (strncmp(kv, "snapshot.id=", 12) == 0)
            dst = id;
        else if (strncmp(kv, "snapshot.name=", 14) == 0)
            dst = name;
        if (!dst) {
            r = -EINVAL;
            break;
        }
        free(*dst);
        *dst = strdup(strchr(kv, '=') + 1);
        if (!*dst) {
            r = -ENOMEM;
            break;
        }
    }
    free(copy);
    if (r < 0) {
        free(*id);
        free(*name);
        *id = *name = NULL;
    }
    return r;
}

int qcow2_select_snapshot(struct qcow2 *q, const char *spec)
{
    struct bd *bd = &q->bd;
    char *id, *name;
    int i, r = parse_spec(spec, &id, &name);

    if (r == -ENOMEM)
        return diag_fail(bd->diag, r, bd->filename, -1, "out of memory");
    if (r < 0)
        return diag_fail(bd->diag, -EINVAL, bd->filename, -1,
                         "snapshot selector '%s' is not NAME, snapshot.id=ID or "
                         "snapshot.name=NAME", spec);
    if (r == 1)
        i = find_snapshot(q, id, name);
    else if ((i = find_snapshot(q, spec, NULL)) < 0)   /* like qemu: ID first */
        i = find_snapshot(q, NULL, spec);
    free(id);
    free(name);
    if (i < 0)
        return diag_fail(bd->diag, -ENOENT, bd->filename, -1,
                         "snapshot '%s' not found (the image has %" PRIu32 " snapshot%s)",
                         spec, q->nsnaps, q->nsnaps == 1 ? "" : "s");

    const struct qcow2_snapshot *sn = &q->snaps[i];
    if (sn->l1_table_offset & (q->h.cluster_size - 1) ||
        (sn->l1_size && sn->l1_table_offset == 0))
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)sn->entry_offset,
                         "snapshot '%s': L1 table offset 0x%" PRIx64
                         " is not a non-zero multiple of the cluster size", sn->name,
                         sn->l1_table_offset);
    if (sn->l1_size > QCOW2_MAX_L1_BYTES / 8)
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)sn->entry_offset,
                         "snapshot '%s': L1 table has %" PRIu32 " entries (max %u)",
                         sn->name, sn->l1_size, QCOW2_MAX_L1_BYTES / 8);
    /* entries past what the virtual size needs are never used */
    uint32_t loaded = sn->l1_size;
    if (loaded > q->h.l1_needed)
        loaded = (uint32_t)q->h.l1_needed;
    r = qcow2_load_l1(q, sn->l1_table_offset, sn->l1_size, loaded);
    if (r < 0 || (r = qcow2_meta_add_l2s(q)) < 0)
        return r;
    q->snapshot = i;
    return 0;
}
