/* test_integration.c: the real `hvupdater serve` binary against a real TLS client.
 *
 * Each group starts the server as a child process (fork/exec, --listen 127.0.0.1:0, waits for
 * --port-file), talks to it with libcurl (OpenSSL, peer and host verified against the CA the
 * group trusts, TLS >= 1.2, keep-alive connections) and stops it with SIGTERM, checking that it
 * exits 0 within 5 s. Responses are parsed with yajl's tree API, independently of the
 * server's own JSON code. Every 200 hook answer of the "answers" group is also written to
 * ANSWERS_DIR/<schema>.<case>.json for the integration.schema test.
 *
 * usage: test_integration HVUPDATER_BINARY SOURCE_DIR ANSWERS_DIR [GROUP...]
 * groups (default: all):
 *   answers   discovery, the three hooks on test/fixtures, Failure answers, health, metrics
 *   http      404, 405 + Allow, 413 (Content-Length and chunked), 400, keep-alive after errors
 *   tls       TLS <= 1.1 refused, TLS 1.2/1.3, another CA or name refused, plain HTTP refused
 *   rotation  --tls-cert/--tls-key replaced by rename(): new connections get the new pair
 *   sigterm   SIGTERM with a request in flight: exit 0 within 5 s
 * HV_IT_VERBOSE=1 runs the server at log level debug and prints libcurl errors.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#define API          "hooks.runtime.cluster.x-k8s.io/v1alpha1"
#define PREFIX       "/" API "/"
#define P_DISCOVERY  PREFIX "discovery"
#define P_CUM        PREFIX "canupdatemachine/can-update-machine"
#define P_CUMS       PREFIX "canupdatemachineset/can-update-machine-set"
#define P_UM         PREFIX "updatemachine/update-machine"
#define MAX_BODY     65536
#define MAX_BODY_STR "65536"

static const char *hv_bin, *src_dir, *answers_dir;

/* ---- small utilities ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    assert_non_null(d);
    return d;
}

static char *read_all(const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *b = malloc(cap);
    assert_non_null(b);
    size_t n;
    while ((n = fread(b + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            cap *= 2;
            b = realloc(b, cap);
            assert_non_null(b);
        }
    }
    fclose(f);
    b[len] = '\0';
    if (len_out)
        *len_out = len;
    return b;
}

static void write_all(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Copy src to dir/.name.tmp, then rename() onto dir/name: readers see old or new, never half. */
static void replace_atomically(const char *src, const char *dir, const char *name)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    size_t len;
    char *data = read_all(src, &len);
    assert_non_null(data);
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
    snprintf(dst, sizeof(dst), "%s/%s", dir, name);
    write_all(tmp, data, len);
    free(data);
    assert_int_equal(rename(tmp, dst), 0);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void rm_rf(const char *dir)
{
    if (dir && dir[0])
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static char *make_tmpdir(void)
{
    char *d = xstrdup("/tmp/hv-it-XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

/* ---- the server as a child process ---- */

struct server {
    pid_t pid;
    unsigned port;
    char dir[PATH_MAX];
    char log[PATH_MAX];
};

static void print_log(const struct server *s)
{
    char *log = read_all(s->log, NULL);
    if (log) {
        fprintf(stderr, "---- hvupdater log (%s) ----\n%s---- end of log ----\n", s->log, log);
        free(log);
    }
}

/* Start `hvupdater serve` with its files in dir and extra args; 0 when it is listening. */
static int server_start(struct server *s, const char *dir, const char *const *extra)
{
    char port_file[PATH_MAX];
    const char *argv[32];
    size_t n = 0;
    memset(s, 0, sizeof(*s));
    snprintf(s->dir, sizeof(s->dir), "%s", dir);
    snprintf(s->log, sizeof(s->log), "%s/server.log", dir);
    snprintf(port_file, sizeof(port_file), "%s/port", dir);
    unlink(port_file);
    argv[n++] = hv_bin;
    argv[n++] = "serve";
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--port-file";
    argv[n++] = port_file;
    for (size_t k = 0; extra && extra[k] && n < 31; k++)
        argv[n++] = extra[k];
    argv[n] = NULL;

    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        signal(SIGPIPE, SIG_DFL);
        execv(hv_bin, (char *const *)argv);
        _exit(127);
    }
    s->pid = pid;
    double deadline = now_s() + 15;
    while (now_s() < deadline) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            fprintf(stderr, "hvupdater exited early (status 0x%x)\n", st);
            print_log(s);
            s->pid = 0;
            return -1;
        }
        char *text = read_all(port_file, NULL);
        if (text && strchr(text, '\n')) {
            s->port = (unsigned)strtoul(text, NULL, 10);
            free(text);
            if (s->port > 0 && s->port < 65536)
                return 0;
            break;
        }
        free(text);
        sleep_s(0.02);
    }
    fprintf(stderr, "hvupdater did not write its port file in time\n");
    print_log(s);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    s->pid = 0;
    return -1;
}

/* SIGTERM, then wait up to timeout_s. Returns the exit code, or -1 when it was killed by a
 * signal or had to be killed because it did not stop in time. */
static int server_stop(struct server *s, double timeout_s, double *took)
{
    if (s->pid <= 0)
        return -1;
    double t0 = now_s();
    kill(s->pid, SIGTERM);
    int st = 0;
    pid_t w = 0;
    while ((w = waitpid(s->pid, &st, WNOHANG)) == 0 && now_s() - t0 < timeout_s)
        sleep_s(0.01);
    if (took)
        *took = now_s() - t0;
    if (w == 0) {
        fprintf(stderr, "hvupdater did not exit within %.1f s of SIGTERM\n", timeout_s);
        kill(s->pid, SIGKILL);
        waitpid(s->pid, &st, 0);
        s->pid = 0;
        print_log(s);
        return -1;
    }
    s->pid = 0;
    if (WIFEXITED(st)) {
        if (WEXITSTATUS(st) != 0)
            print_log(s);
        return WEXITSTATUS(st);
    }
    fprintf(stderr, "hvupdater died of signal %d\n", WTERMSIG(st));
    print_log(s);
    return -1;
}

/* Make a self-signed CA + serving pair in dir/tls by running the server once there. */
static void mint_pair(const char *dir)
{
    struct server s;
    char tls[PATH_MAX];
    snprintf(tls, sizeof(tls), "%s/tls", dir);
    const char *extra[] = {"--cert-dir", tls, "--log-level", "warn", NULL};
    assert_int_equal(server_start(&s, dir, extra), 0);
    assert_int_equal(server_stop(&s, 5, NULL), 0);
}

/* ---- the HTTPS client ---- */

struct client {
    CURL *h;
    struct curl_slist *resolve;
    char ca[PATH_MAX];
    char host[64];
    unsigned port;
};

struct resp {
    CURLcode rc;
    long code;
    char *body;
    size_t len;
    char allow[128];
    char ctype[128];
    char connection[64];
    long connects; /* new connections made for this request (0: a kept-alive one was reused) */
    char err[CURL_ERROR_SIZE];
};

static void resp_free(struct resp *r)
{
    free(r->body);
    memset(r, 0, sizeof(*r));
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct resp *r = ud;
    size_t add = size * n;
    char *nb = realloc(r->body, r->len + add + 1);
    if (!nb)
        return 0;
    memcpy(nb + r->len, p, add);
    r->body = nb;
    r->len += add;
    r->body[r->len] = '\0';
    return add;
}

static void header_value(char *out, size_t cap, const char *line, size_t len, const char *name)
{
    size_t nl = strlen(name);
    if (len <= nl || strncasecmp(line, name, nl) != 0)
        return;
    const char *v = line + nl;
    size_t vl = len - nl;
    while (vl && (*v == ' ' || *v == '\t'))
        v++, vl--;
    while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
        vl--;
    snprintf(out, cap, "%.*s", (int)vl, v);
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    struct resp *r = ud;
    size_t len = size * n;
    if (len >= 5 && !strncmp(p, "HTTP/", 5)) { /* a new response (e.g. after 100 Continue) */
        r->allow[0] = r->ctype[0] = r->connection[0] = '\0';
    }
    header_value(r->allow, sizeof(r->allow), p, len, "Allow:");
    header_value(r->ctype, sizeof(r->ctype), p, len, "Content-Type:");
    header_value(r->connection, sizeof(r->connection), p, len, "Connection:");
    return len;
}

static void client_init(struct client *c, const char *ca, const char *host, unsigned port)
{
    memset(c, 0, sizeof(*c));
    c->h = curl_easy_init();
    assert_non_null(c->h);
    snprintf(c->ca, sizeof(c->ca), "%s", ca);
    snprintf(c->host, sizeof(c->host), "%s", host);
    c->port = port;
    char r[128];
    snprintf(r, sizeof(r), "%s:%u:127.0.0.1", host, port);
    c->resolve = curl_slist_append(NULL, r);
    assert_non_null(c->resolve);
}

static void client_free(struct client *c)
{
    if (c->h)
        curl_easy_cleanup(c->h);
    curl_slist_free_all(c->resolve);
    memset(c, 0, sizeof(*c));
}

