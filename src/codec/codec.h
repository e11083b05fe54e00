/* codec: the compression both formats use, one cluster or grain at a time.
 *
 *   ctx.c          each thread's raw-deflate and zstd compression contexts
 *   deflate.c      compressing a qcow2 cluster (raw deflate or zstd) and a
 *                  VMDK grain (a zlib stream, compressed or stored)
 *   inflate.c      inflating a qcow2 cluster (raw deflate or zstd, bounded
 *                  by the cluster) and a VMDK grain (a zlib stream)
 *   inflate_pool.c a free list of cluster inflaters with their buffers
 *   adler32.c      Adler-32 (scalar and AVX2), for the zlib streams
 *
 * Everything is thread-safe unless said otherwise; nothing prints.  The
 * formats' writers and readers call these; the bytes produced are the ones
 * qemu-img produces (sizes included), so tests compare outputs with it.
 */
#ifndef DISKIMG_CODEC_H
#define DISKIMG_CODEC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct diag;

/* Compression types of a cluster: the values of qcow2's compression_type
 * header field (qcow2/read_int.h checks that they agree). */
#define CODEC_DEFLATE 0     /* raw deflate (qcow2 "zlib") */
#define CODEC_ZSTD    1     /* one zstd frame */

/* --- per-thread compression contexts (ctx.c) --------------------------------
 * Shared by the qcow2 and vmdk writers, so that nothing is allocated per
 * cluster or grain.  A pthread key frees them when the thread ends. */

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

/* --- compressing (deflate.c) ------------------------------------------------ */

/* Compress one qcow2 cluster for compression type `type` (CODEC_DEFLATE:
 * raw deflate with a 4 KiB window, as qemu reads it; CODEC_ZSTD: one
 * frame).  Returns the compressed length, 0 when it does not come out
 * shorter than the input, or a negative errno. */
ssize_t qcow2w_compress_cluster(int type, const void *in, size_t len,
                                void *out, size_t cap);

/* The same for what the converter hands compress(): a whole cluster, or
 * the image's short last one (len < cluster_size), padded to a cluster
 * with the bytes of `rest` (cluster_size of them) or, when NULL, zeros --
 * readers inflate whole clusters. */
ssize_t qcow2w_compress_granule(int type, const void *in, size_t len, size_t cluster_size,
                                const void *rest, void *out, size_t cap);

/* Compress one VMDK grain into a zlib stream (deflate, 32 KiB window, as
 * VMware and qemu read it).  Returns the length, 0 when the grain does not
 * come out shorter than `len` (then store it with vmdkw_zlib_stored), or a
 * negative errno. */
ssize_t vmdkw_deflate(const void *in, size_t len, void *out, size_t cap);

/* `len` bytes as a zlib stream of stored deflate blocks (no compression).
 * Returns the length, or -ENOSPC when cap < vmdkw_zlib_stored_bound(len). */
ssize_t vmdkw_zlib_stored(const void *in, size_t len, void *out, size_t cap);
size_t vmdkw_zlib_stored_bound(size_t len);

/* --- inflating (inflate.c) --------------------------------------------------- */

struct qcow2_inflater;

/* An inflater for clusters of `cluster_size` bytes of compression type
 * CODEC_DEFLATE or CODEC_ZSTD (zstd frames that ask for a larger window
 * are refused).  One thread at a time per inflater. */
int qcow2_inflater_new(struct qcow2_inflater **out, uint8_t compression_type,
                       uint32_t cluster_size);
void qcow2_inflater_free(struct qcow2_inflater *z);

/* Inflate one compressed cluster from `in` into `out` (`cap` bytes, the
 * cluster size).  *produced is how much it filled.  Fails with -EINVAL and
 * a reason in `why` when the data is corrupt or would inflate to more than
 * `cap` bytes.  The caller checks *produced against what it needs. */
int qcow2_inflate(struct qcow2_inflater *z, const uint8_t *in, size_t inlen,
                  uint8_t *out, size_t cap, size_t *produced, char *why, size_t whylen);

/* Inflate one compressed VMDK grain (a zlib stream: 2-byte header, deflate
 * data, big-endian Adler-32) of `clen` bytes into out[0..grain_bytes),
 * zero-filled past a short grain, checking its Adler-32.  The reason for a
 * refusal goes to `d`, naming `file` and the offset `at`. */
int codec_zlib_inflate_grain(const uint8_t *cdata, size_t clen, uint8_t *out,
                             uint32_t grain_bytes, struct diag *d, const char *file,
                             int64_t at);

/* --- a pool of cluster inflaters (inflate_pool.c) ---------------------------- */

/* A free list of inflaters with their buffers, one per concurrent reader. */
struct qcow2_inflate_slot {
    struct qcow2_inflater *z;
    uint8_t *in;     /* 2 * cluster_size: the most a descriptor can span */
    uint8_t *out;    /* cluster_size */
    struct qcow2_inflate_slot *next;
};

struct qcow2_inflate_pool {
    pthread_mutex_t lock;
    struct qcow2_inflate_slot *free;
    uint8_t type;
    uint32_t cluster_size;
};

void qcow2_inflate_pool_init(struct qcow2_inflate_pool *p, uint8_t type,
                             uint32_t cluster_size);
void qcow2_inflate_pool_destroy(struct qcow2_inflate_pool *p);
struct qcow2_inflate_slot *qcow2_inflate_pool_take(struct qcow2_inflate_pool *p);
void qcow2_inflate_pool_give(struct qcow2_inflate_pool *p, struct qcow2_inflate_slot *s);

/* --- Adler-32 (adler32.c) ---------------------------------------------------- */

/* zlib's Adler-32 of p[0..n) continuing from `adler` (1 to start), with
 * AVX2 when the CPU has it.  The two variants are there for the tests. */
uint32_t vmdk_adler32(uint32_t adler, const uint8_t *p, size_t n);
uint32_t vmdk_adler32_generic(uint32_t adler, const uint8_t *p, size_t n);
#if defined(__x86_64__) || defined(__i386__)
uint32_t vmdk_adler32_avx2(uint32_t adler, const uint8_t *p, size_t n);
#endif

#endif
