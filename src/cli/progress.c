#include "progress.h"

#include <time.h>
#include <unistd.h>

#include "util/size.h"

#define MIN_INTERVAL 0.2   /* seconds between updates: ~5 a second */

static bool stdout_busy;

void progress_stdout_in_use(void)
{
    stdout_busy = true;
}

double progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void progress_init(struct progress *p, enum progress_mode mode, FILE *out)
{
    p->mode = mode;
    p->out = out;
    p->start = progress_now();
    p->last = 0;
    p->done = p->total = 0;
    p->shown = false;
    p->last_pct = -1;
    /* a bar only makes sense on a terminal; elsewhere qemu-img's lines,
     * which programs parse */
    if (mode == PROGRESS_BAR && !isatty(fileno(out))) {
        p->mode = stdout_busy ? PROGRESS_NONE : PROGRESS_QEMU;
        p->out = stdout;
    }
}

static void show(struct progress *p, double now, bool final)
{
    double elapsed = now - p->start;
    double frac = p->total ? (double)p->done / (double)p->total : 1.0;

    if (p->mode == PROGRESS_QEMU) {
        /* qemu-img's format; a line at every whole percent */
        double pct = frac * 100.0;
        if (final || pct >= p->last_pct + 1.0 || p->last_pct < 0) {
            fprintf(p->out, "    (%3.2f/100%%)\r", pct);
            p->last_pct = pct;
        }
        if (final)
            fputc('\n', p->out);
        fflush(p->out);
        return;
    }
    if (p->mode == PROGRESS_JSON) {
        fprintf(p->out, "{\"done\":%llu,\"total\":%llu,\"elapsed\":%.3f}\n",
                (unsigned long long)p->done, (unsigned long long)p->total, elapsed);
        fflush(p->out);
        return;
    }
    char done_s[32], total_s[32], rate_s[32], eta[32] = "";
    size_human(p->done, done_s, sizeof(done_s));
    size_human(p->total, total_s, sizeof(total_s));
    double rate = elapsed > 0 ? (double)p->done / elapsed : 0;
    size_human((uint64_t)rate, rate_s, sizeof(rate_s));
    if (!final && rate > 0 && p->total > p->done) {
        unsigned s = (unsigned)((double)(p->total - p->done) / rate);
        snprintf(eta, sizeof(eta), " ETA %u:%02u", s / 60, s % 60);
    }
    int width = 30, fill = (int)(frac * width);
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
    bar[width] = '\0';
    fprintf(p->out, "\r[%s] %5.1f%% %s/%s %s/s%s\033[K", bar, frac * 100.0, done_s,
            total_s, rate_s, eta);
    if (final)
        fputc('\n', p->out);
    fflush(p->out);
}

void progress_update(void *opaque, uint64_t done, uint64_t total)
{
    struct progress *p = opaque;

    p->done = done;
    p->total = total;
    if (p->mode == PROGRESS_NONE)
        return;
    double now = progress_now();
    if (p->shown && now - p->last < MIN_INTERVAL && p->mode != PROGRESS_QEMU)
        return;
    if (done >= total && total > 0)
        return; /* the final line is progress_finish's */
    p->last = now;
    p->shown = true;
    show(p, now, false);
}

void progress_finish(struct progress *p, bool success)
{
    if (p->mode == PROGRESS_NONE)
        return;
    if (success)
        p->done = p->total;
    show(p, progress_now(), true);
}