/* Reset per-request options (kept: live connections and caches) and apply the base ones:
 * verified TLS >= 1.2 against c->ca only, the name c->host resolving to 127.0.0.1. */
static CURL *prep(struct client *c, const char *path, struct resp *r)
{
    CURL *h = c->h;
    char url[1024];
    memset(r, 0, sizeof(*r));
    curl_easy_reset(h);
    snprintf(url, sizeof(url), "https://%s:%u%s", c->host, c->port, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_RESOLVE, c->resolve);
    curl_easy_setopt(h, CURLOPT_CAINFO, c->ca);
    curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->err);
    return h;
}

static void perform(struct client *c, struct resp *r)
{
    r->rc = curl_easy_perform(c->h);
    curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &r->code);
    curl_easy_getinfo(c->h, CURLINFO_NUM_CONNECTS, &r->connects);
    if (!r->body) {
        r->body = calloc(1, 1);
        assert_non_null(r->body);
    }
    if (r->rc != CURLE_OK && getenv("HV_IT_VERBOSE"))
        fprintf(stderr, "curl: %s (%s)\n", curl_easy_strerror(r->rc), r->err);
}

static struct curl_slist *json_headers(void)
{
    struct curl_slist *hs = curl_slist_append(NULL, "Content-Type: application/json");
    assert_non_null(hs);
    return hs;
}

/* method: GET, HEAD, POST or any other verb (sent without a body unless POST). */
static void call_hdr(struct client *c, const char *method, const char *path, const char *body,
                     size_t len, const char *extra_header, struct resp *r)
{
    CURL *h = prep(c, path, r);
    struct curl_slist *hs = NULL;
    if (!strcmp(method, "POST")) {
        hs = json_headers();
        if (extra_header)
            hs = curl_slist_append(hs, extra_header);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
    } else if (!strcmp(method, "HEAD")) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    }
    perform(c, r);
    curl_slist_free_all(hs);
}

static void call(struct client *c, const char *method, const char *path, const char *body,
                 size_t len, struct resp *r)
{
    call_hdr(c, method, path, body, len, NULL, r);
}

static void post(struct client *c, const char *path, const char *body, struct resp *r)
{
    call(c, "POST", path, body, strlen(body), r);
}

static void get(struct client *c, const char *path, struct resp *r)
{
    call(c, "GET", path, NULL, 0, r);
}

/* A chunked POST (Transfer-Encoding: chunked, no Content-Length) streaming len bytes of body. */
struct src {
    const char *p;
    size_t len, off, step;
};

static size_t on_read(char *buf, size_t size, size_t n, void *ud)
{
    struct src *s = ud;
    size_t want = size * n, left = s->len - s->off;
    if (want > s->step)
        want = s->step;
    if (want > left)
        want = left;
    memcpy(buf, s->p + s->off, want);
    s->off += want;
    return want;
}

static void post_chunked(struct client *c, const char *path, const char *body, size_t len,
                         struct resp *r)
{
    CURL *h = prep(c, path, r);
    struct curl_slist *hs = json_headers();
    hs = curl_slist_append(hs, "Transfer-Encoding: chunked");
    struct src s = {body, len, 0, 16384};
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(h, CURLOPT_READDATA, &s);
    perform(c, r);
    curl_slist_free_all(hs);
}

/* ---- JSON: yajl trees, requests built from fixtures, answers saved for the schemas ---- */

static yajl_val parse_json(const char *text)
{
    char err[256];
    yajl_val v = yajl_tree_parse(text, err, sizeof(err));
    if (!v)
        fprintf(stderr, "not JSON (%s): %.300s\n", err, text);
    assert_non_null(v);
    return v;
}

static yajl_val jget(yajl_val v, const char *k1, const char *k2, const char *k3)
{
    const char *path[] = {k1, k2, k3, NULL};
    return yajl_tree_get(v, path, yajl_t_any);
}

static const char *jstr(yajl_val v, const char *k1, const char *k2)
{
    yajl_val s = jget(v, k1, k2, NULL);
    return YAJL_IS_STRING(s) ? YAJL_GET_STRING(s) : NULL;
}

/* RFC 6901 lookup in a yajl tree. */
static yajl_val jptr(yajl_val v, const char *ptr)
{
    if (!*ptr)
        return v;
    if (*ptr != '/')
        return NULL;
    char tok[256];
    while (v && *ptr == '/') {
        ptr++;
        size_t n = 0;
        while (*ptr && *ptr != '/' && n + 1 < sizeof(tok)) {
            if (ptr[0] == '~' && ptr[1] == '1')
                tok[n++] = '/', ptr += 2;
            else if (ptr[0] == '~' && ptr[1] == '0')
                tok[n++] = '~', ptr += 2;
            else
                tok[n++] = *ptr++;
        }
        tok[n] = '\0';
        if (YAJL_IS_OBJECT(v)) {
            yajl_val next = NULL;
            for (size_t k = 0; k < v->u.object.len; k++)
                if (!strcmp(v->u.object.keys[k], tok))
                    next = v->u.object.values[k];
            v = next;
        } else if (YAJL_IS_ARRAY(v)) {
            char *end;
            unsigned long i = strtoul(tok, &end, 10);
            v = (*tok && !*end && i < v->u.array.len) ? v->u.array.values[i] : NULL;
        } else {
            v = NULL;
        }
    }
    return v;
}

/* The literal text of a scalar, as the server wrote it (numbers keep 8192 vs 8192.0). */
static void scalar_text(yajl_val v, char *out, size_t cap)
{
    if (YAJL_IS_NUMBER(v))
        snprintf(out, cap, "%s", YAJL_GET_NUMBER(v));
    else if (YAJL_IS_STRING(v))
        snprintf(out, cap, "\"%s\"", YAJL_GET_STRING(v));
    else if (YAJL_IS_TRUE(v))
        snprintf(out, cap, "true");
    else if (YAJL_IS_FALSE(v))
        snprintf(out, cap, "false");
    else if (YAJL_IS_NULL(v))
        snprintf(out, cap, "null");
    else
        snprintf(out, cap, "<%s>", YAJL_IS_OBJECT(v) ? "object" : v ? "array" : "absent");
}

static bool skipped(const char *path, const char *const *skip)
{
    for (size_t k = 0; skip && skip[k]; k++)
        if (!strcmp(path, skip[k]))
            return true;
    return false;
}

static void emit(yajl_gen g, yajl_val v, const char *path, const char *const *skip)
{
    char sub[512];
    switch (v->type) {
    case yajl_t_object:
        yajl_gen_map_open(g);
        for (size_t k = 0; k < v->u.object.len; k++) {
            const char *key = v->u.object.keys[k];
            snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "", key);
            if (skipped(sub, skip))
                continue;
            yajl_gen_string(g, (const unsigned char *)key, strlen(key));
            emit(g, v->u.object.values[k], sub, skip);
        }
        yajl_gen_map_close(g);
        break;
    case yajl_t_array:
        yajl_gen_array_open(g);
        for (size_t k = 0; k < v->u.array.len; k++)
            emit(g, v->u.array.values[k], path, skip);
        yajl_gen_array_close(g);
        break;
    case yajl_t_string:
        yajl_gen_string(g, (const unsigned char *)v->u.string, strlen(v->u.string));
        break;
    case yajl_t_number:
        yajl_gen_number(g, v->u.number.r, strlen(v->u.number.r));
        break;
    case yajl_t_true:
        yajl_gen_bool(g, 1);
        break;
    case yajl_t_false:
        yajl_gen_bool(g, 0);
        break;
    default:
        yajl_gen_null(g);
        break;
    }
}

static char *fixture_path(const char *name)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/test/fixtures/%s.json", src_dir, name);
    return xstrdup(p);
}

static yajl_val load_fixture(const char *name)
{
    char *p = fixture_path(name);
    char *text = read_all(p, NULL);
    if (!text)
        fprintf(stderr, "cannot read %s\n", p);
    assert_non_null(text);
    yajl_val v = parse_json(text);
    free(text);
    free(p);
    return v;
}

/* A request: {"apiVersion": API, "kind": kind, <fixture members minus skip>} (skip holds
 * dotted paths such as "current" or "desired.infrastructureMachine"). */
static char *build_request(const char *fixture, const char *kind, const char *const *skip)
{
    yajl_val fx = load_fixture(fixture);
    yajl_gen g = yajl_gen_alloc(NULL);
    assert_non_null(g);
    yajl_gen_map_open(g);
    yajl_gen_string(g, (const unsigned char *)"apiVersion", 10);
    yajl_gen_string(g, (const unsigned char *)API, strlen(API));
    yajl_gen_string(g, (const unsigned char *)"kind", 4);
    yajl_gen_string(g, (const unsigned char *)kind, strlen(kind));
    for (size_t k = 0; k < fx->u.object.len; k++) {
        const char *key = fx->u.object.keys[k];
        if (skipped(key, skip))
            continue;
        yajl_gen_string(g, (const unsigned char *)key, strlen(key));
        emit(g, fx->u.object.values[k], key, skip);
    }
    yajl_gen_map_close(g);
    const unsigned char *buf;
    size_t len;
    assert_int_equal(yajl_gen_get_buf(g, &buf, &len), yajl_gen_status_ok);
    char *out = malloc(len + 1);
    assert_non_null(out);
    memcpy(out, buf, len);
    out[len] = '\0';
    yajl_gen_free(g);
    yajl_tree_free(fx);
    return out;
}

