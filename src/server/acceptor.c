/* acceptor.c: owns the hook listener's socket and the thread that accepts from it (see
 * acceptor.h for why libmicrohttpd's own accept is not used). The thread sleeps in poll on
 * the socket and on an eventfd that wakes it for a stop or for a connection closed at the
 * limit; between them it accepts up to ACCEPT_SERIES connections a turn. */
#include "acceptor.h"

#include "hv_clock.h"
#include "log.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Connections accepted in one turn before the limit is looked at again. */
#define ACCEPT_SERIES 16
/* How long it waits before accepting again when the process is out of descriptors. */
#define OUT_OF_FDS_MS 100

struct hv_acceptor {
    int fd;   /* the listening socket */
    int wake; /* eventfd: stop, or below the limit again */
    unsigned port;
    unsigned limit;
    hv_accept_hand hand;
    void *ctx;
    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* parked changed */
    long held;         /* connections begun and not ended (hv_acceptor_held) */
    bool parked;       /* not accepting: held reached the limit */
    bool stop;
};

struct hv_acceptor *hv_acceptor_open(const struct sockaddr *sa, socklen_t sl, unsigned limit,
                                     char *err, size_t errlen)
{
    struct hv_acceptor *a = calloc(1, sizeof(*a));
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    a->limit = limit ? limit : 1;
    a->wake = -1;
    a->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int on = 1;
    if (a->fd < 0 || setsockopt(a->fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0 ||
        (sa->sa_family == AF_INET6 &&
         setsockopt(a->fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on)) < 0) ||
        bind(a->fd, sa, sl) < 0 || listen(a->fd, SOMAXCONN) < 0) {
        snprintf(err, errlen, "%s", strerror(errno));
        goto fail;
    }
    struct sockaddr_storage bound;
    socklen_t bl = sizeof(bound);
    if (getsockname(a->fd, (struct sockaddr *)&bound, &bl) < 0) {
        snprintf(err, errlen, "%s", strerror(errno));
        goto fail;
    }
    a->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
    a->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (a->wake < 0) {
        snprintf(err, errlen, "%s", strerror(errno));
        goto fail;
    }
    pthread_cond_init(&a->cv, NULL);
    pthread_mutex_init(&a->mu, NULL);
    return a;
fail:
    if (a->fd >= 0)
        close(a->fd);
    free(a);
    return NULL;
}

unsigned hv_acceptor_port(const struct hv_acceptor *a)
{
    return a->port;
}

static void poke(struct hv_acceptor *a)
{
    uint64_t one = 1;
    ssize_t n = write(a->wake, &one, sizeof(one));
    (void)n; /* EAGAIN: the counter is already far from zero, the thread will wake anyway */
}

/* At the limit (mu held). */
static bool full_locked(const struct hv_acceptor *a)
{
    return a->held >= (long)a->limit;
}

/* Whether to accept now (false: stop); marks the acceptor parked when at the limit. */
static bool turn(struct hv_acceptor *a, bool *full)
{
    pthread_mutex_lock(&a->mu);
    bool stop = a->stop;
    *full = full_locked(a);
    if (*full != a->parked) {
        a->parked = *full;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return !stop;
}

static bool at_limit(struct hv_acceptor *a)
{
    pthread_mutex_lock(&a->mu);
    bool full = full_locked(a);
    pthread_mutex_unlock(&a->mu);
    return full;
}

/* Accepts what is waiting, up to ACCEPT_SERIES and while below the limit; false when out of
 * descriptors (or memory). A connection counts as held from its hand-off (not from when the
 * server starts serving it: libmicrohttpd's workers take an added connection later, from a
 * queue), so the limit holds during the series too. */
static bool accept_series(struct hv_acceptor *a)
{
    for (int k = 0; k < ACCEPT_SERIES && !at_limit(a); k++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int c = accept4(a->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c >= 0) {
            hv_acceptor_held(a, 1);
            if (!a->hand(a->ctx, c, (struct sockaddr *)&ss, len))
                hv_acceptor_held(a, -1); /* refused (and closed): not held */
            continue;
        }
        /* that client is gone (accept(2): on Linux a pending network error of the new
         * connection is returned by accept itself); the next may wait */
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO || errno == ENETDOWN ||
            errno == ENOPROTOOPT || errno == EHOSTDOWN || errno == ENONET ||
            errno == EHOSTUNREACH || errno == EOPNOTSUPP || errno == ENETUNREACH)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return true;
        return false; /* EMFILE, ENFILE, ENOBUFS, ENOMEM */
    }
    return true;
}

static void *accept_main(void *arg)
{
    struct hv_acceptor *a = arg;
    bool starved = false, told = false;
    bool full;
    while (turn(a, &full)) {
        /* Out of descriptors, the socket stays ready while clients wait: it is not polled
         * then, or the thread would spin; it is tried again OUT_OF_FDS_MS later. */
        struct pollfd p[2] = {{.fd = a->wake, .events = POLLIN},
                              {.fd = a->fd, .events = full || starved ? 0 : POLLIN}};
        int n = poll(p, 2, starved ? OUT_OF_FDS_MS : -1);
        if (n < 0 && errno != EINTR) {
            starved = true; /* (not seen: poll fails only for lack of memory here) */
            continue;
        }
        if (p[0].revents & POLLIN) {
            uint64_t v;
            ssize_t r = read(a->wake, &v, sizeof(v));
            (void)r;
        }
        if (full || (!starved && !(p[1].revents & POLLIN)))
            continue;
        starved = !accept_series(a);
        if (starved && !told) {
            char why[128];
            snprintf(why, sizeof(why), "%s", strerror(errno));
            hv_log(HV_LOG_WARN, "accept-starved", "reason", why, (char *)NULL);
        } else if (!starved && told) {
            hv_log(HV_LOG_INFO, "accept-resumed", (char *)NULL);
        }
        told = starved;
    }
    return NULL;
}

int hv_acceptor_run(struct hv_acceptor *a, hv_accept_hand hand, void *ctx, char *err, size_t errlen)
{
    a->hand = hand;
    a->ctx = ctx;
    int rc = pthread_create(&a->thread, NULL, accept_main, a);
    if (rc) {
        snprintf(err, errlen, "cannot start the accepting thread: %s", strerror(rc));
        return -1;
    }
    pthread_setname_np(a->thread, "hv-accept");
    a->running = true;
    return 0;
}

void hv_acceptor_held(struct hv_acceptor *a, int delta)
{
    pthread_mutex_lock(&a->mu);
    a->held += delta;
    bool wake = a->parked && !full_locked(a);
    pthread_mutex_unlock(&a->mu);
    if (wake)
        poke(a);
}

bool hv_acceptor_wait_parked(struct hv_acceptor *a, unsigned ms)
{
    int64_t until = hv_mono_ms() + ms;
    pthread_mutex_lock(&a->mu);
    while (!a->parked && hv_mono_ms() < until)
        hv_cond_wait_until(&a->cv, &a->mu, until);
    bool parked = a->parked;
    pthread_mutex_unlock(&a->mu);
    return parked;
}

void hv_acceptor_stop(struct hv_acceptor *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->stop = true;
    pthread_mutex_unlock(&a->mu);
    if (a->running) {
        poke(a);
        pthread_join(a->thread, NULL);
        a->running = false;
    }
    if (a->fd >= 0) {
        close(a->fd);
        a->fd = -1;
    }
}

void hv_acceptor_free(struct hv_acceptor *a)
{
    if (!a)
        return;
    hv_acceptor_stop(a);
    close(a->wake);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a);
}
