/* downstream.c: config and HTTPS client for the extensions hvupdater chains (issue: CAPI
 * v1.12 registers only one in-place extension per hook). The client speaks to them exactly as
 * CAPI's runtime client would: HTTPS only, CA-verified, optional client certificate, no
 * redirects, `?timeout=`, a 200 with a JSON body or it is an error. libcurl easy handles are
 * pooled per downstream so calls reuse their TLS connections. Raw transport errors go to
 * the log only; answers carry fixed texts naming the downstream. */
#include "hv_clock.h"
#include "downstream.h"
#include "bodybuf.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "msg.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL_MAX    8
#define ANSWER_MAX  (4u << 20)
#define HANDLER_MAX 64

struct hv_downstream {
    struct hv_downstream_cfg c; /* own copies */
    pthread_mutex_t mu;
    bool discovered;
    char handler[HV_HOOK_COUNT][HANDLER_MAX]; /* "" when the hook is not registered */
    CURL *pool[POOL_MAX];
    size_t npool;
};

static char *xstrdup(const char *s)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        abort();
    return d;
}

/* ---- config ------------------------------------------------------------------------------ */

static bool dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

static void cfg_free(struct hv_downstream_cfg *c)
{
    free(c->name);
    free(c->url);
    free(c->ca_file);
    free(c->cert_file);
    free(c->key_file);
    hj_free(c->settings);
    memset(c, 0, sizeof(*c));
}

void hv_downstream_list_free(struct hv_downstream_list *l)
{
    for (size_t k = 0; k < l->n; k++)
        cfg_free(&l->items[k]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

static int str_member(const hj *o, const char *where, const char *key, bool required, char **dst,
                      char *err, size_t errlen)
{
    const hj *v = hj_get(o, key);
    if (!v && !required)
        return 0;
    if (!v || v->type != HJ_STRING || v->slen == 0 || strlen(v->s) != v->slen) {
        snprintf(err, errlen, "%s.%s must be a non-empty string", where, key);
        return -1;
    }
    *dst = xstrdup(v->s);
    return 0;
}

static int parse_one(struct hv_downstream_cfg *d, const hj *o, const char *where, char *err,
                     size_t errlen)
{
    static const char *const keys[] = {
        "name",           "url",      "caFile", "clientCertFile", "clientKeyFile",
        "timeoutSeconds", "settings", NULL};
    if (hj_check_keys(o, where, keys, err, errlen) < 0)
        return -1;
    if (str_member(o, where, "name", true, &d->name, err, errlen) < 0 ||
        str_member(o, where, "url", true, &d->url, err, errlen) < 0 ||
        str_member(o, where, "caFile", false, &d->ca_file, err, errlen) < 0 ||
        str_member(o, where, "clientCertFile", false, &d->cert_file, err, errlen) < 0 ||
        str_member(o, where, "clientKeyFile", false, &d->key_file, err, errlen) < 0)
        return -1;
    if (!dns_label(d->name) || !strcmp(d->name, "hvupdater")) {
        snprintf(err, errlen, "%s.name must be a DNS-1123 label other than hvupdater", where);
        return -1;
    }
    if (strncmp(d->url, "https://", 8) || !d->url[8] || strchr(d->url, '?') ||
        strchr(d->url, '#')) {
        snprintf(err, errlen, "%s.url must be an https:// URL without query or fragment", where);
        return -1;
    }
    size_t ul = strlen(d->url);
    while (ul > 8 && d->url[ul - 1] == '/')
        d->url[--ul] = '\0';
    if (!d->cert_file != !d->key_file) {
        snprintf(err, errlen, "%s: clientCertFile and clientKeyFile go together", where);
        return -1;
    }
    const hj *t = hj_get(o, "timeoutSeconds");
    d->timeout_s = 3;
    if (t) {
        if (t->type != HJ_INT || t->i < 1 || t->i > 29) {
            snprintf(err, errlen, "%s.timeoutSeconds must be an integer from 1 to 29", where);
            return -1;
        }
        d->timeout_s = (int)t->i;
    }
    const hj *s = hj_get(o, "settings");
    if (s) {
        bool ok = s->type == HJ_OBJECT;
        for (size_t k = 0; ok && k < s->n; k++)
            ok = s->items[k]->type == HJ_STRING;
        if (!ok) {
            snprintf(err, errlen, "%s.settings must be a map of strings", where);
            return -1;
        }
        d->settings = hj_clone(s);
    }
    return 0;
}

int hv_downstream_cfg_parse(struct hv_downstream_list *l, const hj *arr, int handler_timeout_s,
                            char *err, size_t errlen)
{
    hv_downstream_list_free(l);
    if (!arr || arr->type != HJ_ARRAY || arr->n > HV_DOWNSTREAM_MAX) {
        snprintf(err, errlen, "downstream must be an array of at most %d extensions",
                 HV_DOWNSTREAM_MAX);
        return -1;
    }
    l->items = calloc(arr->n ? arr->n : 1, sizeof(*l->items));
    if (!l->items)
        abort();
    int total = 0;
    for (size_t k = 0; k < arr->n; k++) {
        char where[48];
        snprintf(where, sizeof(where), "downstream[%zu]", k);
        l->n = k + 1;
        if (parse_one(&l->items[k], arr->items[k], where, err, errlen) < 0)
            return -1;
        for (size_t j = 0; j < k; j++) {
            if (!strcmp(l->items[j].name, l->items[k].name)) {
                snprintf(err, errlen, "%s.name %s is used twice", where, l->items[k].name);
                return -1;
            }
        }
        total += l->items[k].timeout_s;
    }
    if (arr->n && total >= handler_timeout_s) {
        snprintf(err, errlen,
                 "downstream: the timeoutSeconds add up to %d s, which must stay under "
                 "handlerTimeoutSeconds (%d s), the time CAPI gives hvupdater",
                 total, handler_timeout_s);
        return -1;
    }
    return 0;
}

/* ---- client ------------------------------------------------------------------------------ */

struct hv_downstream *hv_downstream_new(const struct hv_downstream_cfg *c)
{
    struct hv_downstream *d = calloc(1, sizeof(*d));
    if (!d)
        abort();
    d->c.name = xstrdup(c->name);
    d->c.url = xstrdup(c->url);
    d->c.ca_file = xstrdup(c->ca_file);
    d->c.cert_file = xstrdup(c->cert_file);
    d->c.key_file = xstrdup(c->key_file);
    d->c.timeout_s = c->timeout_s;
    d->c.settings = c->settings ? hj_clone(c->settings) : NULL;
    pthread_mutex_init(&d->mu, NULL);
    return d;
}

void hv_downstream_free(struct hv_downstream *d)
{
    if (!d)
        return;
    for (size_t k = 0; k < d->npool; k++)
        curl_easy_cleanup(d->pool[k]);
    pthread_mutex_destroy(&d->mu);
    cfg_free(&d->c);
    free(d);
}

const char *hv_downstream_name(const struct hv_downstream *d)
{
    return d->c.name;
}

int hv_downstream_timeout_s(const struct hv_downstream *d)
{
    return d->c.timeout_s;
}

static CURL *pool_get(struct hv_downstream *d)
{
    pthread_mutex_lock(&d->mu);
    CURL *h = d->npool ? d->pool[--d->npool] : NULL;
    pthread_mutex_unlock(&d->mu);
    if (h)
        return h;
    h = curl_easy_init();
    if (!h)
        return NULL;
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "hvupdater-downstream");
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)ANSWER_MAX);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    if (d->c.ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, d->c.ca_file);
    if (d->c.cert_file) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, d->c.cert_file);
        curl_easy_setopt(h, CURLOPT_SSLKEY, d->c.key_file);
    }
    return h;
}

