/* conntrack.c: see conntrack.h. */
#include "conntrack.h"
#include "hv_clock.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

/* One accepted connection; lives from MHD's STARTED to its CLOSED notification, which MHD
 * sends before it closes the socket, so fd stays valid while the entry is in the list. */
struct conn {
    struct conn *prev, *next;
    int fd;
    atomic_llong deadline_ms; /* CLOCK_MONOTONIC; 0 = already shut down */
    atomic_bool busy;         /* a request's head has come and its answer is not done */
};

struct hv_conntrack {
    unsigned head_timeout_s;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    struct conn *conns;
    bool stop;
    pthread_t thread;
};

static struct conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void hv_conn_busy(struct MHD_Connection *c, bool busy)
{
    struct conn *cs = conn_of(c);
    if (cs)
        atomic_store(&cs->busy, busy);
}

void hv_conn_deadline(struct MHD_Connection *c, unsigned seconds)
{
    struct conn *cs = conn_of(c);
    if (cs && atomic_load(&cs->deadline_ms))
        atomic_store(&cs->deadline_ms, hv_mono_ms() + (long long)seconds * 1000);
}

void hv_conntrack_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                         enum MHD_ConnectionNotificationCode code)
{
    struct hv_conntrack *t = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct conn *cs = ci ? calloc(1, sizeof(*cs)) : NULL;
        if (!cs)
            return; /* no deadline for this one; MHD's idle timeout still applies */
        cs->fd = ci->connect_fd;
        atomic_store(&cs->deadline_ms, hv_mono_ms() + (long long)t->head_timeout_s * 1000);
        pthread_mutex_lock(&t->lock);
        cs->next = t->conns;
        if (t->conns)
            t->conns->prev = cs;
        t->conns = cs;
        pthread_mutex_unlock(&t->lock);
        *socket_context = cs;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        struct conn *cs = *socket_context;
        if (!cs)
            return;
        pthread_mutex_lock(&t->lock);
        if (cs->prev)
            cs->prev->next = cs->next;
        else
            t->conns = cs->next;
        if (cs->next)
            cs->next->prev = cs->prev;
        pthread_mutex_unlock(&t->lock);
        free(cs);
        *socket_context = NULL;
    }
}

/* A safety net for closes libmicrohttpd misses (seen once in a few hundred runs of
 * integration.abuse under load: a connection the client had closed stayed in CLOSE-WAIT
 * until its idle deadline). A connection with no request in progress whose peer has
 * closed, with no byte left unread, can carry nothing more: it is shut down, which
 * libmicrohttpd then closes as if the client had just closed it. Caller holds t->lock. */
static void reap_closed(struct hv_conntrack *t, size_t idle)
{
    if (!idle)
        return;
    struct pollfd *pf = calloc(idle, sizeof(*pf));
    struct conn **who = calloc(idle, sizeof(*who));
    size_t n = 0;
    for (struct conn *cs = t->conns; pf && who && cs && n < idle; cs = cs->next) {
        if (atomic_load(&cs->deadline_ms) && !atomic_load(&cs->busy)) {
            pf[n].fd = cs->fd;
            pf[n].events = POLLRDHUP;
            who[n++] = cs;
        }
    }
    if (n && poll(pf, n, 0) > 0) {
        for (size_t k = 0; k < n; k++) {
            int pending = 0;
            if (!(pf[k].revents & (POLLRDHUP | POLLHUP | POLLERR)) ||
                ioctl(pf[k].fd, FIONREAD, &pending) < 0 || pending > 0)
                continue;
            atomic_store(&who[k]->deadline_ms, 0);
            shutdown(pf[k].fd, SHUT_RDWR);
        }
    }
    free(pf);
    free(who);
}

/* Shut down the socket of each connection past its deadline, four times a second. MHD sees
 * the socket end and closes the connection in its own thread. */
static void *reaper_main(void *arg)
{
    struct hv_conntrack *t = arg;
    pthread_mutex_lock(&t->lock);
    while (!t->stop) {
        int64_t until = hv_mono_ms() + 250;
        while (!t->stop && hv_mono_ms() < until)
            hv_cond_wait_until(&t->cv, &t->lock, until);
        long long now = hv_mono_ms();
        size_t idle = 0;
        for (struct conn *cs = t->conns; cs; cs = cs->next) {
            long long d = atomic_load(&cs->deadline_ms);
            if (d && d <= now) {
                atomic_store(&cs->deadline_ms, 0);
                shutdown(cs->fd, SHUT_RDWR);
            } else if (d && !atomic_load(&cs->busy)) {
                idle++;
            }
        }
        reap_closed(t, idle);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

struct hv_conntrack *hv_conntrack_start(unsigned head_timeout_s, char *err, size_t errlen)
{
    struct hv_conntrack *t = calloc(1, sizeof(*t));
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->head_timeout_s = head_timeout_s;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cv, NULL); /* waited on with hv_cond_wait_until */
    if (pthread_create(&t->thread, NULL, reaper_main, t) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->lock);
        free(t);
        snprintf(err, errlen, "cannot start a thread");
        return NULL;
    }
    return t;
}

void hv_conntrack_stop(struct hv_conntrack *t)
{
    if (!t || t->stop)
        return;
    pthread_mutex_lock(&t->lock);
    t->stop = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
}

void hv_conntrack_free(struct hv_conntrack *t)
{
    if (!t)
        return;
    hv_conntrack_stop(t);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->lock);
    free(t);
}
