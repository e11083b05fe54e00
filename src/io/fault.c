#include "io/fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RULES 16

struct rule {
    enum fault_op op;
    unsigned long nth;
    int and_later;
    int err;          /* negative errno, or 0 for a short transfer or a delay */
    unsigned delay_ms; /* > 0: sleep, then proceed */
};

static struct rule rules[MAX_RULES];
static int nrules;
static const char *stats_path;
static atomic_ulong calls[FAULT_NOPS];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static const struct { const char *name; int err; } errnames[] = {
    { "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EINTR", EINTR }, { "EAGAIN", EAGAIN },
    { "EDQUOT", EDQUOT }, { "EFBIG", EFBIG }, { "EROFS", EROFS }, { "EPERM", EPERM },
    { "EACCES", EACCES }, { "ENOMEM", ENOMEM }, { "EOPNOTSUPP", EOPNOTSUPP },
    { "EINVAL", EINVAL }, { "EBADF", EBADF },
};

static int parse_op(const char *s, enum fault_op *op)
{
    static const char *const names[FAULT_NOPS] = { "read", "write", "sync", "punch" };
    for (int i = 0; i < FAULT_NOPS; i++) {
        if (strcmp(s, names[i]) == 0) {
            *op = (enum fault_op)i;
            return 0;
        }
    }
    return -1;
}

static void write_stats(void)
{
    FILE *f = fopen(stats_path, "w");
    if (!f)
        return;
    fprintf(f, "read %lu write %lu sync %lu punch %lu\n", atomic_load(&calls[FAULT_READ]),
            atomic_load(&calls[FAULT_WRITE]), atomic_load(&calls[FAULT_SYNC]),
            atomic_load(&calls[FAULT_PUNCH]));
    fclose(f);
}

static void parse_rules(void)
{
    const char *env = getenv("DISKIMG_FAULT");
    char buf[512];

    stats_path = getenv("DISKIMG_FAULT_STATS");
    if (stats_path && *stats_path)
        atexit(write_stats);
    else
        stats_path = NULL;

    if (!env || !*env)
        return;
    snprintf(buf, sizeof(buf), "%s", env);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && nrules < MAX_RULES;
         tok = strtok_r(NULL, ",", &save)) {
        char *op = tok, *n = strchr(op, ':'), *what;
        struct rule r = { 0 };
        if (!n || !(what = strchr(n + 1, ':')))
            goto bad;
        *n++ = '\0';
        *what++ = '\0';
        if (parse_op(op, &r.op) < 0)
            goto bad;
        char *end;
        r.nth = strtoul(n, &end, 10);
        if (end == n || r.nth == 0)
            goto bad;
        if (*end == '+') {
            r.and_later = 1;
            end++;
        }
        if (*end)
            goto bad;
        if (strcmp(what, "short") == 0) {
            r.err = 0;
        } else if (strncmp(what, "delay", 5) == 0) {
            unsigned long ms = strtoul(what + 5, &end, 10);
            if (end == what + 5 || *end || ms == 0 || ms > 60000)
                goto bad;
            r.delay_ms = (unsigned)ms;
        } else {
            size_t i;
            for (i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
                if (strcmp(what, errnames[i].name) == 0)
                    break;
            if (i == sizeof(errnames) / sizeof(errnames[0]))
                goto bad;
            r.err = -errnames[i].err;
        }
        rules[nrules++] = r;
        continue;
bad:
        /* A typo in a test must not silently test nothing. */
        fprintf(stderr, "diskimg: DISKIMG_FAULT: cannot parse rule '%s'\n", tok);
        abort();
    }
}

int fault_active(void)
{
    pthread_once(&once, parse_rules);
    return nrules > 0 || stats_path;
}

int fault_inject(enum fault_op op, size_t *len)
{
    if (!fault_active())
        return 0;
    unsigned long n = atomic_fetch_add(&calls[op], 1) + 1;
    for (int i = 0; i < nrules; i++) {
        const struct rule *r = &rules[i];
        if (r->op != op || !(n == r->nth || (r->and_later && n > r->nth)))
            continue;
        /* `N+:EINTR` interrupts every other call: the retry of an
         * interrupted call gets through, as it would for real */
        if (r->err == -EINTR && r->and_later && (n - r->nth) % 2)
            continue;
        if (r->err)
            return r->err;
        if (r->delay_ms) {
            struct timespec ts = { r->delay_ms / 1000, (long)(r->delay_ms % 1000) * 1000000L };
            while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
            return 0;
        }
        if (len && *len > 1)
            *len /= 2;
        return 0;
    }
    return 0;
}