static void pool_put(struct hv_downstream *d, CURL *h)
{
    pthread_mutex_lock(&d->mu);
    if (d->npool < POOL_MAX) {
        d->pool[d->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&d->mu);
    if (h)
        curl_easy_cleanup(h);
}

/* Lower-cased hook path segment: "canupdatemachine". */
static void hook_segment(enum hv_hook h, char *out, size_t cap)
{
    const char *n = hv_hook_name(h);
    size_t k;
    for (k = 0; n[k] && k + 1 < cap; k++)
        out[k] = (char)(n[k] >= 'A' && n[k] <= 'Z' ? n[k] + 32 : n[k]);
    out[k] = '\0';
}

static void count(const struct hv_downstream *d, enum hv_hook h, const char *status,
                  const char *error, double seconds)
{
    hv_metrics_downstream(d->c.name, hv_hook_name(h), status, error, seconds);
}

/* POST body to path; on success *answer is the parsed JSON object. Returns 0, or -1 with a
 * stable reason (why) and the error kind for metrics (*kind). */
static int post(struct hv_downstream *d, enum hv_hook h, const char *handler, const char *body,
                size_t len, int64_t deadline_ms, hj **answer, const char **kind, long *http,
                char *why, size_t whylen)
{
    char url[2048], seg[32];
    hook_segment(h, seg, sizeof(seg));
    int left = (int)(deadline_ms - hv_mono_ms());
    int budget = d->c.timeout_s * 1000;
    if (left < budget)
        budget = left;
    if (budget < 50) {
        *kind = "timeout";
        snprintf(why, whylen, HV_MSG("downstream %s was not called: no time left within %d s"),
                 d->c.name, d->c.timeout_s);
        return -1;
    }
    if (h == HV_HOOK_DISCOVERY)
        snprintf(url, sizeof(url), "%s/" HV_HOOKS_API "/discovery", d->c.url);
    else
        snprintf(url, sizeof(url), "%s/" HV_HOOKS_API "/%s/%s?timeout=%ds", d->c.url, seg, handler,
                 d->c.timeout_s);
    CURL *c = pool_get(d);
    if (!c) {
        *kind = "unreachable";
        snprintf(why, whylen, HV_MSG("downstream %s cannot be reached (%s)"), d->c.name,
                 HV_MSG("connection failed"));
        return -1;
    }
    struct hv_bodybuf b = {.max = ANSWER_MAX};
    char cerr[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *more = hdrs ? curl_slist_append(hdrs, "Expect:") : NULL;
    if (more)
        hdrs = more;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)budget);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)budget);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, hv_bodybuf_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    *http = status;
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(hdrs);
    int ret = -1;
    if (rc != CURLE_OK) {
        switch (rc) {
        case CURLE_OPERATION_TIMEDOUT:
            *kind = "timeout";
            snprintf(why, whylen, HV_MSG("downstream %s did not answer within %d s"), d->c.name,
                     (budget + 999) / 1000);
            break;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_ISSUER_ERROR:
            *kind = "tls";
            snprintf(why, whylen,
                     HV_MSG("downstream %s: the TLS handshake failed (check its caFile, "
                            "clientCertFile and serving certificate)"),
                     d->c.name);
            break;
        default:
            *kind = b.too_big ? "bad-answer" : "unreachable";
            if (b.too_big)
                snprintf(why, whylen, HV_MSG("downstream %s answered more than 4 MiB"), d->c.name);
            else
                snprintf(why, whylen, HV_MSG("downstream %s cannot be reached (%s)"), d->c.name,
                         HV_MSG("connection failed"));
        }
        hv_log(HV_LOG_WARN, "downstream-error", "downstream", d->c.name, "hook", hv_hook_name(h),
               "detail", cerr[0] ? cerr : curl_easy_strerror(rc), (char *)NULL);
        curl_easy_cleanup(c); /* a failed handle may hold a broken connection */
        c = NULL;
    } else if (status != 200) {
        *kind = "http";
        snprintf(why, whylen, HV_MSG("downstream %s answered HTTP %ld"), d->c.name, status);
        char detail[300];
        snprintf(detail, sizeof(detail), "%.256s", b.p ? b.p : "");
        hv_log(HV_LOG_WARN, "downstream-error", "downstream", d->c.name, "hook", hv_hook_name(h),
               "detail", detail, (char *)NULL);
    } else {
        char perr[200];
        hj *doc = hj_parse(b.p ? b.p : "", b.len, perr, sizeof(perr));
        if (!doc || doc->type != HJ_OBJECT) {
            *kind = "bad-answer";
            snprintf(why, whylen, HV_MSG("downstream %s answered something that is not a %s"),
                     d->c.name, HV_MSG("JSON object"));
            hj_free(doc);
        } else {
            *answer = doc;
            ret = 0;
        }
    }
    if (c)
        pool_put(d, c);
    free(b.p);
    return ret;
}

