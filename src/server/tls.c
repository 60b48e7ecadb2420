/* tls.c: the HTTPS serving certificate with hot reload, and the self-signed bootstrap.
 *
 * A generation (parsed chain + key) is immutable once published. A reload builds the new one
 * aside, checks the key against the leaf, then swaps it in under t->lock. GnuTLS keeps using the
 * pointers the callback returned for the whole handshake, so a replaced generation is retired,
 * not freed: at most HV_TLS_RETIRED_MAX are kept (oldest freed first), all freed by hv_tls_free.
 */
#include "tls.h"
#include "hv_clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <gnutls/x509.h>

#define HV_TLS_RETIRED_MAX 16
#define HV_TLS_FILE_MAX    (1024 * 1024)
#define HV_TLS_CHECK_MS    1000
#define HV_TLS_DAY         (24 * 60 * 60)
#define HV_TLS_VALIDITY    (365 * HV_TLS_DAY)
#define HV_TLS_BACKDATE    (60 * 60)

/* What identifies the content of a file a path resolves to (symlinks followed). */
struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

struct gen {
    gnutls_pcert_st *pcerts;
    unsigned npcerts;
    gnutls_privkey_t key;
    long long not_after; /* the leaf's expiry, Unix seconds */
};

struct hv_tls {
    char *cert_path;
    char *key_path;
    pthread_mutex_t reload_lock; /* serialises reloads; guards cert_id and key_id */
    struct file_id cert_id;
    struct file_id key_id;
    pthread_mutex_t lock; /* guards cur, retired, nretired */
    struct gen *cur;
    struct gen *retired[HV_TLS_RETIRED_MAX];
    unsigned nretired;
    atomic_uint generation;
    atomic_llong last_check_ms; /* CLOCK_MONOTONIC ms of the callback's last file check */
};

static _Atomic(struct hv_tls *) hv_tls_active;

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (!err || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static const char *errno_str(int e, char *buf, size_t len)
{
    return strerror_r(e, buf, len); /* GNU variant (_GNU_SOURCE) */
}

static void id_from_stat(const struct stat *st, struct file_id *id)
{
    id->dev = st->st_dev;
    id->ino = st->st_ino;
    id->size = st->st_size;
    id->mtime = st->st_mtim;
}

static bool id_equal(const struct file_id *a, const struct file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

static void datum_free(gnutls_datum_t *d, bool secret)
{
    if (d->data && secret)
        explicit_bzero(d->data, d->size);
    free(d->data);
    d->data = NULL;
    d->size = 0;
}

/* Read a whole regular file; id describes exactly what was read (fstat of the open fd). */
static int read_file(const char *what, const char *path, gnutls_datum_t *out, struct file_id *id,
                     char *err, size_t errlen)
{
    char eb[128];
    struct stat st;
    unsigned char *buf = NULL;
    size_t got = 0;
    int fd;

    out->data = NULL;
    out->size = 0;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        seterr(err, errlen, "cannot open %s file '%s': %s", what, path,
               errno_str(errno, eb, sizeof eb));
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        seterr(err, errlen, "cannot stat %s file '%s': %s", what, path,
               errno_str(errno, eb, sizeof eb));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        seterr(err, errlen, "%s file '%s' is not a regular file", what, path);
        goto fail;
    }
    if (st.st_size == 0) {
        seterr(err, errlen, "%s file '%s' is empty", what, path);
        goto fail;
    }
    if (st.st_size > HV_TLS_FILE_MAX) {
        seterr(err, errlen, "%s file '%s' is larger than %d bytes", what, path, HV_TLS_FILE_MAX);
        goto fail;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        seterr(err, errlen, "out of memory reading %s file '%s'", what, path);
        goto fail;
    }
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            seterr(err, errlen, "cannot read %s file '%s': %s", what, path,
                   errno_str(errno, eb, sizeof eb));
            goto fail;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got != (size_t)st.st_size) {
        seterr(err, errlen, "%s file '%s' changed while being read", what, path);
        goto fail;
    }
    buf[got] = '\0';
    close(fd);
    out->data = buf;
    out->size = (unsigned)got;
    id_from_stat(&st, id);
    return 0;
fail:
    if (buf) {
        explicit_bzero(buf, (size_t)st.st_size);
        free(buf);
    }
    close(fd);
    return -1;
}

