/* bd: a block device (disk image) seen through its format driver.
 *
 * Every format (raw, qcow2, vmdk) is one `struct bd_driver`; the rest of the
 * program knows only this interface.  A `struct bd` is the base of each
 * driver's private state (embed it first and cast, or keep a pointer in
 * `priv`).
 *
 * Reading.  bd_open() probes (or takes -f), opens, and for layered formats
 * opens the backing chain.  block_status() describes one layer; the generic
 * bd_block_status() walks the chain.  pread() returns guest-visible bytes of
 * the whole chain (a driver reads unallocated ranges from bd->backing).
 * pread() and block_status() may be called from several threads at once
 * (compressed clusters are inflated by the caller's thread); drivers lock
 * their caches.  Input that cannot be read forward-only fails on a stream.
 *
 * Writing.  create() formats a new image into an already-open file (the
 * caller owns the temporary name and the rename), or, with opts->existing,
 * opens the image in that file for writing.  Writes are aligned to
 * bd->granule (except at the end of the image) and never overlap.  Data may
 * be written asynchronously through opts->ioq; `done` runs once the buffer
 * may be reused.  finish() commits: all data, then metadata, header last,
 * then fsync when opts->durable.  abort() gives up without committing.
 * An output with next_pass() (qcow2 to a stream) is given the whole
 * conversion again after a first, planning pass (and, being a stream,
 * writes its header first).
 * The writing side is used by one thread.
 *
 * Errors: every function returns 0 (or a count) or a negative errno and
 * records the reason, file and offset in bd->diag.  Nothing prints.
 */
#ifndef DISKIMG_BD_H
#define DISKIMG_BD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "io/ioq.h"

struct bfile;
struct diag;
struct jval;
struct kvopts;

/* --- block status --------------------------------------------------------- */

#define BD_DATA       0x1  /* holds bytes that must be read (may still be zeros) */
#define BD_ZERO       0x2  /* reads as zeros; with a host_offset: a zero
                              cluster that keeps its host cluster; with
                              BD_DATA: stored bytes that are a file hole
                              (metadata preallocation, vmdk flat extents) */
#define BD_ALLOCATED  0x4  /* this layer decides the content (qemu "present") */
#define BD_COMPRESSED 0x8  /* stored compressed (no usable host offset) */

struct bd_extent {
    uint64_t len;           /* > 0, never past the end of the image */
    unsigned flags;         /* BD_* above */
    int depth;              /* 0 = this image, 1 = its backing file, ... */
    int64_t host_offset;    /* where the bytes are in `host`, or -1 */
    const struct bd *host;  /* the layer whose file holds them, or NULL */
    /* The file holding the bytes when it is not host->file (a vmdk extent
     * file, a qcow2 external data file), else NULL. */
    const struct bfile *host_file;
};

/* --- options --------------------------------------------------------------- */

struct bd_open_opts {
    const char *format;        /* -f: driver name; NULL probes */
    bool writable;             /* open for writing (resize, check -r) */
    bool allow_external;       /* references may leave the image's folder */
    bool no_backing;           /* do not open backing files / parents */
    bool no_external_files;    /* refuse every reference to a file (fuzzing;
                                  members of an archive are still read) */
    bool ignore_parent_cid;    /* vmdk: accept a parent whose CID differs */
    const char *snapshot;      /* -l: NAME, snapshot.name=, snapshot.id= */
    unsigned disk_index;       /* OVA: which disk (0 = first) */
    bool salvage;              /* --salvage, read-only: a damaged part the
                                  image can be read without (a VHDX log that
                                  does not replay) is passed over with a
                                  warning instead of refusing the image */
};

