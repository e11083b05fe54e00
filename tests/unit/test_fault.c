/* The DISKIMG_FAULT parser and the counting semantics of fault_inject. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/bfile.h"
#include "io/fault.h"
#include "util/diag.h"

#include "check.h"

static void use_rules(const char *spec)
{
    if (spec)
        setenv("DISKIMG_FAULT", spec, 1);
    else
        unsetenv("DISKIMG_FAULT");
    fault_reset();
}

static void test_parse_valid(void)
{
    struct fault_rule r[FAULT_MAX_RULES];
    char why[256];
    int n;

    n = fault_parse("write:3:ENOSPC", r, FAULT_MAX_RULES, why, sizeof(why));
    CHECK(n == 1, "n=%d", n);
    CHECK(r[0].op == FAULT_WRITE && r[0].nth == 3 && !r[0].and_later && r[0].err == -ENOSPC,
          "op %d nth %lu later %d err %d", r[0].op, r[0].nth, r[0].and_later, r[0].err);

    n = fault_parse("read:1+:short,sync:2:EIO,punch:10+:EOPNOTSUPP,write:7:EINTR,write:2:zero",
                    r, FAULT_MAX_RULES, why, sizeof(why));
    CHECK(n == 5, "n=%d (%s)", n, n < 0 ? why : "");
    CHECK(r[4].op == FAULT_WRITE && r[4].nth == 2 && r[4].zero && r[4].err == 0, "rule 4");
    CHECK(!r[0].zero, "short is not zero");
    CHECK(r[0].op == FAULT_READ && r[0].nth == 1 && r[0].and_later && r[0].err == 0, "rule 0");
    CHECK(r[1].op == FAULT_SYNC && r[1].nth == 2 && !r[1].and_later && r[1].err == -EIO, "rule 1");
    CHECK(r[2].op == FAULT_PUNCH && r[2].nth == 10 && r[2].and_later &&
          r[2].err == -EOPNOTSUPP, "rule 2");
    CHECK(r[3].op == FAULT_WRITE && r[3].nth == 7 && r[3].err == -EINTR, "rule 3");

    n = fault_parse("write:2+:delay250,read:1:delay60000", r, FAULT_MAX_RULES, why, sizeof(why));
    CHECK(n == 2, "n=%d (%s)", n, n < 0 ? why : "");
    CHECK(r[0].op == FAULT_WRITE && r[0].nth == 2 && r[0].and_later && r[0].delay_ms == 250 &&
          r[0].err == 0 && !r[0].zero, "delay rule 0");
    CHECK(r[1].op == FAULT_READ && r[1].delay_ms == 60000, "delay rule 1");

    CHECK(fault_parse("", r, FAULT_MAX_RULES, why, sizeof(why)) == 0, "empty spec");
    CHECK(fault_parse(NULL, r, FAULT_MAX_RULES, why, sizeof(why)) == 0, "NULL spec");

    /* exactly the maximum number of rules is fine */
    char many[1024] = "";
    for (int i = 0; i < FAULT_MAX_RULES; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%swrite:%d:EIO",
                 i ? "," : "", i + 1);
    CHECK(fault_parse(many, r, FAULT_MAX_RULES, why, sizeof(why)) == FAULT_MAX_RULES,
          "%d rules: %s", FAULT_MAX_RULES, why);
}

