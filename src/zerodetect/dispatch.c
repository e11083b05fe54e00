/* Chooses the buffer_is_zero variant once, on first use: the best one this
 * CPU and OS can run, unless DISKIMG_ZERO_IMPL names another usable one.
 * The choice is one atomic pointer to a table entry, so a call costs one
 * relaxed load and an indirect call, and zd_force_impl() can switch it. */
#include "zerodetect/zd_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static bool resolve_is_zero(const void *buf, size_t len);
static size_t resolve_zero_prefix(const void *buf, size_t len);

/* Before the first call: an entry whose functions select, then forward. */
static const struct zd_impl unresolved = {
    "unresolved", resolve_is_zero, resolve_zero_prefix, 0
};

static _Atomic(const struct zd_impl *) active = &unresolved;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The entry called `name` if usable, else the best usable one; *status is
 * 0, -ENOTSUP (known but not usable) or -EINVAL (unknown name). */
static const struct zd_impl *pick(const char *name, int *status)
{
    unsigned have = zd_cpu_features();
    const struct zd_impl *best = NULL;

    *status = name ? -EINVAL : 0;
    for (size_t i = 0; i < zd_impl_count; i++) {
        const struct zd_impl *im = &zd_impl_table[i];
        bool usable = (im->needs & have) == im->needs;
        if (usable && !best)
            best = im;
        if (name && strcmp(name, im->name) == 0) {
            if (usable) {
                *status = 0;
                return im;
            }
            *status = -ENOTSUP;
        }
    }
    return best; /* the table ends with generic, which needs nothing */
}

static void select_once(void)
{
    int status;
    const char *env = getenv("DISKIMG_ZERO_IMPL");

    atomic_store_explicit(&active, pick(env && *env ? env : NULL, &status),
                          memory_order_release);
}

const struct zd_impl *zd_active(void)
{
    const struct zd_impl *im = atomic_load_explicit(&active, memory_order_acquire);

    if (im != &unresolved)
        return im;
    pthread_once(&once, select_once);
    return atomic_load_explicit(&active, memory_order_acquire);
}

static bool resolve_is_zero(const void *buf, size_t len)
{
    return zd_active()->is_zero(buf, len);
}

static size_t resolve_zero_prefix(const void *buf, size_t len)
{
    return zd_active()->zero_prefix(buf, len);
}

bool zd_is_zero_full(const void *buf, size_t len)
{
    /* Relaxed is enough: table entries are constants, never written. */
    return atomic_load_explicit(&active, memory_order_relaxed)->is_zero(buf, len);
}

size_t zd_zero_prefix(const void *buf, size_t len)
{
    return atomic_load_explicit(&active, memory_order_relaxed)->zero_prefix(buf, len);
}

const char *zd_impl_name(void)
{
    return zd_active()->name;
}

int zd_force_impl(const char *name)
{
    int status;

    /* Select first, so that a later first use cannot undo the forcing. */
    pthread_once(&once, select_once);
    atomic_store_explicit(&active, pick(name, &status), memory_order_release);
    return status;
}

size_t zd_impls(const char **names, zd_fn *fns, bool *usable, size_t max)
{
    unsigned have = zd_cpu_features();
    size_t n = 0;

    for (; n < zd_impl_count && n < max; n++) {
        names[n] = zd_impl_table[n].name;
        fns[n] = zd_impl_table[n].is_zero;
        usable[n] = (zd_impl_table[n].needs & have) == zd_impl_table[n].needs;
    }
    return n;
}