/* A request built from a libvirt fixture, for test:///default's domain "test" instead of the
 * fixture's hvt-dimm (which exists only in the QEMU lab). */
static char *on_test_domain(char *req)
{
    static const char from[] = "hvt-dimm";
    char *out = malloc(strlen(req) + 1);
    assert_non_null(out);
    char *o = out;
    for (const char *p = req; *p;) {
        if (!strncmp(p, from, sizeof(from) - 1)) {
            memcpy(o, "test", 4);
            o += 4;
            p += sizeof(from) - 1;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    free(req);
    return out;
}

static void save_answer(const char *schema, const char *name, const struct resp *r)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s.%s.json", answers_dir, schema, name);
    write_all(p, r->body, r->len);
}

static int b64val(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Strict padded standard base64 (what Go's encoding/json expects for []byte). */
static char *b64_decode(const char *in)
{
    size_t n = strlen(in);
    if (n % 4)
        return NULL;
    char *out = malloc(n / 4 * 3 + 1);
    assert_non_null(out);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            v[k] = in[i + k] == '=' ? -2 : b64val((unsigned char)in[i + k]);
            if (v[k] == -1 || (v[k] == -2 && (i + 4 < n || k < 2)) ||
                (k == 3 && v[2] == -2 && v[3] != -2)) {
                free(out);
                return NULL;
            }
        }
        out[o++] = (char)((v[0] << 2) | (v[1] >> 4));
        if (v[2] >= 0)
            out[o++] = (char)(((v[1] & 15) << 4) | (v[2] >> 2));
        if (v[3] >= 0)
            out[o++] = (char)(((v[2] & 3) << 6) | v[3]);
    }
    out[o] = '\0';
    return out;
}

/* ---- checks shared by the tests ---- */

static void expect_json_200(const struct resp *r)
{
    if (r->rc != CURLE_OK || r->code != 200)
        fprintf(stderr, "want 200, got rc=%d (%s) code=%ld body=%.300s\n", r->rc, r->err, r->code,
                r->body ? r->body : "");
    assert_int_equal(r->rc, CURLE_OK);
    assert_int_equal(r->code, 200);
    assert_string_equal(r->ctype, "application/json");
}

/* An HTTP error: code, the one-line plain-text reason (prefix match when want ends in '*'). */
static void expect_error(const struct resp *r, long code, const char *want)
{
    if (r->rc != CURLE_OK || r->code != code)
        fprintf(stderr, "want %ld, got rc=%d (%s) code=%ld body=%.300s\n", code, r->rc, r->err,
                r->code, r->body ? r->body : "");
    assert_int_equal(r->rc, CURLE_OK);
    assert_int_equal(r->code, code);
    assert_true(!strncmp(r->ctype, "text/plain", 10));
    /* exactly one line, newline-terminated */
    assert_true(r->len > 1);
    assert_int_equal(r->body[r->len - 1], '\n');
    assert_null(memchr(r->body, '\n', r->len - 1));
    size_t wl = strlen(want);
    if (wl && want[wl - 1] == '*')
        assert_memory_equal(r->body, want, wl - 1);
    else {
        assert_int_equal(r->len, wl + 1);
        assert_memory_equal(r->body, want, wl);
    }
}

/* Parse a hook answer and check its envelope; returns the tree (caller frees). */
static yajl_val expect_answer(const struct resp *r, const char *kind, const char *status)
{
    expect_json_200(r);
    yajl_val v = parse_json(r->body);
    assert_true(YAJL_IS_OBJECT(v));
    assert_string_equal(jstr(v, "apiVersion", NULL), API);
    assert_string_equal(jstr(v, "kind", NULL), kind);
    if (status)
        assert_string_equal(jstr(v, "status", NULL), status);
    return v;
}

/* Check patch field of answer: JSONPatch, base64 of a JSON array of replace ops, each taking
 * the exact literal desired value at its path (present in current too); n_ops ops on paths. */
static void expect_patch(yajl_val answer, const char *field, yajl_val cur, yajl_val des,
                         const char *const *paths)
{
    yajl_val p = jget(answer, field, NULL, NULL);
    assert_true(YAJL_IS_OBJECT(p));
    assert_string_equal(jstr(p, "patchType", NULL), "JSONPatch");
    const char *b64 = jstr(p, "patch", NULL);
    assert_non_null(b64);
    char *text = b64_decode(b64);
    if (!text)
        fprintf(stderr, "patch is not padded base64: %s\n", b64);
    assert_non_null(text);
    yajl_val ops = parse_json(text);
    assert_true(YAJL_IS_ARRAY(ops));
    size_t n = 0;
    while (paths[n])
        n++;
    if (ops->u.array.len != n)
        fprintf(stderr, "%s: want %zu ops, got %s\n", field, n, text);
    assert_int_equal(ops->u.array.len, n);
    for (size_t k = 0; k < n; k++) {
        yajl_val op = ops->u.array.values[k];
        assert_true(YAJL_IS_OBJECT(op));
        assert_string_equal(jstr(op, "op", NULL), "replace");
        const char *path = jstr(op, "path", NULL);
        assert_non_null(path);
        assert_string_equal(path, paths[k]);
        char got[128], want[128];
        scalar_text(jget(op, "value", NULL, NULL), got, sizeof(got));
        scalar_text(jptr(des, path), want, sizeof(want));
        assert_string_equal(got, want);
        assert_non_null(jptr(cur, path)); /* "replace" needs the member to exist */
    }
    yajl_tree_free(ops);
    free(text);
}

/* ---- group: answers (hook happy paths and Failure answers; saved for the schemas) ---- */

static struct server g_srv;
static char *g_dir;
static char g_ca[PATH_MAX];
static struct client g_cl;

/* A config naming the fixtures' vCenter (vcenter.example.com), so that the vSphere fixtures
 * are planned as they would be in production. Its URL is a closed local port: CanUpdateMachine,
 * which asks the VM for what UpdateMachine would refuse, answers a retryable Failure for them
 * (never a cover it cannot check); CanUpdateMachineSet names no VM and covers them. libvirt
 * stays the embedded default, test:///default, whose domain "test" CanUpdateMachine and
 * UpdateMachine can really observe: the libvirt fixtures are sent for it (on_test_domain). */
static void write_config(const char *dir, char *path, size_t cap)
{
    char u[PATH_MAX], pw[PATH_MAX], text[3 * PATH_MAX];
    snprintf(u, sizeof(u), "%s/vsphere-username", dir);
    snprintf(pw, sizeof(pw), "%s/vsphere-password", dir);
    write_all(u, "hvupdater\n", 10);
    write_all(pw, "not-a-secret\n", 13);
    int n = snprintf(text, sizeof(text),
                     "{\"handlerTimeoutSeconds\": 10,\n"
                     " \"libvirt\": {\"uris\": [\"test:///default\"]},\n"
                     " \"vsphere\": {\"servers\": [{\"name\": \"vcenter.example.com\",\n"
                     "   \"url\": \"https://127.0.0.1:9/sdk\",\n"
                     "   \"usernameFile\": \"%s\", \"passwordFile\": \"%s\"}]}}\n",
                     u, pw);
    assert_true(n > 0 && (size_t)n < sizeof(text));
    snprintf(path, cap, "%s/config.json", dir);
    write_all(path, text, (size_t)n);
}

static int start_default_server(void **state)
{
    g_dir = make_tmpdir();
    char tls[PATH_MAX], config[PATH_MAX];
    snprintf(tls, sizeof(tls), "%s/tls", g_dir);
    snprintf(g_ca, sizeof(g_ca), "%s/ca.crt", tls);
    write_config(g_dir, config, sizeof(config));
    const char *extra[] = {"--config",
                           config,
                           "--cert-dir",
                           tls,
                           "--max-body-bytes",
                           MAX_BODY_STR,
                           "--threads",
                           "2",
                           "--log-level",
                           getenv("HV_IT_VERBOSE") ? "debug" : "info",
                           NULL};
    if (server_start(&g_srv, g_dir, extra) < 0)
        return -1;
    client_init(&g_cl, g_ca, "localhost", g_srv.port);
    return 0;
}

/* The client keeps an idle keep-alive connection open across the stop, as CAPI would. */
static int stop_default_server(void **state)
{
    double took = 0;
    int rc = server_stop(&g_srv, 5, &took);
    client_free(&g_cl);
    if (rc != 0)
        fprintf(stderr, "hvupdater exit status %d after SIGTERM (%.2f s)\n", rc, took);
    if (rc == 0)
        rm_rf(g_dir);
    free(g_dir);
    g_dir = NULL;
    return rc == 0 ? 0 : -1;
}

static int answers_setup(void **state)
{
    if (mkdir(answers_dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "cannot create %s: %s\n", answers_dir, strerror(errno));
        return -1;
    }
    DIR *d = opendir(answers_dir);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) { /* no stale answers from an older run */
        size_t n = strlen(e->d_name);
        if (n > 5 && !strcmp(e->d_name + n - 5, ".json")) {
            char p[PATH_MAX];
            snprintf(p, sizeof(p), "%s/%s", answers_dir, e->d_name);
            unlink(p);
        }
    }
    closedir(d);
    return start_default_server(state);
}

