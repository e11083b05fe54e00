/* qcow2: is this image preallocated with preallocation=metadata?
 *
 * Such images have every data cluster allocated in the tables but the
 * file has holes under them, so block status must look at the file to
 * tell zeros from data.  In other images a data cluster is data (qemu
 * 7.2 reports it so, and measure and map must agree with it).  The test
 * is qemu's: the image counts as preallocated when the clusters in use
 * (refcount > 0) outnumber the clusters the file really occupies by a
 * ninth, and by at least two.  Found out once, on first use.
 */
#include <errno.h>
#include <stdint.h>

#include "formats/qcow2_int.h"
#include "formats/qcow2_rc.h"
#include "io/bfile.h"
#include "util/diag.h"

#define PREALLOC_SCAN_MAX (UINT64_C(64) << 20)   /* refcount entries looked at */

static int detect(struct qcow2 *q)
{
    struct bfile *f = q->bd.file;
    uint64_t cs = q->h.cluster_size;
    uint64_t real = bfile_allocated(f) / cs;
    uint64_t threshold = real * 10 / 9 > real + 2 ? real * 10 / 9 : real + 2;
    uint64_t end = q->file_size / cs + (q->file_size % cs != 0), used = 0;
    struct qcow2_rc rc;
    struct diag quiet;

    if (f->kind != BFILE_REGULAR || end < threshold)
        return 0;
    /* a damaged refcount structure only means "not preallocated" here */
    diag_init(&quiet);
    if (qcow2_rc_open(&rc, q, &quiet) < 0)
        return 0;
    /* ranges without a refcount block are skipped whole; a hostile table
     * full of blocks is looked at up to a bound */
    uint64_t looked = 0;
    for (uint64_t c = 0; c < end && used < threshold && looked < PREALLOC_SCAN_MAX; c++) {
        uint64_t v;
        if (!qcow2_rc_has_block(&rc, c)) {
            c = (c / rc.per_block + 1) * rc.per_block - 1;
            continue;
        }
        if (qcow2_rc_get(&rc, c, &v) < 0)
            break;
        used += v != 0;
        looked++;
    }
    qcow2_rc_close(&rc);
    return used >= threshold;
}

bool qcow2_metadata_preallocated(struct qcow2 *q)
{
    pthread_mutex_lock(&q->prealloc_lock);
    if (q->prealloc < 0)
        q->prealloc = detect(q);
    int v = q->prealloc;
    pthread_mutex_unlock(&q->prealloc_lock);
    return v == 1;
}