struct bd_create_opts {
    uint64_t size;             /* virtual size in bytes */
    struct kvopts *o;          /* -o options; the driver takes (marks) its keys */
    const char *backing_file;  /* -B / -b, or NULL */
    const char *backing_fmt;   /* -F, or NULL */
    bool compress;             /* -c */
    bool durable;              /* fsync in finish() */
    bool existing;             /* -n: open the image already in the file */
    bool target_is_zero;       /* existing target already reads as zeros */
    bool no_external_files;    /* existing target: open none of the files it
                                  names, backing file included (fuzzing) */
    bool allow_external;       /* existing target: its references may leave
                                  its folder (--allow-external) */
    bool fill_unallocated;     /* existing target: only ranges it leaves to
                                  its backing file are written (rebase), so
                                  a driver without convert -n may take it */
    struct ioq *ioq;           /* write queue, or NULL for plain writes */
    /* Further files of the image (VMDK extents): create `path` (beside the
     * output) under a temporary name that the caller renames with the
     * image, or removes.  *tmp is that name, for opening it again.  NULL
     * when the output cannot have further files. */
    int (*add_file)(void *opaque, const char *path, struct bfile **f,
                    const char **tmp, struct diag *d);
    void *add_file_opaque;
};

/* qemu-img check's result fields. */
struct bd_check_result {
    int64_t corruptions, leaks, check_errors;
    int64_t corruptions_fixed, leaks_fixed;
    int64_t image_end_offset;
    int64_t total_clusters, allocated_clusters;
    int64_t fragmented_clusters, compressed_clusters;
};

/* qemu-img measure's result (bytes). */
struct bd_measure {
    uint64_t required;         /* a new image holding the content needs this */
    uint64_t fully_allocated;  /* with every cluster of the virtual size */
    bool has_bitmaps;          /* the source can hold persistent bitmaps and
                                  the new image can take them */
    uint64_t bitmaps;          /* bytes those bitmaps would need */
};

#define BD_CHECK_FIX_LEAKS   0x1
#define BD_CHECK_FIX_ERRORS  0x2

/* qemu-img amend's options for a driver (the command parsed their types;
 * the driver checks them against the image, in qemu-img's order).  Fields
 * left at their "not given" value keep what the image has. */
struct bd_amend {
    bool encrypt;              /* some encrypt.* option was given */
    const char *compat;        /* "0.10", "v2", "1.1", "v3" (else refused), or NULL */
    int64_t refcount_bits;     /* 0: not given */
    int lazy_refcounts;        /* -1 not given, 0 off, 1 on */
    const char *backing_file;  /* NULL: not given */
    const char *backing_fmt;   /* NULL: not given */
    const char *data_file;     /* NULL: not given (the command checked the
                                  folder rule) */
    int data_file_raw;         /* -1 not given, 0 off, 1 on */
    uint64_t size;             /* 0: not given (the command resizes through
                                  resize(); amend only checks it) */
    bool check_only;           /* check everything, change nothing */
};

/* --- the driver and the device --------------------------------------------- */

struct bd;

enum bd_snapshot_op { BD_SNAPSHOT_CREATE, BD_SNAPSHOT_APPLY, BD_SNAPSHOT_DELETE };

/* One operation of qemu-img bitmap on a persistent dirty bitmap. */
enum bd_bitmap_act {
    BD_BITMAP_ADD, BD_BITMAP_REMOVE, BD_BITMAP_CLEAR, BD_BITMAP_ENABLE,
    BD_BITMAP_DISABLE, BD_BITMAP_MERGE,
};
struct bd_bitmap_op {
    enum bd_bitmap_act act;
    const char *source;         /* merge: the source bitmap's name */
    struct bd *source_bd;       /* merge: the image it is in (NULL: this one) */
};

/* What a driver's output side can do (bd_driver.caps), so that no command
 * decides by a driver's name.  STREAM_OUT, STREAM_TWO_PASS, UNKNOWN_SIZE,
 * INPLACE and BACKING describe a format (the registered drivers);
 * ALL_COMPRESSED, IN_ORDER and OFFLOAD_LATE the writer that create()
 * returns (OFFLOAD_LATE stands on raw's format driver: its writer is that
 * driver). */
