/* kv_http.c: the KubeVirt backend's own small Kubernetes client (the backends may not include
 * src/, whose kube room has one): one libcurl easy handle per request, HTTPS only, the CA
 * pinned to the configured bundle, the bearer token read from its file at every request
 * (projected tokens rotate) and wiped after use, answers capped at KV_MAX_BODY.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "kv_internal.h"

#define KV_MAX_BODY  (8 << 20) /* a page of VirtualMachines with their records */
#define KV_TOKEN_MAX 8192

int kv_seterr(struct hv_err *err, enum hv_errcode code, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->detail, sizeof(err->detail), fmt, ap);
        va_end(ap);
    }
    return code;
}

struct body {
    char *p;
    size_t n;
    bool over;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct body *b = ud;
    size_t len = size * nmemb;
    if (b->n + len > KV_MAX_BODY) {
        b->over = true;
        return 0;
    }
    char *np = realloc(b->p, b->n + len + 1);
    if (!np)
        return 0;
    b->p = np;
    memcpy(b->p + b->n, ptr, len);
    b->n += len;
    b->p[b->n] = '\0';
    return len;
}

/* the token file's first line, without trailing whitespace; -1 when unreadable or empty */
static int read_token(const char *path, char *tok, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(tok, 1, cap - 1, f);
    fclose(f);
    tok[n] = '\0';
    while (n && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
        tok[--n] = '\0';
    return n && !strpbrk(tok, "\r\n") ? 0 : -1;
}

void kv_wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

int kv_http(const struct kv_cluster *c, const char *method, const char *path, const char *ctype,
            const char *body, int timeout_ms, long *status, char **resp, struct hv_err *err)
{
    *status = 0;
    *resp = NULL;
    char tok[KV_TOKEN_MAX], auth[KV_TOKEN_MAX + 32] = "";
    if (c->kc) { /* from a kubeconfig: a token, a client certificate, or both */
        if (c->kc->token)
            snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->kc->token);
    } else {
        if (read_token(c->token_file, tok, sizeof(tok)) < 0)
            return kv_seterr(err, HV_E_CREDENTIALS, "cannot read the token file %s", c->token_file);
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", tok);
        kv_wipe(tok, sizeof(tok));
    }
    size_t url_len = strlen(c->server) + strlen(path) + 1;
    char *url = malloc(url_len);
    if (!url)
        abort();
    snprintf(url, url_len, "%s%s", c->server, path);
    CURL *h = curl_easy_init();
    if (!h)
        abort();
    struct curl_slist *hdr = NULL;
    if (auth[0])
        hdr = curl_slist_append(hdr, auth);
    hdr = curl_slist_append(hdr, "Accept: application/json");
    char ct[96];
    if (ctype) {
        snprintf(ct, sizeof(ct), "Content-Type: %s", ctype);
        hdr = curl_slist_append(hdr, ct);
    }
    struct body b = {0};
    char ebuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    if (!c->kc) {
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    } else { /* blobs: libcurl copies them; nothing reaches the disk */
        if (c->kc->ca) {
            struct curl_blob ca = {c->kc->ca, c->kc->ca_len, CURL_BLOB_COPY};
            curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &ca);
        }
        if (c->kc->cert) {
            struct curl_blob cert = {c->kc->cert, c->kc->cert_len, CURL_BLOB_COPY};
            struct curl_blob key = {c->kc->key, c->kc->key_len, CURL_BLOB_COPY};
            curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
            curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
            curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
            curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
        }
    }
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdr);
    kv_wipe(auth, sizeof(auth));
    int ret = HV_OK;
    if (rc != CURLE_OK) {
        enum hv_errcode code = rc == CURLE_OPERATION_TIMEDOUT ? HV_E_TIMEOUT
                               : rc == CURLE_PEER_FAILED_VERIFICATION ||
                                       rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_CERTPROBLEM
                                   ? HV_E_TLS
                                   : HV_E_UNREACHABLE;
        ret = kv_seterr(err, code, "%s %s: %s", method, path,
                        b.over    ? "answer too large"
                        : ebuf[0] ? ebuf
                                  : curl_easy_strerror(rc));
        free(b.p);
    } else {
        *resp = b.p ? b.p : calloc(1, 1);
        if (!*resp)
            abort();
    }
    free(url);
    return ret;
}

int kv_status_err(long status, const char *body, const char *what, struct hv_err *err)
{
    enum hv_errcode code;
    if (status == 401 || status == 403)
        code = HV_E_AUTH;
    else if (status == 404)
        code = HV_E_NOT_FOUND;
    else if (status == 409 || (status == 422 && body &&
                               (strstr(body, "testing value") || strstr(body, "test failed"))))
        /* another writer changed the VM since it was read: our resourceVersion test failed
         * (the API server answers 422 with json-patch's "testing value ... failed: test
         * failed" in details.causes, under a generic message) */
        code = HV_E_BUSY;
    else if (status == 429 || status >= 500)
        code = HV_E_UNREACHABLE; /* the API server, or a webhook it calls, is not there */
    else
        code = HV_E_INTERNAL;
    /* the API server's Status message only: never the token (it is not in an answer) */
    char msg[300] = "";
    if (body) {
        yajl_val v = yajl_tree_parse(body, NULL, 0);
        const char *m = kv_str(v, "message");
        if (m)
            snprintf(msg, sizeof(msg), "%s", m);
        /* a generic message ("the server rejected our request due to an error in our
         * request") says why only in its first cause: json-patch's error, for one */
        yajl_val causes = kv_get(v, "details.causes");
        if (YAJL_IS_ARRAY(causes) && causes->u.array.len > 0) {
            const char *c = kv_str(causes->u.array.values[0], "message");
            if (c && (!m || !strstr(m, c))) {
                size_t n = strlen(msg);
                snprintf(msg + n, sizeof(msg) - n, "%s%s", n ? ": " : "", c);
            }
        }
        yajl_tree_free(v);
    }
    return kv_seterr(err, code, "%s: HTTP %ld%s%s", what, status, msg[0] ? ": " : "", msg);
}

int kv_get_json(const struct kv_cluster *c, const char *path, int timeout_ms, yajl_val *out,
                struct hv_err *err)
{
    long status;
    char *body;
    *out = NULL;
    int rc = kv_http(c, "GET", path, NULL, NULL, timeout_ms, &status, &body, err);
    if (rc != HV_OK)
        return rc;
    if (status == 404) {
        free(body);
        return HV_OK;
    }
    if (status != 200) {
        rc = kv_status_err(status, body, path, err);
        free(body);
        return rc;
    }
    char ebuf[128];
    *out = yajl_tree_parse(body, ebuf, sizeof(ebuf));
    free(body);
    if (!*out)
        return kv_seterr(err, HV_E_INTERNAL, "GET %s: not JSON", path);
    return HV_OK;
}