int hv_downstream_discover(struct hv_downstream *d, int64_t deadline_ms, char *why, size_t whylen)
{
    static const char req[] = "{\"apiVersion\":\"" HV_HOOKS_API "\",\"kind\":\"DiscoveryRequest\"}";
    hj *a = NULL;
    const char *kind = NULL;
    int64_t t0 = hv_mono_ms();
    char names[HV_HOOK_COUNT][HANDLER_MAX];
    memset(names, 0, sizeof(names));
    long http = 0;
    int rc = post(d, HV_HOOK_DISCOVERY, NULL, req, sizeof(req) - 1, deadline_ms, &a, &kind, &http,
                  why, whylen);
    if (rc == 0) {
        const hj *hs = hj_get(a, "handlers");
        const char *st = hj_get_str(a, "status");
        if (!st || strcmp(st, "Success") || (hs && hs->type != HJ_ARRAY)) {
            kind = "bad-answer";
            snprintf(why, whylen, HV_MSG("downstream %s: discovery did not succeed"), d->c.name);
            rc = -1;
        }
        for (size_t k = 0; rc == 0 && hs && k < hs->n; k++) {
            const hj *e = hs->items[k];
            const char *name = hj_get_str(e, "name");
            const char *hook = hj_get_str(hj_get(e, "requestHook"), "hook");
            for (int h = HV_HOOK_CAN_UPDATE_MACHINE; hook && h < HV_HOOK_COUNT; h++) {
                if (strcmp(hook, hv_hook_name((enum hv_hook)h)))
                    continue;
                if (!name || !dns_label(name)) {
                    kind = "bad-answer";
                    snprintf(why, whylen,
                             HV_MSG("downstream %s: discovery lists a handler whose name is not "
                                    "a DNS-1123 label"),
                             d->c.name);
                    rc = -1;
                } else {
                    snprintf(names[h], HANDLER_MAX, "%s", name);
                }
            }
        }
    }
    hj_free(a);
    count(d, HV_HOOK_DISCOVERY, rc == 0 ? "Success" : "Error", rc == 0 ? NULL : kind,
          (double)(hv_mono_ms() - t0) / 1e3);
    pthread_mutex_lock(&d->mu);
    if (rc == 0) {
        memcpy(d->handler, names, sizeof(names));
        d->discovered = true;
    }
    pthread_mutex_unlock(&d->mu);
    if (rc == 0) {
        char list[3 * HANDLER_MAX + 8];
        snprintf(list, sizeof(list), "%s,%s,%s", names[1], names[2], names[3]);
        hv_log(HV_LOG_INFO, "downstream-discovery", "downstream", d->c.name, "handlers", list,
               (char *)NULL);
    } else {
        hv_log(HV_LOG_WARN, "downstream-discovery", "downstream", d->c.name, "message", why,
               (char *)NULL);
    }
    return rc;
}

