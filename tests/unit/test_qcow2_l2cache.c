/* The L2 table cache: hits and misses, least-recently-used eviction, a
 * table cut by the end of the file (an error), tables past it, and many threads on
 * few slots (every slot pinned: the others wait, nobody gets a wrong table). */
#include <pthread.h>
#include <stdint.h>

#include "formats/qcow2/read_int.h"
#include "io/bfile.h"
#include "qcow2_testutil.h"

#define TS 512
#define NT 20

static uint8_t file[NT * TS + 100];
static struct qcow2_l2cache *c;
static struct diag d;
static int bad;

static void *worker(void *arg)
{
    uint32_t x = (uint32_t)(uintptr_t)arg;
    for (int i = 0; i < 20000; i++) {
        x = x * 1103515245u + 12345u;
        unsigned t = 1 + (x >> 8) % (NT - 1);
        const uint8_t *tab;
        int slot;
        if (qcow2_l2cache_get(c, (uint64_t)t * TS, &tab, &slot) < 0) {
            __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
            continue;
        }
        if (tab[0] != t || tab[TS - 1] != t)
            __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
        qcow2_l2cache_put(c, slot);
    }
    return NULL;
}

int main(void)
{
    struct bfile *f;
    const uint8_t *tab;
    int s1, s2;

    diag_init(&d);
    for (unsigned t = 0; t < NT; t++)
        memset(file + t * TS, (int)t, TS);
    memset(file + NT * TS, 0x77, 100);      /* a table cut by the end */
    CHECK(bfile_open_mem(&f, "mem", file, sizeof(file), &d) == 0);
    CHECK(qcow2_l2cache_new(&c, f, TS, 0, &d) == 0);
    CHECK(qcow2_l2cache_slots(c) == 4);

    CHECK_OK(qcow2_l2cache_get(c, TS, &tab, &s1), &d);
    CHECK(tab[0] == 1);
    qcow2_l2cache_put(c, s1);
    CHECK_OK(qcow2_l2cache_get(c, TS, &tab, &s2), &d);
    CHECK(s2 == s1 && qcow2_l2cache_misses(c) == 1);
    qcow2_l2cache_put(c, s2);
    /* 1 is the oldest after 2,3,4 are loaded and 1 is not touched: 5 evicts it */
    for (unsigned t = 2; t <= 5; t++) {
        CHECK_OK(qcow2_l2cache_get(c, t * TS, &tab, &s1), &d);
        CHECK(tab[7] == t);
        qcow2_l2cache_put(c, s1);
    }
    CHECK(qcow2_l2cache_misses(c) == 5);
    CHECK_OK(qcow2_l2cache_get(c, 5 * TS, &tab, &s1), &d);
    qcow2_l2cache_put(c, s1);
    CHECK(qcow2_l2cache_misses(c) == 5);
    CHECK_OK(qcow2_l2cache_get(c, TS, &tab, &s1), &d);
    qcow2_l2cache_put(c, s1);
    CHECK(qcow2_l2cache_misses(c) == 6);

    /* cut by the end of the file: a truncated image, an error */
    CHECK_FAIL(qcow2_l2cache_get(c, NT * TS, &tab, &s1), &d,
               "L2 table at offset 10240 is cut by the end of the file (10340 bytes)");
    /* at or past the end: an error naming the offset, and the slot is free again */
    CHECK_FAIL(qcow2_l2cache_get(c, sizeof(file), &tab, &s1), &d,
               "L2 table at offset 10340 is past the end of the file (10340 bytes)");
    CHECK_FAIL(qcow2_l2cache_get(c, 1ULL << 40, &tab, &s1), &d, "past the end of the file");

    /* eight threads on four slots */
    pthread_t th[8];
    for (uintptr_t i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, worker, (void *)(i + 1));
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    CHECK(bad == 0);

    qcow2_l2cache_free(c);
    bfile_close(f);
    return t_done("test_qcow2_l2cache");
}
