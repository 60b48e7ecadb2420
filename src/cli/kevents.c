/* kevents.c: the Kubernetes Event sink of serve --kube-events (kevents.h). Owns its queue,
 * its worker thread and one curl handle used by that thread only. */
#include "kevents.h"
#include "json.h"
#include "kevent.h"
#include "log.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_MAX 64
#define SEEN_MAX  256
#define REPEAT_S  600 /* the same event again only after 10 minutes */

struct seen {
    unsigned long hash;
    time_t at;
};

struct hv_kevents {
    char base[300];    /* https://HOST:PORT */
    char token[512];   /* path of the token file */
    char ca[512];      /* path of ca.crt */
    char instance[64]; /* reportingInstance: the host (pod) name */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct hv_kevent q[QUEUE_MAX];
    size_t head, n;
    bool stopping;
    struct seen seen[SEEN_MAX];
    size_t nseen;
    pthread_t th;
};

static unsigned long hash_event(const struct hv_kevent *e)
{
    unsigned long h = 5381;
    const char *parts[] = {e->kind, e->ns, e->name, e->uid, e->reason, e->message};
    for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) {
        for (const char *p = parts[k]; *p; p++)
            h = h * 33 + (unsigned char)*p;
        h = h * 33 + 0x1f;
    }
    return h;
}

/* The sink (called on hook threads): queue unless seen within REPEAT_S or the queue is full. */
static void sink(const struct hv_kevent *e, void *ctx)
{
    struct hv_kevents *k = ctx;
    unsigned long h = hash_event(e);
    time_t now = time(NULL);
    bool drop = false;
    pthread_mutex_lock(&k->mu);
    size_t oldest = 0;
    for (size_t i = 0; i < k->nseen; i++) {
        if (k->seen[i].hash == h && now - k->seen[i].at < REPEAT_S)
            drop = true;
        if (k->seen[i].at < k->seen[oldest].at)
            oldest = i;
    }
    if (!drop && k->n == QUEUE_MAX) {
        drop = true;
        hv_log(HV_LOG_WARN, "kube-event-dropped", "reason", e->reason, "detail", "event queue full",
               (char *)NULL);
    }
    if (!drop) {
        size_t slot = k->nseen < SEEN_MAX ? k->nseen++ : oldest;
        k->seen[slot] = (struct seen){h, now};
        k->q[(k->head + k->n) % QUEUE_MAX] = *e;
        k->n++;
        pthread_cond_signal(&k->cv);
    }
    pthread_mutex_unlock(&k->mu);
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
    (void)p;
    (void)ctx;
    return size * n;
}

static bool read_token(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    size_t n = fread(out, 1, cap - 1, f);
    fclose(f);
    out[n] = '\0';
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' '))
        out[--n] = '\0';
    return n > 0;
}

static char *event_json(const struct hv_kevents *k, const struct hv_kevent *e, size_t *len)
{
    char ts[32], gen[300];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(gen, sizeof(gen), "%s.", e->name);
    hj *meta = hj_new_object();
    hj_obj_set_take(meta, "generateName", hj_new_string(gen));
    hj_obj_set_take(meta, "namespace", hj_new_string(e->ns));
    hj *inv = hj_new_object();
    hj_obj_set_take(inv, "apiVersion", hj_new_string(e->api_version));
    hj_obj_set_take(inv, "kind", hj_new_string(e->kind));
    hj_obj_set_take(inv, "name", hj_new_string(e->name));
    hj_obj_set_take(inv, "namespace", hj_new_string(e->ns));
    if (e->uid[0])
        hj_obj_set_take(inv, "uid", hj_new_string(e->uid));
    hj *src = hj_new_object();
    hj_obj_set_take(src, "component", hj_new_string("hvupdater"));
    hj *ev = hj_new_object();
    hj_obj_set_take(ev, "apiVersion", hj_new_string("v1"));
    hj_obj_set_take(ev, "kind", hj_new_string("Event"));
    hj_obj_set_take(ev, "metadata", meta);
    hj_obj_set_take(ev, "involvedObject", inv);
    hj_obj_set_take(ev, "type", hj_new_string("Warning"));
    hj_obj_set_take(ev, "reason", hj_new_string(e->reason));
    hj_obj_set_take(ev, "message", hj_new_string(e->message));
    hj_obj_set_take(ev, "source", src);
    hj_obj_set_take(ev, "reportingComponent", hj_new_string("hvupdater"));
    hj_obj_set_take(ev, "reportingInstance", hj_new_string(k->instance));
    hj_obj_set_take(ev, "firstTimestamp", hj_new_string(ts));
    hj_obj_set_take(ev, "lastTimestamp", hj_new_string(ts));
    hj_obj_set_take(ev, "count", hj_new_int(1));
    char *out = hj_dump(ev, len);
    hj_free(ev);
    return out;
}

