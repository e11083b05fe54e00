/* The VMDK reader's private state, shared by open.c (the driver),
 * read_sparse.c (grain directories, grain tables, grains), read_markers.c
 * and read_scan.c (a streamOptimized extent's markers) and read_stream.c
 * (forward-only reading of streamOptimized files from a pipe). */
#ifndef DISKIMG_VMDK_INT_H
#define DISKIMG_VMDK_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "codec/codec.h"
#include "formats/bd.h"
#include "formats/metamap.h"
#include "formats/vmdk/format.h"

struct bfile;

/* A grain found by scanning markers (no usable grain directory). */
struct vmdk_grain_loc {
    uint64_t grain;         /* grain index in the extent */
    uint64_t file_off;      /* byte offset of its grain marker */
};

struct vmdk_extent {
    enum vmdk_ext_type type;    /* FLAT (VMFS is read as FLAT), SPARSE, ZERO, VMFSSPARSE */
    uint64_t start, len;        /* guest bytes covered */
    struct bfile *file;         /* NULL for ZERO; owned by struct vmdk */
    char *name;                 /* for info and messages */
    uint64_t flat_off;          /* FLAT: byte offset of the data in `file` */

    /* sparse (KDMV and COWD) */
    struct vmdk4_header hdr;    /* KDMV only */
    uint32_t grain_bytes;
    uint32_t gtes;              /* entries per grain table */
    uint64_t capacity;          /* bytes the grain directory covers */
    uint64_t file_size;
    bool compressed, markers, zero_grain;
    uint32_t gd_n;
    uint32_t *gd;               /* sector of each grain table, 0 = none */
    struct metamap meta;        /* with gd: where the extent's metadata is */
    struct vmdk_grain_loc *scan;  /* instead of gd: grains found by scanning */
    size_t n_scan;

    /* read from a pipe: a grain directory read before the grains */
    bool dir_known;             /* it was read (else the stream must end with EOS) */
    bool dir_grains;            /* it lists at least one grain */
    uint64_t dir_last;          /* byte offset of the last grain it lists */
};

/* A walk over the markers of a streamOptimized extent (read_markers.c). */
struct vmdk_walk {
    uint64_t pos;               /* byte offset of the next object */
    bool footer;                /* a footer marker was passed */
};

#define VMDK_GT_SLOTS    64
#define VMDK_GRAIN_SLOTS 4

struct vmdk_gt_slot {
    const struct vmdk_extent *x;
    uint32_t gd_idx;
    uint64_t stamp;
    uint32_t *ent;              /* VMDK_MAX_GTES entries, allocated on first use */
};

struct vmdk_grain_slot {
    const struct vmdk_extent *x;
    uint64_t grain;
    uint64_t stamp;
    uint8_t *data;              /* inflated grain, x->grain_bytes */
};

/* Forward-only reading of a streamOptimized extent (stdin).  A reader
 * thread walks the markers and inflates grains into a small queue while the
 * caller converts the previous ones (the caller is one thread: the pipeline
 * reads a stream strictly in order). */
#define VMDK_STREAM_QUEUE 8

struct vmdk_sgrain {
    uint64_t grain;             /* grain index */
    uint8_t *data;              /* inflated, grain_bytes */
};

struct vmdk_stream {
    /* the reader thread's side */
    struct vmdk_walk walk;      /* where the next marker is */
    uint64_t next_min;          /* smallest grain index allowed next */
    uint8_t *cdata;             /* compressed bytes of the grain being read */
    pthread_t thread;
    bool started;

    /* shared, under vmdk.lock */
    pthread_cond_t cv_put, cv_get;
    struct vmdk_sgrain queue[VMDK_STREAM_QUEUE];
    uint8_t *spare[VMDK_STREAM_QUEUE + 2];  /* grain buffers to reuse */
    size_t head, count, n_spare;
    bool done;                  /* the reader stopped (end of stream or error) */
    int err;                    /* its error, or 0 */
    bool stop;                  /* close(): the reader must stop */

    /* the caller's side */
    bool eos;                   /* the queue is drained and the reader done */
    bool have;                  /* cur holds the grain at or after the last offset */
    struct vmdk_sgrain cur;
    uint64_t released;          /* guest bytes below this were handed out */
};

struct vmdk {
    struct bd bd;
    struct vmdk_desc desc;      /* parsed descriptor (embedded or file) */
    bool monolithic;            /* the image file is the only (sparse) extent */
    struct vmdk_extent *ext;
    size_t n_ext;
    struct bfile **files;       /* extent files opened (bd.file excluded) */
    size_t n_files;

    pthread_mutex_t lock;       /* guards the caches and the stream state */
    uint64_t clock;
    struct vmdk_gt_slot gt[VMDK_GT_SLOTS];
    struct vmdk_grain_slot gr[VMDK_GRAIN_SLOTS];

    bool streaming;             /* the single extent is read from a pipe */
    struct vmdk_stream st;
};

/* Count `bytes` more of grain directories, scan indexes and metadata maps
 * against the chain's budget (BD_MAX_TABLE_BYTES: 8192 extents naming one
 * file with a 16 MiB directory, or 63 descriptors naming each other as
 * parents, must not add up). */
