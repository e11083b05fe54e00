/* genimg: seeded generator of test and benchmark disks (raw, sparse).
 *
 *   genimg [-s SEED] [-a ALLOC%] [-m MINRUN] [-M MAXRUN] [-u] SIZE OUT
 *
 * Writes a raw image of SIZE bytes made of runs of MINRUN..MAXRUN bytes
 * (default 4K..8M), each one of: random bytes (incompressible), text-like
 * bytes (compressible), explicitly written zeros, or a hole.  About ALLOC%
 * (default 65) of the disk is written (random, text or zeros); the rest is
 * holes.  With -u run boundaries fall at any byte (default: 512-aligned,
 * still unaligned to 4K and to clusters).  The same arguments always give
 * the same bytes.  OUT must not exist.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/size.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* xorshift64*: fast, seedable, good enough for test data */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static void fill_random(uint8_t *p, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = rnd();
        memcpy(p + i, &v, 8);
    }
    for (; i < n; i++)
        p[i] = (uint8_t)rnd();
}

static void fill_text(uint8_t *p, size_t n)
{
    static const char *const words[] = {
        "disk ", "image ", "sector ", "cluster ", "the ", "of ", "zero ", "qcow2 ",
        "vmdk ", "grain ", "table ", "refcount ", "\n", "block ", "data ", "0123 ",
    };
    size_t i = 0;
    while (i < n) {
        const char *w = words[rnd() % 16];
        size_t l = strlen(w);
        if (l > n - i)
            l = n - i;
        memcpy(p + i, w, l);
        i += l;
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: genimg [-s SEED] [-a ALLOC%%] [-m MINRUN] [-M MAXRUN] [-u] SIZE OUT\n");
    return 2;
}

int main(int argc, char **argv)
{
    uint64_t seed = 1, size, minrun = 4096, maxrun = 8 << 20;
    unsigned alloc = 65;
    int unaligned = 0, c;

    while ((c = getopt(argc, argv, "s:a:m:M:u")) != -1) {
        switch (c) {
        case 's': seed = strtoull(optarg, NULL, 0); break;
        case 'a': alloc = (unsigned)atoi(optarg); break;
        case 'm': if (size_parse(optarg, 1, &minrun) < 0) return usage(); break;
        case 'M': if (size_parse(optarg, 1, &maxrun) < 0) return usage(); break;
        case 'u': unaligned = 1; break;
        default: return usage();
        }
    }
    if (argc - optind != 2 || size_parse(argv[optind], 1, &size) < 0 || alloc > 100 ||
        minrun == 0 || maxrun < minrun)
        return usage();
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
    int fd = open(argv[optind + 1], O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        fprintf(stderr, "genimg: %s: %s\n", argv[optind + 1], strerror(errno));
        return 1;
    }
    if (ftruncate(fd, (off_t)size) < 0) {
        perror("genimg: ftruncate");
        return 1;
    }
    uint8_t *buf = malloc(maxrun);
    if (!buf)
        return 1;
    uint64_t pos = 0;
    while (pos < size) {
        uint64_t len = minrun + rnd() % (maxrun - minrun + 1);
        if (!unaligned)
            len = (len + 511) & ~511ULL;
        if (len > size - pos)
            len = size - pos;
        unsigned kind = (unsigned)(rnd() % 100);
        if (kind < alloc) {
            unsigned what = (unsigned)(rnd() % 3);   /* random, text, zeros */
            if (what == 0)
                fill_random(buf, len);
            else if (what == 1)
                fill_text(buf, len);
            else
                memset(buf, 0, len);
            for (uint64_t done = 0; done < len;) {
                ssize_t n = pwrite(fd, buf + done, len - done, (off_t)(pos + done));
                if (n <= 0) {
                    perror("genimg: write");
                    return 1;
                }
                done += (uint64_t)n;
            }
        }
        pos += len;
    }
    free(buf);
    if (close(fd) < 0) {
        perror("genimg: close");
        return 1;
    }
    return 0;
}
