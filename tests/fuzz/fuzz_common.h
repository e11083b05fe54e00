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

/* The default options for fuzzing: every reference refused. */
struct bd_open_opts fuzz_default_opts(void);

#endif
