/* kv_kubeconfig.c: a kubeconfig (CAPK's infraClusterSecretRef Secret, key "kubeconfig") read
 * with libyaml into what kv_http.c needs: the server, its CA, and a bearer token or a client
 * certificate and key, all kept in memory (libcurl takes them as blobs; nothing is written to
 * disk). The YAML is first read into a small tree under hard limits (size, depth, nodes);
 * aliases are refused (no billion-laughs expansion), as are exec and auth-provider plugins,
 * file paths (the files of whoever wrote the Secret are not in hvupdater's pod), basic auth,
 * proxies and insecure-skip-tls-verify: a connection that carries credentials is verified.
 * Messages name keys and contexts only, never a value.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "kv_internal.h"

#define KC_MAX_DEPTH 32
#define KC_MAX_NODES 20000

enum kc_type { KC_SCALAR, KC_MAP, KC_SEQ };

struct kc_node {
    enum kc_type type;
    char *s; /* scalar value (NUL-terminated; len bytes) */
    size_t len;
    struct kc_node **kids; /* KC_MAP: key, value, key, value ...; KC_SEQ: items */
    size_t n, cap;
};

static void node_free(struct kc_node *n)
{
    if (!n)
        return;
    if (n->s) {
        kv_wipe(n->s, n->len);
        free(n->s);
    }
    for (size_t k = 0; k < n->n; k++)
        node_free(n->kids[k]);
    free(n->kids);
    free(n);
}

static struct kc_node *node_new(enum kc_type t)
{
    struct kc_node *n = calloc(1, sizeof(*n));
    if (!n)
        abort();
    n->type = t;
    return n;
}

static void node_add(struct kc_node *p, struct kc_node *c)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        struct kc_node **k = realloc(p->kids, cap * sizeof(*k));
        if (!k)
            abort();
        p->kids = k;
        p->cap = cap;
    }
    p->kids[p->n++] = c;
}

static int fail(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return -1;
}

/* The first document of text as a tree; NULL with why on malformed or hostile input. */
static struct kc_node *read_tree(const char *text, size_t len, char *why, size_t whylen)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        fail(why, whylen, "kubeconfig: cannot start the YAML parser");
        return NULL;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    struct kc_node *stack[KC_MAX_DEPTH + 1];
    size_t depth = 0, nodes = 0;
    struct kc_node *root = NULL;
    bool done = false, bad = false;
    while (!done && !bad) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            fail(why, whylen, "kubeconfig: not YAML (line %lu)",
                 (unsigned long)p.problem_mark.line + 1);
            bad = true;
            break;
        }
        struct kc_node *n = NULL;
        switch (ev.type) {
        case YAML_ALIAS_EVENT:
            fail(why, whylen, "kubeconfig: YAML aliases are not accepted");
            bad = true;
            break;
        case YAML_SCALAR_EVENT:
            n = node_new(KC_SCALAR);
            n->len = ev.data.scalar.length;
            n->s = malloc(n->len + 1);
            if (!n->s)
                abort();
            memcpy(n->s, ev.data.scalar.value, n->len);
            n->s[n->len] = '\0';
            break;
        case YAML_MAPPING_START_EVENT:
            n = node_new(KC_MAP);
            break;
        case YAML_SEQUENCE_START_EVENT:
            n = node_new(KC_SEQ);
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
            if (depth)
                depth--;
            if (!depth)
                done = true; /* the first document's root is complete */
            break;
        case YAML_DOCUMENT_END_EVENT:
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
        if (!n)
            continue;
        if (++nodes > KC_MAX_NODES) {
            node_free(n);
            fail(why, whylen, "kubeconfig: more than %d YAML nodes", KC_MAX_NODES);
            bad = true;
            break;
        }
        if (!root) {
            root = n;
        } else if (depth) {
            node_add(stack[depth - 1], n);
        } else {
            node_free(n); /* a second root cannot happen within one document */
            continue;
        }
        if (n->type != KC_SCALAR) {
            if (depth == KC_MAX_DEPTH) {
                fail(why, whylen, "kubeconfig: nested deeper than %d", KC_MAX_DEPTH);
                bad = true;
                break;
            }
            stack[depth++] = n;
        } else if (n == root) {
            done = true;
        }
    }
    yaml_parser_delete(&p);
    if (bad) {
        node_free(root);
        return NULL;
    }
    if (!root || root->type != KC_MAP) {
        node_free(root);
        fail(why, whylen, "kubeconfig: not a YAML mapping");
        return NULL;
    }
    return root;
}