static void check_discovery(const struct resp *r)
{
    yajl_val v = expect_answer(r, "DiscoveryResponse", "Success");
    yajl_val hs = jget(v, "handlers", NULL, NULL);
    assert_true(YAJL_IS_ARRAY(hs));
    assert_int_equal(hs->u.array.len, 3);
    static const char *const names[] = {"can-update-machine", "can-update-machine-set",
                                        "update-machine"};
    static const char *const hooks[] = {"CanUpdateMachine", "CanUpdateMachineSet", "UpdateMachine"};
    for (size_t k = 0; k < 3; k++) {
        yajl_val h = hs->u.array.values[k];
        assert_string_equal(jstr(h, "name", NULL), names[k]);
        assert_string_equal(jstr(h, "requestHook", "apiVersion"), API);
        assert_string_equal(jstr(h, "requestHook", "hook"), hooks[k]);
        yajl_val t = jget(h, "timeoutSeconds", NULL, NULL);
        assert_true(YAJL_IS_INTEGER(t));
        assert_true(YAJL_GET_INTEGER(t) >= 1 && YAJL_GET_INTEGER(t) <= 30);
        assert_string_equal(jstr(h, "failurePolicy", NULL), "Fail");
    }
    yajl_tree_free(v);
}

static void test_discovery(void **state)
{
    static const char *const req = "{\"apiVersion\":\"" API "\",\"kind\":\"DiscoveryRequest\"}";
    struct resp r;
    post(&g_cl, P_DISCOVERY, req, &r);
    check_discovery(&r);
    save_answer("discovery-response", "plain", &r);
    resp_free(&r);

    post(&g_cl, P_DISCOVERY "?timeout=10s", req, &r); /* exactly as CAPI calls it */
    check_discovery(&r);
    assert_int_equal(r.connects, 0); /* kept alive */
    save_answer("discovery-response", "timeout", &r);
    resp_free(&r);

    post(&g_cl, "/" API "/DISCOVERY?timeout=10s", req, &r);
    check_discovery(&r);
    save_answer("discovery-response", "upper-case", &r);
    resp_free(&r);

    post(&g_cl, P_DISCOVERY, "", &r); /* discovery needs nothing from its body */
    check_discovery(&r);
    resp_free(&r);
}

struct cum_case {
    const char *fixture;
    const char *message_part; /* must occur in the message */
    const char *paths[4];     /* the patch's replace ops, in order; none: no patch at all */
    const char *status;       /* NULL: Success */
};

static void run_can_update(bool set, const struct cum_case *cases, size_t n)
{
    const char *kind = set ? "CanUpdateMachineSetRequest" : "CanUpdateMachineRequest";
    const char *rkind = set ? "CanUpdateMachineSetResponse" : "CanUpdateMachineResponse";
    const char *infra = set ? "infrastructureMachineTemplate" : "infrastructureMachine";
    const char *field = set ? "infrastructureMachineTemplatePatch" : "infrastructureMachinePatch";
    static const char *const others[][2] = {{"machinePatch", "bootstrapConfigPatch"},
                                            {"machineSetPatch", "bootstrapConfigTemplatePatch"}};
    for (size_t k = 0; k < n; k++) {
        const struct cum_case *c = &cases[k];
        char *req = build_request(c->fixture, kind, NULL);
        if (!strncmp(c->fixture, "lvm-", 4))
            req = on_test_domain(req);
        yajl_val fx = load_fixture(c->fixture);
        struct resp r;
        post(&g_cl, set ? P_CUMS "?timeout=10s" : P_CUM "?timeout=10s", req, &r);
        yajl_val v = expect_answer(&r, rkind, c->status ? c->status : "Success");
        const char *msg = jstr(v, "message", NULL);
        if (!msg || !strstr(msg, c->message_part))
            fprintf(stderr, "%s: message %s lacks \"%s\"\n", c->fixture, msg ? msg : "(none)",
                    c->message_part);
        assert_true(msg && strstr(msg, c->message_part));
        if (c->paths[0])
            expect_patch(v, field, jget(fx, "current", infra, NULL),
                         jget(fx, "desired", infra, NULL), c->paths);
        else
            assert_null(jget(v, field, NULL, NULL));
        assert_null(jget(v, others[set][0], NULL, NULL));
        assert_null(jget(v, others[set][1], NULL, NULL));
        save_answer(set ? "can-update-machine-set-response" : "can-update-machine-response",
                    c->fixture, &r);
        /* deterministic: the same request gets the very same answer */
        struct resp again;
        post(&g_cl, set ? P_CUMS : P_CUM, req, &again);
        assert_int_equal(again.code, 200);
        assert_int_equal(again.len, r.len);
        assert_memory_equal(again.body, r.body, r.len);
        resp_free(&again);
        yajl_tree_free(v);
        yajl_tree_free(fx);
        resp_free(&r);
        free(req);
    }
}

static void test_can_update_machine(void **state)
{
#define CANNOT_CHECK "cannot check the change on this VM: the hypervisor cannot be reached; retry"
    static const struct cum_case cases[] = {
        /* the fixtures' vCenter cannot be reached: a retryable Failure, never a cover */
        {"vsm-memory-grow", CANNOT_CHECK, {NULL}, "Failure"},
        {"vsm-memory-cpu-grow", CANNOT_CHECK, {NULL}, "Failure"},
        {"vsm-cores", CANNOT_CHECK, {NULL}, "Failure"},
        {"vsm-shrink", CANNOT_CHECK, {NULL}, "Failure"},
        {"vsm-float-memory", CANNOT_CHECK, {NULL}, "Failure"},
        {"vsm-v1beta2-grow", CANNOT_CHECK, {NULL}, "Failure"},
        {"vsm-disk", CANNOT_CHECK, {NULL}, "Failure"},
        {"vsm-disk-shrink", CANNOT_CHECK, {NULL}, "Failure"},
        {"vsm-version-and-memory", CANNOT_CHECK, {NULL}, "Failure"},
        /* no hardware differs: no VM to ask */
        {"vsm-bootstrap-files", "bootstrapConfig.spec.files", {NULL}, NULL},
        /* test:///default's domain "test" (2048 MiB, 2 vCPUs) */
        {"lvm-grow", "memoryMiB 1024->2048", {"/spec/memoryMiB", "/spec/vcpu"}, NULL},
        {"lvm-shrink", "vcpu 3->1", {"/spec/memoryMiB", "/spec/vcpu"}, NULL},
        {"unknown-kind", "FooMachine", {NULL}, NULL},
    };
    run_can_update(false, cases, sizeof(cases) / sizeof(cases[0]));

    /* the float literal must go out as written: Kubernetes compares 2048 != 2048.0 */
    char *req = on_test_domain(build_request("lvm-grow", "CanUpdateMachineRequest", NULL));
    char *at = strstr(req, "\"memoryMiB\":2048");
    assert_non_null(at);
    char *freq = NULL;
    assert_true(asprintf(&freq, "%.*s\"memoryMiB\":2048.0%s", (int)(at - req), req,
                         at + strlen("\"memoryMiB\":2048")) > 0);
    struct resp r;
    post(&g_cl, P_CUM, freq, &r);
    free(freq);
    yajl_val v = expect_answer(&r, "CanUpdateMachineResponse", "Success");
    char *text = b64_decode(jstr(v, "infrastructureMachinePatch", "patch"));
    assert_non_null(text);
    assert_string_equal(text, "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":"
                              "2048.0},{\"op\":\"replace\",\"path\":\"/spec/vcpu\",\"value\":3}]");
    free(text);
    yajl_tree_free(v);
    resp_free(&r);

    /* upper-case hook and handler segments route the same */
    post(&g_cl, "/" API "/CanUpdateMachine/Can-Update-Machine?timeout=10s", req, &r);
    v = expect_answer(&r, "CanUpdateMachineResponse", "Success");
    text = b64_decode(jstr(v, "infrastructureMachinePatch", "patch"));
    assert_non_null(text);
    assert_string_equal(text, "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":"
                              "2048},{\"op\":\"replace\",\"path\":\"/spec/vcpu\",\"value\":3}]");
    free(text);
    yajl_tree_free(v);
    resp_free(&r);
    free(req);
}

static void test_can_update_machine_set(void **state)
{
    static const struct cum_case cases[] = {
        {"vsmt-memory-cpu-grow",
         "memoryMiB 4096->8192",
         {"/spec/template/spec/memoryMiB", "/spec/template/spec/numCPUs"},
         NULL},
        {"vsmt-shrink",
         "numCPUs 4->2",
         {"/spec/template/spec/memoryMiB", "/spec/template/spec/numCPUs"},
         NULL},
        {"vsmt-version", "machineSet.spec.template.spec.version", {NULL}, NULL},
    };
    run_can_update(true, cases, sizeof(cases) / sizeof(cases[0]));
}