enum hv_ds_result hv_downstream_call(struct hv_downstream *d, enum hv_hook h, const hj *req,
                                     int64_t deadline_ms, hj **answer, char *why, size_t whylen)
{
    char handler[HANDLER_MAX];
    *answer = NULL;
    /* One bound for everything this downstream costs the call: discovery, the call, a retry. */
    int64_t own = hv_mono_ms() + (int64_t)d->c.timeout_s * 1000;
    if (own < deadline_ms)
        deadline_ms = own;
    pthread_mutex_lock(&d->mu);
    bool known = d->discovered;
    pthread_mutex_unlock(&d->mu);
    if (!known && hv_downstream_discover(d, deadline_ms, why, whylen) < 0)
        return HV_DS_ERROR;

    hj *body = hj_clone(req);
    if (d->c.settings)
        hj_obj_set_take(body, "settings", hj_clone(d->c.settings));
    size_t len;
    char *text = hj_dump(body, &len);
    hj_free(body);
    if (!text)
        abort();
    const char *kind = NULL;
    hj *a = NULL;
    int rc = -1;
    double secs = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        pthread_mutex_lock(&d->mu);
        snprintf(handler, sizeof(handler), "%s", d->handler[h]);
        pthread_mutex_unlock(&d->mu);
        if (!handler[0]) {
            free(text);
            return HV_DS_SKIP;
        }
        long http = 0;
        int64_t t0 = hv_mono_ms();
        rc = post(d, h, handler, text, len, deadline_ms, &a, &kind, &http, why, whylen);
        secs = (double)(hv_mono_ms() - t0) / 1e3;
        /* 404 on names from an earlier discovery: the downstream renamed its handlers (a new
         * version); discover again and retry once. */
        if (rc == 0 || http != 404 || !known || attempt)
            break;
        count(d, h, "Error", kind, secs);
        if (hv_downstream_discover(d, deadline_ms, why, whylen) < 0)
            break;
    }
    free(text);
    const char *status = rc == 0 ? hj_get_str(a, "status") : NULL;
    char want[64];
    snprintf(want, sizeof(want), "%sResponse", hv_hook_name(h));
    const char *akind = rc == 0 ? hj_get_str(a, "kind") : NULL;
    if (rc == 0 && (!status || (strcmp(status, "Success") && strcmp(status, "Failure")) ||
                    (akind && strcmp(akind, want)))) {
        kind = "bad-answer";
        snprintf(why, whylen, HV_MSG("downstream %s answered something that is not a %s"),
                 d->c.name, want);
        hj_free(a);
        a = NULL;
        rc = -1;
    }
    count(d, h, rc < 0 ? "Error" : status, rc < 0 ? kind : NULL, secs);
    if (hv_log_enabled(HV_LOG_INFO)) {
        char ms[32];
        snprintf(ms, sizeof(ms), "%.3f", secs * 1e3);
        const char *m = rc == 0 ? hj_get_str(a, "message") : why;
        hv_log(HV_LOG_INFO, "downstream-call", "downstream", d->c.name, "hook", hv_hook_name(h),
               "status", rc < 0 ? "Error" : status, "#ms", ms, "message", m ? m : "", (char *)NULL);
    }
    if (rc < 0) {
        /* A failed call may mean the downstream moved or renamed its handlers: ask again. */
        pthread_mutex_lock(&d->mu);
        d->discovered = false;
        pthread_mutex_unlock(&d->mu);
        return HV_DS_ERROR;
    }
    *answer = a;
    return HV_DS_OK;
}