static unsigned count_str(const gnutls_datum_t *d, const char *needle)
{
    const char *p = (const char *)d->data;
    unsigned n = 0;

    while ((p = strstr(p, needle)) != NULL) {
        n++;
        p += strlen(needle);
    }
    return n;
}

static void crts_free(gnutls_x509_crt_t *crts, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        gnutls_x509_crt_deinit(crts[i]);
    gnutls_free(crts);
}

/* Parse a PEM chain file (leaf first). A file cut short (unbalanced BEGIN/END) is refused. */
static int load_chain(const char *what, const char *path, gnutls_x509_crt_t **crts, unsigned *n,
                      struct file_id *id, char *err, size_t errlen)
{
    gnutls_datum_t d;
    int rc;

    *crts = NULL;
    *n = 0;
    if (read_file(what, path, &d, id, err, errlen) != 0)
        return -1;
    if (count_str(&d, "-----BEGIN ") != count_str(&d, "-----END ")) {
        seterr(err, errlen, "%s file '%s' is incomplete (unterminated PEM block)", what, path);
        datum_free(&d, false);
        return -1;
    }
    rc = gnutls_x509_crt_list_import2(crts, n, &d, GNUTLS_X509_FMT_PEM, 0);
    datum_free(&d, false);
    if (rc < 0 || *n == 0) {
        seterr(err, errlen, "%s file '%s' holds no valid PEM certificate: %s", what, path,
               rc < 0 ? gnutls_strerror(rc) : "empty list");
        if (rc >= 0)
            crts_free(*crts, *n);
        *crts = NULL;
        *n = 0;
        return -1;
    }
    return 0;
}

static int load_key(const char *path, gnutls_privkey_t *key, struct file_id *id, char *err,
                    size_t errlen)
{
    gnutls_datum_t d;
    int rc;

    *key = NULL;
    if (read_file("key", path, &d, id, err, errlen) != 0)
        return -1;
    rc = gnutls_privkey_init(key);
    if (rc >= 0)
        rc = gnutls_privkey_import_x509_raw(*key, &d, GNUTLS_X509_FMT_PEM, NULL, 0);
    datum_free(&d, true);
    if (rc < 0) {
        seterr(err, errlen, "key file '%s' holds no valid unencrypted PEM private key: %s", path,
               gnutls_strerror(rc));
        gnutls_privkey_deinit(*key);
        *key = NULL;
        return -1;
    }
    return 0;
}

/* The key matches the certificate when their SubjectPublicKeyInfo encodings are identical. */
static int key_matches(gnutls_privkey_t key, gnutls_x509_crt_t crt, const char *cert_path,
                       const char *key_path, char *err, size_t errlen)
{
    gnutls_pubkey_t from_key = NULL, from_crt = NULL;
    gnutls_datum_t a = {NULL, 0}, b = {NULL, 0};
    int rc, ok = -1;

    rc = gnutls_pubkey_init(&from_key);
    if (rc >= 0)
        rc = gnutls_pubkey_init(&from_crt);
    if (rc >= 0)
        rc = gnutls_pubkey_import_privkey(from_key, key, 0, 0);
    if (rc >= 0)
        rc = gnutls_pubkey_import_x509(from_crt, crt, 0);
    if (rc >= 0)
        rc = gnutls_pubkey_export2(from_key, GNUTLS_X509_FMT_DER, &a);
    if (rc >= 0)
        rc = gnutls_pubkey_export2(from_crt, GNUTLS_X509_FMT_DER, &b);
    if (rc < 0)
        seterr(err, errlen, "cannot compare key '%s' with certificate '%s': %s", key_path,
               cert_path, gnutls_strerror(rc));
    else if (a.size != b.size || memcmp(a.data, b.data, a.size) != 0)
        seterr(err, errlen, "key file '%s' does not match the certificate in '%s'", key_path,
               cert_path);
    else
        ok = 0;
    gnutls_free(a.data);
    gnutls_free(b.data);
    gnutls_pubkey_deinit(from_key);
    gnutls_pubkey_deinit(from_crt);
    return ok;
}