#define BD_CAP_STREAM_OUT      0x01  /* can be written to a pipe */
#define BD_CAP_STREAM_TWO_PASS 0x02  /* ... only from a seekable source: the
                                        content is read twice (next_pass) */
#define BD_CAP_UNKNOWN_SIZE    0x04  /* takes a source whose size is known
                                        only at its end (raw from a pipe) */
#define BD_CAP_INPLACE         0x08  /* convert -n -O FMT writes into an
                                        existing image of this format */
#define BD_CAP_BACKING         0x40  /* a new image can name a backing file */
#define BD_CAP_ALL_COMPRESSED  0x10  /* writer: every data granule goes through
                                        compress(), -c or not */
#define BD_CAP_IN_ORDER        0x20  /* writer: writes must come in offset
                                        order (no -W) */
#define BD_CAP_OFFLOAD_LATE    0x80  /* writer: a range map_for_offload gave
                                        may be filled at any time before
                                        finish, after later calls (raw: the
                                        file is the image) */

struct bd_driver {
    const char *name;
    const char *alias;         /* another name -f/-O accept (vpc: "vhd"), or NULL */
    unsigned caps;             /* BD_CAP_* above */

    /* What `-o help` prints for this output format (NULL: no options). */
    const char *create_options_help;

    /* Optional: the options of qemu-img create's "Formatting 'F', fmt=X..."
     * line for this format, written into buf as " k=v k=v ..." (qemu-img's
     * keys and order, size included).  Reads o->o without marking keys.
     * NULL: the line is " size=N". */
    void (*describe_create)(const struct bd_create_opts *o, char *buf, size_t len);

    /* 0 = not this format; higher = more certain.  `head` holds the first
     * bytes of the file (up to 64 KiB, fewer if the file is shorter). */
    int (*probe)(const uint8_t *head, size_t len, const char *filename);
    /* Optional: the same from the last bytes of a seekable file (`tail`,
     * up to 512 bytes, ending at `file_size`): formats whose signature is
     * at the end (a fixed VHD is the disk and a footer). */
    int (*probe_tail)(const uint8_t *tail, size_t len, uint64_t file_size,
                      const char *filename);

    /* Open the image in `f` (taken over: closed by close(), also on error).
     * `parent` is the image that refers to this one (NULL for the top). */
    int (*open)(struct bd **out, struct bfile *f, const struct bd_open_opts *o,
                struct bd *parent, struct diag *d);

    /* This layer's view of [off, off+len): fill *e (depth 0). */
    int (*block_status)(struct bd *bd, uint64_t off, uint64_t len,
                        struct bd_extent *e);

    /* Guest bytes [off, off+len) of the whole chain.  Thread-safe. */
    int (*pread)(struct bd *bd, void *buf, size_t len, uint64_t off);