static void test_parse_invalid(void)
{
    static const struct { const char *spec, *why_has; } bad[] = {
        { "write", "is not OP:N:WHAT" },
        { "write:3", "is not OP:N:WHAT" },
        { "bogus:1:EIO", "unknown operation 'bogus'" },
        { "Write:1:EIO", "unknown operation" },
        { "write:0:EIO", "'0' is not a number from 1" },
        { "write:x:EIO", "'x' is not a number" },
        { "write:-1:EIO", "'-1' is not a number" },
        { "write::EIO", "is not a number" },
        { "write:99999999999999999999999:EIO", "is not a number" },
        { "write:3+x:EIO", "is not N or N+" },
        { "write:3++:EIO", "is not N or N+" },
        { "write:3:EWHAT", "'EWHAT' is not a known errno name, 'short', 'zero' or 'delayMS'" },
        { "write:3:delay", "'delay' is not delayMS with MS from 1 to 60000" },
        { "write:3:delay0", "is not delayMS" },
        { "write:3:delay60001", "is not delayMS" },
        { "write:3:delay-5", "is not delayMS" },
        { "write:3:delay5x", "is not delayMS" },
        { "write:3:delay99999999999999999999999", "is not delayMS" },
        { "write:3:", "is not a known errno name" },
        { "write:3:eio", "is not a known errno name" },
        { "write:3:short:extra", "is not a known errno name" },
        { ",", "is not OP:N:WHAT" },
        { "write:1:EIO,", "is not OP:N:WHAT" },
        { "write:1:EIO,,read:1:EIO", "is not OP:N:WHAT" },
        { "read:1:EIO,write:2:BAD", "rule 'write:2:BAD'" },
    };
    struct fault_rule r[FAULT_MAX_RULES];
    char why[256];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        int n = fault_parse(bad[i].spec, r, FAULT_MAX_RULES, why, sizeof(why));
        CHECK(n == -EINVAL, "'%s' parsed as %d rules", bad[i].spec, n);
        CHECK(strstr(why, bad[i].why_has), "'%s': reason '%s' lacks '%s'", bad[i].spec, why,
              bad[i].why_has);
    }

    char many[1024] = "";
    for (int i = 0; i <= FAULT_MAX_RULES; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%swrite:%d:EIO",
                 i ? "," : "", i + 1);
    CHECK(fault_parse(many, r, FAULT_MAX_RULES, why, sizeof(why)) == -EINVAL,
          "%d rules accepted", FAULT_MAX_RULES + 1);
    CHECK(strstr(why, "more than"), "reason '%s'", why);

    char longrule[300];
    memset(longrule, '1', sizeof(longrule));
    memcpy(longrule, "write:", 6);
    memcpy(longrule + sizeof(longrule) - 5, ":EIO", 5);
    CHECK(fault_parse(longrule, r, FAULT_MAX_RULES, why, sizeof(why)) == -EINVAL,
          "a 300-byte rule accepted");
    CHECK(strstr(why, "too long"), "reason '%s'", why);
}

/* A bad DISKIMG_FAULT never aborts (library code does not): every call
 * fails with EINVAL, and fault_env_error() names the rule that is wrong. */
static void test_bad_env_refused(void)
{
    char why[256] = "";
    size_t len = 1;

    use_rules("write:1:EIO,read:x:EIO");
    CHECK(fault_active(), "a bad spec is not active");
    CHECK(fault_inject(FAULT_WRITE, &len) == -EINVAL, "write under a bad spec");
    CHECK(fault_inject(FAULT_READ, &len) == -EINVAL, "read under a bad spec");
    CHECK(fault_inject(FAULT_SYNC, NULL) == -EINVAL, "sync under a bad spec");
    CHECK(fault_env_error(why, sizeof(why)) == -EINVAL, "fault_env_error accepts it");
    CHECK(strstr(why, "read:x:EIO") != NULL, "reason '%s' does not name the rule", why);

    use_rules("write:1:EIO");
    CHECK(fault_env_error(why, sizeof(why)) == 0, "a good spec refused");
    use_rules(NULL);
    CHECK(fault_env_error(why, sizeof(why)) == 0, "no spec refused");
}

static int inj(enum fault_op op)
{
    size_t len = 100;
    return fault_inject(op, &len);
}

