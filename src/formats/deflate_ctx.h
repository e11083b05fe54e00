/* deflate_ctx: each thread's raw-deflate and zstd compression contexts,
 * shared by the qcow2 and vmdk writers, so that nothing is allocated per
 * cluster or grain.  A pthread key frees them when the thread ends. */
#ifndef DISKIMG_DEFLATE_CTX_H
#define DISKIMG_DEFLATE_CTX_H

#include <stddef.h>
#include <sys/types.h>

/* Raw deflate (no header, no checksum) of in[0..len) into out[0..cap) at
 * `level` with a window of 2^window_bits bytes.  Returns the compressed
 * length, 0 when it does not fit in cap, or a negative errno. */
ssize_t deflate_ctx_raw(const void *in, size_t len, void *out, size_t cap, int level,
                        int window_bits, int mem_level);

/* One zstd frame at `level`; same returns. */
ssize_t deflate_ctx_zstd(const void *in, size_t len, void *out, size_t cap, int level);

/* 1 when zstd's fastest level cannot shrink in[0..len) by 1/64 (deflate
 * would then save little too: the buffer is random, encrypted or already
 * compressed), 0 otherwise or when len is under 4 KiB, or a negative errno.
 * out[0..cap) is scratch.  About 1/100 of deflate's time on such data. */
int deflate_ctx_incompressible(const void *in, size_t len, void *out, size_t cap);

#endif
