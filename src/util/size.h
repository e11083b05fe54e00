/* size: sizes as qemu-img reads and prints them.
 *
 * Input: a decimal number, optionally with a fraction, and an optional
 * suffix B, K, M, G, T, P, E (powers of 1024, either case); no suffix means
 * `default_unit` (1 = bytes).  "1.5G", "64k", "512" are valid; negative
 * numbers, hex, trailing junk, overflow past 2^63-1 and fractions that do not
 * come out as whole bytes are not.
 */
#ifndef DISKIMG_SIZE_H
#define DISKIMG_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 0 or -EINVAL (not a size) or -ERANGE (too large). */
int size_parse(const char *s, uint64_t default_unit, uint64_t *out);

/* A size exactly as qemu-img 7.2 reads its dd operands (and other sizes
 * given to cvtnum): leading white space and a '+' are skipped, '-' is
 * refused; a decimal number, optionally with a fraction, and an optional
 * one-letter suffix B, K, M, G, T, P, E (either case); a fraction needs a
 * suffix other than B (unless it is all zeros) and is rounded to the
 * nearest byte through qemu's 64-bit fixed point ("1.1k" = 1126, a half
 * rounds up); no exponent.  Or a hex number "0x..." without a fraction
 * (a suffix is allowed but deprecated: *hex_suffix is set, the caller
 * warns).  Anything after the number or suffix is -EINVAL; a value past
 * 2^64-1 is -ERANGE (bounds below that are the caller's). */
int size_parse_qemu(const char *s, uint64_t *out, bool *hex_suffix);

/* qemu-img's human form: "10 MiB", "1.5 GiB", "512 B" (at most 3 significant
 * digits, as qemu-img prints them). */
void size_human(uint64_t v, char *buf, size_t n);

#endif
