/* Out of memory in the library's small allocators (jval trees, kvopts
 * lists): every allocation is made to fail in turn, and each time the
 * caller must get -ENOMEM (never an abort or a crash) with the structure
 * still whole enough to free; under ASan/LSan nothing may leak.
 *
 * The failures come from a malloc failure injector: this test is linked
 * with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup (see
 * the Makefile), so the library's calls land in the __wrap_ functions
 * below; calls inside libc itself are not affected. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/jval.h"
#include "util/kvopts.h"

#include "check.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);

static unsigned long calls, fail_at;  /* fail_at 0: never fail */
static int failed;

static int should_fail(void)
{
    if (!fail_at || ++calls != fail_at)
        return 0;
    failed = 1;
    return 1;
}

void *__wrap_malloc(size_t n) { return should_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return should_fail() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return should_fail() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return should_fail() ? NULL : __real_strdup(s); }

/* Fail the nth allocation from now on (and only that one). */
static void arm(unsigned long n)
{
    calls = 0;
    fail_at = n;
    failed = 0;
}

/* Stop failing; `failed` keeps saying whether the armed one came. */
static void disarm(void)
{
    fail_at = 0;
}

/* A tree shaped like `info --output=json` of a qcow2 image: nested objects
 * and arrays, strings, more children than the first allocation holds. */
static struct jval *build_tree(void)
{
    struct jval *o = jv_object();
    jv_set(o, "virtual-size", jv_uint(1u << 30));
    jv_set(o, "filename", jv_str("disk.qcow2"));
    jv_set(o, "format", jv_str("qcow2"));
    jv_set(o, "dirty-flag", jv_bool(false));
    jv_set(o, "format", jv_str("qcow2 again"));  /* replaces in place */
    struct jval *snaps = jv_set(o, "snapshots", jv_array());
    for (int i = 0; i < 20; i++) {
        struct jval *s = jv_push(snaps, jv_object());
        char name[16];
        snprintf(name, sizeof(name), "snap%d", i);
        jv_set(s, "id", jv_int(i));
        jv_set(s, "name", jv_str(name));
        jv_set(s, "vm-clock-nsec", jv_double(0.5));
        struct jval *flags = jv_set(s, "flags", jv_array());
        jv_push(flags, jv_str("in-use"));
        jv_push(flags, jv_null());
    }
    struct jval *fs = jv_set(o, "format-specific", jv_object());
    struct jval *data = jv_set(fs, "data", jv_object());
    jv_set(data, "compat", jv_str("1.1"));
    return o;
}

static void test_jval(void)
{
    unsigned long n;

    for (n = 1;; n++) {
        arm(n);
        struct jval *o = build_tree();
        disarm();
        int st = jv_status(o);
        if (!failed) {
            CHECK(st == 0, "no allocation failed, status %d", st);
            CHECK(jv_get(jv_get(jv_get(o, "format-specific"), "data"), "compat") != NULL,
                  "the whole tree was not built");
            jv_free(o);
            break;
        }
        CHECK(st == -ENOMEM, "allocation %lu failed, status %d", n, st);
        jv_free(o);
    }
    CHECK(n > 100, "only %lu allocations: the sweep did not cover the tree", n);
}

static void test_kvopts(void)
{
    static const char list[] = "cluster_size=64K,compat=1.1,a,,b=c,lazy_refcounts=on,"
                               "cluster_size=2M,x=1,y=2,z=3,preallocation=metadata";
    char err[256];
    unsigned long n;

    for (n = 1;; n++) {
        struct kvopts o = { 0 };
        arm(n);
        int r = kvopts_parse(&o, list, err, sizeof(err));
        disarm();
        for (size_t i = 0; i < o.n; i++)
            CHECK(o.v[i].key && o.v[i].val, "allocation %lu: entry %zu half made", n, i);
        if (!failed) {
            CHECK(r == 0, "no allocation failed, parse returned %d", r);
            CHECK(o.n == 8, "%zu entries", o.n);  /* "a,,b=c" is one key "a,b" */
            const char *cs = kvopts_get(&o, "cluster_size");
            CHECK(cs && strcmp(cs, "2M") == 0, "cluster_size is '%s'", cs ? cs : "(none)");
            kvopts_free(&o);
            break;
        }
        CHECK(r == -ENOMEM, "allocation %lu failed, parse returned %d", n, r);
        CHECK(strstr(err, "memory") != NULL, "reason '%s'", err);
        kvopts_free(&o);
    }
    CHECK(n > 10, "only %lu allocations", n);
}

int main(void)
{
    test_jval();
    test_kvopts();
    if (failures) {
        fprintf(stderr, "test_oom: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_oom: all checks passed\n");
    return 0;
}