/* UpdateMachine against the embedded libvirt test:///default driver, whose domain "test" has
 * 2048 MiB and 2 vCPUs: the first answer is "in progress" (retryAfterSeconds > 0), then "done"
 * (Success, 0), and every later call answers the same. */
static char *um_request(const char *vm, int memory_mib, int vcpu)
{
    char *out = NULL;
    int n = asprintf(
        &out,
        "{\"apiVersion\":\"" API "\",\"kind\":\"UpdateMachineRequest\",\"desired\":{"
        "\"machine\":{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\","
        "\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\"},"
        "\"spec\":{\"clusterName\":\"c1\",\"version\":\"v1.31.0\","
        "\"bootstrap\":{\"configRef\":{\"apiGroup\":\"bootstrap.cluster.x-k8s.io\","
        "\"kind\":\"KubeadmConfig\",\"name\":\"%s\"}},"
        "\"infrastructureRef\":{\"apiGroup\":\"infrastructure.cluster.x-k8s.io\","
        "\"kind\":\"LibvirtMachine\",\"name\":\"%s\"}}},"
        "\"infrastructureMachine\":{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1alpha1\","
        "\"kind\":\"LibvirtMachine\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\"},"
        "\"spec\":{\"memoryMiB\":%d,\"vcpu\":%d}},"
        "\"bootstrapConfig\":{\"apiVersion\":\"bootstrap.cluster.x-k8s.io/v1beta2\","
        "\"kind\":\"KubeadmConfig\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\"},"
        "\"spec\":{}}}}",
        vm, vm, vm, vm, memory_mib, vcpu, vm);
    assert_true(n > 0);
    return out;
}

static void test_update_machine(void **state)
{
    char *req = um_request("test", 2048, 2);
    struct resp r;
    bool saw_progress = false, done = false;
    double t0 = now_s();
    while (!done && now_s() - t0 < 10) {
        post(&g_cl, P_UM "?timeout=10s", req, &r);
        yajl_val v = expect_answer(&r, "UpdateMachineResponse", NULL);
        const char *st = jstr(v, "status", NULL), *msg = jstr(v, "message", NULL);
        yajl_val ra = jget(v, "retryAfterSeconds", NULL, NULL);
        assert_true(YAJL_IS_INTEGER(ra)); /* always present, an int32 */
        if (!st || strcmp(st, "Success"))
            fprintf(stderr, "UpdateMachine: %s\n", r.body);
        assert_string_equal(st, "Success");
        assert_non_null(msg);
        if (YAJL_GET_INTEGER(ra) > 0) {
            assert_true(YAJL_GET_INTEGER(ra) <= 3600);
            if (!saw_progress)
                save_answer("update-machine-response", "in-progress", &r);
            saw_progress = true;
            sleep_s(0.2 * (double)YAJL_GET_INTEGER(ra)); /* retryAfterSeconds, scaled down */
        } else {
            assert_int_equal(YAJL_GET_INTEGER(ra), 0);
            assert_true(!strncmp(msg, "done", 4));
            save_answer("update-machine-response", "done", &r);
            done = true;
        }
        yajl_tree_free(v);
        resp_free(&r);
    }
    assert_true(done);
    /* idempotent after completion: each call after a "done" first looks at the VM again
     * ("in progress: observing the VM", retryAfterSeconds 1), then answers the same done;
     * called the way CAPI does (after retryAfterSeconds, scaled down) */
    for (int k = 0; k < 3; k++) {
        bool again = false;
        t0 = now_s();
        while (!again && now_s() - t0 < 10) {
            post(&g_cl, P_UM, req, &r);
            yajl_val v = expect_answer(&r, "UpdateMachineResponse", "Success");
            long long ra = YAJL_GET_INTEGER(jget(v, "retryAfterSeconds", NULL, NULL));
            const char *msg = jstr(v, "message", NULL);
            assert_non_null(msg);
            if (ra == 0) {
                assert_string_equal(
                    msg, "done: memory 2048 MiB, 2 vCPUs (vCPUs not verified in the guest)");
                again = true;
            } else {
                assert_string_equal(msg, "in progress: observing the VM");
                sleep_s(0.2 * (double)ra);
            }
            yajl_tree_free(v);
            resp_free(&r);
        }
        assert_true(again);
    }
    free(req);

    /* a VM no configured host has: a Failure that names it, the same on every call */
    req = um_request("hvt-no-such-vm", 2048, 2);
    char *first = NULL;
    t0 = now_s();
    while (now_s() - t0 < 10) {
        post(&g_cl, P_UM, req, &r);
        yajl_val v = expect_answer(&r, "UpdateMachineResponse", NULL);
        const char *st = jstr(v, "status", NULL);
        bool failed = st && !strcmp(st, "Failure");
        if (failed) {
            assert_int_equal(YAJL_GET_INTEGER(jget(v, "retryAfterSeconds", NULL, NULL)), 0);
            const char *msg = jstr(v, "message", NULL);
            assert_non_null(msg);
            assert_non_null(strstr(msg, "hvt-no-such-vm"));
            if (!first) {
                first = xstrdup(msg);
                save_answer("update-machine-response", "vm-not-found", &r);
            } else {
                assert_string_equal(msg, first);
            }
        }
        yajl_tree_free(v);
        resp_free(&r);
        if (first && failed && now_s() - t0 > 0.5)
            break;
        sleep_s(0.1);
    }
    assert_non_null(first);
    free(first);
    free(req);
}

struct failure_case {
    const char *name, *path, *schema, *fixture, *kind;
    const char *skip[3];
    const char *message;
};

static void test_failure_answers(void **state)
{
    static const struct failure_case cases[] = {
        {"wrong-kind",
         P_CUM,
         "can-update-machine-response",
         "vsm-memory-grow",
         "CanUpdateMachineSetRequest",
         {NULL},
         "request kind is not CanUpdateMachineRequest"},
        {"missing-desired",
         P_CUM,
         "can-update-machine-response",
         "vsm-memory-grow",
         "CanUpdateMachineRequest",
         {"desired", NULL},
         "request has no desired"},
        {"missing-current",
         P_CUM,
         "can-update-machine-response",
         "vsm-memory-grow",
         "CanUpdateMachineRequest",
         {"current", NULL},
         "request has no current"},
        {"missing-infra",
         P_CUM,
         "can-update-machine-response",
         "vsm-memory-grow",
         "CanUpdateMachineRequest",
         {"desired.infrastructureMachine", NULL},
         "request has no desired.infrastructureMachine"},
        {"missing-infra-spec",
         P_CUM,
         "can-update-machine-response",
         "vsm-memory-grow",
         "CanUpdateMachineRequest",
         {"current.infrastructureMachine.spec", NULL},
         "current.infrastructureMachine has no spec"},
        {"wrong-kind",
         P_CUMS,
         "can-update-machine-set-response",
         "vsmt-memory-cpu-grow",
         "CanUpdateMachineRequest",
         {NULL},
         "request kind is not CanUpdateMachineSetRequest"},
        {"missing-infra",
         P_CUMS,
         "can-update-machine-set-response",
         "vsmt-memory-cpu-grow",
         "CanUpdateMachineSetRequest",
         {"desired.infrastructureMachineTemplate", NULL},
         "request has no desired.infrastructureMachineTemplate"},
        {"missing-desired",
         P_UM,
         "update-machine-response",
         "vsm-memory-grow",
         "UpdateMachineRequest",
         {"desired", "current", NULL},
         "request has no desired"},
        {"missing-infra",
         P_UM,
         "update-machine-response",
         "vsm-memory-grow",
         "UpdateMachineRequest",
         {"current", "desired.infrastructureMachine", NULL},
         "request has no desired.infrastructureMachine"},
        {"wrong-kind",
         P_UM,
         "update-machine-response",
         "vsm-memory-grow",
         "CanUpdateMachineRequest",
         {"current", NULL},
         "request kind is not UpdateMachineRequest"},
        {"unknown-kind",
         P_UM,
         "update-machine-response",
         "unknown-kind",
         "UpdateMachineRequest",
         {"current", NULL},
         "no hvupdater profile for FooMachine infrastructure.cluster.x-k8s.io/v1beta1"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const struct failure_case *c = &cases[k];
        char *req = build_request(c->fixture, c->kind, c->skip);
        struct resp r;
        post(&g_cl, c->path, req, &r);
        const char *rkind = !strcmp(c->path, P_CUM)    ? "CanUpdateMachineResponse"
                            : !strcmp(c->path, P_CUMS) ? "CanUpdateMachineSetResponse"
                                                       : "UpdateMachineResponse";
        yajl_val v = expect_answer(&r, rkind, "Failure");
        const char *msg = jstr(v, "message", NULL);
        if (!msg || strcmp(msg, c->message))
            fprintf(stderr, "%s %s: want \"%s\", got \"%s\"\n", c->schema, c->name, c->message,
                    msg ? msg : "(none)");
        assert_non_null(msg);
        assert_string_equal(msg, c->message);
        assert_null(jget(v, "infrastructureMachinePatch", NULL, NULL));
        assert_null(jget(v, "infrastructureMachineTemplatePatch", NULL, NULL));
        if (!strcmp(c->path, P_UM)) {
            yajl_val ra = jget(v, "retryAfterSeconds", NULL, NULL);
            assert_true(YAJL_IS_INTEGER(ra));
            assert_int_equal(YAJL_GET_INTEGER(ra), 0);
        }
        char name[128];
        snprintf(name, sizeof(name), "failure-%s", c->name);
        save_answer(c->schema, name, &r);
        yajl_tree_free(v);
        resp_free(&r);
        free(req);
    }
}

static void test_health(void **state)
{
    struct resp r;
    get(&g_cl, "/healthz", &r);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.body, "ok\n");
    resp_free(&r);
    get(&g_cl, "/readyz", &r);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.body, "ready\n");
    resp_free(&r);
    call(&g_cl, "HEAD", "/healthz", NULL, 0, &r);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.code, 200);
    resp_free(&r);
}