    /* Writing side, NULL for read-only formats.  create() takes over `f`
     * only when it succeeds (closed by close()). */
    int (*create)(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                  struct diag *d);
    /* `done` runs exactly once, also when the call fails.  The buffer is
     * 4 KiB aligned (O_DIRECT output can take it as it is) and holds
     * exactly `len` bytes: a driver reads nothing past them, and writes
     * nothing past off+len (the target may hold more, -n). */
    int (*pwrite)(struct bd *bd, const void *buf, size_t len, uint64_t off,
                  ioq_done_fn done, void *opaque);
    /* Make [off, off+len) read as zeros (holes in a new image cost nothing). */
    int (*write_zeroes)(struct bd *bd, uint64_t off, uint64_t len);
    /* Optional: compress one granule on a worker thread (thread-safe).  Returns
     * the compressed length, or 0 when it does not shrink (store it plain). */
    ssize_t (*compress)(struct bd *bd, const void *in, size_t len, void *out,
                        size_t cap);
    /* Optional: write a granule compress() produced. */
    int (*pwrite_compressed)(struct bd *bd, const void *cdata, size_t clen,
                             uint64_t off, ioq_done_fn done, void *opaque);
    /* Optional (copy offload): take guest range [off, off+len) (granule-
     * aligned, never written before) as if it were written, and say where
     * its bytes go: *f at *host, for the first *mapped bytes (> 0, whole
     * granules or up to the image's end; contiguous in *f), with *host
     * congruent to off modulo `align` (a power of two; dynamic VHD and VDI,
     * whose data lie a sector past a block boundary, have no such hook).
     * The caller puts exactly those bytes there (FICLONERANGE,
     * copy_file_range or pwrite) before its next call into the driver
     * (then offload_done, if set; with BD_CAP_OFFLOAD_LATE, at any time
     * before finish), and calls again for the rest.  -ENOTSUP (nothing recorded): this
     * output cannot; write the range with pwrite instead. */
    int (*map_for_offload)(struct bd *bd, uint64_t off, uint64_t len, uint32_t align,
                           struct bfile **f, uint64_t *host, uint64_t *mapped);
    /* Optional: after map_for_offload, whether its bytes are in place (0)
     * or could not be put there (negative errno): an output that must not
     * name unwritten clusters (convert -n into qcow2) records the mapping
     * only now. */
    int (*offload_done)(struct bd *bd, int err);
    int (*finish)(struct bd *bd);
    void (*abort)(struct bd *bd);

    /* Frees everything, closes files and the backing chain. */
    void (*close)(struct bd *bd);

    /* Optional: add format details to the `info` object (qemu-img's keys:
     * "cluster-size", "format-specific", "snapshots", "dirty-flag", ...). */
    int (*info)(struct bd *bd, struct jval *obj);

    /* Optional, archives (OVA): open the member that `ref` names, for a
     * reference made by the image in `from` (a member this archive handed
     * out).  References inside an archive resolve to its members only. */
    int (*open_member)(struct bd *archive, const struct bfile *from, const char *ref,
                       struct bfile **out);

    /* Optional: verify metadata (qemu-img check). */
    int (*check)(struct bd *bd, struct bd_check_result *r, unsigned fix);

    /* Optional: change the virtual size of an image opened for writing
     * (opts->writable), in place and durably; `shrink` allows a smaller
     * size (the data past it is discarded).  raw also resizes an output
     * stream before finish() (a raw stream input's size known at its end). */
    int (*resize)(struct bd *bd, uint64_t new_size, bool shrink);

    /* Optional: the size a new image of this format would take (qemu-img
     * measure): for `size` bytes of virtual size when `src` is NULL, else
     * for the content of `src` (its allocation, from block status).  Takes
     * (marks) the -o keys it knows from `o` (may be NULL). */
    int (*measure)(struct kvopts *o, uint64_t size, struct bd *src,
                   struct bd_measure *m, struct diag *d);

    /* Optional: an output that must see the content twice (qcow2 to a
     * stream plans its layout in a first pass that writes nothing).  Called
     * after each complete conversion pass: 1 = run the conversion again over
     * the same sources, 0 = done (then finish()), or a negative errno. */
    int (*next_pass)(struct bd *bd);

    /* Optional: internal snapshots (qemu-img snapshot -c/-a/-d) of an image
     * opened for writing, in place and crash-safe.  `name` is the new
     * snapshot's name (create) or an ID or name (apply, delete: the ID is
     * tried first).  Afterwards the image may only be closed.  The list is
     * the info() object's "snapshots". */
    int (*snapshot)(struct bd *bd, enum bd_snapshot_op op, const char *name);

    /* Optional: name another backing file (NULL or "": none) and format
     * (NULL: none recorded) in an image opened for writing; the header
     * only, in one write, synced (rebase -u; safe rebase copies first). */
    int (*set_backing)(struct bd *bd, const char *name, const char *fmt);
    /* Optional: the refusals of set_backing() alone, nothing written (a
     * safe rebase asks before it copies anything). */
    int (*check_backing)(struct bd *bd, const char *name, const char *fmt);

