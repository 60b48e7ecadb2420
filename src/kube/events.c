/* events.c: the Event queue of events.h: a ring of QUEUE_MAX copied events, a table of what
 * was posted lately (dedup), one poster thread. mu guards all of it. */
#include "events.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define QUEUE_MAX 64
#define RECENT    256
#define DEDUP_S   600
#define NOTE_MAX  1024 /* events.k8s.io/v1 refuses a longer note */

struct item {
    char api_version[128], kind[64], ns[254], name[254], uid[64];
    char reason[64], note[NOTE_MAX];
};

struct hv_events {
    struct hv_kube *k;
    char instance[128];
    pthread_mutex_t mu;
    pthread_cond_t cond; /* an item came, the queue drained, or stop */
    pthread_t thread;
    struct item q[QUEUE_MAX];
    size_t head, n;
    bool busy, stop;
    struct {
        uint64_t hash;
        time_t at;
    } recent[RECENT];
    size_t next_recent;
};

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL; /* a separator, so "ab"+"c" != "a"+"bc" */
}

static void copy(char *dst, size_t cap, const char *s)
{
    snprintf(dst, cap, "%s", s ? s : "");
}

/* A JSON object of the Event (events.k8s.io/v1). */
static char *event_json(const struct hv_events *ev, const struct item *it)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    char when[64];
    snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec / 1000);
    hj *e = hj_new_object();
    hj_obj_set_take(e, "apiVersion", hj_new_string("events.k8s.io/v1"));
    hj_obj_set_take(e, "kind", hj_new_string("Event"));
    hj *md = hj_new_object();
    /* as client-go names them: the object's name and the time in hex */
    char name[300];
    snprintf(name, sizeof(name), "%.230s.%llx", it->name,
             (unsigned long long)now.tv_sec * 1000000000ULL + (unsigned long long)now.tv_nsec);
    hj_obj_set_take(md, "name", hj_new_string(name));
    hj_obj_set_take(md, "namespace", hj_new_string(it->ns));
    hj_obj_set_take(e, "metadata", md);
    hj_obj_set_take(e, "eventTime", hj_new_string(when));
    hj_obj_set_take(e, "type", hj_new_string("Warning"));
    hj_obj_set_take(e, "reason", hj_new_string(it->reason));
    hj_obj_set_take(e, "action", hj_new_string("InPlaceUpdate"));
    hj_obj_set_take(e, "note", hj_new_text(it->note));
    hj_obj_set_take(e, "reportingController", hj_new_string("hvupdater"));
    hj_obj_set_take(e, "reportingInstance", hj_new_string(ev->instance));
    hj *reg = hj_new_object();
    hj_obj_set_take(reg, "apiVersion", hj_new_string(it->api_version));
    hj_obj_set_take(reg, "kind", hj_new_string(it->kind));
    hj_obj_set_take(reg, "namespace", hj_new_string(it->ns));
    hj_obj_set_take(reg, "name", hj_new_string(it->name));
    if (it->uid[0])
        hj_obj_set_take(reg, "uid", hj_new_string(it->uid));
    hj_obj_set_take(e, "regarding", reg);
    char *out = hj_dump(e, NULL);
    hj_free(e);
    return out;
}

static void *poster(void *arg)
{
    struct hv_events *ev = arg;
    pthread_mutex_lock(&ev->mu);
    for (;;) {
        while (!ev->n && !ev->stop)
            pthread_cond_wait(&ev->cond, &ev->mu);
        if (ev->stop)
            break;
        struct item *it = malloc(sizeof(*it));
        if (!it)
            abort();
        *it = ev->q[ev->head];
        ev->head = (ev->head + 1) % QUEUE_MAX;
        ev->n--;
        ev->busy = true;
        pthread_mutex_unlock(&ev->mu);

        char path[400], err[256] = "";
        snprintf(path, sizeof(path), "/apis/events.k8s.io/v1/namespaces/%s/events", it->ns);
        char *body = event_json(ev, it);
        int st = hv_kube_post(ev->k, path, body, 0, err, sizeof(err));
        char obj[600];
        snprintf(obj, sizeof(obj), "%s %s/%s", it->kind, it->ns, it->name);
        if (st == 201 || st == 200)
            hv_log(HV_LOG_INFO, "event-posted", "object", obj, "reason", it->reason, (char *)NULL);
        else
            hv_log(HV_LOG_WARN, "event-error", "object", obj, "reason", it->reason, "detail", err,
                   (char *)NULL);
        free(body);
        free(it);

        pthread_mutex_lock(&ev->mu);
        ev->busy = false;
        pthread_cond_broadcast(&ev->cond);
    }
    pthread_mutex_unlock(&ev->mu);
    return NULL;
}

