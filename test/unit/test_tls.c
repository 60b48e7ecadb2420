/* test_tls.c: cmocka tests for src/server/tls.c (serving certificate, rotation, self-signed
 * bootstrap).
 *
 * Every test works in its own mkdtemp() directory under /tmp and removes it. The rotation tests
 * run a real libmicrohttpd HTTPS daemon (GnuTLS) on an ephemeral loopback port and talk to it
 * with libcurl (OpenSSL), so what is checked is what a TLS client actually sees.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>

#include "tls.h"

static const char *const dns_names[] = {"localhost", "hvupdater.example.svc", NULL};
static const char *const ip_addrs[] = {"127.0.0.1", "::1", NULL};

/* ---- helpers: files and directories ---- */

static void pj(char *out, const char *dir, const char *name)
{
    int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);
    assert_true(n > 0 && n < PATH_MAX);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

/* Per-test setup/teardown: *state is a fresh temp dir, removed even when the test fails. */
static int tmpdir_setup(void **state)
{
    char *d = strdup("/tmp/hv-test-tls-XXXXXX");

    if (!d || !mkdtemp(d)) {
        free(d);
        return -1;
    }
    *state = d;
    return 0;
}

static int tmpdir_teardown(void **state)
{
    char *d = *state;
    int rc = nftw(d, rm_entry, 16, FTW_DEPTH | FTW_PHYS);

    free(d);
    return rc == 0 ? 0 : -1;
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long n;

    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Write path.tmp then rename it over path, like an atomic file replacement. */
static void write_atomic(const char *path, const void *data, size_t len)
{
    char tmp[PATH_MAX];
    FILE *f;

    assert_true(snprintf(tmp, sizeof tmp, "%s.tmp", path) < (int)sizeof tmp);
    f = fopen(tmp, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, path), 0);
}

static void copy_atomic(const char *src, const char *dst)
{
    size_t len;
    unsigned char *data = read_all(src, &len);

    write_atomic(dst, data, len);
    free(data);
}

static bool same_bytes(const char *a, const char *b)
{
    size_t la, lb;
    unsigned char *da = read_all(a, &la), *db = read_all(b, &lb);
    bool same = la == lb && memcmp(da, db, la) == 0;

    free(da);
    free(db);
    return same;
}

/* Move path's mtime so a reload sees a changed file without changing its content. */
static void bump_mtime(const char *path, long sec)
{
    struct timespec ts[2] = {{.tv_sec = sec, .tv_nsec = 0}, {.tv_sec = sec, .tv_nsec = 0}};

    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* First certificate of a PEM file. */
static gnutls_x509_crt_t load_crt(const char *path)
{
    gnutls_x509_crt_t crt;
    gnutls_datum_t d;
    size_t len;
    unsigned char *data = read_all(path, &len);

    d.data = data;
    d.size = (unsigned)len;
    assert_int_equal(gnutls_x509_crt_init(&crt), 0);
    assert_int_equal(gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM), 0);
    free(data);
    return crt;
}

/* True when the leaf in leaf_path verifies against the CA in ca_path. */
static bool verifies(const char *leaf_path, const char *ca_path)
{
    gnutls_x509_trust_list_t tl;
    gnutls_x509_crt_t leaf = load_crt(leaf_path), ca = load_crt(ca_path);
    unsigned status = 1;

    assert_int_equal(gnutls_x509_trust_list_init(&tl, 0), 0);
    assert_int_equal(gnutls_x509_trust_list_add_cas(tl, &ca, 1, 0), 1); /* tl owns ca now */
    assert_int_equal(gnutls_x509_trust_list_verify_crt(tl, &leaf, 1, 0, &status, NULL), 0);
    gnutls_x509_trust_list_deinit(tl, 1);
    gnutls_x509_crt_deinit(leaf);
    return status == 0;
}