static void gen_free(struct gen *g)
{
    if (!g)
        return;
    for (unsigned i = 0; i < g->npcerts; i++)
        gnutls_pcert_deinit(&g->pcerts[i]);
    free(g->pcerts);
    gnutls_privkey_deinit(g->key);
    free(g);
}

/* Build a generation from the two files; nothing is published here. */
static struct gen *gen_load(const char *cert_path, const char *key_path, struct file_id *cert_id,
                            struct file_id *key_id, char *err, size_t errlen)
{
    gnutls_x509_crt_t *crts = NULL;
    unsigned ncrts = 0;
    struct gen *g = calloc(1, sizeof *g);
    int rc;

    if (!g) {
        seterr(err, errlen, "out of memory loading TLS certificate");
        return NULL;
    }
    if (load_chain("certificate", cert_path, &crts, &ncrts, cert_id, err, errlen) != 0 ||
        load_key(key_path, &g->key, key_id, err, errlen) != 0 ||
        key_matches(g->key, crts[0], cert_path, key_path, err, errlen) != 0)
        goto fail;
    g->not_after = (long long)gnutls_x509_crt_get_expiration_time(crts[0]);
    g->pcerts = calloc(ncrts, sizeof *g->pcerts);
    if (!g->pcerts) {
        seterr(err, errlen, "out of memory loading TLS certificate");
        goto fail;
    }
    for (; g->npcerts < ncrts; g->npcerts++) {
        rc = gnutls_pcert_import_x509(&g->pcerts[g->npcerts], crts[g->npcerts], 0);
        if (rc < 0) {
            seterr(err, errlen, "cannot use certificate %u of '%s': %s", g->npcerts + 1, cert_path,
                   gnutls_strerror(rc));
            goto fail;
        }
    }
    crts_free(crts, ncrts);
    return g;
fail:
    crts_free(crts, ncrts);
    gen_free(g);
    return NULL;
}

struct hv_tls *hv_tls_open(const char *cert_file, const char *key_file, char *err, size_t errlen)
{
    struct hv_tls *t;

    if (!cert_file || !key_file || !*cert_file || !*key_file) {
        seterr(err, errlen, "TLS certificate and key file names are required");
        return NULL;
    }
    t = calloc(1, sizeof *t);
    if (!t || !(t->cert_path = strdup(cert_file)) || !(t->key_path = strdup(key_file))) {
        seterr(err, errlen, "out of memory opening TLS certificate");
        goto fail;
    }
    t->cur = gen_load(t->cert_path, t->key_path, &t->cert_id, &t->key_id, err, errlen);
    if (!t->cur)
        goto fail;
    pthread_mutex_init(&t->reload_lock, NULL);
    pthread_mutex_init(&t->lock, NULL);
    atomic_init(&t->generation, 0);
    atomic_init(&t->last_check_ms, hv_mono_ms());
    return t;
fail:
    if (t) {
        free(t->cert_path);
        free(t->key_path);
        free(t);
    }
    return NULL;
}

void hv_tls_free(struct hv_tls *t)
{
    struct hv_tls *expected = t;

    if (!t)
        return;
    atomic_compare_exchange_strong(&hv_tls_active, &expected, NULL);
    gen_free(t->cur);
    for (unsigned i = 0; i < t->nretired; i++)
        gen_free(t->retired[i]);
    pthread_mutex_destroy(&t->lock);
    pthread_mutex_destroy(&t->reload_lock);
    free(t->cert_path);
    free(t->key_path);
    free(t);
}

void hv_tls_activate(struct hv_tls *t)
{
    atomic_store(&hv_tls_active, t);
}

static void publish(struct hv_tls *t, struct gen *g)
{
    struct gen *drop = NULL;

    pthread_mutex_lock(&t->lock);
    if (t->nretired == HV_TLS_RETIRED_MAX) {
        drop = t->retired[0];
        memmove(&t->retired[0], &t->retired[1], (HV_TLS_RETIRED_MAX - 1) * sizeof t->retired[0]);
        t->nretired--;
    }
    t->retired[t->nretired++] = t->cur;
    t->cur = g;
    pthread_mutex_unlock(&t->lock);
    gen_free(drop);
}