    /* Optional: make an image opened for writing hold nothing, so that it
     * reads everything from its backing file (qemu-img commit empties the
     * top image), crash-safe: the image is either as it was or empty.
     * `check_only`: only the refusals (an image that cannot be emptied),
     * nothing written.  Afterwards the image may only be closed. */
    int (*make_empty)(struct bd *bd, bool check_only);
    /* Optional: qemu-img amend of an image opened for writing: everything
     * `a` asks is checked first (refusals change nothing), then applied
     * crash-safely (the size excepted: the command calls resize()).
     * *resize_first: with a size, whether the command resizes before this
     * call (a downgrade, as qemu-img) or after.  Afterwards the image may
     * only be closed. */
    int (*amend)(struct bd *bd, const struct bd_amend *a, bool *resize_first);
    /* Optional: persistent dirty bitmaps (qemu-img bitmap) of an image
     * opened for writing: `ops` applied in order to the bitmap `name`
     * (`granularity` for an add, 0: the default), then written, crash-safe.
     * When op k fails, *failed = k, the operations before it are written
     * (as qemu-img does) and its error is returned; a failure that is no
     * single operation's (a corrupt image, an I/O error) sets *failed = n.
     * Afterwards the image may only be closed. */
    int (*bitmap)(struct bd *bd, const char *name, const struct bd_bitmap_op *ops,
                  size_t n, uint64_t granularity, size_t *failed);

    /* Optional: convert --bitmaps.  With `dst` NULL, whether the bitmaps
     * of `src` (an image of this driver) can be copied: bitmaps marked in
     * use refused, or warned about with `skip_broken`.  Else every bitmap
     * of `src` but those is added to `dst` (an image of this format opened
     * for writing, of the same virtual size) with its granularity, enabled
     * flag and content, crash-safe; an existing name is an error. */
    int (*bitmaps_copy)(struct bd *dst, struct bd *src, bool skip_broken);
};

struct bd {
    const struct bd_driver *drv;
    struct bfile *file;        /* the image file (descriptor, for vmdk) */
    char *filename;            /* as given (top) or as resolved (references) */
    uint64_t size;             /* virtual size in bytes */
    uint32_t granule;          /* write/allocation unit (cluster size), >= 512 */
    struct diag *diag;
    /* The options this image was opened with (a copy: its strings must
     * outlive the bd; references get driver names, which are static). */
    struct bd_open_opts opts;
    struct bd *parent;         /* the image that refers to this one, or NULL */
    int depth;                 /* 0 for the top image */

    struct bd *backing;        /* opened backing file / parent disk, or NULL */
    char *backing_name;        /* as stored in the image, or NULL */
    char *backing_fmt;         /* as stored, or NULL */
    bool backing_missing;      /* named but not opened (no_backing) */

    bool dirty;                /* dirty flag / unclean shutdown marker */
    void *priv;                /* driver state if not embedding */

    /* Memory of the tables this image keeps while open, counted against
     * its chain's budget (bd_table_budget); in the top image, also the
     * chain's total (the image an archive hands out counts in the archive). */
    uint64_t table_bytes;
    uint64_t chain_table_bytes;
};

/* Initialise the base fields (drivers call this in open/create). */
void bd_init(struct bd *bd, const struct bd_driver *drv, struct bfile *f,
             struct diag *d);

/* --- the chain's memory budget ---------------------------------------------------- */

/* What the tables every image of one chain keeps while it is open (VMDK
 * grain directories, scan indexes and metadata maps; qcow2 L1 and snapshot
 * tables) may take together: a chain of small images that each stay under
 * their own limits cannot add up to gigabytes. */
#define BD_MAX_TABLE_BYTES (256ull << 20)

