/* progress: what -p and --progress=json print while a command works.
 *
 * A bar on stderr when it is a terminal (percentage, bytes, rate, ETA), or
 * one JSON object per line ({"done":N,"total":N,"elapsed":S}) for programs.
 * At most ~5 updates a second, and always a final 100% on success.
 * -p when stderr is not a terminal prints what qemu-img -p prints, for the
 * programs that parse it (KubeVirt CDI, oVirt): "    (NN.NN/100%)\r" on
 * stdout at every whole percent, a newline at the end -- unless stdout
 * carries the command's output (progress_stdout_in_use).
 */
#ifndef DISKIMG_PROGRESS_H
#define DISKIMG_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum progress_mode { PROGRESS_NONE, PROGRESS_BAR, PROGRESS_JSON, PROGRESS_QEMU };

struct progress {
    enum progress_mode mode;
    FILE *out;
    double start, last;
    uint64_t done, total;
    bool shown;
    double last_pct;           /* PROGRESS_QEMU: the percentage last printed */
};

/* Stdout is the command's output (convert to "-"): no progress there. */
void progress_stdout_in_use(void);

void progress_init(struct progress *p, enum progress_mode mode, FILE *out);

/* Callback for convert_opts.progress (opaque = struct progress *). */
void progress_update(void *opaque, uint64_t done, uint64_t total);

/* Print the final state: 100% on success, where it stopped otherwise. */
void progress_finish(struct progress *p, bool success);

/* Monotonic seconds. */
double progress_now(void);

#endif
