/* ioq backend: one writer thread doing pwrite, fed by a FIFO.
 *
 * The owner thread queues requests and goes on producing the next chunk
 * while the writer copies this one into the page cache, so both cores work
 * (see ioq.c for why this beats io_uring for buffered output here).
 * Finished requests come back on a second FIFO and the owner runs their
 * callbacks in ioq_* calls, as with the other backends.  After the first
 * failure the writer writes nothing more: later requests come back with
 * that error.  The writer blocks every signal, so handlers (SIGINT cleanup)
 * run on the owner thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/ioq_internal.h"

struct wthread {
    struct ioq *q;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work;        /* todo got a request, or stop */
    pthread_cond_t done;        /* fin got a request */
    struct ioq_req *todo_head, *todo_tail;
    struct ioq_req *fin_head, *fin_tail;
    bool stop;
    int err;                    /* first failure the writer saw */
};

static void push(struct ioq_req **head, struct ioq_req **tail, struct ioq_req *r)
{
    r->next = NULL;
    if (*tail)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

static void *writer_main(void *arg)
{
    struct wthread *w = arg;

    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->todo_head && !w->stop)
            pthread_cond_wait(&w->work, &w->lock);
        struct ioq_req *r = w->todo_head;
        if (!r)
            break;
        w->todo_head = r->next;
        if (!w->todo_head)
            w->todo_tail = NULL;
        int err = w->err;
        pthread_mutex_unlock(&w->lock);

        /* ioq_write_sync touches only r and the (thread-safe) diag */
        r->res = err ? err : ioq_write_sync(w->q, r);

        pthread_mutex_lock(&w->lock);
        if (r->res < 0 && !w->err)
            w->err = r->res;
        push(&w->fin_head, &w->fin_tail, r);
        pthread_cond_signal(&w->done);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void thread_submit(struct ioq *q, struct ioq_req *r)
{
    struct wthread *w = q->backend;

    pthread_mutex_lock(&w->lock);
    push(&w->todo_head, &w->todo_tail, r);
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->lock);
}

static void thread_reap(struct ioq *q, bool wait)
{
    struct wthread *w = q->backend;
    struct ioq_req *r;

    pthread_mutex_lock(&w->lock);
    while (wait && !w->fin_head)
        pthread_cond_wait(&w->done, &w->lock);
    r = w->fin_head;
    w->fin_head = w->fin_tail = NULL;
    pthread_mutex_unlock(&w->lock);
    while (r) {
        struct ioq_req *next = r->next;
        ioq_finished(q, r);
        r = next;
    }
}

static void thread_destroy(struct ioq *q)
{
    struct wthread *w = q->backend;

    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->done);
    pthread_cond_destroy(&w->work);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

static const struct ioq_backend_ops thread_ops = {
    .name = "thread",
    .submit = thread_submit,
    .reap = thread_reap,
    .destroy = thread_destroy,
};

int ioq_thread_init(struct ioq *q)
{
    struct wthread *w = calloc(1, sizeof(*w));
    sigset_t all, old;
    int e;

    if (!w) {
        snprintf(q->note, sizeof(q->note), "writer thread setup failed: out of memory");
        return -ENOMEM;
    }
    w->q = q;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->work, NULL);
    pthread_cond_init(&w->done, NULL);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    e = pthread_create(&w->thread, NULL, writer_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
        snprintf(q->note, sizeof(q->note), "writer thread setup failed: %s", strerror(e));
        pthread_cond_destroy(&w->done);
        pthread_cond_destroy(&w->work);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return -e;
    }
    q->backend = w;
    q->ops = &thread_ops;
    return 0;
}
