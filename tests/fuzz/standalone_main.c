/* main() for the fuzz targets without libFuzzer (-DFUZZ_STANDALONE): runs
 * LLVMFuzzerTestOneInput on every file named (AFL++ passes one, `@@`).
 * Exit 0 when every input was processed; a bug aborts (sanitizers, the
 * walker's contract checks). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fuzz_common.h"

#define MAX_INPUT (64u << 20)

/* The exact size, as libFuzzer does, so an over-read hits the redzone. */
static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    uint8_t *buf;

    if (!f || fstat(fileno(f), &st) < 0 || st.st_size > MAX_INPUT) {
        fprintf(stderr, "%s: cannot read (missing, or larger than %u bytes)\n",
                path, MAX_INPUT);
        exit(2);
    }
    buf = malloc(st.st_size ? (size_t)st.st_size : 1);
    if (!buf || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        fprintf(stderr, "%s: read failed\n", path);
        exit(2);
    }
    fclose(f);
    *len = (size_t)st.st_size;
    return buf;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s INPUT...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        size_t len;
        uint8_t *buf = slurp(argv[i], &len);
        LLVMFuzzerTestOneInput(buf, len);
        free(buf);
    }
    return 0;
}