/* The value of the sample whose name+labels is exactly name, or -1. */
static double metric(const char *text, const char *name)
{
    size_t nl = strlen(name);
    const char *p = text;
    while (p && *p) {
        if (!strncmp(p, name, nl) && p[nl] == ' ')
            return strtod(p + nl + 1, NULL);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return -1;
}

static char *get_metrics(struct client *c)
{
    struct resp r;
    get(c, "/metrics", &r);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.code, 200);
    assert_true(!strncmp(r.ctype, "text/plain; version=0.0.4", 25));
    char *t = r.body;
    r.body = NULL;
    return t;
}

#define M_CUM_OK  "hvupdater_hook_calls_total{hook=\"CanUpdateMachine\",status=\"Success\"}"
#define M_CUM_BAD "hvupdater_hook_calls_total{hook=\"CanUpdateMachine\",status=\"Failure\"}"
#define M_CUM_ERR "hvupdater_hook_calls_total{hook=\"CanUpdateMachine\",status=\"Error\"}"
#define M_H_INF   "hvupdater_hook_duration_seconds_bucket{hook=\"CanUpdateMachine\",le=\"+Inf\"}"
#define M_H_CNT   "hvupdater_hook_duration_seconds_count{hook=\"CanUpdateMachine\"}"
#define M_H_SUM   "hvupdater_hook_duration_seconds_sum{hook=\"CanUpdateMachine\"}"
#define M_H_LOW   "hvupdater_hook_duration_seconds_bucket{hook=\"CanUpdateMachine\",le=\"0.0005\"}"
#define M_INFL    "hvupdater_hook_calls_in_flight"

static void test_metrics(void **state)
{
    char *before = get_metrics(&g_cl);
    double ok0 = metric(before, M_CUM_OK), bad0 = metric(before, M_CUM_BAD);
    double err0 = metric(before, M_CUM_ERR), inf0 = metric(before, M_H_INF);
    double cnt0 = metric(before, M_H_CNT);
    assert_true(ok0 >= 0 && bad0 >= 0 && err0 >= 0 && inf0 >= 0 && cnt0 >= 0);
    assert_true(metric(before, M_H_SUM) >= 0);
    assert_true(metric(before, M_H_LOW) >= 0);
    assert_true(strstr(before, "# TYPE hvupdater_hook_duration_seconds histogram\n") != NULL);
    assert_true(strstr(before, "# TYPE hvupdater_hook_calls_in_flight gauge\n") != NULL);
    assert_true(metric(before, M_INFL) == 0); /* nothing in flight while /metrics answers */

    char *req = on_test_domain(build_request("lvm-grow", "CanUpdateMachineRequest", NULL));
    char *bad = build_request("vsm-memory-grow", "CanUpdateMachineRequest",
                              (const char *const[]){"desired", NULL});
    struct resp r;
    for (int k = 0; k < 5; k++) {
        post(&g_cl, P_CUM "?timeout=10s", req, &r);
        assert_int_equal(r.code, 200);
        resp_free(&r);
    }
    for (int k = 0; k < 2; k++) {
        post(&g_cl, P_CUM, bad, &r);
        assert_int_equal(r.code, 200);
        resp_free(&r);
    }
    post(&g_cl, P_CUM, "[]", &r);
    assert_int_equal(r.code, 400);
    resp_free(&r);

    char *after = get_metrics(&g_cl);
    assert_true(metric(after, M_CUM_OK) == ok0 + 5);
    assert_true(metric(after, M_CUM_BAD) == bad0 + 2);
    assert_true(metric(after, M_CUM_ERR) == err0 + 1);
    assert_true(metric(after, M_H_INF) == inf0 + 8);
    assert_true(metric(after, M_H_CNT) == cnt0 + 8);
    assert_true(metric(after, M_INFL) == 0);
    /* buckets are cumulative and end at the count */
    double prev = -1;
    char name[256];
    static const char *const les[] = {"0.0005", "0.001", "0.0025", "0.005", "0.01",
                                      "0.025",  "0.05",  "0.1",    "0.25",  "0.5",
                                      "1",      "2.5",   "5",      "10",    "+Inf"};
    for (size_t k = 0; k < sizeof(les) / sizeof(les[0]); k++) {
        snprintf(name, sizeof(name),
                 "hvupdater_hook_duration_seconds_bucket{hook=\"CanUpdateMachine\",le=\"%s\"}",
                 les[k]);
        double v = metric(after, name);
        assert_true(v >= prev);
        prev = v;
    }
    assert_true(prev == metric(after, M_H_CNT));
    free(before);
    free(after);
    free(req);
    free(bad);
}

/* ---- group: http (errors, limits, keep-alive after errors) ---- */

static void test_not_found(void **state)
{
    struct resp r;
    static const char *const paths[] = {
        "/",
        "/nope",
        "/healthz/",
        "/" API,
        "/" API "/",
        "/" API "/discovery/extra",
        "/hooks.runtime.cluster.x-k8s.io/v1alpha2/discovery",
        "/" API "/canupdatemachine",
        "/" API "/canupdatemachine/wrong-handler",
        "/" API "/canupdatemachine/can-update-machine-set",
        "/" API "/beforeclustercreate/before-cluster-create",
    };
    for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); k++) {
        get(&g_cl, paths[k], &r);
        expect_error(&r, 404, "no such path");
        resp_free(&r);
        post(&g_cl, paths[k], "{}", &r);
        expect_error(&r, 404, "no such path");
        resp_free(&r);
    }
    /* and the connection still serves (a new one if the server closed it) */
    post(&g_cl, P_DISCOVERY, "{}", &r);
    check_discovery(&r);
    resp_free(&r);
}

static void test_method_not_allowed(void **state)
{
    struct resp r;
    static const char *const hook_paths[] = {P_DISCOVERY, P_CUM, P_CUMS, P_UM};
    for (size_t k = 0; k < 4; k++) {
        get(&g_cl, hook_paths[k], &r);
        expect_error(&r, 405, "method not allowed: use POST");
        assert_string_equal(r.allow, "POST");
        resp_free(&r);
        call(&g_cl, "PUT", hook_paths[k], NULL, 0, &r);
        expect_error(&r, 405, "method not allowed: use POST");
        assert_string_equal(r.allow, "POST");
        resp_free(&r);
    }
    static const char *const get_paths[] = {"/healthz", "/readyz", "/metrics"};
    for (size_t k = 0; k < 3; k++) {
        post(&g_cl, get_paths[k], "{}", &r);
        expect_error(&r, 405, "method not allowed: use GET");
        assert_string_equal(r.allow, "GET");
        resp_free(&r);
        call(&g_cl, "DELETE", get_paths[k], NULL, 0, &r);
        expect_error(&r, 405, "method not allowed: use GET");
        assert_string_equal(r.allow, "GET");
        resp_free(&r);
    }
    post(&g_cl, P_DISCOVERY, "{}", &r); /* after Connection: close, a new connection works */
    check_discovery(&r);
    resp_free(&r);
}

/* A JSON object of exactly n bytes: {"kind":"DiscoveryRequest"} padded with spaces. */
static char *padded_object(size_t n)
{
    static const char *const core = "{\"kind\":\"DiscoveryRequest\"";
    size_t cl = strlen(core);
    assert_true(n > cl + 1);
    char *b = malloc(n + 1);
    assert_non_null(b);
    memcpy(b, core, cl);
    memset(b + cl, ' ', n - cl - 1);
    b[n - 1] = '}';
    b[n] = '\0';
    return b;
}

static void test_too_large_content_length(void **state)
{
    struct resp r;
    char *at_limit = padded_object(MAX_BODY), *over = padded_object(MAX_BODY + 1);
    char *big = padded_object(16 * MAX_BODY);
    post(&g_cl, P_DISCOVERY, at_limit, &r); /* the limit itself is fine */
    check_discovery(&r);
    resp_free(&r);
    /* Content-Length over the limit with Expect: 100-continue: refused before the body */
    call_hdr(&g_cl, "POST", P_CUM, big, 16 * MAX_BODY, "Expect: 100-continue", &r);
    expect_error(&r, 413, "request body larger than the limit of " MAX_BODY_STR " bytes");
    resp_free(&r);
    /* Content-Length one byte over the limit, body sent at once (as Go's client does) */
    call_hdr(&g_cl, "POST", P_DISCOVERY, over, MAX_BODY + 1, "Expect:", &r);
    if (r.code != 413)
        fprintf(stderr, "body of limit+1 bytes without Expect: rc=%d (%s) code=%ld\n", r.rc, r.err,
                r.code);
    expect_error(&r, 413, "request body larger than the limit of " MAX_BODY_STR " bytes");
    resp_free(&r);
    post(&g_cl, P_DISCOVERY, "{}", &r);
    check_discovery(&r);
    resp_free(&r);
    free(at_limit);
    free(over);
    free(big);
}

