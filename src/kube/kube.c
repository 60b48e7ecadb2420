/* kube.c: the Kubernetes API client of kube.h: one libcurl easy handle per request, HTTPS
 * only, the CA pinned to the configured bundle, the bearer token read from its file each time
 * and wiped after use, answers capped at MAX_BODY. */
#include "kube.h"
#include "bodybuf.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>

#define MAX_BODY  (1 << 20)
#define TOKEN_MAX 8192

struct hv_kube {
    char *server; /* no trailing slash */
    char *token_file;
    char *ca_file;
    int timeout_ms;
};

static char *dup_str(const char *s)
{
    char *d = strdup(s);
    if (!d)
        abort();
    return d;
}

struct hv_kube *hv_kube_new(const struct hv_kube_cfg *cfg, char *err, size_t errlen)
{
    char url[300];
    if (cfg->server && *cfg->server) {
        if (strncmp(cfg->server, "https://", 8) != 0) {
            snprintf(err, errlen, "kubernetes.server must start with https://");
            return NULL;
        }
        snprintf(url, sizeof(url), "%s", cfg->server);
    } else {
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        const char *port = getenv("KUBERNETES_SERVICE_PORT");
        if (!host || !*host) {
            snprintf(err, errlen,
                     "no kubernetes.server and no KUBERNETES_SERVICE_HOST (not in a pod)");
            return NULL;
        }
        /* an IPv6 service address needs brackets in a URL */
        snprintf(url, sizeof(url), strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
                 port && *port ? port : "443");
    }
    size_t n = strlen(url);
    while (n > 8 && url[n - 1] == '/')
        url[--n] = '\0';
    struct hv_kube *k = calloc(1, sizeof(*k));
    if (!k)
        abort();
    k->server = dup_str(url);
    k->token_file =
        dup_str(cfg->token_file && *cfg->token_file ? cfg->token_file : HV_KUBE_SA_DIR "/token");
    k->ca_file = dup_str(cfg->ca_file && *cfg->ca_file ? cfg->ca_file : HV_KUBE_SA_DIR "/ca.crt");
    k->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 5000;
    return k;
}

void hv_kube_free(struct hv_kube *k)
{
    if (!k)
        return;
    free(k->server);
    free(k->token_file);
    free(k->ca_file);
    free(k);
}

int hv_kube_timeout(const struct hv_kube *k)
{
    return k->timeout_ms;
}

int hv_kube_name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 253 || s[0] == '.' || s[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-' ||
              s[i] == '.'))
            return 0;
    return 1;
}

/* The token, trimmed of trailing white space, into buf; -1 when it cannot be read. Read with
 * read(2) straight into buf (no stdio buffer keeps a copy in freed memory), O_CLOEXEC. */