/* m[key] of a mapping (keys are scalars; the last one wins, as in Go's YAML decoding) */
static const struct kc_node *get(const struct kc_node *m, const char *key)
{
    const struct kc_node *v = NULL;
    if (!m || m->type != KC_MAP)
        return NULL;
    for (size_t k = 0; k + 1 < m->n; k += 2)
        if (m->kids[k]->type == KC_SCALAR && !strcmp(m->kids[k]->s, key))
            v = m->kids[k + 1];
    return v;
}

static const char *str(const struct kc_node *m, const char *key)
{
    const struct kc_node *v = get(m, key);
    return v && v->type == KC_SCALAR && v->len == strlen(v->s) ? v->s : NULL;
}

/* The entry of list key (clusters, contexts, users) whose name is name, and its inner
 * mapping under inner; NULL when none. */
static const struct kc_node *named(const struct kc_node *root, const char *list, const char *name,
                                   const char *inner)
{
    const struct kc_node *l = get(root, list);
    if (!l || l->type != KC_SEQ)
        return NULL;
    const struct kc_node *found = NULL;
    for (size_t k = 0; k < l->n; k++) {
        const char *nm = str(l->kids[k], "name");
        if (nm && !strcmp(nm, name))
            found = get(l->kids[k], inner);
    }
    return found && found->type == KC_MAP ? found : NULL;
}