/* Early answers (404, 405, 413) to a request whose large body is sent without waiting for
 * them (no Expect: 100-continue, as Go's client does): the answer must reach the client, not
 * be destroyed by a TCP reset because the server closed the connection with unread input. */
static void test_early_errors_big_body(void **state)
{
    static const struct {
        const char *path;
        long code;
    } cases[] = {{P_CUM, 413}, {"/nope", 404}, {"/healthz", 405}};
    const size_t n = 16 * MAX_BODY;
    char *big = padded_object(n);
    int lost_all = 0;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        int lost = 0;
        for (int k = 0; k < 8; k++) {
            struct resp r;
            call_hdr(&g_cl, "POST", cases[c].path, big, n, "Expect:", &r);
            if (r.code != cases[c].code) {
                if (!lost)
                    fprintf(stderr, "BUG: POST %s (%zu B): want %ld, got rc=%d (%s) code=%ld\n",
                            cases[c].path, n, cases[c].code, r.rc, r.err, r.code);
                lost++;
            }
            resp_free(&r);
        }
        if (lost)
            fprintf(stderr, "BUG: %d of 8 early %ld answers were lost to a connection reset\n",
                    lost, cases[c].code);
        lost_all += lost;
    }
    assert_int_equal(lost_all, 0);
    free(big);
}

static void test_too_large_chunked(void **state)
{
    struct resp r;
    char *small = padded_object(MAX_BODY), *big = padded_object(4 * MAX_BODY);
    post_chunked(&g_cl, P_DISCOVERY, small, MAX_BODY, &r); /* chunked itself is fine */
    check_discovery(&r);
    resp_free(&r);
    post_chunked(&g_cl, P_CUM, big, 4 * MAX_BODY, &r);
    if (r.code != 413)
        fprintf(stderr,
                "BUG: chunked body over the limit: rc=%d (%s) code=%ld: the server closes the "
                "connection without an answer instead of 413\n",
                r.rc, r.err, r.code);
    expect_error(&r, 413, "request body larger than the limit of " MAX_BODY_STR " bytes");
    resp_free(&r);
    post(&g_cl, P_DISCOVERY, "{}", &r);
    check_discovery(&r);
    resp_free(&r);
    free(small);
    free(big);
}

static void test_bad_json_keep_alive(void **state)
{
    struct resp r;
    post(&g_cl, P_DISCOVERY, "{}", &r); /* open a connection */
    check_discovery(&r);
    resp_free(&r);
    static const char *const bodies[] = {"not json", "{\"kind\":", "{} {}", "{\"a\":1,}"};
    for (size_t k = 0; k < sizeof(bodies) / sizeof(bodies[0]); k++) {
        post(&g_cl, P_CUM, bodies[k], &r);
        expect_error(&r, 400, "invalid JSON*");
        assert_int_equal(r.connects, 0);
        resp_free(&r);
        /* malformed, then valid on the very same keep-alive connection */
        char *req = on_test_domain(build_request("lvm-grow", "CanUpdateMachineRequest", NULL));
        post(&g_cl, P_CUM, req, &r);
        yajl_val v = expect_answer(&r, "CanUpdateMachineResponse", "Success");
        assert_int_equal(r.connects, 0);
        yajl_tree_free(v);
        resp_free(&r);
        free(req);
    }
    static const char *const not_objects[] = {"[]", "[{\"kind\":\"CanUpdateMachineRequest\"}]",
                                              "\"CanUpdateMachineRequest\"", "42", "null"};
    for (size_t k = 0; k < sizeof(not_objects) / sizeof(not_objects[0]); k++) {
        post(&g_cl, P_CUM, not_objects[k], &r);
        expect_error(&r, 400, "request body must be a JSON object");
        assert_int_equal(r.connects, 0);
        resp_free(&r);
    }
    post(&g_cl, P_CUM, "", &r); /* an empty body is not a request */
    expect_error(&r, 400, "invalid JSON*");
    resp_free(&r);
    post(&g_cl, P_UM, "{\"kind\":\"UpdateMachineRequest\"", &r);
    expect_error(&r, 400, "invalid JSON*");
    assert_int_equal(r.connects, 0);
    resp_free(&r);
    post(&g_cl, P_DISCOVERY, "{}", &r);
    check_discovery(&r);
    assert_int_equal(r.connects, 0);
    resp_free(&r);
}

/* ---- group: tls ---- */

static char *g_other_dir;
static char g_other_ca[PATH_MAX];

static int tls_setup(void **state)
{
    g_other_dir = make_tmpdir();
    mint_pair(g_other_dir);
    snprintf(g_other_ca, sizeof(g_other_ca), "%s/tls/ca.crt", g_other_dir);
    return start_default_server(state);
}

static int tls_teardown(void **state)
{
    rm_rf(g_other_dir);
    free(g_other_dir);
    return stop_default_server(state);
}

static void test_tls_versions(void **state)
{
    struct client c;
    struct resp r;
    client_init(&c, g_ca, "localhost", g_srv.port);

    /* TLS 1.0/1.1 only (client security level lowered so that the client really offers them):
     * the server must refuse the handshake. */
    CURL *h = prep(&c, "/healthz", &r);
    curl_easy_setopt(h, CURLOPT_SSLVERSION,
                     (long)(CURL_SSLVERSION_TLSv1_0 | CURL_SSLVERSION_MAX_TLSv1_1));
    curl_easy_setopt(h, CURLOPT_SSL_CIPHER_LIST, "DEFAULT:@SECLEVEL=0");
    perform(&c, &r);
    assert_int_equal(r.rc, CURLE_SSL_CONNECT_ERROR);
    assert_int_equal(r.code, 0);
    assert_null(strstr(r.err, "no protocols available")); /* not refused by the client itself */
    resp_free(&r);

    /* TLS 1.2 exactly, and TLS 1.3 exactly */
    static const long versions[][2] = {
        {CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_MAX_TLSv1_2},
        {CURL_SSLVERSION_TLSv1_3, CURL_SSLVERSION_MAX_TLSv1_3},
    };
    for (size_t k = 0; k < 2; k++) {
        client_free(&c);
        client_init(&c, g_ca, "localhost", g_srv.port);
        h = prep(&c, "/healthz", &r);
        curl_easy_setopt(h, CURLOPT_SSLVERSION, versions[k][0] | versions[k][1]);
        perform(&c, &r);
        assert_int_equal(r.rc, CURLE_OK);
        assert_int_equal(r.code, 200);
        resp_free(&r);
    }
    client_free(&c);
}

static void test_tls_other_ca_refused(void **state)
{
    struct client c;
    struct resp r;
    client_init(&c, g_other_ca, "localhost", g_srv.port);
    get(&c, "/healthz", &r);
    assert_int_equal(r.rc, CURLE_PEER_FAILED_VERIFICATION);
    assert_int_equal(r.code, 0);
    resp_free(&r);
    client_free(&c);

    /* the right CA but a name the certificate does not hold */
    client_init(&c, g_ca, "evil.example.com", g_srv.port);
    get(&c, "/healthz", &r);
    assert_int_equal(r.rc, CURLE_PEER_FAILED_VERIFICATION);
    resp_free(&r);
    client_free(&c);

    /* by IP address, as the self-signed certificate names 127.0.0.1 too */
    client_init(&c, g_ca, "127.0.0.1", g_srv.port);
    get(&c, "/healthz", &r);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.code, 200);
    resp_free(&r);
    client_free(&c);
}