static void test_counting(void)
{
    size_t len;

    use_rules(NULL);
    CHECK(!fault_active(), "active without rules");
    len = 10;
    CHECK(fault_inject(FAULT_WRITE, &len) == 0 && len == 10, "no rules: len %zu", len);

    use_rules("write:3:EIO");
    CHECK(fault_active(), "not active");
    CHECK(inj(FAULT_WRITE) == 0, "call 1");
    CHECK(inj(FAULT_READ) == 0, "reads do not count for writes");
    CHECK(inj(FAULT_WRITE) == 0, "call 2");
    CHECK(inj(FAULT_WRITE) == -EIO, "call 3 must fail");
    CHECK(inj(FAULT_WRITE) == 0, "call 4 (N without + fails once)");
    CHECK(inj(FAULT_WRITE) == 0, "call 5");

    use_rules("read:2+:ENOSPC");
    CHECK(inj(FAULT_READ) == 0, "call 1");
    for (int i = 2; i <= 10; i++)
        CHECK(inj(FAULT_READ) == -ENOSPC, "call %d of N+ must fail", i);
    CHECK(inj(FAULT_WRITE) == 0, "other ops unaffected");
    CHECK(fault_inject(FAULT_SYNC, NULL) == 0, "sync unaffected");

    use_rules("write:1+:short");
    len = 10;
    CHECK(fault_inject(FAULT_WRITE, &len) == 0 && len == 5, "short: 10 -> %zu", len);
    len = 3;
    CHECK(fault_inject(FAULT_WRITE, &len) == 0 && len == 1, "short: 3 -> %zu", len);
    len = 1;
    CHECK(fault_inject(FAULT_WRITE, &len) == 0 && len == 1, "short: 1 -> %zu", len);
    CHECK(fault_inject(FAULT_WRITE, NULL) == 0, "short without a length");

    use_rules("read:2:zero");
    len = 10;
    CHECK(fault_inject(FAULT_READ, &len) == 0 && len == 10, "zero: call 1 untouched");
    CHECK(fault_inject(FAULT_READ, &len) == 0 && len == 0, "zero: call 2 cut to %zu", len);
    len = 10;
    CHECK(fault_inject(FAULT_READ, &len) == 0 && len == 10, "zero: call 3 untouched");

    /* delay: the call proceeds, whole, after at least the delay */
    use_rules("write:2:delay30");
    struct timespec t0, t1;
    len = 10;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(fault_inject(FAULT_WRITE, &len) == 0 && len == 10, "delay: call 1");
    CHECK(fault_inject(FAULT_WRITE, &len) == 0 && len == 10, "delay: call 2 proceeds whole");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    CHECK(ms >= 29, "delay30 slept %ld ms", ms);

    /* first listed rule wins */
    use_rules("write:2:EIO,write:1+:ENOSPC");
    CHECK(inj(FAULT_WRITE) == -ENOSPC, "call 1");
    CHECK(inj(FAULT_WRITE) == -EIO, "call 2: the first listed rule wins");
    CHECK(inj(FAULT_WRITE) == -ENOSPC, "call 3");

    /* sync and punch rules */
    use_rules("sync:1:EIO,punch:2:EOPNOTSUPP");
    CHECK(fault_inject(FAULT_SYNC, NULL) == -EIO, "sync 1");
    CHECK(fault_inject(FAULT_SYNC, NULL) == 0, "sync 2");
    CHECK(inj(FAULT_PUNCH) == 0 && inj(FAULT_PUNCH) == -EOPNOTSUPP, "punch 2");

    /* reset starts counting from zero again */
    use_rules("write:2:EIO");
    CHECK(inj(FAULT_WRITE) == 0 && inj(FAULT_WRITE) == -EIO, "first round");
    fault_reset();
    CHECK(inj(FAULT_WRITE) == 0 && inj(FAULT_WRITE) == -EIO, "after fault_reset");
    use_rules(NULL);
}

/* The call after an injected EINTR/EAGAIN is the retry: it proceeds and is
 * not counted, so N+ rules cannot livelock a retry loop. */
