#include "util/diag.h"

#include <errno.h>
#include <string.h>

void diag_init(struct diag *d)
{
    memset(d, 0, sizeof(*d));
    pthread_mutex_init(&d->lock, NULL);
    d->offset = -1;
}

int diag_vfail(struct diag *d, int err, const char *file, int64_t offset,
               const char *fmt, va_list ap)
{
    if (err >= 0)
        err = -EIO;
    if (!d)
        return err;
    pthread_mutex_lock(&d->lock);
    if (d->err == 0) {
        d->err = err;
        d->offset = offset;
        snprintf(d->file, sizeof(d->file), "%s", file ? file : "");
        if (fmt)
            vsnprintf(d->what, sizeof(d->what), fmt, ap);
        else
            snprintf(d->what, sizeof(d->what), "%s", strerror(-err));
    }
    pthread_mutex_unlock(&d->lock);
    return err;
}

int diag_fail(struct diag *d, int err, const char *file, int64_t offset,
              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err = diag_vfail(d, err, file, offset, fmt, ap);
    va_end(ap);
    return err;
}

int diag_errno(struct diag *d, int err, const char *file, int64_t offset,
               const char *op)
{
    if (err >= 0)
        err = -EIO;
    return diag_fail(d, err, file, offset, "%s: %s", op, strerror(-err));
}

void diag_warn(struct diag *d, const char *file, int64_t offset,
               const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (!d)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&d->lock);
    d->warnings++;
    if (d->warn)
        d->warn(d->warn_opaque, file, offset, msg);
    pthread_mutex_unlock(&d->lock);
}

void diag_clear(struct diag *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->lock);
    d->err = 0;
    d->offset = -1;
    d->file[0] = d->what[0] = '\0';
    pthread_mutex_unlock(&d->lock);
}

void diag_format(const struct diag *d, char *buf, size_t n)
{
    const char *what = d->what[0] ? d->what : strerror(d->err ? -d->err : EIO);

    if (d->file[0] && d->offset >= 0)
        snprintf(buf, n, "%s: %s (offset %lld)", d->file, what, (long long)d->offset);
    else if (d->file[0])
        snprintf(buf, n, "%s: %s", d->file, what);
    else if (d->offset >= 0)
        snprintf(buf, n, "%s (offset %lld)", what, (long long)d->offset);
    else
        snprintf(buf, n, "%s", what);
}
