/* vs_soap.c: HTTPS POSTs to <url> with libcurl, the shared vim25 session (cookie
 * vmware_soap_session, Login/Logout, one re-login on NotAuthenticated) and TLS policy
 * (thumbprint pin, CA bundle, or explicitly insecure).
 *
 * Locks: s->mu guards cookie, generation, pool and stats (never held across I/O);
 * s->login_mu serialises RetrieveServiceContent and Login. Easy handles come from a pool
 * and share DNS through s->share; each handle keeps its own keep-alive connection (libcurl
 * does not support sharing connections between concurrent threads).
 */
#include "hv_clock.h"
#include "vs_soap.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>

#include "vs_tls.h"

#define POOL_MAX        64 /* idle easy handles kept (engine workers and probes at once) */
#define COOKIE_NAME     "vmware_soap_session"
#define INITIAL_VERSION "6.5" /* every vCenter we support still accepts it */
#define SECRET_MAX      1024

struct vs_server {
    char *name;
    char *url;
    char *host;     /* "vc.example.com" */
    char *hostport; /* "vc.example.com:443" or as given */
    char *username;
    char *username_file;
    char *password_file;
    char *ca_file;
    hv_vs_creds_fn creds; /* with identity: credentials come from it at each login */
    void *creds_ctx;
    char *identity;
    struct vs_tls_pin pin;
    bool insecure;
    int timeout_ms;

    CURLSH *share;
    pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];

    pthread_mutex_t mu;
    char cookie[512]; /* "vmware_soap_session=..." or "" */
    unsigned gen;     /* bumped by every login */
    bool logged_in;
    bool have_content;
    CURL *pool[POOL_MAX];
    size_t npool;
    struct vs_stats stats;

    pthread_mutex_t login_mu;
    struct vs_content content; /* written once under login_mu before have_content */
};

struct xfer {
    struct vs_buf body;
    bool too_big;
    bool want_cookie;
    char cookie[512];
};

int64_t vs_now_ms(void)
{
    return hv_mono_ms();
}

