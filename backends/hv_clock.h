/* hv_clock.h: the monotonic milliseconds every part of hvupdater measures deadlines in, and a
 * condition wait bounded by such a deadline (header-only: hvcore and the backend libraries
 * both use it, and neither links the other's objects). */
#ifndef HV_CLOCK_H
#define HV_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline int64_t hv_mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Wait on c (m held) until signalled or until the monotonic time at_ms; returns at once when
 * at_ms has passed. Spurious wake-ups return too: callers loop on their own condition. */
static inline void hv_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, int64_t at_ms)
{
    int64_t left = at_ms - hv_mono_ms();
    if (left <= 0)
        return;
    struct timespec ts; /* the condition variables use the default clock, CLOCK_REALTIME */
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += left / 1000;
    ts.tv_nsec += (left % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(c, m, &ts);
}

#endif