static int stat_id(const char *what, const char *path, struct file_id *id, char *err, size_t errlen)
{
    char eb[128];
    struct stat st;

    if (stat(path, &st) != 0) {
        seterr(err, errlen, "cannot stat %s file '%s': %s", what, path,
               errno_str(errno, eb, sizeof eb));
        return -1;
    }
    id_from_stat(&st, id);
    return 0;
}

static int reload_locked(struct hv_tls *t, char *err, size_t errlen)
{
    struct file_id cid, kid;
    struct gen *g;

    if (stat_id("certificate", t->cert_path, &cid, err, errlen) != 0 ||
        stat_id("key", t->key_path, &kid, err, errlen) != 0)
        return -1;
    if (id_equal(&cid, &t->cert_id) && id_equal(&kid, &t->key_id))
        return 0;
    /* Failures record nothing, so the next check retries until the pair is good again. */
    g = gen_load(t->cert_path, t->key_path, &cid, &kid, err, errlen);
    if (!g)
        return -1;
    publish(t, g);
    t->cert_id = cid;
    t->key_id = kid;
    atomic_fetch_add(&t->generation, 1);
    return 1;
}

int hv_tls_maybe_reload(struct hv_tls *t, char *err, size_t errlen)
{
    int rc;

    if (!t) {
        seterr(err, errlen, "no TLS certificate handle");
        return -1;
    }
    pthread_mutex_lock(&t->reload_lock);
    rc = reload_locked(t, err, errlen);
    pthread_mutex_unlock(&t->reload_lock);
    return rc;
}

int hv_tls_cert_callback(gnutls_session_t s, const gnutls_datum_t *req_ca_dn, int nreqs,
                         const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                         gnutls_pcert_st **pcert, unsigned int *pcert_length,
                         gnutls_privkey_t *pkey)
{
    struct hv_tls *t = atomic_load(&hv_tls_active);
    long long now, last;
    struct gen *g;

    if (!t)
        return -1;
    now = hv_mono_ms();
    last = atomic_load(&t->last_check_ms);
    /* One caller per second wins the exchange and checks the files; the others go on. */
    if (now - last >= HV_TLS_CHECK_MS &&
        atomic_compare_exchange_strong(&t->last_check_ms, &last, now)) {
        char ebuf[256];
        (void)hv_tls_maybe_reload(t, ebuf, sizeof ebuf);
    }
    pthread_mutex_lock(&t->lock);
    g = t->cur;
    *pcert = g->pcerts;
    *pcert_length = g->npcerts;
    *pkey = g->key;
    pthread_mutex_unlock(&t->lock);
    return 0;
}

const char *hv_tls_priorities(void)
{
    /* TLS 1.3, and TLS 1.2 with forward secrecy and AEAD only: ECDHE key exchange (no static
     * RSA, no finite-field DHE), AES-GCM or ChaCha20-Poly1305 (no CBC, no SHA-1 MACs). */
    return "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-KX-ALL:+ECDHE-RSA:+ECDHE-ECDSA:"
           "-CIPHER-ALL:+AES-256-GCM:+AES-128-GCM:+CHACHA20-POLY1305:-MAC-ALL:+AEAD:"
           "%SERVER_PRECEDENCE";
}

char *hv_tls_read_ca_bundle(const char *path, char *err, size_t errlen)
{
    gnutls_x509_crt_t *crts = NULL;
    unsigned n = 0;
    struct file_id id;
    if (load_chain("client CA", path, &crts, &n, &id, err, errlen) != 0)
        return NULL;
    crts_free(crts, n);
    gnutls_datum_t d;
    if (read_file("client CA", path, &d, &id, err, errlen) != 0)
        return NULL;
    return (char *)d.data;
}

long long hv_tls_not_after(struct hv_tls *t)
{
    if (!t)
        return 0;
    pthread_mutex_lock(&t->lock);
    long long v = t->cur ? t->cur->not_after : 0;
    pthread_mutex_unlock(&t->lock);
    return v;
}

unsigned hv_tls_generation(const struct hv_tls *t)
{
    return t ? atomic_load(&t->generation) : 0;
}

/* ---- self-signed bootstrap ---- */

