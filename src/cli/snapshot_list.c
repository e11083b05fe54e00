/* The snapshot table as qemu-img prints it (info, snapshot -l), from the
 * "snapshots" array of a driver's info object. */
#include <stdio.h>
#include <time.h>

#include "cli.h"
#include "util/jval.h"
#include "util/size.h"

static uint64_t juint(const struct jval *v)
{
    if (!v)
        return 0;
    return v->type == J_UINT ? v->v.u : v->type == J_INT ? (uint64_t)v->v.i : 0;
}

void cli_print_snapshots(const struct jval *snaps)
{
    printf("Snapshot list:\n");
    printf("%-9s %-17s %7s%20s %12s %10s\n", "ID", "TAG", "VM SIZE", "DATE", "VM CLOCK",
           "ICOUNT");
    for (size_t i = 0; i < snaps->n; i++) {
        const struct jval *s = snaps->items[i];
        const struct jval *id = jv_get(s, "id"), *name = jv_get(s, "name");
        char vms[32], date[32], clock[80];
        size_human(juint(jv_get(s, "vm-state-size")), vms, sizeof(vms));
        time_t t = (time_t)juint(jv_get(s, "date-sec"));
        struct tm tm;
        localtime_r(&t, &tm);
        strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &tm);
        uint64_t secs = juint(jv_get(s, "vm-clock-sec"));
        uint64_t ms = juint(jv_get(s, "vm-clock-nsec")) / 1000000;
        snprintf(clock, sizeof(clock), "%02llu:%02llu:%02llu.%03llu",
                 (unsigned long long)(secs / 3600), (unsigned long long)(secs / 60 % 60),
                 (unsigned long long)(secs % 60), (unsigned long long)ms);
        const struct jval *ic = jv_get(s, "icount");
        char icount[32] = "--";
        if (ic)
            snprintf(icount, sizeof(icount), "%llu", (unsigned long long)juint(ic));
        printf("%-9s %-17s %7s%20s %12s %10s\n", id && id->type == J_STRING ? id->v.s : "",
               name && name->type == J_STRING ? name->v.s : "", vms, date, clock, icount);
    }
}

