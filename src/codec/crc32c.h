/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), the checksum of
 * every VHDX header, region table and log entry.
 *
 * crc32c() runs the SSE4.2 `crc32` instruction where the CPU has it and a
 * table (slicing by 8) otherwise, chosen once on first use (like the zero
 * detection); DISKIMG_CRC32C_IMPL=generic forces the table.  Thread-safe,
 * prints nothing.
 */
#ifndef DISKIMG_CRC32C_H
#define DISKIMG_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of p[0..n) continuing from `crc` (0 to start): the usual
 * pre- and post-inversion are inside, so crc32c(crc32c(0, a), b) is the
 * CRC of a then b.  crc32c(0, "123456789", 9) == 0xe3069283. */
uint32_t crc32c(uint32_t crc, const void *p, size_t n);

/* The two variants, for the tests; crc32c_sse42 may only be called when
 * crc32c_have_sse42(). */
uint32_t crc32c_generic(uint32_t crc, const void *p, size_t n);
uint32_t crc32c_sse42(uint32_t crc, const void *p, size_t n);
bool crc32c_have_sse42(void);
/* The name of the variant crc32c() runs ("sse4.2" or "generic"). */
const char *crc32c_impl_name(void);

#endif