static int mkdir_p(const char *dir, char *err, size_t errlen)
{
    char eb[128], path[PATH_MAX];
    struct stat st;
    size_t len = strlen(dir);

    if (len >= sizeof path) {
        seterr(err, errlen, "directory name '%s' is too long", dir);
        return -1;
    }
    memcpy(path, dir, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        path[i] = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            seterr(err, errlen, "cannot create directory '%s': %s", path,
                   errno_str(errno, eb, sizeof eb));
            return -1;
        }
        path[i] = dir[i];
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        seterr(err, errlen, "'%s' is not a directory", dir);
        return -1;
    }
    return 0;
}

static int parse_ip(const char *s, unsigned char *bin, unsigned *len)
{
    if (inet_pton(AF_INET, s, bin) == 1) {
        *len = 4;
        return 0;
    }
    if (inet_pton(AF_INET6, s, bin) == 1) {
        *len = 16;
        return 0;
    }
    return -1;
}

/* True when the files in place can be kept: see hv_tls_make_selfsigned in tls.h. */
static bool existing_ok(const char *ca_path, const char *crt_path, const char *key_path,
                        const char *const *dns, const char *const *ips)
{
    gnutls_x509_crt_t *chain = NULL, *cas = NULL;
    unsigned nchain = 0, ncas = 0, status = 1;
    gnutls_privkey_t key = NULL;
    struct file_id id;
    time_t now = time(NULL);
    bool ok = false;
    char e[8];

    if (load_chain("certificate", crt_path, &chain, &nchain, &id, e, sizeof e) != 0 ||
        load_chain("CA", ca_path, &cas, &ncas, &id, e, sizeof e) != 0 ||
        load_key(key_path, &key, &id, e, sizeof e) != 0 ||
        key_matches(key, chain[0], crt_path, key_path, e, sizeof e) != 0)
        goto out;
    if (gnutls_x509_crt_get_expiration_time(chain[0]) < now + HV_TLS_DAY ||
        gnutls_x509_crt_get_activation_time(chain[0]) > now)
        goto out;
    if (gnutls_x509_crt_list_verify(chain, nchain, cas, ncas, NULL, 0, 0, &status) < 0 ||
        status != 0)
        goto out;
    for (size_t i = 0; dns && dns[i]; i++)
        if (!gnutls_x509_crt_check_hostname2(chain[0], dns[i], 0))
            goto out;
    for (size_t i = 0; ips && ips[i]; i++) {
        unsigned char bin[16];
        unsigned len;
        if (parse_ip(ips[i], bin, &len) != 0 || !gnutls_x509_crt_check_ip(chain[0], bin, len, 0))
            goto out;
    }
    ok = true;
out:
    crts_free(chain, nchain);
    crts_free(cas, ncas);
    gnutls_privkey_deinit(key);
    return ok;
}

static int new_key(gnutls_x509_privkey_t *key, char *err, size_t errlen)
{
    int rc = gnutls_x509_privkey_init(key);

    if (rc >= 0)
        rc = gnutls_x509_privkey_generate(*key, GNUTLS_PK_ECDSA,
                                          GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
    if (rc < 0) {
        seterr(err, errlen, "cannot generate an ECDSA P-256 key: %s", gnutls_strerror(rc));
        return -1;
    }
    return 0;
}

/* Fields every certificate gets: v3, random positive serial, validity, CN, key, SKI. */
static int crt_base(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const char *cn, time_t now,
                    unsigned char *ski, size_t *ski_len)
{
    unsigned char serial[16];
    int rc;

    rc = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial);
    serial[0] = (unsigned char)((serial[0] & 0x7f) | 0x40); /* positive, no leading zero */
    if (rc >= 0)
        rc = gnutls_x509_crt_set_version(crt, 3);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_serial(crt, serial, sizeof serial);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_activation_time(crt, now - HV_TLS_BACKDATE);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_expiration_time(crt, now + HV_TLS_VALIDITY);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
                                           (unsigned)strlen(cn));
    if (rc >= 0)
        rc = gnutls_x509_crt_set_key(crt, key);
    if (rc >= 0)
        rc = gnutls_x509_privkey_get_key_id(key, GNUTLS_KEYID_USE_SHA1, ski, ski_len);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_subject_key_id(crt, ski, *ski_len);
    return rc;
}