struct hv_events *hv_events_new(struct hv_kube *k, const char *instance)
{
    struct hv_events *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return NULL;
    ev->k = k;
    copy(ev->instance, sizeof(ev->instance), instance && *instance ? instance : "hvupdater");
    pthread_mutex_init(&ev->mu, NULL);
    pthread_cond_init(&ev->cond, NULL);
    if (pthread_create(&ev->thread, NULL, poster, ev) != 0) {
        pthread_cond_destroy(&ev->cond);
        pthread_mutex_destroy(&ev->mu);
        free(ev);
        return NULL;
    }
    return ev;
}

void hv_events_post(struct hv_events *ev, const struct hv_event_obj *obj, const char *reason,
                    const char *note)
{
    if (!ev || !hv_kube_name_ok(obj->namespace_) || !hv_kube_name_ok(obj->name) || !obj->kind ||
        !obj->api_version)
        return;
    uint64_t h = 1469598103934665603ULL;
    h = fnv(fnv(fnv(fnv(h, obj->kind), obj->namespace_), obj->name), obj->uid ? obj->uid : "");
    h = fnv(fnv(h, reason), note);
    time_t now = time(NULL);
    pthread_mutex_lock(&ev->mu);
    for (size_t i = 0; i < RECENT; i++) {
        if (ev->recent[i].hash == h && now - ev->recent[i].at < DEDUP_S) {
            pthread_mutex_unlock(&ev->mu);
            return;
        }
    }
    if (ev->n == QUEUE_MAX) {
        pthread_mutex_unlock(&ev->mu);
        hv_log(HV_LOG_WARN, "event-dropped", "reason", reason, "detail", "event queue full",
               (char *)NULL);
        return;
    }
    ev->recent[ev->next_recent].hash = h;
    ev->recent[ev->next_recent].at = now;
    ev->next_recent = (ev->next_recent + 1) % RECENT;
    struct item *it = &ev->q[(ev->head + ev->n) % QUEUE_MAX];
    copy(it->api_version, sizeof(it->api_version), obj->api_version);
    copy(it->kind, sizeof(it->kind), obj->kind);
    copy(it->ns, sizeof(it->ns), obj->namespace_);
    copy(it->name, sizeof(it->name), obj->name);
    copy(it->uid, sizeof(it->uid), obj->uid);
    copy(it->reason, sizeof(it->reason), reason);
    copy(it->note, sizeof(it->note), note);
    ev->n++;
    pthread_cond_broadcast(&ev->cond);
    pthread_mutex_unlock(&ev->mu);
}

int hv_events_flush(struct hv_events *ev, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&ev->mu);
    int rc = 0;
    while ((ev->n || ev->busy) && rc == 0)
        rc = pthread_cond_timedwait(&ev->cond, &ev->mu, &until);
    bool idle = !ev->n && !ev->busy;
    pthread_mutex_unlock(&ev->mu);
    return idle ? 0 : -1;
}

void hv_events_free(struct hv_events *ev)
{
    if (!ev)
        return;
    pthread_mutex_lock(&ev->mu);
    ev->stop = true;
    pthread_cond_broadcast(&ev->cond);
    pthread_mutex_unlock(&ev->mu);
    pthread_join(ev->thread, NULL);
    pthread_cond_destroy(&ev->cond);
    pthread_mutex_destroy(&ev->mu);
    free(ev);
}