/* Write a self-signed cert (also used as ca.crt) valid for `seconds` plus its key into dir. */
static void write_short_lived(const char *dir, long seconds)
{
    gnutls_x509_privkey_t key;
    gnutls_x509_crt_t crt;
    gnutls_datum_t out;
    unsigned char serial[1] = {7}, lo[4] = {127, 0, 0, 1}, v6[16] = {[15] = 1};
    time_t now = time(NULL);
    char p[PATH_MAX];

    assert_int_equal(gnutls_x509_privkey_init(&key), 0);
    assert_int_equal(gnutls_x509_privkey_generate(
                         key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0),
                     0);
    assert_int_equal(gnutls_x509_crt_init(&crt), 0);
    assert_int_equal(gnutls_x509_crt_set_version(crt, 3), 0);
    assert_int_equal(gnutls_x509_crt_set_serial(crt, serial, sizeof serial), 0);
    assert_int_equal(gnutls_x509_crt_set_activation_time(crt, now - 60), 0);
    assert_int_equal(gnutls_x509_crt_set_expiration_time(crt, now + seconds), 0);
    assert_int_equal(
        gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, "localhost", 9), 0);
    assert_int_equal(gnutls_x509_crt_set_key(crt, key), 0);
    assert_int_equal(gnutls_x509_crt_set_basic_constraints(crt, 1, -1), 0);
    assert_int_equal(
        gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_DIGITAL_SIGNATURE),
        0);
    for (size_t i = 0; dns_names[i]; i++)
        assert_int_equal(gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, dns_names[i],
                                                              (unsigned)strlen(dns_names[i]),
                                                              GNUTLS_FSAN_APPEND),
                         0);
    assert_int_equal(
        gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, lo, 4, GNUTLS_FSAN_APPEND),
        0);
    assert_int_equal(
        gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, v6, 16, GNUTLS_FSAN_APPEND),
        0);
    assert_int_equal(gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0), 0);

    assert_int_equal(gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &out), 0);
    pj(p, dir, "tls.crt");
    write_atomic(p, out.data, out.size);
    pj(p, dir, "ca.crt");
    write_atomic(p, out.data, out.size);
    gnutls_free(out.data);
    assert_int_equal(
        gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN, &out),
        0);
    pj(p, dir, "tls.key");
    write_atomic(p, out.data, out.size);
    assert_int_equal(chmod(p, 0600), 0);
    gnutls_free(out.data);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
}

/* Make a fresh CA + leaf in dir/name and return that directory's path in out. */
static void make_pair(char *out, const char *dir, const char *name)
{
    char err[256] = "";

    pj(out, dir, name);
    assert_int_equal(hv_tls_make_selfsigned(out, dns_names, ip_addrs, err, sizeof err), 1);
}

/* True when the chain the callback serves right now has the leaf of leaf_path first. */
static bool serving(const char *leaf_path)
{
    gnutls_pcert_st *pcert = NULL;
    gnutls_privkey_t key = NULL;
    unsigned n = 0;
    gnutls_x509_crt_t crt = load_crt(leaf_path);
    gnutls_datum_t der;
    bool same;

    assert_int_equal(hv_tls_cert_callback(NULL, NULL, 0, NULL, 0, &pcert, &n, &key), 0);
    assert_true(n >= 1);
    assert_non_null(pcert);
    assert_non_null(key);
    assert_int_equal(gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_DER, &der), 0);
    same = der.size == pcert[0].cert.size && memcmp(der.data, pcert[0].cert.data, der.size) == 0;
    gnutls_free(der.data);
    gnutls_x509_crt_deinit(crt);
    return same;
}

/* ---- helpers: a minimal HTTPS server and client ---- */

static enum MHD_Result answer_ok(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    r = MHD_create_response_from_buffer(2, (void *)"ok", MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static struct MHD_Daemon *start_server(const char *priorities, int *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    const union MHD_DaemonInfo *info;
    struct MHD_Daemon *d;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    d = MHD_start_daemon(MHD_USE_TLS | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
                         NULL, answer_ok, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                         MHD_OPTION_HTTPS_CERT_CALLBACK, hv_tls_cert_callback,
                         MHD_OPTION_HTTPS_PRIORITIES, priorities, MHD_OPTION_END);
    assert_non_null(d);
    info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    assert_non_null(info);
    assert_true(info->port > 0);
    *port = info->port;
    return d;
}

struct body {
    char buf[64];
    size_t len;
};

static size_t collect(char *data, size_t size, size_t n, void *userdata)
{
    struct body *b = userdata;
    size_t len = size * n;

    if (len > sizeof b->buf - 1 - b->len)
        return 0;
    memcpy(b->buf + b->len, data, len);
    b->len += len;
    b->buf[b->len] = '\0';
    return len;
}

/* GET https://<host>:port/ on a fresh connection, trusting only cafile. host is "localhost"
 * (resolved to 127.0.0.1, checks the DNS SAN) or "127.0.0.1" (checks the IP SAN). On success
 * the server must have answered 200 "ok". sslversion is a CURLOPT_SSLVERSION value. */
static CURLcode fetch(int port, const char *host, const char *cafile, long sslversion)
{
    char url[128], resolve[64], errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *rs = NULL;
    struct body b = {.len = 0};
    long status = 0;
    CURLcode rc;
    CURL *c = curl_easy_init();

    assert_non_null(c);
    snprintf(url, sizeof url, "https://%s:%d/", host, port);
    snprintf(resolve, sizeof resolve, "localhost:%d:127.0.0.1", port);
    rs = curl_slist_append(rs, resolve);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_RESOLVE, rs);
    curl_easy_setopt(c, CURLOPT_CAINFO, cafile);
    curl_easy_setopt(c, CURLOPT_SSLVERSION, sslversion);
    if ((sslversion & 0xffff) < CURL_SSLVERSION_TLSv1_2)
        curl_easy_setopt(c, CURLOPT_SSL_CIPHER_LIST, "DEFAULT:@SECLEVEL=0"); /* let OpenSSL try */
    curl_easy_setopt(c, CURLOPT_SSL_SESSIONID_CACHE, 0L);
    curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    rc = curl_easy_perform(c);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        assert_int_equal(status, 200);
        assert_string_equal(b.buf, "ok");
    } else {
        print_message("    curl %s (CA %s): %s: %s\n", url, cafile, curl_easy_strerror(rc), errbuf);
    }
    curl_slist_free_all(rs);
    curl_easy_cleanup(c);
    return rc;
}

