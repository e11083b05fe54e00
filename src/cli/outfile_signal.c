/* The signal thread of outfile.h: SIGINT, SIGTERM, SIGHUP, SIGQUIT and
 * SIGPIPE are blocked in every other thread and taken here with sigwait(),
 * so the cleanup is ordinary code under a mutex: it waits for a commit in
 * progress, removes the temporary files still pending, and the process
 * then dies of the signal (exit status 128 + N, as without the cleanup). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "outfile_priv.h"
#include "util/diag.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct outfile *active;
static sigset_t sigs;

void outfile_lock(void)
{
    pthread_mutex_lock(&lock);
}

void outfile_unlock(void)
{
    pthread_mutex_unlock(&lock);
}

void outfile_set_active(struct outfile *of)
{
    active = of;
}

static void *signal_main(void *arg)
{
    (void)arg;
    for (;;) {
        int sig;
        if (sigwait(&sigs, &sig) != 0)
            continue;
        /* never released: nothing may start a commit after the cleanup */
        pthread_mutex_lock(&lock);
        if (active)
            outfile_unlink_pending(active);
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        sigaction(sig, &sa, NULL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        pthread_sigmask(SIG_UNBLOCK, &one, NULL);
        raise(sig);
        _exit(128 + sig);   /* not reached: the default action ends the process */
    }
    return NULL;
}

int outfile_install_signal_cleanup(struct diag *d)
{
    static const int want[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE };
    static bool started;
    pthread_attr_t attr;
    pthread_t t;

    if (started)
        return 0;
    sigemptyset(&sigs);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        struct sigaction old, sa;
        sigaction(want[i], NULL, &old);
        /* nohup: a hangup is meant to be ignored */
        if (want[i] == SIGHUP && old.sa_handler == SIG_IGN)
            continue;
        /* the others are taken even if ignored (a shell starts background
         * jobs with SIGINT and SIGQUIT ignored): an ignored signal would be
         * discarded, never reach sigwait(), and nothing would clean up */
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        sigaction(want[i], &sa, NULL);
        sigaddset(&sigs, want[i]);
    }
    int e = pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    if (e == 0 && (e = pthread_attr_init(&attr)) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        e = pthread_create(&t, &attr, signal_main, NULL);
        pthread_attr_destroy(&attr);
    }
    if (e != 0) {
        pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
        return diag_errno(d, -e, NULL, -1, "cannot start the signal thread");
    }
    started = true;
    return 0;
}
