/* Shared by the fuzz targets: open an image held in memory and walk it.
 *
 * Every target is one file defining LLVMFuzzerTestOneInput().  Built with
 * clang -fsanitize=fuzzer it is a libFuzzer binary (`make fuzz`); built with
 * -DFUZZ_STANDALONE it gets the main() of standalone_main.c instead, which runs
 * the same function on each file named on the command line (regression
 * replay in `make check`, and AFL++: afl-clang-fast ... -DFUZZ_STANDALONE,
 * then `afl-fuzz ... -- ./target @@`).
 *
 * No real file is ever opened: the image is a BFILE_MEMORY (or a pipe fed
 * from memory, for the stream targets) and opts.no_external_files refuses
 * every backing file, data file, extent and parent reference.
 */
#ifndef DISKIMG_FUZZ_COMMON_H
#define DISKIMG_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/bd.h"

/* Bytes of guest data one input may read (a 2^60-byte image with one data
 * extent must not take forever); compressed clusters still get inflated. */
#define FUZZ_READ_BUDGET   (8u << 20)
/* Extents one input may visit before the walk stops. */
#define FUZZ_MAX_EXTENTS   20000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Open `data` as an image of `format` (NULL probes) named `name` (the name
 * matters for probing: *.vmdk, *.ova) with every reference refused.
 * Returns 0 and *out, or a negative errno (the input was refused). */
int fuzz_open_mem(struct bd **out, const uint8_t *data, size_t size,
                  const char *name, const struct bd_open_opts *o, struct diag *d);

/* Open over a pipe fed by a thread from `data` (a forward-only stream). */
int fuzz_open_pipe(struct bd **out, const uint8_t *data, size_t size,
                   const char *name, const struct bd_open_opts *o, struct diag *d,
                   void **feeder);
/* Join the feeder thread (after bd_close). */
void fuzz_pipe_done(void *feeder);

/* Walk the whole image: block status over the virtual size, pread of every
 * data extent (and a little of every other one) within FUZZ_READ_BUDGET,
 * the last sector, and info/check when the driver has them.  Checks the
 * driver contract on the way (extent lengths, zero extents read as zeros)
 * and aborts when it is broken, so the fuzzer reports it. */
void fuzz_walk(struct bd *bd, int with_check);

/* What a walk read: the virtual size, a digest of the guest content (non-
 * zero sectors with their offsets: independent of how block status cut
 * the extents) and whether the walk covered the whole image without an
 * error or a budget cut. */
struct fuzz_reading {
    bool opened, complete;
    uint64_t size, digest;
    const char *format;     /* the driver that opened it */
};

/* fuzz_walk that also fills *out (may be NULL). */
void fuzz_walk_read(struct bd *bd, int with_check, struct fuzz_reading *out);

/* Open `data` (from memory, or from a pipe when `pipe`), walk it, close. */
void fuzz_read_input(const uint8_t *data, size_t size, const char *name,
                     const struct bd_open_opts *o, int pipe, struct fuzz_reading *out);

/* The truncation rule: a truncated image or stream is an error, never
 * zeros.  `data` cut at fuzz_cut_point() (on a boundary of `unit` bytes,
 * 1-16 units before the end, chosen by the input) is read the same way as
 * `whole` was; if that reading completes, it must give the same size and
 * content (what was cut was not needed), otherwise the walker aborts.
 * The unit is a sector for VMDK streams and tar archives (a stream cut
 * between grains or markers), a cluster for qcow2 (whose last cluster may
 * legitimately end before its end: qemu leaves such files, and its
 * missing tail reads as zeros). */
void fuzz_truncation_rule(const uint8_t *data, size_t size, size_t unit, const char *name,
                          const struct bd_open_opts *o, int pipe,
                          const struct fuzz_reading *whole);
/* Where fuzz_truncation_rule cuts `data`: the start of its last `unit`
 * minus 0-15 more units; 0 when it is too small to cut. */
size_t fuzz_cut_point(const uint8_t *data, size_t size, size_t unit);

/* The default options for fuzzing: every reference refused. */
struct bd_open_opts fuzz_default_opts(void);

/* --- the modifying commands (check -r, resize, convert -n) ---------------
 * They open the image by path, so the input goes into a memfd, a real
 * file only this process sees (/proc/self/fd/N). */

/* A memfd holding `data`, its path in `path` (64 bytes); -1 on failure. */
int fuzz_memfd(const uint8_t *data, size_t size, char path[64]);
/* Whether the memfd's bytes are exactly `data` (nothing was written). */
bool fuzz_memfd_same(int fd, const uint8_t *data, size_t size);
/* A digest of the memfd's bytes (its non-zero sectors with their
 * offsets) and *size, its length: the file may be a sparse one of
 * gigabytes once repaired. */
uint64_t fuzz_memfd_digest(int fd, uint64_t *size);
/* Open the qcow2 image at `path` (every reference refused), for writing or
 * reading. */
int fuzz_open_qcow2_path(struct bd **out, const char *path, bool writable, struct diag *d);

/* The guest content a modification must keep: chunks that read without
 * an error before, with their bytes (data extents within a budget, the
 * first chunk of every other extent). */
#define FUZZ_KEEP_CHUNK 4096u
#define FUZZ_KEEP_MAX   256u
struct fuzz_guest {
    uint64_t size;
    size_t n;
    uint64_t off[FUZZ_KEEP_MAX];
    uint32_t len[FUZZ_KEEP_MAX];
    uint8_t bytes[FUZZ_KEEP_MAX][FUZZ_KEEP_CHUNK];
};
void fuzz_guest_record(struct bd *bd, struct fuzz_guest *g);
/* Every recorded byte below `limit` reads the same from `bd` (a chunk that
 * read before must read now); aborts otherwise. */
void fuzz_guest_verify(struct bd *bd, const struct fuzz_guest *g, uint64_t limit);

#endif