int vs_left_ms(int64_t deadline)
{
    int64_t left = deadline - vs_now_ms();
    if (left <= 0)
        return 0;
    return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

static char *dup_or_null(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *user)
{
    (void)h;
    (void)access;
    struct vs_server *s = user;
    if (data < CURL_LOCK_DATA_LAST)
        pthread_mutex_lock(&s->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *user)
{
    (void)h;
    struct vs_server *s = user;
    if (data < CURL_LOCK_DATA_LAST)
        pthread_mutex_unlock(&s->share_locks[data]);
}

/* Split https://host[:port]/path into "host" and "host[:port]". */
static int parse_url(struct vs_server *s, char *err, size_t errlen)
{
    const char *p = s->url;
    if (strncasecmp(p, "https://", 8) != 0) {
        snprintf(err, errlen, "vSphere url must start with https://");
        return -1;
    }
    p += 8;
    size_t n = strcspn(p, "/?#");
    if (n == 0 || memchr(p, '@', n)) {
        snprintf(err, errlen, "vSphere url needs a host (and no user info)");
        return -1;
    }
    s->hostport = strndup(p, n);
    if (!s->hostport)
        return -1;
    if (s->hostport[0] == '[') {
        char *end = strchr(s->hostport, ']');
        s->host = end ? strndup(s->hostport + 1, (size_t)(end - s->hostport - 1)) : NULL;
    } else {
        s->host = strndup(s->hostport, strcspn(s->hostport, ":"));
    }
    if (!s->host || !s->host[0]) {
        snprintf(err, errlen, "vSphere url has a malformed host");
        return -1;
    }
    return 0;
}

struct vs_server *vs_server_new(const struct hv_vsphere_server *cfg, char *err, size_t errlen)
{
    if (!cfg->url || !*cfg->url) {
        snprintf(err, errlen, "vSphere server without url");
        return NULL;
    }
    if (!cfg->creds &&
        (!cfg->password_file || !*cfg->password_file ||
         (!(cfg->username && *cfg->username) && !(cfg->username_file && *cfg->username_file)))) {
        snprintf(err, errlen,
                 "vSphere server %s needs a username (or username file) and a "
                 "password file",
                 cfg->name && *cfg->name ? cfg->name : "without a name");
        return NULL;
    }
    struct vs_server *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->login_mu, NULL);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&s->share_locks[i], NULL);
    s->url = strdup(cfg->url);
    s->username = dup_or_null(cfg->username);
    s->username_file = dup_or_null(cfg->username_file);
    s->password_file = dup_or_null(cfg->password_file);
    s->ca_file = dup_or_null(cfg->ca_file);
    s->creds = cfg->creds;
    s->creds_ctx = cfg->creds_ctx;
    s->identity = dup_or_null(cfg->identity);
    s->insecure = cfg->insecure_skip_verify != 0;
    s->timeout_ms = cfg->call_timeout_ms > 0 ? cfg->call_timeout_ms : 10000;
    snprintf(err, errlen, "out of memory");
    if (!s->url || parse_url(s, err, errlen) != 0)
        goto fail;
    s->name = strdup(cfg->name && *cfg->name ? cfg->name : s->host);
    if (!s->name)
        goto fail;
    if (cfg->thumbprint && *cfg->thumbprint) {
        if (vs_thumbprint_parse(cfg->thumbprint, &s->pin) != 0) {
            snprintf(err, errlen,
                     "vSphere server %s: thumbprint is not a SHA-1 or SHA-256 hex "
                     "digest",
                     s->name);
            goto fail;
        }
        s->pin.require_chain = s->ca_file != NULL && !s->insecure;
        char why[256];
        if (vs_tls_pin_enforceable(why, sizeof(why)) < 0) {
            snprintf(err, errlen, "vSphere server %s: %s; refusing to start", s->name, why);
            goto fail;
        }
    }
    s->share = curl_share_init();
    if (!s->share)
        goto fail;
    curl_share_setopt(s->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(s->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(s->share, CURLSHOPT_USERDATA, s);
    /* DNS only: libcurl does not support a connection cache (CURL_LOCK_DATA_CONNECT)
     * shared by handles in concurrent threads (CURLSHOPT_SHARE), so connections stay with
     * the pooled handle that opened them. */
    curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    /* TLS sessions stay per handle: sharing SSL_SESSIONs across threads buys little with
     * pooled connections, and keeps every resumed session tied to one handle's handshake. */
    snprintf(s->content.api_version, sizeof(s->content.api_version), INITIAL_VERSION);
    err[0] = '\0';
    return s;
fail:
    vs_server_free(s);
    return NULL;
}

const char *vs_server_name(const struct vs_server *s)
{
    return s->name;
}

const char *vs_server_host(const struct vs_server *s)
{
    return s->host;
}

const char *vs_server_hostport(const struct vs_server *s)
{
    return s->hostport;
}

int vs_server_timeout(const struct vs_server *s)
{
    return s->timeout_ms;
}

void vs_server_stats(struct vs_server *s, struct vs_stats *st)
{
    pthread_mutex_lock(&s->mu);
    *st = s->stats;
    pthread_mutex_unlock(&s->mu);
}

/* ---- transport ---- */

static size_t on_body(char *data, size_t size, size_t nmemb, void *user)
{
    struct xfer *x = user;
    size_t n = size * nmemb;
    if (x->body.len + n > VS_RESPONSE_MAX) {
        x->too_big = true;
        return 0; /* aborts the transfer */
    }
    vs_buf_addn(&x->body, data, n);
    return x->body.failed ? 0 : n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *user)
{
    struct xfer *x = user;
    size_t n = size * nmemb;
    static const char prefix[] = "set-cookie:";
    if (!x->want_cookie || n < sizeof(prefix) || strncasecmp(data, prefix, sizeof(prefix) - 1) != 0)
        return n;
    const char *p = data + sizeof(prefix) - 1;
    const char *end = data + n;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    size_t name_len = sizeof(COOKIE_NAME) - 1;
    if ((size_t)(end - p) <= name_len || strncmp(p, COOKIE_NAME "=", name_len + 1) != 0)
        return n;
    size_t len = 0;
    while (p + len < end && p[len] != ';' && p[len] != '\r' && p[len] != '\n')
        len++;
    if (len < sizeof(x->cookie))
        snprintf(x->cookie, sizeof(x->cookie), "%.*s", (int)len, p);
    return n;
}

static CURL *pool_get(struct vs_server *s)
{
    pthread_mutex_lock(&s->mu);
    CURL *h = s->npool ? s->pool[--s->npool] : NULL;
    pthread_mutex_unlock(&s->mu);
    if (h)
        return h;
    h = curl_easy_init();
    if (!h)
        return NULL;
    curl_easy_setopt(h, CURLOPT_URL, s->url);
    curl_easy_setopt(h, CURLOPT_SHARE, s->share);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "hvupdater-vsphere");
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)VS_RESPONSE_MAX);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    /* One request per handle at a time: HTTP/1.1 keep-alive, no HTTP/2 connection shared
     * between threads. Each handle keeps its one connection to the server open in its own
     * cache, so a pooled handle reuses it on its next call: about one connection per
     * concurrent caller, at most POOL_MAX idle. */
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_MAXCONNECTS, 1L);
    if (s->pin.len) {
        /* A pin is honoured even with insecure_skip_verify, which then only drops the chain
         * and host-name checks. */
        long chain = s->pin.require_chain ? 1L : 0L;
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, chain);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, chain ? 2L : 0L);
        if (vs_tls_pin_install(h, &s->pin) < 0) { /* never connect without the pin */
            curl_easy_cleanup(h);
            return NULL;
        }
    } else if (s->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (s->ca_file && !s->insecure)
        curl_easy_setopt(h, CURLOPT_CAINFO, s->ca_file);
    return h;
}

