/* convert: move the guest bytes of one or more source images into an output
 * image, format-agnostic.
 *
 *   plan    block status of the sources -> jobs: zero gaps (never read) and
 *           data ranges of at most one chunk, aligned to the output granule
 *   read    worker threads read data jobs (compressed input is inflated in
 *           those threads by the drivers), several jobs in flight
 *   detect  each chunk is split into data and zero runs (zerodetect)
 *   encode  with -c, worker threads compress each output granule
 *   write   the calling thread hands runs to the output driver in order
 *           (or as they come with out_of_order), zero runs become holes
 *
 * The caller opens the sources, creates the output (bd_driver.create), runs
 * convert_run(), then commits (finish + rename) or aborts.
 */
#ifndef DISKIMG_CONVERT_H
#define DISKIMG_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bd;
struct diag;
struct ioq;

/* Copy offload (io/offload.h): data whose bytes sit in a file is shared
 * (FICLONERANGE) or copied by the kernel (copy_file_range) into the output
 * instead of passing through buffers; zero runs are still found (through a
 * read-only mapping of the source) and left as holes. */
enum convert_offload {
    CONVERT_OFFLOAD_OFF,       /* read, scan and write everything */
    CONVERT_OFFLOAD_AUTO,      /* where the files allow, else as OFF */
    CONVERT_OFFLOAD_REQUIRED,  /* as AUTO, but fail when data was converted
                                  and none of it could be offloaded */
};

struct convert_opts {
    struct bd **src;           /* sources, one after the other in this order,
                                  each after the first starting on a 512-byte
                                  sector boundary (zeros between) */
    size_t nsrc;
    struct bd *out;            /* created output image */
    struct bd *out_backing;    /* the output's backing image opened for
                                  reading (-B), or NULL: only what differs
                                  from it is written */
    uint64_t sparse_size;      /* -S: shortest zero run left as a hole;
                                  0 = write everything (fully allocated) */
    unsigned threads;          /* worker threads (>= 1) */
    unsigned inflight;         /* chunks in flight (>= 1) */
    bool out_of_order;         /* -W: write chunks as they become ready */
    bool compress;             /* -c: compress data granules */
    bool sequential;           /* a source is a stream: read strictly in
                                  order, no lookahead, no threads */
    bool salvage;              /* read errors become zeros and warnings */
    struct diag *src_diag;     /* with salvage: where the sources report
                                  (kept apart from the command's diag) */
    bool skip_gaps;            /* zero ranges known from metadata need no
                                  write_zeroes (sparsify in place) */
    struct ioq *ioq;           /* the output's write queue, reaped here */
    enum convert_offload offload;  /* never with compress, out_backing,
                                      sequential, salvage (then OFF) */

    /* Called on the calling thread as work completes (done <= total; total
     * is 0 while the size of a stream is unknown). */
    void (*progress)(void *opaque, uint64_t done, uint64_t total);
    void *progress_opaque;
};

struct convert_stats {
    uint64_t total;            /* virtual bytes converted */
    uint64_t read;             /* bytes read from the sources */
    uint64_t written;          /* data bytes handed to the output */
    uint64_t compressed;       /* bytes after compression (with -c) */
    uint64_t zero_meta;        /* zero bytes known from metadata (not read) */
    uint64_t zero_scan;        /* zero bytes found by scanning */
    uint64_t salvaged;         /* bytes that could not be read (salvage) */
    uint64_t shared;           /* of `written`: shared with the source (reflink) */
    uint64_t offloaded;        /* of `written`: copied by copy_file_range */
    const char *offload_off;   /* why offload did not run at all, or NULL */
    int offload_refused;       /* errno of the last answer that stopped it
                                  (for every source, or for one: EXDEV), or 0 */
    unsigned threads;
    size_t chunk;
};

/* The virtual size of the sources laid out one after the other: each but
 * the last rounded up to whole 512-byte sectors (qemu-img's layout), plus
 * the last one's size.  UINT64_MAX for a raw stream of unknown size (then
 * convert_run reads to its end and reports the size in stats.total; it
 * must be the only source, in sequential mode), or when the sum does not
 * fit. */
uint64_t convert_total_size(struct bd **src, size_t nsrc);

int convert_run(const struct convert_opts *o, struct diag *d,
                struct convert_stats *st);

#endif
