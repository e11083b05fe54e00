/* metamap: lookups against a brute-force scan over random range sets,
 * overlapping ones included, and the edges (touching, empty, wrapping). */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "formats/metamap.h"

static int overlaps(const struct metarange *r, uint64_t off, uint64_t len)
{
    return len && off < r->off + r->len && r->off < off + len;
}

int main(void)
{
    struct metamap m = { 0 };

    CHECK(metamap_find(&m, 0, 100) == NULL);
    CHECK(metamap_add(&m, 4096, 512, "header") == 0);
    CHECK(metamap_add(&m, 0, 0, "empty") == 0);
    CHECK(metamap_add(&m, UINT64_MAX - 10, 20, "wraps") == -EOVERFLOW);
    CHECK(metamap_find(&m, 4096, 1) == NULL, "unsealed map answers");
    CHECK(metamap_seal(&m) == 0);
    CHECK(metamap_add(&m, 1, 1, "late") == -EINVAL);
    CHECK(metamap_find(&m, 4095, 1) == NULL, "touching below");
    CHECK(metamap_find(&m, 4608, 100) == NULL, "touching above");
    CHECK(metamap_find(&m, 4095, 2) != NULL);
    CHECK(metamap_find(&m, 4607, 1) != NULL);
    CHECK(metamap_find(&m, 0, UINT64_MAX) != NULL, "a query that wraps");
    CHECK(metamap_find(&m, 4100, 0) == NULL, "an empty query");
    metamap_free(&m);

    srand(7);
    for (int round = 0; round < 300; round++) {
        struct metarange all[64];
        int n = rand() % 64;
        for (int i = 0; i < n; i++) {
            all[i].off = (uint64_t)(rand() % 4000);
            all[i].len = (uint64_t)(rand() % (round % 3 ? 40 : 600)) + 1;
            all[i].what = "x";
            CHECK(metamap_add(&m, all[i].off, all[i].len, "x") == 0);
        }
        CHECK(metamap_seal(&m) == 0);
        for (int q = 0; q < 200; q++) {
            uint64_t off = (uint64_t)(rand() % 4700), len = (uint64_t)(rand() % 50);
            int want = 0;
            for (int i = 0; i < n; i++)
                want |= overlaps(&all[i], off, len);
            const struct metarange *got = metamap_find(&m, off, len);
            CHECK(!!got == want, "round %d query %llu+%llu", round,
                  (unsigned long long)off, (unsigned long long)len);
            if (got)
                CHECK(overlaps(got, off, len));
        }
        metamap_free(&m);
    }
    return failures != 0;
}