/* Count `bytes` more for `bd` against its chain's budget (the counter is in
 * the top image: every layer reaches it through `parent`).  Over the
 * budget: -ENOMEM, recorded as "FILE: WHAT need more than the 256 MiB
 * budget ...", and nothing is counted. */
int bd_table_budget(struct bd *bd, uint64_t bytes, const char *file, const char *what);

/* Give back bytes counted for `bd` (a table it freed or replaced). */
void bd_table_return(struct bd *bd, uint64_t bytes);

/* --- generic operations ------------------------------------------------------ */

/* Open `path` ("-" = stdin) with probing or o->format. */
int bd_open(struct bd **out, const char *path, const struct bd_open_opts *o,
            struct diag *d);

/* Open an image over an already-open file (references, OVA members, fuzzing). */
int bd_open_bfile(struct bd **out, struct bfile *f, const struct bd_open_opts *o,
                  struct bd *parent, struct diag *d);

/* A file an image refers to (backing file, data file, extent, parent).
 * `ref` is resolved against the folder of `from`'s file and opened beneath
 * it in one step (openat2 RESOLVE_BENEATH, or a walk with O_NOFOLLOW where
 * openat2 is missing), so a symlink swapped in meanwhile cannot lead out.
 * A reference that leaves that folder (absolute elsewhere, "..", a symlink
 * out) is refused unless from->opts.allow_external; one that is outside as
 * written is refused before the file system is asked.  Only regular files
 * and block devices are opened: a FIFO or a character device is refused
 * without blocking.  Inside an archive the reference names a member of that
 * archive (never a host file).  Loops (the same file twice in one chain)
 * and chains deeper than BD_MAX_DEPTH are refused; so is an archive as a
 * backing file or parent. */
#define BD_MAX_DEPTH 64
int bd_open_ref_file(struct bd *from, const char *ref, bool writable,
                     struct bfile **out);
int bd_open_ref(struct bd *from, const char *ref, const char *format,
                struct bd **out);

/* The chain's view: like driver block_status, walking into backing files. */
int bd_block_status(struct bd *bd, uint64_t off, uint64_t len,
                    struct bd_extent *e);

/* How many `unit`-byte units of bd's guest view hold data (are not zero
 * by block status): what an output of that cluster or block size must
 * allocate (measure). */
int bd_data_units(struct bd *bd, uint64_t unit, uint64_t *n);

/* Guest bytes; reads past bd->size are an error. */
int bd_pread(struct bd *bd, void *buf, size_t len, uint64_t off);

/* Bytes of the layer below `bd` for a range `bd` leaves unallocated: read
 * from bd->backing where it has them, zeros elsewhere (no backing file, or
 * beyond its end).  For drivers' pread(). */
int bd_pread_backing(struct bd *bd, void *buf, size_t len, uint64_t off);

void bd_close(struct bd *bd);

/* For drivers' block status: whether the file's bytes at `host` are a hole
 * (SEEK_DATA/SEEK_HOLE on a regular file; never on other files), and the
 * length of that hole or data run, at most `len`. */
uint64_t bd_file_run(const struct bfile *f, uint64_t host, uint64_t len, bool *hole);

/* Free the base fields (backing chain, file, names); drivers' close() calls
 * it before freeing their own struct. */
void bd_release(struct bd *bd);

/* The driver called `name` (or by its alias), or NULL. */
const struct bd_driver *bd_find_driver(const char *name);

/* Probe `f`'s first bytes (and its last 512, for probe_tail); *drv is NULL
 * when nothing but raw matches and the name does not claim a format (then
 * the caller treats it as raw).  A file named like a format the tool knows
 * (*.qcow2, *.qcow, *.vmdk, *.ova, *.vhd, *.vhdx, *.vdi) that matches
 * nothing fails with a hint to pass -f raw. */
int bd_probe(struct bfile *f, const struct bd_driver **drv, struct diag *d);

extern const struct bd_driver bd_raw;

#endif
