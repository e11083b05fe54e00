/* kvopts: `-o key=value,key2=value2` option lists, parsed as qemu-img does
 * (several -o accumulate, the last value of a key wins, ",," is a literal
 * comma, a bare `key` means `key=on`).  Drivers take the keys they know;
 * whatever nobody took is reported by the command as an invalid parameter.
 */
#ifndef DISKIMG_KVOPTS_H
#define DISKIMG_KVOPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kv {
    char *key;
    char *val;
    bool used;
};

struct kvopts {
    size_t n;
    struct kv *v;
};

/* Append the pairs of `s`.  Returns 0, or -EINVAL (or -ENOMEM) with a
 * reason in err. */
int kvopts_parse(struct kvopts *o, const char *s, char *err, size_t errlen);

/* Set key=val (replaces an earlier value).  0, or -ENOMEM (the list is
 * then unchanged). */
int kvopts_set(struct kvopts *o, const char *key, const char *val);

/* Last value of `key` (marking it used), or NULL. */
const char *kvopts_get(struct kvopts *o, const char *key);

/* Typed getters: 0 = absent (value untouched), 1 = present and valid,
 * -EINVAL = present but not valid (reason in err). */
int kvopts_get_size(struct kvopts *o, const char *key, uint64_t *val,
                    char *err, size_t errlen);
int kvopts_get_bool(struct kvopts *o, const char *key, bool *val,
                    char *err, size_t errlen);

/* First key no one took, or NULL. */
const char *kvopts_unused(const struct kvopts *o);

/* True if the list is exactly "help" or "?" (list the options). */
bool kvopts_wants_help(const struct kvopts *o);

void kvopts_free(struct kvopts *o);

#endif