static int make_ca(gnutls_x509_crt_t ca, gnutls_x509_privkey_t key, time_t now, unsigned char *ski,
                   size_t *ski_len)
{
    unsigned char r[4];
    char cn[64];
    int rc;

    rc = gnutls_rnd(GNUTLS_RND_NONCE, r, sizeof r);
    snprintf(cn, sizeof cn, "hvupdater-ca-%02x%02x%02x%02x", r[0], r[1], r[2], r[3]);
    if (rc >= 0)
        rc = crt_base(ca, key, cn, now, ski, ski_len);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_basic_constraints(ca, 1, 0);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_key_usage(ca, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN |
                                                   GNUTLS_KEY_DIGITAL_SIGNATURE);
    if (rc >= 0)
        rc = gnutls_x509_crt_sign2(ca, ca, key, GNUTLS_DIG_SHA256, 0);
    return rc;
}

static int make_leaf(gnutls_x509_crt_t leaf, gnutls_x509_privkey_t key, gnutls_x509_crt_t ca,
                     gnutls_x509_privkey_t ca_key, const unsigned char *ca_ski, size_t ca_ski_len,
                     const char *const *dns, const char *const *ips, time_t now)
{
    unsigned char ski[64];
    size_t ski_len = sizeof ski;
    const char *cn = "hvupdater";
    int rc;

    if (dns && dns[0])
        cn = dns[0];
    else if (ips && ips[0])
        cn = ips[0];
    rc = crt_base(leaf, key, cn, now, ski, &ski_len);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_authority_key_id(leaf, ca_ski, ca_ski_len);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_basic_constraints(leaf, 0, -1);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_key_usage(leaf, GNUTLS_KEY_DIGITAL_SIGNATURE);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_key_purpose_oid(leaf, GNUTLS_KP_TLS_WWW_SERVER, 0);
    for (size_t i = 0; rc >= 0 && dns && dns[i]; i++)
        rc = gnutls_x509_crt_set_subject_alt_name(leaf, GNUTLS_SAN_DNSNAME, dns[i],
                                                  (unsigned)strlen(dns[i]), GNUTLS_FSAN_APPEND);
    for (size_t i = 0; rc >= 0 && ips && ips[i]; i++) {
        unsigned char bin[16];
        unsigned len = 0;
        (void)parse_ip(ips[i], bin, &len); /* validated by the caller */
        rc = gnutls_x509_crt_set_subject_alt_name(leaf, GNUTLS_SAN_IPADDRESS, bin, len,
                                                  GNUTLS_FSAN_APPEND);
    }
    if (rc >= 0)
        rc = gnutls_x509_crt_sign2(leaf, ca, ca_key, GNUTLS_DIG_SHA256, 0);
    return rc;
}

/* Write dir/.name.tmp with mode, fsync it; the caller renames it into place. */
static int write_tmp(const char *tmp, const gnutls_datum_t *d, mode_t mode, char *err,
                     size_t errlen)
{
    char eb[128];
    size_t off = 0;
    int fd;

    unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0 || fchmod(fd, mode) != 0)
        goto fail;
    while (off < d->size) {
        ssize_t n = write(fd, d->data + off, d->size - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            goto fail;
        off += (size_t)n;
    }
    if (fsync(fd) != 0)
        goto fail;
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    return 0;
fail:
    seterr(err, errlen, "cannot write '%s': %s", tmp, errno_str(errno, eb, sizeof eb));
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return -1;
}

struct out_file {
    const char *name;
    mode_t mode;
    gnutls_datum_t data;
    bool secret;
    char path[PATH_MAX];
    char tmp[PATH_MAX];
};

static int write_all(const char *dir, struct out_file *f, size_t n, char *err, size_t errlen)
{
    char eb[128];
    size_t written = 0;
    int dfd;

    for (; written < n; written++)
        if (write_tmp(f[written].tmp, &f[written].data, f[written].mode, err, errlen) != 0)
            goto fail;
    /* CA first, then key, then leaf: a reader never sees a new leaf without its CA. */
    for (size_t i = 0; i < n; i++) {
        if (rename(f[i].tmp, f[i].path) != 0) {
            seterr(err, errlen, "cannot rename '%s' to '%s': %s", f[i].tmp, f[i].path,
                   errno_str(errno, eb, sizeof eb));
            goto fail;
        }
    }
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 0;
fail:
    for (size_t i = 0; i < written; i++)
        unlink(f[i].tmp);
    return -1;
}

