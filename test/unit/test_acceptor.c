/* The hook listener's acceptor (src/server/acceptor.c): it hands every connection over, stops
 * accepting at its limit so that further clients wait in the listen queue, accepts again when
 * a connection ends, and stops on demand. Real loopback sockets; every wait is on a condition
 * with a bound far above the time it takes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "acceptor.h"

#define WAIT_MS 20000

struct handed {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fds[16];
    int n;
    struct hv_acceptor *a;
};

/* The hand-off: keeps the descriptor (the acceptor counts the connection as held from here,
 * whenever the server starts serving it, as libmicrohttpd's workers do later, from a queue). */
static bool keep(void *ctx, int fd, const struct sockaddr *sa, socklen_t len)
{
    struct handed *h = ctx;
    assert_int_equal(sa->sa_family, AF_INET);
    assert_int_equal(len, sizeof(struct sockaddr_in));
    pthread_mutex_lock(&h->mu);
    if (h->n < 16)
        h->fds[h->n++] = fd;
    else
        close(fd);
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return true;
}

/* The hand-off of a server that refuses every connection (libmicrohttpd over the per-address
 * limit): closes it and says so. */
static bool refuse(void *ctx, int fd, const struct sockaddr *sa, socklen_t len)
{
    struct handed *h = ctx;
    (void)sa;
    (void)len;
    close(fd);
    pthread_mutex_lock(&h->mu);
    h->n++;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return false;
}

/* accept4 as the acceptor calls it, counted, and failing with EMFILE while `starve` is set:
 * the process out of descriptors, the client left in the listen queue. (Lowering
 * RLIMIT_NOFILE instead does not work under valgrind, which keeps descriptors of its own
 * and closes an accepted socket over the limit it emulates: the client would be lost.) */
static atomic_int accept_calls;
static atomic_bool starve;
static pthread_mutex_t calls_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t calls_cv = PTHREAD_COND_INITIALIZER;
int accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
    pthread_mutex_lock(&calls_mu);
    atomic_fetch_add(&accept_calls, 1);
    pthread_cond_broadcast(&calls_cv);
    pthread_mutex_unlock(&calls_mu);
    if (atomic_load(&starve)) {
        errno = EMFILE;
        return -1;
    }
    return (int)syscall(SYS_accept4, fd, sa, len, flags);
}

static int wait_handed(struct handed *h, int want)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(&h->mu);
    while (h->n < want && pthread_cond_timedwait(&h->cv, &h->mu, &until) == 0)
        ;
    int n = h->n;
    pthread_mutex_unlock(&h->mu);
    return n;
}

static int handed_now(struct handed *h)
{
    pthread_mutex_lock(&h->mu);
    int n = h->n;
    pthread_mutex_unlock(&h->mu);
    return n;
}

static struct hv_acceptor *open_loopback(unsigned limit)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = 0};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char err[256] = "";
    struct hv_acceptor *a =
        hv_acceptor_open((struct sockaddr *)&sin, sizeof(sin), limit, err, sizeof(err));
    if (!a)
        fail_msg("hv_acceptor_open: %s", err);
    assert_int_not_equal(hv_acceptor_port(a), 0);
    return a;
}

/* A connected client socket (the kernel completes the handshake from the listen queue,
 * accepted or not). */
static int dial(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    return fd;
}

static void test_parks_at_the_limit_and_goes_on_when_one_ends(void **state)
{
    (void)state;
    struct handed h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    h.a = open_loopback(2);
    char err[256] = "";
    assert_int_equal(hv_acceptor_run(h.a, keep, &h, err, sizeof(err)), 0);
    int c[3];
    for (int k = 0; k < 3; k++)
        c[k] = dial(hv_acceptor_port(h.a));
    assert_int_equal(wait_handed(&h, 2), 2);
    /* two held: it stops accepting; the third client waits in the listen queue */
    assert_true(hv_acceptor_wait_parked(h.a, WAIT_MS));
    assert_int_equal(handed_now(&h), 2);
    /* one of them ends: the third is accepted, and two are held again */
    hv_acceptor_held(h.a, -1);
    assert_int_equal(wait_handed(&h, 3), 3);
    assert_true(hv_acceptor_wait_parked(h.a, WAIT_MS));
    assert_int_equal(handed_now(&h), 3);
    hv_acceptor_stop(h.a);
    /* stopped: the socket is closed, a new client is refused */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)hv_acceptor_port(h.a))};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), -1);
    assert_int_equal(errno, ECONNREFUSED);
    close(fd);
    hv_acceptor_free(h.a);
    for (int k = 0; k < 3; k++)
        close(c[k]);
    for (int k = 0; k < h.n; k++)
        close(h.fds[k]);
}

