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

#include <stddef.h>
#include <stdint.h>

/* 0 or -EINVAL (not a size) or -ERANGE (too large). */
int size_parse(const char *s, uint64_t default_unit, uint64_t *out);

/* qemu-img's human form: "10 MiB", "1.5 GiB", "512 B" (at most 3 significant
 * digits, as qemu-img prints them). */
void size_human(uint64_t v, char *buf, size_t n);

#endif