static int read_token(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -1;
    size_t n = 0;
    int big = 0;
    for (;;) {
        char one;
        ssize_t r = n < cap - 1 ? read(fd, buf + n, cap - 1 - n) : read(fd, &one, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (n == cap - 1) {
            big = 1;
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    while (n && isspace((unsigned char)buf[n - 1]))
        buf[--n] = '\0';
    return n && !big && !strpbrk(buf, "\r\n") ? 0 : -1;
}

/* query: NULL, or "a=b&c=d" already escaped (hv_kube_list makes it) */
static int request(struct hv_kube *k, const char *method, const char *path, const char *query,
                   const char *body, const char *ctype, int timeout_ms, struct hv_bodybuf *out,
                   char *err, size_t errlen)
{
    if (timeout_ms <= 0)
        timeout_ms = k->timeout_ms;
    if (path[0] != '/' || strpbrk(path, " ?#\r\n") || (query && strpbrk(query, " #\r\n"))) {
        snprintf(err, errlen, "kubernetes: bad path");
        return -1;
    }
    static char token_hdr[] = "Authorization: Bearer ";
    char *auth = malloc(sizeof(token_hdr) + TOKEN_MAX);
    if (!auth)
        abort();
    memcpy(auth, token_hdr, sizeof(token_hdr));
    if (read_token(k->token_file, auth + sizeof(token_hdr) - 1, TOKEN_MAX) < 0) {
        free(auth);
        snprintf(err, errlen, "kubernetes: cannot read the token file %s", k->token_file);
        return -1;
    }
    size_t ulen = strlen(k->server) + strlen(path) + (query ? strlen(query) + 1 : 0) + 1;
    char *url = malloc(ulen);
    if (!url)
        abort();
    snprintf(url, ulen, "%s%s%s%s", k->server, path, query ? "?" : "", query ? query : "");
    CURL *h = curl_easy_init();
    struct curl_slist *hdr = NULL;
    hdr = curl_slist_append(hdr, auth);
    hdr = curl_slist_append(hdr, "Accept: application/json");
    char ct[96];
    snprintf(ct, sizeof(ct), "Content-Type: %s", ctype ? ctype : "application/json");
    if (body)
        hdr = curl_slist_append(hdr, ct);
    int status = -1;
    if (!h || !hdr) {
        snprintf(err, errlen, "kubernetes: out of memory");
        goto out;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_CAINFO, k->ca_file);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, hv_bodybuf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK) {
        snprintf(err, errlen, "kubernetes %s: %s", out->too_big ? "answer too large" : "request",
                 out->too_big ? "over 1 MiB" : curl_easy_strerror(rc));
        goto out;
    }
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    status = (int)code;
out:
    explicit_bzero(auth, sizeof(token_hdr) + TOKEN_MAX);
    free(auth);
    free(url);
    for (struct curl_slist *x = hdr; x; x = x->next) /* the nodes hold copies of auth */
        explicit_bzero(x->data, strlen(x->data));
    curl_slist_free_all(hdr);
    if (h)
        curl_easy_cleanup(h);
    return status;
}

/* GET path?query (query may be NULL) and parse the answer into *out on 200; the body buffer
 * is wiped (it may be a Secret). The HTTP status, or -1. */
static int get_json(struct hv_kube *k, const char *path, const char *query, int timeout_ms,
                    hj **out, char *err, size_t errlen)
{
    struct hv_bodybuf b = {.max = MAX_BODY, .wipe = true};
    *out = NULL;
    int st = request(k, "GET", path, query, NULL, NULL, timeout_ms, &b, err, errlen);
    if (st == 200) {
        char e[128];
        *out = hj_parse(b.p ? b.p : "", b.len, e, sizeof(e));
        if (!*out) {
            snprintf(err, errlen, "kubernetes GET %s: answer is not JSON: %s", path, e);
            st = -1;
        }
    } else if (st > 0) {
        snprintf(err, errlen, "kubernetes GET %s: HTTP %d", path, st);
    }
    if (b.p)
        explicit_bzero(b.p, b.len);
    free(b.p);
    return st;
}

static int io_get(void *ctx, const char *path, int timeout_ms, hj **out, char *err, size_t errlen)
{
    return hv_kube_get(ctx, path, timeout_ms, out, err, errlen);
}

struct hv_kube_io hv_kube_io(struct hv_kube *k)
{
    return (struct hv_kube_io){k, io_get};
}

int hv_kube_get(struct hv_kube *k, const char *path, int timeout_ms, hj **out, char *err,
                size_t errlen)
{
    return get_json(k, path, NULL, timeout_ms, out, err, errlen);
}

/* A request with a body (POST, PATCH); err gets the API server's Status message on an error. */
static int send_body(struct hv_kube *k, const char *method, const char *path, const char *body,
                     const char *ctype, int timeout_ms, char *err, size_t errlen)
{
    struct hv_bodybuf b = {.max = MAX_BODY};
    int st = request(k, method, path, NULL, body, ctype, timeout_ms, &b, err, errlen);
    if (st > 0 && (st < 200 || st > 299)) {
        /* the API server's Status says why (e.g. which field failed validation) */
        char e[64];
        hj *status = b.p ? hj_parse(b.p, b.len, e, sizeof(e)) : NULL;
        const char *why = hj_get_str(status, "message");
        snprintf(err, errlen, "kubernetes %s %s: HTTP %d%s%.300s", method, path, st,
                 why ? ": " : "", why ? why : "");
        hj_free(status);
    }
    free(b.p);
    return st;
}

int hv_kube_post(struct hv_kube *k, const char *path, const char *body, int timeout_ms, char *err,
                 size_t errlen)
{
    return send_body(k, "POST", path, body, NULL, timeout_ms, err, errlen);
}

int hv_kube_merge_patch(struct hv_kube *k, const char *path, const char *patch, int timeout_ms,
                        char *err, size_t errlen)
{
    return send_body(k, "PATCH", path, patch, "application/merge-patch+json", timeout_ms, err,
                     errlen);
}

int hv_kube_list(struct hv_kube *k, const char *path, int limit, const char *cont, int timeout_ms,
                 hj **out, char *err, size_t errlen)
{
    *out = NULL;
    char query[2048];
    char *esc = cont && *cont ? curl_easy_escape(NULL, cont, 0) : NULL;
    if (cont && *cont && (!esc || strlen(esc) > sizeof(query) - 64)) {
        curl_free(esc);
        snprintf(err, errlen, "kubernetes GET %s: continue token too long", path);
        return -1;
    }
    snprintf(query, sizeof(query), "limit=%d%s%s", limit > 0 ? limit : 100, esc ? "&continue=" : "",
             esc ? esc : "");
    curl_free(esc);
    return get_json(k, path, query, timeout_ms, out, err, errlen);
}

/* ---- server-side dry run (claims the provider accepts: kube/dryrun.h) ---- */
int hv_kube_dry_run_merge_patch(struct hv_kube *k, const char *path, const char *patch,
                                int timeout_ms, hj **status_out, char *err, size_t errlen)
{
    struct hv_bodybuf b = {.max = MAX_BODY};
    *status_out = NULL;
    int st = request(k, "PATCH", path, "dryRun=All", patch, "application/merge-patch+json",
                     timeout_ms, &b, err, errlen);
    if (st > 0 && (st < 200 || st > 299)) {
        char e[64];
        *status_out = b.p ? hj_parse(b.p, b.len, e, sizeof(e)) : NULL;
        snprintf(err, errlen, "kubernetes PATCH %s (dry run): HTTP %d", path, st);
    }
    if (b.p)
        explicit_bzero(b.p, b.len);
    free(b.p);
    return st;
}

int64_t hv_kube_mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}