/* Below the limit every client is handed over, each once, with its own descriptor. */
static void test_hands_over_every_connection(void **state)
{
    (void)state;
    struct handed h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    h.a = open_loopback(64);
    char err[256] = "";
    assert_int_equal(hv_acceptor_run(h.a, keep, &h, err, sizeof(err)), 0);
    int c[10];
    for (int k = 0; k < 10; k++)
        c[k] = dial(hv_acceptor_port(h.a));
    assert_int_equal(wait_handed(&h, 10), 10);
    for (int i = 0; i < 10; i++)
        for (int j = i + 1; j < 10; j++)
            assert_int_not_equal(h.fds[i], h.fds[j]);
    /* each handed descriptor is one end of one client's connection: a byte crosses */
    for (int k = 0; k < 10; k++) {
        char b = (char)('a' + k);
        assert_int_equal(write(c[k], &b, 1), 1);
    }
    for (int k = 0; k < 10; k++) {
        struct sockaddr_in peer, mine;
        socklen_t pl = sizeof(peer), ml = sizeof(mine);
        assert_int_equal(getpeername(h.fds[k], (struct sockaddr *)&peer, &pl), 0);
        assert_int_equal(getsockname(c[k], (struct sockaddr *)&mine, &ml), 0);
        assert_int_equal(peer.sin_port, mine.sin_port); /* handed in the order they came */
    }
    assert_false(hv_acceptor_wait_parked(h.a, 1));
    hv_acceptor_free(h.a); /* stops the thread first */
    for (int k = 0; k < 10; k++) {
        close(c[k]);
        close(h.fds[k]);
    }
}

/* The limit holds however late the server starts serving what it was handed: clients that
 * are all waiting when the thread starts are not handed over past the limit in one series. */
static void test_counts_from_the_hand_off(void **state)
{
    (void)state;
    struct handed h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    h.a = open_loopback(2);
    int c[6];
    for (int k = 0; k < 6; k++)
        c[k] = dial(hv_acceptor_port(h.a)); /* all six in the listen queue */
    char err[256] = "";
    assert_int_equal(hv_acceptor_run(h.a, keep, &h, err, sizeof(err)), 0);
    assert_int_equal(wait_handed(&h, 2), 2);
    assert_true(hv_acceptor_wait_parked(h.a, WAIT_MS));
    assert_int_equal(handed_now(&h), 2);
    hv_acceptor_free(h.a);
    for (int k = 0; k < 6; k++)
        close(c[k]);
    for (int k = 0; k < h.n; k++)
        close(h.fds[k]);
}

/* A connection the server refuses (and closes) is not held: all are offered, none parks it. */
static void test_refused_is_not_held(void **state)
{
    (void)state;
    struct handed h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    h.a = open_loopback(2);
    char err[256] = "";
    assert_int_equal(hv_acceptor_run(h.a, refuse, &h, err, sizeof(err)), 0);
    int c[5];
    for (int k = 0; k < 5; k++)
        c[k] = dial(hv_acceptor_port(h.a));
    assert_int_equal(wait_handed(&h, 5), 5);
    assert_false(hv_acceptor_wait_parked(h.a, 1));
    hv_acceptor_free(h.a);
    for (int k = 0; k < 5; k++)
        close(c[k]);
}

/* Out of descriptors it tries again now and then, not in a loop on the ready socket, and takes
 * the client once descriptors are free. (Only a bound from above on the number of tries: a
 * slow machine makes fewer.) */
static int unstarve(void **state)
{
    (void)state;
    atomic_store(&starve, false);
    return 0;
}

static void test_out_of_descriptors_waits(void **state)
{
    (void)state;
    struct handed h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    h.a = open_loopback(4);
    char err[256] = "";
    assert_int_equal(hv_acceptor_run(h.a, keep, &h, err, sizeof(err)), 0);
    atomic_store(&starve, true);
    int before = atomic_load(&accept_calls);
    int c = dial(hv_acceptor_port(h.a));
    struct timespec until; /* its first try, refused */
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(&calls_mu);
    while (atomic_load(&accept_calls) == before &&
           pthread_cond_timedwait(&calls_cv, &calls_mu, &until) == 0)
        ;
    pthread_mutex_unlock(&calls_mu);
    before = atomic_load(&accept_calls);
    assert_true(before > 0);
    sleep(1);
    int tries = atomic_load(&accept_calls) - before;
    assert_true(tries < 100); /* every 100 ms: about 10; a spin makes tens of thousands */
    assert_int_equal(handed_now(&h), 0);
    atomic_store(&starve, false);
    assert_int_equal(wait_handed(&h, 1), 1);
    hv_acceptor_free(h.a);
    close(c);
    close(h.fds[0]);
}

/* Stopping an acceptor that waits for clients returns (the thread wakes from its poll). */
static void test_stops_while_waiting(void **state)
{
    (void)state;
    struct handed h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    h.a = open_loopback(4);
    char err[256] = "";
    assert_int_equal(hv_acceptor_run(h.a, keep, &h, err, sizeof(err)), 0);
    hv_acceptor_stop(h.a);
    hv_acceptor_stop(h.a); /* twice is harmless */
    hv_acceptor_free(h.a);
    assert_int_equal(h.n, 0);
    hv_acceptor_free(NULL);
}

/* An address in use: no acceptor, and the reason. */
static void test_address_in_use(void **state)
{
    (void)state;
    struct hv_acceptor *a = open_loopback(4);
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)hv_acceptor_port(a))};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char err[256] = "";
    assert_null(hv_acceptor_open((struct sockaddr *)&sin, sizeof(sin), 4, err, sizeof(err)));
    assert_string_equal(err, strerror(EADDRINUSE));
    hv_acceptor_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parks_at_the_limit_and_goes_on_when_one_ends),
        cmocka_unit_test(test_hands_over_every_connection),
        cmocka_unit_test(test_counts_from_the_hand_off),
        cmocka_unit_test(test_refused_is_not_held),
        cmocka_unit_test_teardown(test_out_of_descriptors_waits, unstarve),
        cmocka_unit_test(test_stops_while_waiting),
        cmocka_unit_test(test_address_in_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