static void pool_put(struct vs_server *s, CURL *h)
{
    pthread_mutex_lock(&s->mu);
    if (s->npool < POOL_MAX) {
        s->pool[s->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (h)
        curl_easy_cleanup(h);
}

static int curl_err(CURLcode rc, const struct xfer *x, const char *method, const char *msg,
                    struct hv_err *err)
{
    if (vs_tls_mismatch())
        return vs_err(err, HV_E_TLS, "server certificate thumbprint mismatch");
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
        return vs_err(err, HV_E_TIMEOUT, "%s: timed out: %s", method, msg);
    case CURLE_WRITE_ERROR:
    case CURLE_FILESIZE_EXCEEDED:
        if (x->too_big || rc == CURLE_FILESIZE_EXCEEDED)
            return vs_err(err, HV_E_INTERNAL, "%s: response larger than %zu bytes", method,
                          VS_RESPONSE_MAX);
        return vs_err(err, HV_E_INTERNAL, "%s: out of memory reading response", method);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
        return vs_err(err, HV_E_TLS, "%s: TLS verification failed: %s", method, msg);
    default:
        return vs_err(err, HV_E_UNREACHABLE, "%s: %s", method, msg);
    }
}

/* POST req; on HTTP 200 or 500 with a SOAP body, parse it into out. */
static int post(struct vs_server *s, const char *method, const struct vs_buf *req,
                const char *cookie, int timeout_ms, struct xfer *x, struct vs_reply *out,
                struct hv_err *err)
{
    char action[64];
    pthread_mutex_lock(&s->mu);
    snprintf(action, sizeof(action), "SOAPAction: urn:vim25/%s", s->content.api_version);
    s->stats.calls++;
    pthread_mutex_unlock(&s->mu);

    CURL *h = pool_get(s);
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: text/xml; charset=utf-8");
    struct curl_slist *more = hdrs ? curl_slist_append(hdrs, action) : NULL;
    more = more ? curl_slist_append(more, "Expect:") : NULL;
    if (!h || !more) {
        curl_slist_free_all(hdrs);
        if (h)
            curl_easy_cleanup(h);
        return vs_err(err, HV_E_INTERNAL, "%s: out of memory", method);
    }
    char msg[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, msg);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->data);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->len);
    curl_easy_setopt(h, CURLOPT_COOKIE, cookie && *cookie ? cookie : NULL);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_ms < 10000 ? timeout_ms : 10000));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);

    vs_tls_mismatch_reset();
    CURLcode rc = curl_easy_perform(h);
    long status = 0, connects = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
    if (connects > 0) {
        pthread_mutex_lock(&s->mu);
        s->stats.connects += (unsigned long)connects;
        pthread_mutex_unlock(&s->mu);
    }
    /* Drop borrowed pointers before the handle goes back to the pool. */
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)-1);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(h, CURLOPT_COOKIE, NULL);
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) {
        if (!msg[0])
            snprintf(msg, sizeof(msg), "%s", curl_easy_strerror(rc));
        curl_easy_cleanup(h); /* a failed handle may hold state we do not want to reuse */
        return curl_err(rc, x, method, msg, err);
    }
    pool_put(s, h);
    if (status != 200 && status != 500)
        return vs_err(err, HV_E_UNREACHABLE, "%s: HTTP status %ld", method, status);
    out->doc = vs_xml_parse(x->body.data ? x->body.data : "", x->body.len, err);
    if (!out->doc) {
        if (status == 500)
            return vs_err(err, HV_E_UNREACHABLE, "%s: HTTP status 500 without a SOAP body", method);
        return err ? (int)err->code : HV_E_INTERNAL;
    }
    out->body = vs_xml_body(out->doc);
    if (!out->body) {
        vs_reply_free(out);
        return vs_err(err, HV_E_INTERNAL, "%s: response without a SOAP body", method);
    }
    return HV_OK;
}