/* Plain HTTP to the TLS port: whatever comes back must not be an HTTP answer in the clear. */
static void test_plain_http_refused(void **state)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_srv.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
    assert_int_equal(send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL), (ssize_t)(sizeof(req) - 1));
    char buf[4096];
    size_t got = 0;
    double deadline = now_s() + 5;
    bool closed = false;
    while (now_s() < deadline && got < sizeof(buf)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = recv(fd, buf + got, sizeof(buf) - got, 0);
        if (n <= 0) {
            closed = true;
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    assert_true(closed); /* the server hangs up */
    assert_false(got >= 5 && !memcmp(buf, "HTTP/", 5));
    assert_null(memmem(buf, got, "ok\n", 3));

    /* and the server still serves TLS afterwards */
    struct resp r;
    get(&g_cl, "/healthz", &r);
    assert_int_equal(r.code, 200);
    resp_free(&r);
}

/* ---- group: rotation (--tls-cert/--tls-key replaced while serving) ---- */

static void test_rotation(void **state)
{
    char *dir = make_tmpdir(), a[PATH_MAX], b[PATH_MAX], live[PATH_MAX], src[PATH_MAX];
    char ca_a[PATH_MAX], ca_b[PATH_MAX], cert[PATH_MAX], key[PATH_MAX];
    snprintf(a, sizeof(a), "%s/a", dir);
    snprintf(b, sizeof(b), "%s/b", dir);
    snprintf(live, sizeof(live), "%s/live", dir);
    assert_int_equal(mkdir(a, 0700), 0);
    assert_int_equal(mkdir(b, 0700), 0);
    assert_int_equal(mkdir(live, 0700), 0);
    mint_pair(a);
    mint_pair(b);
    snprintf(ca_a, sizeof(ca_a), "%s/tls/ca.crt", a);
    snprintf(ca_b, sizeof(ca_b), "%s/tls/ca.crt", b);
    snprintf(src, sizeof(src), "%s/tls/tls.crt", a);
    replace_atomically(src, live, "tls.crt");
    snprintf(src, sizeof(src), "%s/tls/tls.key", a);
    replace_atomically(src, live, "tls.key");
    snprintf(cert, sizeof(cert), "%s/tls.crt", live);
    snprintf(key, sizeof(key), "%s/tls.key", live);

    struct server s;
    const char *extra[] = {"--tls-cert", cert, "--tls-key", key, "--log-level", "info", NULL};
    assert_int_equal(server_start(&s, dir, extra), 0);

    struct client old_a, c;
    struct resp r;
    client_init(&old_a, ca_a, "localhost", s.port);
    get(&old_a, "/healthz", &r);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.code, 200);
    resp_free(&r);
    client_init(&c, ca_b, "localhost", s.port);
    get(&c, "/healthz", &r);
    assert_int_equal(r.rc, CURLE_PEER_FAILED_VERIFICATION);
    resp_free(&r);
    client_free(&c);

    /* rotate to B's pair: each file replaced by rename(), the certificate first */
    snprintf(src, sizeof(src), "%s/tls/tls.crt", b);
    replace_atomically(src, live, "tls.crt");
    snprintf(src, sizeof(src), "%s/tls/tls.key", b);
    replace_atomically(src, live, "tls.key");
    sleep_s(1.3);

    /* new connections (fresh clients: no TLS session to resume) verify with B only */
    int tries = 0;
    do {
        if (tries)
            sleep_s(0.5);
        client_init(&c, ca_b, "localhost", s.port);
        get(&c, "/healthz", &r);
        client_free(&c);
        if (r.rc == CURLE_OK)
            break;
        resp_free(&r);
    } while (++tries < 4);
    if (tries)
        fprintf(stderr, "note: the new certificate took %d extra attempt(s)\n", tries);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.code, 200);
    assert_int_equal(tries, 0); /* served on the first new connection after > 1 s */
    resp_free(&r);
    client_init(&c, ca_a, "localhost", s.port);
    get(&c, "/healthz", &r);
    assert_int_equal(r.rc, CURLE_PEER_FAILED_VERIFICATION);
    resp_free(&r);
    client_free(&c);

    /* the connection opened before the rotation is still served */
    get(&old_a, "/healthz", &r);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.code, 200);
    assert_int_equal(r.connects, 0);
    resp_free(&r);

    client_init(&c, ca_b, "localhost", s.port);
    char *m = get_metrics(&c);
    assert_true(metric(m, "hvupdater_tls_certificate_reloads_total") == 1);
    free(m);
    client_free(&c);

    assert_int_equal(server_stop(&s, 5, NULL), 0);
    client_free(&old_a);
    rm_rf(dir);
    free(dir);
}

/* ---- group: sigterm while a request is in flight ---- */

struct stalled {
    struct client c;
    struct resp r;
    const char *body;
    size_t len, off;
    atomic_bool half_sent, release;
};

static size_t on_read_stall(char *buf, size_t size, size_t n, void *ud)
{
    struct stalled *s = ud;
    if (s->off >= s->len / 2) {
        atomic_store(&s->half_sent, true);
        while (!atomic_load(&s->release))
            sleep_s(0.01);
        return CURL_READFUNC_ABORT;
    }
    size_t want = size * n, left = s->len / 2 - s->off;
    if (want > left)
        want = left;
    memcpy(buf, s->body + s->off, want);
    s->off += want;
    return want;
}

static void *stalled_post(void *ud)
{
    struct stalled *s = ud;
    CURL *h = prep(&s->c, P_CUM, &s->r);
    char cl[64];
    snprintf(cl, sizeof(cl), "Content-Length: %zu", s->len);
    struct curl_slist *hs = curl_slist_append(json_headers(), cl);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)s->len);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read_stall);
    curl_easy_setopt(h, CURLOPT_READDATA, s);
    s->r.rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &s->r.code);
    curl_slist_free_all(hs);
    return NULL;
}

static void test_sigterm_in_flight(void **state)
{
    struct stalled s;
    memset(&s, 0, sizeof(s));
    char *req = build_request("vsm-memory-grow", "CanUpdateMachineRequest", NULL);
    s.body = req;
    s.len = strlen(req);
    client_init(&s.c, g_ca, "localhost", g_srv.port);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stalled_post, &s), 0);
    double t0 = now_s();
    while (!atomic_load(&s.half_sent) && now_s() - t0 < 10)
        sleep_s(0.01);
    assert_true(atomic_load(&s.half_sent));
    sleep_s(0.3); /* let the server take in the first half */

    char *m = get_metrics(&g_cl);
    double inflight = metric(m, M_INFL);
    free(m);

    double took = 0;
    int rc = server_stop(&g_srv, 5, &took);
    atomic_store(&s.release, true);
    pthread_join(t, NULL);
    assert_true(inflight == 1); /* the stalled call was counted while it was in flight */
    assert_int_equal(rc, 0);    /* exit 0 within 5 s */
    fprintf(stderr, "note: stopped in %.3f s with a request in flight\n", took);
    assert_true(s.r.rc != CURLE_OK || s.r.code != 200); /* the half request got no answer */
    resp_free(&s.r);
    client_free(&s.c);
    free(req);
}

static int sigterm_teardown(void **state)
{
    /* the server was stopped by the test; start_default_server's leftovers only */
    client_free(&g_cl);
    if (g_srv.pid > 0)
        server_stop(&g_srv, 5, NULL);
    rm_rf(g_dir);
    free(g_dir);
    g_dir = NULL;
    return 0;
}

/* ---- main ---- */

static bool want(int argc, char **argv, const char *group)
{
    if (argc <= 4)
        return true;
    for (int k = 4; k < argc; k++)
        if (!strcmp(argv[k], group))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr,
                "usage: %s HVUPDATER_BINARY SOURCE_DIR ANSWERS_DIR [GROUP...]\n"
                "groups: answers http tls rotation sigterm\n",
                argv[0]);
        return 2;
    }
    hv_bin = argv[1];
    src_dir = argv[2];
    answers_dir = argv[3];
    signal(SIGPIPE, SIG_IGN);
    if (access(hv_bin, X_OK) != 0) {
        fprintf(stderr, "%s: not executable\n", hv_bin);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int failed = 0;

    const struct CMUnitTest answers[] = {
        cmocka_unit_test(test_discovery),
        cmocka_unit_test(test_can_update_machine),
        cmocka_unit_test(test_can_update_machine_set),
        cmocka_unit_test(test_update_machine),
        cmocka_unit_test(test_failure_answers),
        cmocka_unit_test(test_health),
        cmocka_unit_test(test_metrics),
    };
    const struct CMUnitTest http[] = {
        cmocka_unit_test(test_not_found),
        cmocka_unit_test(test_method_not_allowed),
        cmocka_unit_test(test_too_large_content_length),
        cmocka_unit_test(test_bad_json_keep_alive),
        cmocka_unit_test(test_too_large_chunked),
        cmocka_unit_test(test_early_errors_big_body),
    };
    const struct CMUnitTest tls[] = {
        cmocka_unit_test(test_tls_versions),
        cmocka_unit_test(test_tls_other_ca_refused),
        cmocka_unit_test(test_plain_http_refused),
    };
    const struct CMUnitTest rotation[] = {
        cmocka_unit_test(test_rotation),
    };
    const struct CMUnitTest sigterm[] = {
        cmocka_unit_test(test_sigterm_in_flight),
    };
    if (want(argc, argv, "answers"))
        failed +=
            cmocka_run_group_tests_name("answers", answers, answers_setup, stop_default_server);
    if (want(argc, argv, "http"))
        failed +=
            cmocka_run_group_tests_name("http", http, start_default_server, stop_default_server);
    if (want(argc, argv, "tls"))
        failed += cmocka_run_group_tests_name("tls", tls, tls_setup, tls_teardown);
    if (want(argc, argv, "rotation"))
        failed += cmocka_run_group_tests_name("rotation", rotation, NULL, NULL);
    if (want(argc, argv, "sigterm"))
        failed +=
            cmocka_run_group_tests_name("sigterm", sigterm, start_default_server, sigterm_teardown);
    curl_global_cleanup();
    return failed ? 1 : 0;
}