static int b64v(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

char *kv_b64_decode(const char *in, size_t len, size_t *out_len)
{
    char *out = malloc(len / 4 * 3 + 4);
    if (!out)
        abort();
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0, pad = 0;
    for (size_t k = 0; k < len; k++) {
        unsigned char c = (unsigned char)in[k];
        if (c == '\n' || c == '\r' || c == ' ' || c == '\t')
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64v(c);
        if (v < 0 || pad) {
            kv_wipe(out, len / 4 * 3 + 4);
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (pad > 2 || bits >= 6) {
        kv_wipe(out, len / 4 * 3 + 4);
        free(out);
        return NULL;
    }
    out[n] = '\0';
    *out_len = n;
    return out;
}

/* key's base64 value decoded into *dst (NUL-terminated, *dlen bytes); 0 absent, 1 set, -1 bad */
static int b64_member(const struct kc_node *m, const char *key, char **dst, size_t *dlen)
{
    const char *v = str(m, key);
    if (!v)
        return get(m, key) ? -1 : 0;
    *dst = kv_b64_decode(v, strlen(v), dlen);
    return *dst && *dlen ? 1 : -1;
}

void kv_kubeconfig_free(struct kv_kubeconfig *kc)
{
    if (!kc)
        return;
    char *bufs[] = {kc->ca, kc->cert, kc->key, kc->token};
    size_t lens[] = {kc->ca_len, kc->cert_len, kc->key_len, kc->token ? strlen(kc->token) : 0};
    for (size_t k = 0; k < sizeof(bufs) / sizeof(bufs[0]); k++) {
        if (bufs[k])
            kv_wipe(bufs[k], lens[k]);
        free(bufs[k]);
    }
    memset(kc, 0, sizeof(*kc));
}

/* keys of cluster / user entries that hvupdater refuses, with why */
static const char *const refused_cluster[][2] = {
    {"insecure-skip-tls-verify", "insecure-skip-tls-verify is not accepted (the connection "
                                 "carries credentials: give certificate-authority-data)"},
    {"certificate-authority", "certificate-authority is a file path; give "
                              "certificate-authority-data"},
    {"proxy-url", "proxy-url is not supported"},
    {"tls-server-name", "tls-server-name is not supported"},
};
static const char *const refused_user[][2] = {
    {"exec", "exec credential plugins are not supported (give a token or a client certificate)"},
    {"auth-provider", "auth-provider plugins are not supported (give a token or a client "
                      "certificate)"},
    {"tokenFile", "tokenFile is a file path; give token"},
    {"client-certificate", "client-certificate is a file path; give client-certificate-data"},
    {"client-key", "client-key is a file path; give client-key-data"},
    {"username", "basic authentication (username/password) is not supported"},
    {"password", "basic authentication (username/password) is not supported"},
    {"as", "impersonation (as) is not supported"},
};

static int parse_tree(const struct kc_node *root, struct kv_kubeconfig *kc, char *why,
                      size_t whylen)
{
    const char *cur = str(root, "current-context");
    if (!cur || !*cur)
        return fail(why, whylen, "kubeconfig: no current-context");
    const struct kc_node *ctx = named(root, "contexts", cur, "context");
    if (!ctx)
        return fail(why, whylen, "kubeconfig: current-context \"%.64s\" is not in contexts", cur);
    const char *cname = str(ctx, "cluster"), *uname = str(ctx, "user");
    const char *ns = str(ctx, "namespace");
    if (!cname || !*cname)
        return fail(why, whylen, "kubeconfig: context \"%.64s\" names no cluster", cur);
    const struct kc_node *cl = named(root, "clusters", cname, "cluster");
    if (!cl)
        return fail(why, whylen, "kubeconfig: cluster \"%.64s\" is not in clusters", cname);
    for (size_t k = 0; k < sizeof(refused_cluster) / sizeof(refused_cluster[0]); k++) {
        const char *v = str(cl, refused_cluster[k][0]);
        /* insecure-skip-tls-verify: false is what it would be anyway */
        if (get(cl, refused_cluster[k][0]) && !(v && !strcmp(v, "false")))
            return fail(why, whylen, "kubeconfig: cluster \"%.64s\": %s", cname,
                        refused_cluster[k][1]);
    }
    const char *server = str(cl, "server");
    if (!server || strncmp(server, "https://", 8) || strlen(server) >= sizeof(kc->server) ||
        strpbrk(server, " \t\r\n?#"))
        return fail(why, whylen, "kubeconfig: cluster \"%.64s\": server is not https://HOST[:PORT]",
                    cname);
    snprintf(kc->server, sizeof(kc->server), "%s", server);
    size_t n = strlen(kc->server);
    while (n > 8 && kc->server[n - 1] == '/')
        kc->server[--n] = '\0';
    if (b64_member(cl, "certificate-authority-data", &kc->ca, &kc->ca_len) < 0)
        return fail(why, whylen,
                    "kubeconfig: cluster \"%.64s\": certificate-authority-data is not base64",
                    cname);
    if (ns && *ns) {
        if (strlen(ns) >= sizeof(kc->ns) ||
            strspn(ns, "abcdefghijklmnopqrstuvwxyz0123456789-.") != strlen(ns))
            return fail(why, whylen, "kubeconfig: context \"%.64s\": namespace is not a name", cur);
        snprintf(kc->ns, sizeof(kc->ns), "%s", ns);
    }
    if (!uname || !*uname)
        return fail(why, whylen, "kubeconfig: context \"%.64s\" names no user", cur);
    const struct kc_node *u = named(root, "users", uname, "user");
    if (!u)
        return fail(why, whylen, "kubeconfig: user \"%.64s\" is not in users", uname);
    for (size_t k = 0; k < sizeof(refused_user) / sizeof(refused_user[0]); k++)
        if (get(u, refused_user[k][0]))
            return fail(why, whylen, "kubeconfig: user \"%.64s\": %s", uname, refused_user[k][1]);
    const char *tok = str(u, "token");
    if (get(u, "token") && (!tok || !*tok || strpbrk(tok, "\r\n") || strlen(tok) >= 8192))
        return fail(why, whylen, "kubeconfig: user \"%.64s\": token is not one line", uname);
    if (tok) {
        kc->token = strdup(tok);
        if (!kc->token)
            abort();
    }
    int hc = b64_member(u, "client-certificate-data", &kc->cert, &kc->cert_len);
    int hk = b64_member(u, "client-key-data", &kc->key, &kc->key_len);
    if (hc < 0 || hk < 0)
        return fail(why, whylen,
                    "kubeconfig: user \"%.64s\": client-certificate-data or client-key-data is "
                    "not base64",
                    uname);
    if (hc != hk)
        return fail(why, whylen,
                    "kubeconfig: user \"%.64s\": client-certificate-data and client-key-data go "
                    "together",
                    uname);
    if (!kc->token && !kc->cert)
        return fail(why, whylen,
                    "kubeconfig: user \"%.64s\" has no token and no client certificate", uname);
    return 0;
}

int kv_kubeconfig_parse(const char *text, size_t len, struct kv_kubeconfig *kc, char *why,
                        size_t whylen)
{
    memset(kc, 0, sizeof(*kc));
    if (len > KV_KUBECONFIG_MAX)
        return fail(why, whylen, "kubeconfig: larger than %d bytes", KV_KUBECONFIG_MAX);
    if (memchr(text, '\0', len))
        return fail(why, whylen, "kubeconfig: contains a NUL byte");
    struct kc_node *root = read_tree(text, len, why, whylen);
    if (!root)
        return -1;
    int rc = parse_tree(root, kc, why, whylen);
    node_free(root);
    if (rc < 0)
        kv_kubeconfig_free(kc);
    return rc;
}
