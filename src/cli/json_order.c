/* json_order: object members in the order qemu-img prints them.
 *
 * Why: qemu-img builds its JSON (info, check, measure) in QDicts, which
 * are hash tables of 512 buckets printed bucket by bucket, the member added
 * last first within a bucket.  Its key order is therefore a function of the
 * key names; scripts and test suites that compare our output with
 * qemu-img's byte for byte see the same order only if we sort the same way.
 * The hash (the one QDict uses, TDB's) is a fact of that output format:
 * value = 0x238F13AF * length, plus each byte shifted left by
 * (index * 5 % 24), then 1103515243 * value + 12345, all in 32 bits. */
#include "cli.h"

#include <stdint.h>
#include <string.h>

#include "util/jval.h"

#define QDICT_BUCKETS 512u

static unsigned qdict_bucket(const char *key)
{
    size_t len = strlen(key);
    uint32_t v = (uint32_t)(0x238F13AFu * (uint32_t)len);

    for (size_t i = 0; i < len; i++)
        v += (uint32_t)(unsigned char)key[i] << (i * 5 % 24);
    return (unsigned)((1103515243u * v + 12345u) % QDICT_BUCKETS);
}

void cli_json_qemu_order(struct jval *v)
{
    if (!v || (v->type != J_OBJECT && v->type != J_ARRAY))
        return;
    for (size_t i = 0; i < v->n; i++)
        cli_json_qemu_order(v->items[i]);
    if (v->type != J_OBJECT)
        return;
    /* insertion sort (objects hold a few dozen members at most): bucket
     * ascending, and within a bucket the later member first -- so a member
     * moves in front of every earlier one whose bucket is not lower */
    for (size_t i = 1; i < v->n; i++) {
        struct jval *item = v->items[i];
        char *key = v->keys[i];
        unsigned b = qdict_bucket(key);
        size_t j = i;
        while (j > 0 && qdict_bucket(v->keys[j - 1]) >= b) {
            v->items[j] = v->items[j - 1];
            v->keys[j] = v->keys[j - 1];
            j--;
        }
        v->items[j] = item;
        v->keys[j] = key;
    }
}