int vmdk_table_budget(struct vmdk *v, const struct vmdk_extent *x, uint64_t bytes);

/* read_sparse.c */
/* `head`: the file's first bytes if already read, else NULL. */
int vmdk_sparse_open(struct vmdk *v, struct vmdk_extent *x, uint64_t desc_sectors,
                     const uint8_t *head, size_t head_len);
int vmdk_cowd_open(struct vmdk *v, struct vmdk_extent *x, uint64_t desc_sectors);
int vmdk_sparse_block_status(struct vmdk *v, struct vmdk_extent *x, uint64_t off,
                             uint64_t len, struct bd_extent *e);
int vmdk_sparse_pread(struct vmdk *v, struct vmdk_extent *x, uint8_t *buf, size_t len,
                      uint64_t off);
void vmdk_sparse_free(struct vmdk_extent *x);
void vmdk_caches_free(struct vmdk *v);

/* meta.c */
/* Build x->meta once the directory at sector `used` is in x->gd (refusing
 * grain tables inside other metadata or overlapping each other). */
int vmdk_meta_build(struct vmdk *v, struct vmdk_extent *x, uint64_t used);
/* Whether grain g, which a table entry puts at byte `off` of the extent
 * file and which takes at least `len` bytes there, can be read: inside the
 * file and clear of the metadata.  The reason goes to `d` (may be NULL). */
int vmdk_grain_check(const struct vmdk_extent *x, uint64_t g, uint64_t off, uint64_t len,
                     struct diag *d);
/* check: every grain the tables map inside the file and clear of the
 * metadata; each bad one counted in res->corruptions (and warned about),
 * or with `res` NULL the first one an error (before writing in place). */
int vmdk_sparse_check(struct vmdk *v, struct vmdk_extent *x, struct bd_check_result *res);

/* Inflate one compressed grain (zlib stream) into `out` (grain_bytes;
 * zero-filled past a short grain), checking its Adler-32 (codec/inflate.c). */
static inline int vmdk_inflate_grain(const struct vmdk_extent *x, const uint8_t *cdata,
                                     size_t clen, uint8_t *out, struct diag *d, int64_t at)
{
    return codec_zlib_inflate_grain(cdata, clen, out, x->grain_bytes, d, x->name, at);
}

/* read_markers.c: the walk over a streamOptimized extent's markers.
 * vmdk_walk_start: the byte offset where the walk starts (after the header,
 * the embedded descriptor and the overhead); vmdk_total_grains: the grains
 * of the capacity.  vmdk_walk_next: the object at w->pos; for a grain, its
 * compressed bytes go to cbuf (vmdk_cbuf_bytes) and *grain is set; w->pos
 * moves past it.  Returns 1 for a grain, 0 at an accepted end of the
 * stream, or an error (a stream cut short is one). */
uint64_t vmdk_walk_start(const struct vmdk_extent *x);
uint64_t vmdk_total_grains(const struct vmdk_extent *x);
int vmdk_walk_next(struct vmdk *v, struct vmdk_extent *x, struct vmdk_walk *w,
                   uint8_t *cbuf, uint64_t *grain, uint32_t *csize, uint64_t *gpos);

/* read_scan.c: walk the markers from x->hdr.overhead to the end, listing the
 * grains (random-access fallback when there is no grain directory). */
int vmdk_scan_grains(struct vmdk *v, struct vmdk_extent *x);

/* read_stream.c */
int vmdk_stream_open(struct vmdk *v, struct vmdk_extent *x);
int vmdk_stream_block_status(struct vmdk *v, uint64_t off, uint64_t len,
                             struct bd_extent *e);
int vmdk_stream_pread(struct vmdk *v, uint8_t *buf, size_t len, uint64_t off);
void vmdk_stream_free(struct vmdk *v);

/* desc_edit.c: the descriptor text [text, text+len) (up to its first NUL)
 * with parentCID = parent_cid and parentFileNameHint = hint (no hint line
 * when NULL); *out is malloc'd, *out_len its length.  -EINVAL for a hint
 * that cannot be written (vmdk_hint_ok), -ENOMEM. */
#define VMDK_MAX_HINT 4096
bool vmdk_hint_ok(const char *name);
int vmdk_desc_set_parent(const char *text, size_t len, const char *hint, uint32_t parent_cid,
                         char **out, size_t *out_len);

/* set_backing.c: the driver's set_backing and check_backing (rebase). */
int vmdk_set_backing(struct bd *bd, const char *name, const char *fmt);
int vmdk_check_backing(struct bd *bd, const char *name, const char *fmt);

/* inplace.c: create() with opts->existing: grains written into the image
 * in `f` (rebase's safe mode). */
int vmdk_inplace_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                        struct diag *d);

/* open.c: the extent holding guest offset `off` (< bd.size); empty extents
 * that share its start are passed over. */
struct vmdk_extent *vmdk_find_extent(const struct vmdk *v, uint64_t off);

/* True if reads of `f` must go forward (a pipe, or a slice of one). */
bool vmdk_file_is_stream(const struct bfile *f);

#endif