static void post(struct hv_kevents *k, CURL *h, const struct hv_kevent *e)
{
    char tok[8192], auth[8256], url[600];
    if (!read_token(k->token, tok, sizeof(tok))) {
        hv_log(HV_LOG_WARN, "kube-event-failed", "reason", e->reason, "detail",
               "cannot read the service account token", (char *)NULL);
        return;
    }
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", tok);
    snprintf(url, sizeof(url), "%s/api/v1/namespaces/%s/events", k->base, e->ns);
    size_t len;
    char *body = event_json(k, e, &len);
    struct curl_slist *hd = curl_slist_append(NULL, auth);
    hd = curl_slist_append(hd, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    char code_s[16];
    snprintf(code_s, sizeof(code_s), "%ld", code);
    if (rc != CURLE_OK || code < 200 || code > 299)
        hv_log(HV_LOG_WARN, "kube-event-failed", "reason", e->reason, "#http", code_s, "detail",
               rc != CURLE_OK ? curl_easy_strerror(rc) : "the API server refused it", (char *)NULL);
    else
        hv_log(HV_LOG_DEBUG, "kube-event", "reason", e->reason, "object", e->name, (char *)NULL);
    curl_slist_free_all(hd);
    free(body);
}

static void *worker(void *arg)
{
    struct hv_kevents *k = arg;
    CURL *h = curl_easy_init();
    if (h) {
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(h, CURLOPT_CAINFO, k->ca);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
        curl_easy_setopt(h, CURLOPT_USERAGENT, "hvupdater-events");
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    }
    pthread_mutex_lock(&k->mu);
    for (;;) {
        while (!k->n && !k->stopping)
            pthread_cond_wait(&k->cv, &k->mu);
        if (!k->n)
            break; /* stopping, queue empty */
        struct hv_kevent e = k->q[k->head];
        k->head = (k->head + 1) % QUEUE_MAX;
        k->n--;
        pthread_mutex_unlock(&k->mu);
        if (h)
            post(k, h, &e);
        pthread_mutex_lock(&k->mu);
    }
    pthread_mutex_unlock(&k->mu);
    if (h)
        curl_easy_cleanup(h);
    return NULL;
}

struct hv_kevents *hv_kevents_start(char *err, size_t errlen)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    const char *dir = getenv("HVUPDATER_SERVICEACCOUNT_DIR");
    if (!dir || !*dir)
        dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    if (!host || !*host || !port || !*port) {
        snprintf(err, errlen,
                 "--kube-events needs KUBERNETES_SERVICE_HOST and "
                 "KUBERNETES_SERVICE_PORT (run in a pod)");
        return NULL;
    }
    struct hv_kevents *k = calloc(1, sizeof(*k));
    if (!k)
        abort();
    snprintf(k->base, sizeof(k->base), strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s",
             host, port);
    snprintf(k->token, sizeof(k->token), "%s/token", dir);
    snprintf(k->ca, sizeof(k->ca), "%s/ca.crt", dir);
    char tok[8192];
    if (!read_token(k->token, tok, sizeof(tok)) || access(k->ca, R_OK) < 0) {
        snprintf(err, errlen,
                 "--kube-events needs the service account token and ca.crt in %s "
                 "(automountServiceAccountToken: true)",
                 dir);
        free(k);
        return NULL;
    }
    if (gethostname(k->instance, sizeof(k->instance)) < 0)
        snprintf(k->instance, sizeof(k->instance), "hvupdater");
    k->instance[sizeof(k->instance) - 1] = '\0';
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    if (pthread_create(&k->th, NULL, worker, k) != 0) {
        snprintf(err, errlen, "--kube-events: cannot start its thread");
        pthread_mutex_destroy(&k->mu);
        pthread_cond_destroy(&k->cv);
        free(k);
        return NULL;
    }
    hv_kevent_set_sink(sink, k);
    return k;
}

void hv_kevents_stop(struct hv_kevents *k)
{
    if (!k)
        return;
    hv_kevent_set_sink(NULL, NULL);
    pthread_mutex_lock(&k->mu);
    k->stopping = true;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    pthread_join(k->th, NULL);
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
    free(k);
}