#define TLS_ANY (CURL_SSLVERSION_DEFAULT)
#define TLS_1_1 (CURL_SSLVERSION_TLSv1_1 | CURL_SSLVERSION_MAX_TLSv1_1)
#define TLS_1_2 (CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2)
#define TLS_1_3 (CURL_SSLVERSION_TLSv1_3 | CURL_SSLVERSION_MAX_TLSv1_3)

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- tests ---- */

static void test_priorities_tls12_and_13_only(void **state)
{
    gnutls_priority_t prio;
    const unsigned *list = NULL;
    const char *errpos = NULL;
    bool has12 = false, has13 = false;
    int n;

    assert_int_equal(gnutls_priority_init2(&prio, hv_tls_priorities(), &errpos, 0), 0);
    n = gnutls_priority_protocol_list(prio, &list);
    assert_true(n >= 2);
    for (int i = 0; i < n; i++) {
        assert_true(list[i] == GNUTLS_TLS1_2 || list[i] == GNUTLS_TLS1_3);
        has12 |= list[i] == GNUTLS_TLS1_2;
        has13 |= list[i] == GNUTLS_TLS1_3;
    }
    assert_true(has12 && has13);
    gnutls_priority_deinit(prio);
}

static void test_selfsigned_writes_valid_chain(void **state)
{
    const char *tmp = *state;
    char dir[PATH_MAX], ca_p[PATH_MAX], crt_p[PATH_MAX], key_p[PATH_MAX], err[256] = "";
    unsigned char ski[64], aki[64], ip4[4] = {127, 0, 0, 1}, ip6[16] = {[15] = 1};
    unsigned char other4[4] = {10, 0, 0, 1};
    size_t ski_len = sizeof ski, aki_len = sizeof aki;
    unsigned ca_flag = 0, crit = 0, usage = 0, bits = 0;
    int pathlen = -1;
    struct stat st;
    gnutls_x509_crt_t ca, leaf;
    char oid[128];
    size_t oid_len = sizeof oid;
    time_t now = time(NULL);
    struct hv_tls *t;

    pj(dir, tmp, "nested/certs");
    pj(ca_p, dir, "ca.crt");
    pj(crt_p, dir, "tls.crt");
    pj(key_p, dir, "tls.key");
    assert_int_equal(hv_tls_make_selfsigned(dir, dns_names, ip_addrs, err, sizeof err), 1);

    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(stat(key_p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(stat(ca_p, &st), 0);
    assert_int_equal(stat(crt_p, &st), 0);

    assert_true(verifies(crt_p, ca_p));

    ca = load_crt(ca_p);
    leaf = load_crt(crt_p);
    /* CA: CA:TRUE, keyCertSign, SKI, ECDSA P-256, ~1 year. */
    assert_true(gnutls_x509_crt_get_basic_constraints(ca, &crit, &ca_flag, &pathlen) >= 0);
    assert_int_equal(ca_flag, 1);
    assert_true(gnutls_x509_crt_get_key_usage(ca, &usage, &crit) >= 0);
    assert_true(usage & GNUTLS_KEY_KEY_CERT_SIGN);
    assert_int_equal(gnutls_x509_crt_get_subject_key_id(ca, ski, &ski_len, &crit), 0);
    assert_true(ski_len > 0);
    assert_int_equal(gnutls_x509_crt_get_pk_algorithm(ca, &bits), GNUTLS_PK_ECDSA);
    assert_int_equal(bits, 256);
    /* Leaf: not a CA, serverAuth, AKI = CA's SKI, ECDSA P-256, the SANs asked for. */
    ca_flag = 1;
    assert_true(gnutls_x509_crt_get_basic_constraints(leaf, &crit, &ca_flag, &pathlen) >= 0);
    assert_int_equal(ca_flag, 0);
    assert_int_equal(gnutls_x509_crt_get_key_purpose_oid(leaf, 0, oid, &oid_len, &crit), 0);
    assert_string_equal(oid, GNUTLS_KP_TLS_WWW_SERVER);
    assert_int_equal(gnutls_x509_crt_get_authority_key_id(leaf, aki, &aki_len, &crit), 0);
    assert_int_equal(aki_len, ski_len);
    assert_memory_equal(aki, ski, ski_len);
    assert_int_equal(gnutls_x509_crt_get_pk_algorithm(leaf, &bits), GNUTLS_PK_ECDSA);
    assert_int_equal(bits, 256);
    assert_true(gnutls_x509_crt_check_hostname(leaf, "localhost"));
    assert_true(gnutls_x509_crt_check_hostname(leaf, "hvupdater.example.svc"));
    assert_false(gnutls_x509_crt_check_hostname(leaf, "example.com"));
    assert_true(gnutls_x509_crt_check_ip(leaf, ip4, 4, 0));
    assert_true(gnutls_x509_crt_check_ip(leaf, ip6, 16, 0));
    assert_false(gnutls_x509_crt_check_ip(leaf, other4, 4, 0));
    assert_true(gnutls_x509_crt_get_expiration_time(leaf) > now + 364L * 86400);
    assert_true(gnutls_x509_crt_get_expiration_time(leaf) < now + 367L * 86400);
    assert_true(gnutls_x509_crt_get_activation_time(leaf) <= now);
    gnutls_x509_crt_deinit(ca);
    gnutls_x509_crt_deinit(leaf);

    /* The pair loads as a serving certificate. */
    t = hv_tls_open(crt_p, key_p, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(hv_tls_generation(t), 0);
    hv_tls_free(t);
}

static void test_selfsigned_second_call_keeps_files(void **state)
{
    static const char *const names[] = {"ca.crt", "tls.crt", "tls.key"};
    const char *tmp = *state;
    char dir[PATH_MAX], p[PATH_MAX], err[256] = "";
    unsigned char *before[3];
    size_t len[3];
    ino_t ino[3];
    struct stat st;

    make_pair(dir, tmp, "certs");
    for (int i = 0; i < 3; i++) {
        pj(p, dir, names[i]);
        before[i] = read_all(p, &len[i]);
        assert_int_equal(stat(p, &st), 0);
        ino[i] = st.st_ino;
    }
    assert_int_equal(hv_tls_make_selfsigned(dir, dns_names, ip_addrs, err, sizeof err), 0);
    /* A subset of the names is still covered: kept too. */
    assert_int_equal(hv_tls_make_selfsigned(dir, dns_names, NULL, err, sizeof err), 0);
    for (int i = 0; i < 3; i++) {
        size_t n;
        unsigned char *after;
        pj(p, dir, names[i]);
        after = read_all(p, &n);
        assert_int_equal(n, len[i]);
        assert_memory_equal(after, before[i], n);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_ino, ino[i]); /* not even rewritten with the same bytes */
        free(after);
        free(before[i]);
    }
}

static void test_selfsigned_regenerates_when_unfit(void **state)
{
    static const char *const other_names[] = {"other.example", NULL};
    const char *tmp = *state;
    char dir[PATH_MAX], other[PATH_MAX], ca_p[PATH_MAX], crt_p[PATH_MAX], key_p[PATH_MAX];
    char saved[PATH_MAX], err[256] = "";

    pj(dir, tmp, "certs");
    pj(ca_p, dir, "ca.crt");
    pj(crt_p, dir, "tls.crt");
    pj(key_p, dir, "tls.key");
    pj(saved, tmp, "saved.crt");
    assert_int_equal(mkdir(dir, 0700), 0);

    /* Control: a 48 h leaf is kept, so the 1 h case below fails on its lifetime alone. */
    write_short_lived(dir, 48L * 3600);
    copy_atomic(crt_p, saved);
    assert_int_equal(hv_tls_make_selfsigned(dir, dns_names, ip_addrs, err, sizeof err), 0);
    assert_true(same_bytes(crt_p, saved));

    /* A leaf expiring within 24 h is replaced. */
    write_short_lived(dir, 3600);
    copy_atomic(crt_p, saved);
    assert_int_equal(hv_tls_make_selfsigned(dir, dns_names, ip_addrs, err, sizeof err), 1);
    assert_false(same_bytes(crt_p, saved));
    assert_true(verifies(crt_p, ca_p));

    /* A key that does not match the leaf is replaced. */
    make_pair(other, tmp, "other");
    pj(saved, other, "tls.key");
    copy_atomic(saved, key_p);
    pj(saved, tmp, "saved.crt");
    copy_atomic(crt_p, saved);
    assert_int_equal(hv_tls_make_selfsigned(dir, dns_names, ip_addrs, err, sizeof err), 1);
    assert_false(same_bytes(crt_p, saved));
    {
        struct hv_tls *t = hv_tls_open(crt_p, key_p, err, sizeof err);
        assert_non_null(t);
        hv_tls_free(t);
    }

    /* A leaf not covering a requested name is replaced. */
    copy_atomic(crt_p, saved);
    assert_int_equal(hv_tls_make_selfsigned(dir, other_names, NULL, err, sizeof err), 1);
    assert_false(same_bytes(crt_p, saved));
}

static void test_selfsigned_rejects_bad_input(void **state)
{
    static const char *const bad_ips[] = {"127.0.0.1", "not-an-ip", NULL};
    static const char *const empty_dns[] = {"", NULL};
    const char *tmp = *state;
    char file[PATH_MAX], dir[PATH_MAX], err[256];

    err[0] = '\0';
    assert_int_equal(hv_tls_make_selfsigned(tmp, NULL, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "at least one DNS name or IP address"));
    err[0] = '\0';
    assert_int_equal(hv_tls_make_selfsigned(tmp, dns_names, bad_ips, err, sizeof err), -1);
    assert_non_null(strstr(err, "invalid IP address 'not-an-ip'"));
    err[0] = '\0';
    assert_int_equal(hv_tls_make_selfsigned(tmp, empty_dns, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "empty DNS name"));
    err[0] = '\0';
    assert_int_equal(hv_tls_make_selfsigned("", dns_names, NULL, err, sizeof err), -1);
    assert_true(err[0] != '\0');

    /* A path under a regular file cannot become a directory. */
    pj(file, tmp, "plain");
    write_atomic(file, "x", 1);
    pj(dir, file, "certs");
    err[0] = '\0';
    assert_int_equal(hv_tls_make_selfsigned(dir, dns_names, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot create directory"));
    /* Nothing was written into the temp dir by the failed calls. */
    pj(file, tmp, "tls.crt");
    assert_int_not_equal(access(file, F_OK), 0);
}

static void expect_open_fails(const char *crt, const char *key, const char *msg, const char *path)
{
    char err[512] = "";
    struct hv_tls *t = hv_tls_open(crt, key, err, sizeof err);

    assert_null(t);
    if (!strstr(err, msg) || (path && !strstr(err, path)))
        fail_msg("error '%s' lacks '%s' / '%s'", err, msg, path ? path : "");
}

static void test_open_reports_bad_files(void **state)
{
    static const char garbage[] = "this is not a certificate\n";
    const char *tmp = *state;
    char a[PATH_MAX], b[PATH_MAX], crt[PATH_MAX], key[PATH_MAX], other_key[PATH_MAX];
    char missing[PATH_MAX], junk[PATH_MAX], empty[PATH_MAX], cut[PATH_MAX];
    unsigned char *pem;
    size_t len;

    make_pair(a, tmp, "a");
    make_pair(b, tmp, "b");
    pj(crt, a, "tls.crt");
    pj(key, a, "tls.key");
    pj(other_key, b, "tls.key");
    pj(missing, tmp, "missing.pem");
    pj(junk, tmp, "junk.pem");
    pj(empty, tmp, "empty.pem");
    pj(cut, tmp, "cut.pem");
    write_atomic(junk, garbage, sizeof garbage - 1);
    write_atomic(empty, "", 0);
    pem = read_all(crt, &len);
    write_atomic(cut, pem, len / 2);
    free(pem);

    expect_open_fails(missing, key, "cannot open certificate file", missing);
    expect_open_fails(crt, missing, "cannot open key file", missing);
    expect_open_fails(junk, key, "holds no valid PEM certificate", junk);
    expect_open_fails(crt, junk, "holds no valid unencrypted PEM private key", junk);
    expect_open_fails(empty, key, "is empty", empty);
    expect_open_fails(cut, key, "certificate file", cut);
    expect_open_fails(key, crt, "holds no valid PEM certificate", key); /* swapped */
    expect_open_fails(crt, other_key, "does not match the certificate", other_key);
    expect_open_fails(tmp, key, "is not a regular file", tmp);
    expect_open_fails(NULL, key, "are required", NULL);

    hv_tls_free(NULL); /* harmless */
}

static void test_reload_direct(void **state)
{
    static const char garbage[] = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    const char *tmp = *state;
    char a[PATH_MAX], b[PATH_MAX], srv[PATH_MAX], crt[PATH_MAX], key[PATH_MAX];
    char a_crt[PATH_MAX], a_key[PATH_MAX], b_crt[PATH_MAX], b_key[PATH_MAX], err[512] = "";
    struct hv_tls *t;

    make_pair(a, tmp, "a");
    make_pair(b, tmp, "b");
    pj(a_crt, a, "tls.crt");
    pj(a_key, a, "tls.key");
    pj(b_crt, b, "tls.crt");
    pj(b_key, b, "tls.key");
    pj(srv, tmp, "srv");
    assert_int_equal(mkdir(srv, 0700), 0);
    pj(crt, srv, "tls.crt");
    pj(key, srv, "tls.key");
    copy_atomic(a_crt, crt);
    copy_atomic(a_key, key);

    t = hv_tls_open(crt, key, err, sizeof err);
    assert_non_null(t);
    hv_tls_activate(t);
    assert_true(serving(a_crt));
    assert_int_equal(hv_tls_maybe_reload(t, err, sizeof err), 0);

    /* Half a rotation (new key, old cert) is refused and the old pair stays in service. */
    copy_atomic(b_key, key);
    err[0] = '\0';
    assert_int_equal(hv_tls_maybe_reload(t, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not match"));
    assert_int_equal(hv_tls_generation(t), 0);
    assert_true(serving(a_crt));
    /* Still refused on the next check (failures are retried, not remembered). */
    assert_int_equal(hv_tls_maybe_reload(t, err, sizeof err), -1);

    /* The other half arrives: reloaded once, then unchanged. */
    copy_atomic(b_crt, crt);
    assert_int_equal(hv_tls_maybe_reload(t, err, sizeof err), 1);
    assert_int_equal(hv_tls_generation(t), 1);
    assert_true(serving(b_crt));
    assert_int_equal(hv_tls_maybe_reload(t, err, sizeof err), 0);

    /* Garbage replacing the cert: -1 with a message, B still served. */
    write_atomic(crt, garbage, sizeof garbage - 1);
    err[0] = '\0';
    assert_int_equal(hv_tls_maybe_reload(t, err, sizeof err), -1);
    assert_non_null(strstr(err, "holds no valid PEM certificate"));
    assert_non_null(strstr(err, crt));
    assert_true(serving(b_crt));

    /* A vanished file: -1, B still served. */
    assert_int_equal(unlink(crt), 0);
    err[0] = '\0';
    assert_int_equal(hv_tls_maybe_reload(t, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot stat certificate file"));
    assert_true(serving(b_crt));

    /* More reloads than the retired list holds: oldest are freed, no leak, no crash. */
    copy_atomic(b_crt, crt);
    for (long i = 0; i < 20; i++) {
        bump_mtime(crt, 1000000 + i);
        assert_int_equal(hv_tls_maybe_reload(t, err, sizeof err), 1);
        assert_true(serving(b_crt));
    }
    assert_int_equal(hv_tls_generation(t), 21);

    hv_tls_free(t); /* also deactivates */
    {
        gnutls_pcert_st *pc = NULL;
        gnutls_privkey_t k = NULL;
        unsigned n = 0;
        assert_int_equal(hv_tls_cert_callback(NULL, NULL, 0, NULL, 0, &pc, &n, &k), -1);
    }
}

/* The hammer threads and the reloading thread meet at a barrier before and after each round,
 * so the test is bounded by its work (ROUNDS reloads, HAMMERS * CALLS callbacks a round) and
 * not by scheduling: no thread spins waiting for another, so under valgrind's one thread at a
 * time every thread gets its turn when the others block at the barrier. */
enum { HAMMERS = 4, ROUNDS = 12, CALLS = 50 };

struct hammer {
    pthread_barrier_t start, end;
    atomic_ulong calls;
    atomic_int failures;
};

static void *hammer_callback(void *arg)
{
    struct hammer *h = arg;

    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&h->start);
        for (int c = 0; c < CALLS; c++) {
            gnutls_pcert_st *pc = NULL;
            gnutls_privkey_t k = NULL;
            unsigned n = 0;
            if (hv_tls_cert_callback(NULL, NULL, 0, NULL, 0, &pc, &n, &k) != 0 || n < 1 || !pc ||
                !k || pc[0].cert.size < 2 || pc[0].cert.data[0] != 0x30) /* DER SEQUENCE */
                atomic_fetch_add(&h->failures, 1);
            atomic_fetch_add(&h->calls, 1);
        }
        pthread_barrier_wait(&h->end);
    }
    return NULL;
}

static void test_callback_concurrent_with_reloads(void **state)
{
    const char *tmp = *state;
    char a[PATH_MAX], crt[PATH_MAX], key[PATH_MAX], err[512] = "";
    struct hammer h;
    pthread_t th[HAMMERS];
    struct hv_tls *t;

    make_pair(a, tmp, "a");
    pj(crt, a, "tls.crt");
    pj(key, a, "tls.key");
    t = hv_tls_open(crt, key, err, sizeof err);
    assert_non_null(t);
    hv_tls_activate(t);
    assert_int_equal(pthread_barrier_init(&h.start, NULL, HAMMERS + 1), 0);
    assert_int_equal(pthread_barrier_init(&h.end, NULL, HAMMERS + 1), 0);
    atomic_init(&h.calls, 0);
    atomic_init(&h.failures, 0);
    for (int i = 0; i < HAMMERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer_callback, &h), 0);
    for (long i = 0; i < ROUNDS; i++) {
        pthread_barrier_wait(&h.start);
        /* this round's reload runs while the hammers call the callback */
        bump_mtime(i % 2 ? crt : key, 2000000 + i);
        int rc = hv_tls_maybe_reload(t, err, sizeof err);
        pthread_barrier_wait(&h.end);
        assert_int_equal(rc, 1);
    }
    for (int i = 0; i < HAMMERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&h.start);
    pthread_barrier_destroy(&h.end);
    assert_int_equal(atomic_load(&h.failures), 0);
    assert_int_equal(atomic_load(&h.calls), (unsigned long)HAMMERS * ROUNDS * CALLS);
    assert_true(hv_tls_generation(t) >= ROUNDS);
    hv_tls_free(t);
}

/* Point the Kubernetes-style link srv/..data at srv/<gen_dir> atomically. */
static void swap_data_link(const char *srv, const char *gen_dir)
{
    char link_tmp[PATH_MAX], link[PATH_MAX];

    pj(link_tmp, srv, "..data_tmp");
    pj(link, srv, "..data");
    unlink(link_tmp);
    assert_int_equal(symlink(gen_dir, link_tmp), 0);
    assert_int_equal(rename(link_tmp, link), 0);
}

static void populate_gen(const char *srv, const char *gen_dir, const char *from)
{
    char d[PATH_MAX], src[PATH_MAX], dst[PATH_MAX];

    pj(d, srv, gen_dir);
    assert_int_equal(mkdir(d, 0700), 0);
    pj(src, from, "tls.crt");
    pj(dst, d, "tls.crt");
    copy_atomic(src, dst);
    pj(src, from, "tls.key");
    pj(dst, d, "tls.key");
    copy_atomic(src, dst);
}

static void test_rotation_end_to_end(void **state)
{
    static const char garbage[] = "garbage, not PEM\n";
    const char *tmp = *state;
    char a[PATH_MAX], b[PATH_MAX], srv[PATH_MAX], crt[PATH_MAX], key[PATH_MAX];
    char ca_a[PATH_MAX], ca_b[PATH_MAX], link[PATH_MAX], err[512] = "";
    struct MHD_Daemon *d;
    struct hv_tls *t;
    int port;

    /* hvupdater's certificate rotation needs the callback: a libmicrohttpd without it is a
     * failure of this build, never a skipped (passing) test */
    if (MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) != MHD_YES)
        fail_msg("libmicrohttpd lacks MHD_FEATURE_HTTPS_CERT_CALLBACK: certificate rotation "
                 "cannot work");
    make_pair(a, tmp, "a");
    make_pair(b, tmp, "b");
    pj(ca_a, a, "ca.crt");
    pj(ca_b, b, "ca.crt");

    /* srv/tls.crt -> ..data/tls.crt, ..data -> gen-a: the layout of a Secret volume. */
    pj(srv, tmp, "srv");
    assert_int_equal(mkdir(srv, 0700), 0);
    populate_gen(srv, "gen-a", a);
    swap_data_link(srv, "gen-a");
    pj(crt, srv, "tls.crt");
    pj(key, srv, "tls.key");
    assert_int_equal(symlink("..data/tls.crt", crt), 0);
    assert_int_equal(symlink("..data/tls.key", key), 0);

    t = hv_tls_open(crt, key, err, sizeof err);
    assert_non_null(t);
    hv_tls_activate(t);
    d = start_server(hv_tls_priorities(), &port);

    assert_int_equal(fetch(port, "localhost", ca_a, TLS_ANY), CURLE_OK);
    assert_int_equal(fetch(port, "127.0.0.1", ca_a, TLS_ANY), CURLE_OK);
    assert_int_equal(fetch(port, "localhost", ca_b, TLS_ANY), CURLE_PEER_FAILED_VERIFICATION);
    /* Versions: 1.2 and 1.3 accepted, 1.1 refused by the server. */
    assert_int_equal(fetch(port, "localhost", ca_a, TLS_1_2), CURLE_OK);
    assert_int_equal(fetch(port, "localhost", ca_a, TLS_1_3), CURLE_OK);
    assert_int_equal(fetch(port, "localhost", ca_a, TLS_1_1), CURLE_SSL_CONNECT_ERROR);

    /* Rotate to B by swapping the ..data link; the next check (> 1 s) picks it up. */
    populate_gen(srv, "gen-b", b);
    swap_data_link(srv, "gen-b");
    sleep_ms(1300);
    assert_int_equal(fetch(port, "localhost", ca_a, TLS_ANY), CURLE_PEER_FAILED_VERIFICATION);
    assert_int_equal(fetch(port, "localhost", ca_b, TLS_ANY), CURLE_OK);
    assert_int_equal(fetch(port, "127.0.0.1", ca_b, TLS_1_2), CURLE_OK);
    assert_int_equal(hv_tls_generation(t), 1);

    /* Garbage renamed over tls.crt: the callback's reload fails, B keeps being served. */
    write_atomic(crt, garbage, sizeof garbage - 1);
    sleep_ms(1300);
    assert_int_equal(fetch(port, "localhost", ca_b, TLS_ANY), CURLE_OK);
    assert_int_equal(hv_tls_generation(t), 1);
    err[0] = '\0';
    assert_int_equal(hv_tls_maybe_reload(t, err, sizeof err), -1);
    assert_non_null(strstr(err, "holds no valid PEM certificate"));

    /* Back to a good file: served again without a restart (same content as gen 1). */
    pj(link, srv, "tls.crt.tmp");
    assert_int_equal(symlink("..data/tls.crt", link), 0);
    assert_int_equal(rename(link, crt), 0);
    sleep_ms(1300);
    assert_int_equal(fetch(port, "localhost", ca_b, TLS_ANY), CURLE_OK);

    MHD_stop_daemon(d);
    hv_tls_free(t);
}

/* Control for the TLS 1.1 refusal above: with a priority string that allows TLS 1.1 the same
 * client gets through, so the refusal comes from hv_tls_priorities(), not from the client. */
static void test_tls11_control(void **state)
{
    const char *tmp = *state;
    char a[PATH_MAX], crt[PATH_MAX], key[PATH_MAX], ca[PATH_MAX], err[512] = "";
    struct MHD_Daemon *d;
    struct hv_tls *t;
    int port;

    /* hvupdater's certificate rotation needs the callback: a libmicrohttpd without it is a
     * failure of this build, never a skipped (passing) test */
    if (MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) != MHD_YES)
        fail_msg("libmicrohttpd lacks MHD_FEATURE_HTTPS_CERT_CALLBACK: certificate rotation "
                 "cannot work");
    make_pair(a, tmp, "a");
    pj(crt, a, "tls.crt");
    pj(key, a, "tls.key");
    pj(ca, a, "ca.crt");
    t = hv_tls_open(crt, key, err, sizeof err);
    assert_non_null(t);
    hv_tls_activate(t);
    d = start_server("NORMAL:+VERS-TLS1.1", &port);
    assert_int_equal(fetch(port, "localhost", ca, TLS_1_1), CURLE_OK);
    MHD_stop_daemon(d);
    hv_tls_free(t);
}

static int group_setup(void **state)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static int group_teardown(void **state)
{
    curl_global_cleanup();
    return 0;
}

/* A test that gets a fresh temp dir as *state. */
#define IN_TMPDIR(f) cmocka_unit_test_setup_teardown(f, tmpdir_setup, tmpdir_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priorities_tls12_and_13_only),
        IN_TMPDIR(test_selfsigned_writes_valid_chain),
        IN_TMPDIR(test_selfsigned_second_call_keeps_files),
        IN_TMPDIR(test_selfsigned_regenerates_when_unfit),
        IN_TMPDIR(test_selfsigned_rejects_bad_input),
        IN_TMPDIR(test_open_reports_bad_files),
        IN_TMPDIR(test_reload_direct),
        IN_TMPDIR(test_callback_concurrent_with_reloads),
        IN_TMPDIR(test_rotation_end_to_end),
        IN_TMPDIR(test_tls11_control),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