static void test_transient_retry(void)
{
    use_rules("write:1+:EINTR");
    for (int i = 0; i < 5; i++) {
        CHECK(inj(FAULT_WRITE) == -EINTR, "attempt %d must get EINTR", i);
        CHECK(inj(FAULT_WRITE) == 0, "its retry %d must proceed", i);
    }

    use_rules("write:1:EINTR,write:2:EIO");
    CHECK(inj(FAULT_WRITE) == -EINTR, "call 1");
    CHECK(inj(FAULT_WRITE) == 0, "retry of call 1, not counted");
    CHECK(inj(FAULT_WRITE) == -EIO, "call 2");

    use_rules("read:1+:EAGAIN");
    CHECK(inj(FAULT_READ) == -EAGAIN && inj(FAULT_READ) == 0, "EAGAIN then its retry");
    CHECK(inj(FAULT_WRITE) == 0, "write not affected");

    /* the retry pass is per operation kind */
    use_rules("read:1+:EINTR,write:1+:EINTR");
    CHECK(inj(FAULT_READ) == -EINTR, "read");
    CHECK(inj(FAULT_WRITE) == -EINTR, "write is not the read's retry");
    CHECK(inj(FAULT_READ) == 0 && inj(FAULT_WRITE) == 0, "both retries proceed");
    use_rules(NULL);
}

static void *other_thread(void *arg)
{
    *(int *)arg = inj(FAULT_WRITE);
    return NULL;
}

/* The retry pass belongs to the thread that got the EINTR; counting is
 * shared by all threads. */
static void test_threads(void)
{
    pthread_t t;
    int res = 1;

    use_rules("write:1+:EINTR");
    CHECK(inj(FAULT_WRITE) == -EINTR, "main thread, call 1");
    pthread_create(&t, NULL, other_thread, &res);
    pthread_join(t, NULL);
    CHECK(res == -EINTR, "another thread's call is not the retry (got %d)", res);
    CHECK(inj(FAULT_WRITE) == 0, "main thread's retry proceeds");

    use_rules("write:2:EIO");
    CHECK(inj(FAULT_WRITE) == 0, "call 1");
    pthread_create(&t, NULL, other_thread, &res);
    pthread_join(t, NULL);
    CHECK(res == -EIO, "call 2 on another thread must fail (got %d)", res);
    use_rules(NULL);
}

/* bfile's read loop under faults that must be retried: the content is
 * still right (this livelocked before the retry pass existed). */
static void test_bfile_retries(void)
{
    char path[4096];
    const char *tmp = getenv("TEST_TMP");
    snprintf(path, sizeof(path), "%s/fault-bfile.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp %s", path);
    static unsigned char data[100000], back[100000];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (unsigned char)(i * 7 + 3);
    CHECK(write(fd, data, sizeof(data)) == (ssize_t)sizeof(data), "write");
    close(fd);

    static const char *const specs[] = { "read:1+:EINTR", "read:1+:short",
                                         "read:2:EINTR,read:1+:short" };
    for (size_t s = 0; s < sizeof(specs) / sizeof(specs[0]); s++) {
        struct diag d;
        struct bfile *f;
        diag_init(&d);
        CHECK(bfile_open(&f, path, 0, &d) == 0, "open");
        use_rules(specs[s]);
        memset(back, 0, sizeof(back));
        int r = bfile_pread(f, back, sizeof(back), 0);
        CHECK(r == 0 && memcmp(back, data, sizeof(data)) == 0, "%s: r=%d", specs[s], r);
        use_rules(NULL);
        bfile_close(f);
    }
    unlink(path);
}

int main(void)
{
    test_parse_valid();
    test_parse_invalid();
    test_bad_env_refused();
    test_counting();
    test_transient_retry();
    test_threads();
    test_bfile_retries();
    if (failures) {
        fprintf(stderr, "test_fault: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_fault: all checks passed\n");
    return 0;
}
