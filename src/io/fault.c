#include "io/fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct fault_rule rules[FAULT_MAX_RULES];
static int nrules;
/* DISKIMG_FAULT did not parse: every call fails with EINVAL (a typo in a
 * test must not silently test nothing) and fault_env_error() says why. */
static bool bad_spec;
static char bad_why[256];
static const char *stats_path;
static atomic_ulong calls[FAULT_NOPS];
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* Set after an injected EINTR/EAGAIN: the next call of that kind on this
 * thread is the retry and proceeds (otherwise `N+:EINTR` would livelock). */
static _Thread_local bool retry_pass[FAULT_NOPS];

static const struct { const char *name; int err; } errnames[] = {
    { "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EINTR", EINTR }, { "EAGAIN", EAGAIN },
    { "EDQUOT", EDQUOT }, { "EFBIG", EFBIG }, { "EROFS", EROFS }, { "EPERM", EPERM },
    { "EACCES", EACCES }, { "ENOMEM", ENOMEM }, { "EOPNOTSUPP", EOPNOTSUPP },
    { "EINVAL", EINVAL }, { "EBADF", EBADF },
};

static const char *const op_names[FAULT_NOPS] = { "read", "write", "sync", "punch" };

/* One rule `OP:N[+]:WHAT` of exactly `len` bytes at `s`. */
static int parse_rule(const char *s, size_t len, struct fault_rule *r, char *why,
                      size_t why_len)
{
    char tok[128];
    char *n, *what, *end;

    if (len >= sizeof(tok)) {
        snprintf(why, why_len, "rule '%.*s...' is too long", 32, s);
        return -EINVAL;
    }
    memcpy(tok, s, len);
    tok[len] = '\0';
    memset(r, 0, sizeof(*r));
    n = strchr(tok, ':');
    what = n ? strchr(n + 1, ':') : NULL;
    if (!what) {
        snprintf(why, why_len, "rule '%s' is not OP:N:WHAT", tok);
        return -EINVAL;
    }
    *n++ = '\0';
    *what++ = '\0';

    int op = -1;
    for (int i = 0; i < FAULT_NOPS; i++)
        if (strcmp(tok, op_names[i]) == 0)
            op = i;
    if (op < 0) {
        snprintf(why, why_len, "rule '%.*s': unknown operation '%s' "
                 "(read, write, sync or punch)", (int)len, s, tok);
        return -EINVAL;
    }
    r->op = (enum fault_op)op;

    errno = 0;
    r->nth = (n[0] >= '0' && n[0] <= '9') ? strtoul(n, &end, 10) : 0;
    if (r->nth == 0 || errno) {
        snprintf(why, why_len, "rule '%.*s': call number '%s' is not a number from 1",
                 (int)len, s, n);
        return -EINVAL;
    }
    if (*end == '+') {
        r->and_later = true;
        end++;
    }
    if (*end) {
        snprintf(why, why_len, "rule '%.*s': call number '%s' is not N or N+",
                 (int)len, s, n);
        return -EINVAL;
    }

    if (strcmp(what, "short") == 0)
        return 0;
    if (strcmp(what, "zero") == 0) {
        r->zero = true;
        return 0;
    }
    if (strncmp(what, "delay", 5) == 0) {
        errno = 0;
        unsigned long ms = (what[5] >= '0' && what[5] <= '9') ? strtoul(what + 5, &end, 10) : 0;
        if (ms == 0 || ms > 60000 || errno || *end) {
            snprintf(why, why_len, "rule '%.*s': '%s' is not delayMS with MS from 1 to 60000",
                     (int)len, s, what);
            return -EINVAL;
        }
        r->delay_ms = (unsigned)ms;
        return 0;
    }
    for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++) {
        if (strcmp(what, errnames[i].name) == 0) {
            r->err = -errnames[i].err;
            return 0;
        }
    }
    snprintf(why, why_len, "rule '%.*s': '%s' is not a known errno name, 'short', 'zero' or 'delayMS'",
             (int)len, s, what);
    return -EINVAL;
}

int fault_parse(const char *spec, struct fault_rule *out, int max, char *why,
                size_t why_len)
{
    int count = 0;
    const char *p = spec;

    if (!spec || !*spec)
        return 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (count == max) {
            snprintf(why, why_len, "more than %d rules", max);
            return -EINVAL;
        }
        if (parse_rule(p, len, &out[count], why, why_len) < 0)
            return -EINVAL;
        count++;
        if (!comma)
            return count;
        p = comma + 1;
    }
}

static void load_rules(void)
{
    const char *env = getenv("DISKIMG_FAULT");
    int n = fault_parse(env, rules, FAULT_MAX_RULES, bad_why, sizeof(bad_why));

    bad_spec = n < 0;
    nrules = n < 0 ? 0 : n;
    stats_path = getenv("DISKIMG_FAULT_STATS");
    if (stats_path && !*stats_path)
        stats_path = NULL;
}

void fault_reset(void)
{
    pthread_once(&once, load_rules);
    nrules = 0;
    load_rules();
    for (int i = 0; i < FAULT_NOPS; i++) {
        atomic_store(&calls[i], 0);
        retry_pass[i] = false;
    }
}

int fault_active(void)
{
    pthread_once(&once, load_rules);
    return nrules > 0 || stats_path || bad_spec;
}

int fault_env_error(char *why, size_t why_len)
{
    pthread_once(&once, load_rules);
    if (!bad_spec)
        return 0;
    snprintf(why, why_len, "%s", bad_why);
    return -EINVAL;
}

const char *fault_stats_path(void)
{
    pthread_once(&once, load_rules);
    return stats_path;
}

void fault_format_stats(char *buf, size_t n)
{
    snprintf(buf, n, "read %lu write %lu sync %lu punch %lu\n",
             atomic_load(&calls[FAULT_READ]), atomic_load(&calls[FAULT_WRITE]),
             atomic_load(&calls[FAULT_SYNC]), atomic_load(&calls[FAULT_PUNCH]));
}

int fault_inject(enum fault_op op, size_t *len)
{
    if (!fault_active())
        return 0;
    if (bad_spec)
        return -EINVAL;
    if (retry_pass[op]) {
        retry_pass[op] = false;
        return 0;
    }
    unsigned long n = atomic_fetch_add(&calls[op], 1) + 1;
    for (int i = 0; i < nrules; i++) {
        const struct fault_rule *r = &rules[i];
        if (r->op != op || !(n == r->nth || (r->and_later && n > r->nth)))
            continue;
        if (r->err == -EINTR || r->err == -EAGAIN)
            retry_pass[op] = true;
        if (r->err)
            return r->err;
        if (r->delay_ms) {
            struct timespec ts = { r->delay_ms / 1000, (long)(r->delay_ms % 1000) * 1000000L };
            while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
            return 0;
        }
        if (len && r->zero)
            *len = 0;
        else if (len && *len > 1)
            *len /= 2;
        return 0;
    }
    return 0;
}