int hv_tls_make_selfsigned(const char *dir, const char *const *dns_names,
                           const char *const *ip_addrs, char *err, size_t errlen)
{
    struct out_file f[3] = {
        {.name = "ca.crt", .mode = 0644},
        {.name = "tls.key", .mode = 0600, .secret = true},
        {.name = "tls.crt", .mode = 0644},
    };
    gnutls_x509_privkey_t ca_key = NULL, leaf_key = NULL;
    gnutls_x509_crt_t ca = NULL, leaf = NULL;
    unsigned char ca_ski[64];
    size_t ca_ski_len = sizeof ca_ski, nnames = 0;
    time_t now = time(NULL);
    int rc, ret = -1;

    if (!dir || !*dir) {
        seterr(err, errlen, "a certificate directory is required");
        return -1;
    }
    for (size_t i = 0; dns_names && dns_names[i]; i++, nnames++) {
        if (!*dns_names[i]) {
            seterr(err, errlen, "empty DNS name in certificate subject names");
            return -1;
        }
    }
    for (size_t i = 0; ip_addrs && ip_addrs[i]; i++, nnames++) {
        unsigned char bin[16];
        unsigned len;
        if (parse_ip(ip_addrs[i], bin, &len) != 0) {
            seterr(err, errlen, "invalid IP address '%s' in certificate subject names",
                   ip_addrs[i]);
            return -1;
        }
    }
    if (nnames == 0) {
        seterr(err, errlen, "at least one DNS name or IP address is required for the certificate");
        return -1;
    }
    for (size_t i = 0; i < 3; i++) {
        int a = snprintf(f[i].path, sizeof f[i].path, "%s/%s", dir, f[i].name);
        int b = snprintf(f[i].tmp, sizeof f[i].tmp, "%s/.%s.tmp", dir, f[i].name);
        if (a < 0 || b < 0 || (size_t)b >= sizeof f[i].tmp) {
            seterr(err, errlen, "directory name '%s' is too long", dir);
            return -1;
        }
    }
    if (mkdir_p(dir, err, errlen) != 0)
        return -1;
    if (existing_ok(f[0].path, f[2].path, f[1].path, dns_names, ip_addrs))
        return 0;

    if (new_key(&ca_key, err, errlen) != 0 || new_key(&leaf_key, err, errlen) != 0)
        goto out;
    rc = gnutls_x509_crt_init(&ca);
    if (rc >= 0)
        rc = gnutls_x509_crt_init(&leaf);
    if (rc >= 0)
        rc = make_ca(ca, ca_key, now, ca_ski, &ca_ski_len);
    if (rc >= 0)
        rc = make_leaf(leaf, leaf_key, ca, ca_key, ca_ski, ca_ski_len, dns_names, ip_addrs, now);
    if (rc >= 0)
        rc = gnutls_x509_crt_export2(ca, GNUTLS_X509_FMT_PEM, &f[0].data);
    if (rc >= 0)
        rc = gnutls_x509_privkey_export2_pkcs8(leaf_key, GNUTLS_X509_FMT_PEM, NULL,
                                               GNUTLS_PKCS_PLAIN, &f[1].data);
    if (rc >= 0)
        rc = gnutls_x509_crt_export2(leaf, GNUTLS_X509_FMT_PEM, &f[2].data);
    if (rc < 0) {
        seterr(err, errlen, "cannot create the self-signed certificates: %s", gnutls_strerror(rc));
        goto out;
    }
    if (write_all(dir, f, 3, err, errlen) != 0)
        goto out;
    ret = 1;
out:
    for (size_t i = 0; i < 3; i++) {
        if (f[i].data.data && f[i].secret)
            explicit_bzero(f[i].data.data, f[i].data.size);
        gnutls_free(f[i].data.data);
    }
    gnutls_x509_crt_deinit(ca);
    gnutls_x509_crt_deinit(leaf);
    gnutls_x509_privkey_deinit(ca_key);
    gnutls_x509_privkey_deinit(leaf_key);
    return ret;
}