void vs_reply_free(struct vs_reply *r)
{
    if (r->doc)
        xmlFreeDoc(r->doc);
    r->doc = NULL;
    r->body = NULL;
}

/* ---- session ---- */

/* Read a secret file, trimmed of trailing CR/LF: read(2) straight into out (no stdio buffer
 * keeps a copy in freed memory; the caller wipes out), O_CLOEXEC. */
static int read_secret(const char *path, const char *what, char *out, size_t outlen,
                       struct hv_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return vs_err(err, HV_E_AUTH, "cannot read %s file %s: %s", what, path, strerror(errno));
    size_t n = 0;
    bool more = false;
    for (;;) {
        char one;
        ssize_t r = n < outlen - 1 ? read(fd, out + n, outlen - 1 - n) : read(fd, &one, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (n == outlen - 1) {
            more = true;
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    out[n] = '\0';
    if (more || strlen(out) != n) {
        explicit_bzero(out, outlen);
        return vs_err(err, HV_E_AUTH, "%s file %s is too long or not text", what, path);
    }
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = '\0';
    return HV_OK;
}

static int fetch_content(struct vs_server *s, int timeout_ms, struct hv_err *err)
{
    struct vs_buf req;
    vs_buf_init(&req);
    vs_env_begin(&req, "RetrieveServiceContent", "ServiceInstance", "ServiceInstance");
    vs_env_end(&req, "RetrieveServiceContent");
    struct xfer x = {0};
    struct vs_reply r = {0};
    int rc = post(s, "RetrieveServiceContent", &req, NULL, timeout_ms, &x, &r, err);
    vs_buf_free(&req);
    vs_buf_free(&x.body);
    if (rc != HV_OK)
        return rc;
    struct vs_fault f;
    if (vs_xml_fault(r.body, &f)) {
        vs_reply_free(&r);
        return vs_fault_err(&f, "RetrieveServiceContent", err);
    }
    struct vs_content c = {0};
    xmlNodePtr rv = vs_xml_child(r.body, "returnval");
    vs_xml_child_text(vs_xml_child(rv, "about"), "apiVersion", c.api_version,
                      sizeof(c.api_version));
    vs_xml_child_text(rv, "propertyCollector", c.property_collector, sizeof(c.property_collector));
    vs_xml_child_text(rv, "searchIndex", c.search_index, sizeof(c.search_index));
    vs_xml_child_text(rv, "sessionManager", c.session_manager, sizeof(c.session_manager));
    vs_xml_child_text(rv, "eventManager", c.event_manager, sizeof(c.event_manager));
    vs_xml_child_text(rv, "rootFolder", c.root_folder, sizeof(c.root_folder));
    vs_xml_child_text(rv, "viewManager", c.view_manager, sizeof(c.view_manager));
    vs_reply_free(&r);
    if (!c.property_collector[0] || !c.search_index[0] || !c.session_manager[0])
        return vs_err(err, HV_E_UNREACHABLE, "RetrieveServiceContent: not a vCenter answer");
    if (strspn(c.api_version, "0123456789.") != strlen(c.api_version) || !c.api_version[0])
        snprintf(c.api_version, sizeof(c.api_version), INITIAL_VERSION);
    pthread_mutex_lock(&s->mu);
    s->content = c;
    s->have_content = true;
    pthread_mutex_unlock(&s->mu);
    return HV_OK;
}

/* Called with login_mu held. */
static int do_login(struct vs_server *s, int timeout_ms, struct hv_err *err)
{
    char user[SECRET_MAX], pass[SECRET_MAX];
    int rc = HV_OK;
    if (s->creds && s->identity) {
        rc = s->creds(s->creds_ctx, s->name, s->identity, user, sizeof(user), pass, sizeof(pass),
                      timeout_ms, err);
        if (rc == HV_OK)
            goto have;
        explicit_bzero(user, sizeof(user));
        explicit_bzero(pass, sizeof(pass));
        /* HV_E_NOT_FOUND: the cluster names no identity, so the configured files serve it */
        if (rc != HV_E_NOT_FOUND)
            return rc;
        if (!s->password_file)
            return vs_err(err, HV_E_AUTH, "cluster %s names no vCenter identity", s->identity);
        rc = HV_OK;
    }
    if (!s->password_file)
        return vs_err(err, HV_E_AUTH, "no credentials for %s: the machine names no cluster",
                      s->name);
    if (s->username_file)
        rc = read_secret(s->username_file, "username", user, sizeof(user), err);
    else
        snprintf(user, sizeof(user), "%s", s->username);
    if (rc == HV_OK)
        rc = read_secret(s->password_file, "password", pass, sizeof(pass), err);
    if (rc != HV_OK) {
        explicit_bzero(user, sizeof(user));
        return rc;
    }
have:;
    struct vs_buf req;
    vs_buf_init(&req);
    vs_env_begin(&req, "Login", "SessionManager", s->content.session_manager);
    vs_buf_elem(&req, "userName", user);
    vs_buf_elem(&req, "password", pass);
    vs_env_end(&req, "Login");
    explicit_bzero(user, sizeof(user));
    explicit_bzero(pass, sizeof(pass));
    if (req.failed) {
        vs_buf_free(&req);
        return vs_err(err, HV_E_AUTH, "Login: credentials hold characters XML cannot carry");
    }
    struct xfer x = {.want_cookie = true};
    struct vs_reply r = {0};
    rc = post(s, "Login", &req, NULL, timeout_ms, &x, &r, err);
    vs_buf_free(&req);
    vs_buf_free(&x.body);
    if (rc != HV_OK)
        return rc;
    struct vs_fault f;
    if (vs_xml_fault(r.body, &f)) {
        vs_reply_free(&r);
        rc = vs_fault_err(&f, "Login", err);
        return rc == HV_E_INTERNAL ? vs_err(err, HV_E_AUTH, "Login refused: %s", f.type) : rc;
    }
    vs_reply_free(&r);
    if (!x.cookie[0])
        return vs_err(err, HV_E_AUTH, "Login: no %s cookie in the answer", COOKIE_NAME);
    pthread_mutex_lock(&s->mu);
    memcpy(s->cookie, x.cookie, sizeof(s->cookie));
    explicit_bzero(x.cookie, sizeof(x.cookie));
    s->gen++;
    s->logged_in = true;
    s->stats.logins++;
    pthread_mutex_unlock(&s->mu);
    return HV_OK;
}

const struct vs_content *vs_session(struct vs_server *s, int timeout_ms, struct hv_err *err)
{
    if (timeout_ms <= 0)
        timeout_ms = s->timeout_ms;
    pthread_mutex_lock(&s->mu);
    bool ready = s->have_content && s->logged_in;
    pthread_mutex_unlock(&s->mu);
    if (ready)
        return &s->content;
    int rc = HV_OK;
    pthread_mutex_lock(&s->login_mu);
    if (!s->have_content)
        rc = fetch_content(s, timeout_ms, err);
    if (rc == HV_OK && !s->logged_in)
        rc = do_login(s, timeout_ms, err);
    pthread_mutex_unlock(&s->login_mu);
    return rc == HV_OK ? &s->content : NULL;
}

/* Log in again unless another thread already did since generation gen. */
static int relogin(struct vs_server *s, unsigned gen, int timeout_ms, struct hv_err *err)
{
    int rc = HV_OK;
    pthread_mutex_lock(&s->login_mu);
    pthread_mutex_lock(&s->mu);
    bool stale = s->gen == gen;
    if (stale) {
        s->logged_in = false;
        s->cookie[0] = '\0';
    }
    pthread_mutex_unlock(&s->mu);
    if (stale) {
        rc = do_login(s, timeout_ms, err);
        if (rc == HV_OK) {
            pthread_mutex_lock(&s->mu);
            s->stats.relogins++;
            pthread_mutex_unlock(&s->mu);
        }
    }
    pthread_mutex_unlock(&s->login_mu);
    return rc;
}

/* RetrieveProperties without a valid session answers with per-property NotAuthenticated
 * faults in missingSet (the simulator does this) instead of a SOAP fault. */
static bool missing_not_authenticated(xmlNodePtr body)
{
    xmlNodePtr rv = vs_xml_child(body, "returnval");
    for (xmlNodePtr o = vs_xml_child(rv, "objects"); o; o = vs_xml_next(o, "objects")) {
        for (xmlNodePtr m = vs_xml_child(o, "missingSet"); m; m = vs_xml_next(m, "missingSet")) {
            char type[96];
            vs_xml_xsi_type(vs_xml_child(vs_xml_child(m, "fault"), "fault"), type, sizeof(type));
            if (strcmp(type, "NotAuthenticated") == 0)
                return true;
        }
    }
    return false;
}

int vs_call(struct vs_server *s, const char *method, const struct vs_buf *req, int timeout_ms,
            struct vs_reply *out, struct hv_err *err)
{
    out->doc = NULL;
    out->body = NULL;
    if (req->failed)
        return vs_err(err, HV_E_INTERNAL, "%s: a value cannot be carried in XML", method);
    if (timeout_ms <= 0)
        timeout_ms = s->timeout_ms;
    int64_t deadline = vs_now_ms() + timeout_ms;
    for (int attempt = 0;; attempt++) {
        char cookie[sizeof(s->cookie)];
        pthread_mutex_lock(&s->mu);
        memcpy(cookie, s->cookie, sizeof(cookie));
        unsigned gen = s->gen;
        pthread_mutex_unlock(&s->mu);

        int left = vs_left_ms(deadline);
        if (left == 0)
            return vs_err(err, HV_E_TIMEOUT, "%s: timed out", method);
        struct xfer x = {0};
        int rc = post(s, method, req, cookie, left, &x, out, err);
        vs_buf_free(&x.body);
        if (rc != HV_OK)
            return rc;
        struct vs_fault f;
        bool fault = vs_xml_fault(out->body, &f);
        bool unauth =
            fault ? strcmp(f.type, "NotAuthenticated") == 0 : missing_not_authenticated(out->body);
        if (unauth) {
            vs_reply_free(out);
            if (attempt > 0)
                return vs_err(err, HV_E_AUTH, "%s: session refused after a new login", method);
            left = vs_left_ms(deadline);
            rc = left ? relogin(s, gen, left, err)
                      : vs_err(err, HV_E_TIMEOUT, "%s: timed out", method);
            if (rc != HV_OK)
                return rc;
            continue;
        }
        if (fault) {
            vs_reply_free(out);
            return vs_fault_err(&f, method, err);
        }
        return HV_OK;
    }
}

void vs_server_free(struct vs_server *s)
{
    if (!s)
        return;
    if (s->logged_in && s->content.session_manager[0]) {
        struct vs_buf req;
        vs_buf_init(&req);
        vs_env_begin(&req, "Logout", "SessionManager", s->content.session_manager);
        vs_env_end(&req, "Logout");
        struct xfer x = {0};
        struct vs_reply r = {0};
        if (post(s, "Logout", &req, s->cookie, 2000, &x, &r, NULL) == HV_OK)
            vs_reply_free(&r);
        vs_buf_free(&req);
        vs_buf_free(&x.body);
    }
    for (size_t i = 0; i < s->npool; i++)
        curl_easy_cleanup(s->pool[i]);
    if (s->share)
        curl_share_cleanup(s->share);
    explicit_bzero(s->cookie, sizeof(s->cookie));
    free(s->name);
    free(s->url);
    free(s->host);
    free(s->hostport);
    free(s->username);
    free(s->username_file);
    free(s->password_file);
    free(s->identity);
    free(s->ca_file);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&s->share_locks[i]);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->login_mu);
    free(s);
}
