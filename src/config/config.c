/* config.c: load and strictly validate the config file. Unknown keys are errors, so a typo
 * never silently turns a policy off. Defaults mirror schemas/config.json. */
#include "config.h"
#include "log.h"
#include "pattern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONFIG_BYTES (1024 * 1024)

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d)
        abort();
    return d;
}

void hv_config_default(struct hv_config *c)
{
    memset(c, 0, sizeof(*c));
    c->max_body = 4u << 20;
    c->handler_timeout_s = 10;
    hv_settings_default(&c->defaults);
    c->engine.workers = 4;
    c->engine.max_power_cycles = 4;
    c->engine.max_power_cycles_per_host = 1;
    c->engine.step_timeout_s = 300;
    c->engine.max_entries = 10000;
    c->libvirt_uris = calloc(1, sizeof(char *));
    if (!c->libvirt_uris)
        abort();
    c->libvirt_uris[0] = xstrdup("test:///default");
    c->n_libvirt_uris = 1;
    c->keepalive_interval_s = 5;
    c->keepalive_count = 3;
    c->connect_timeout_s = 10;
    c->kube.timeout_s = 5;
    c->kube.check_machines = -1;
    c->log.format = -1;
    c->log.level = -1;
    hv_profiles_builtin(&c->profiles);
    c->kubevirt_timeout_s = 10;
}

void hv_config_free(struct hv_config *c)
{
    free(c->listen);
    free(c->metrics_listen);
    free(c->client_ca_file);
    for (size_t k = 0; k < c->n_libvirt_uris; k++)
        free(c->libvirt_uris[k]);
    free(c->libvirt_uris);
    for (size_t k = 0; k < c->n_kubevirt; k++) {
        struct hv_kubevirt_cfg *kv = &c->kubevirt[k];
        free(kv->name);
        free(kv->server);
        free(kv->token_file);
        free(kv->ca_file);
        for (size_t j = 0; j < kv->n_namespaces; j++)
            free(kv->namespaces[j]);
        free(kv->namespaces);
    }
    free(c->kubevirt);
    c->kubevirt = NULL;
    c->n_kubevirt = 0;
    for (size_t k = 0; k < c->n_vsphere; k++) {
        struct hv_vsphere_cfg *v = &c->vsphere[k];
        free(v->name);
        free(v->url);
        free(v->username_file);
        free(v->password_file);
        free(v->thumbprint);
        free(v->ca_file);
    }
    free(c->vsphere);
    free(c->kube.server);
    free(c->kube.token_file);
    free(c->kube.ca_file);
    free(c->kube.capv_namespace);
    hv_profiles_free(&c->profiles);
    hv_downstream_list_free(&c->downstream);
    memset(c, 0, sizeof(*c));
}

static int int_member(const hj *o, const char *where, const char *key, long lo, long hi, long *out,
                      char *err, size_t errlen)
{
    const hj *v = hj_get(o, key);
    if (!v)
        return 0;
    /* An integer literal only: 60.0 is refused, as Go's int32 and the schema tests do. */
    if (v->type != HJ_INT || v->i < lo || v->i > hi) {
        snprintf(err, errlen, "%s.%s must be an integer from %ld to %ld", where, key, lo, hi);
        return -1;
    }
    *out = (long)v->i;
    return 0;
}

static int int_into(const hj *o, const char *where, const char *key, long lo, long hi, int *dst,
                    char *err, size_t errlen)
{
    long v = *dst;
    if (int_member(o, where, key, lo, hi, &v, err, errlen) < 0)
        return -1;
    *dst = (int)v;
    return 0;
}

static int str_dup_member(const hj *o, const char *where, const char *key, bool required,
                          char **dst, char *err, size_t errlen)
{
    const hj *v = hj_get(o, key);
    if (!v && !required)
        return 0;
    if (!v || v->type != HJ_STRING || v->slen == 0 || strlen(v->s) != v->slen) {
        snprintf(err, errlen, "%s.%s must be a non-empty string", where, key);
        return -1;
    }
    free(*dst);
    *dst = xstrdup(v->s);
    return 0;
}

static int parse_defaults(struct hv_config *c, const hj *d, char *err, size_t errlen)
{
    static const char *const keys[] = {"powerCycle", "onUncoverable", "powerOffMode",
                                       "guestVerification", NULL};
    if (hj_check_keys(d, "defaults", keys, err, errlen) < 0)
        return -1;
    char e[256];
    if (hv_settings_apply(&c->defaults, d, e, sizeof(e)) < 0) {
        snprintf(err, errlen, "defaults: %s", e);
        return -1;
    }
    return 0;
}

static int parse_engine(struct hv_config *c, const hj *e, char *err, size_t errlen)
{
    static const char *const keys[] = {"workers",
                                       "maxConcurrentPowerCycles",
                                       "maxPowerCyclesPerHost",
                                       "stepTimeoutSeconds",
                                       "liveTimeoutSeconds",
                                       "shutdownTimeoutSeconds",
                                       "deadlineSeconds",
                                       "maxEntries",
                                       NULL};
    if (hj_check_keys(e, "engine", keys, err, errlen) < 0)
        return -1;
    return int_into(e, "engine", "workers", 1, 64, &c->engine.workers, err, errlen) < 0 ||
                   int_into(e, "engine", "maxConcurrentPowerCycles", 1, 1000,
                            &c->engine.max_power_cycles, err, errlen) < 0 ||
                   int_into(e, "engine", "maxPowerCyclesPerHost", 1, 1000,
                            &c->engine.max_power_cycles_per_host, err, errlen) < 0 ||
                   int_into(e, "engine", "stepTimeoutSeconds", 1, 86400, &c->engine.step_timeout_s,
                            err, errlen) < 0 ||
                   int_into(e, "engine", "liveTimeoutSeconds", 1, 86400,
                            &c->defaults.live_timeout_s, err, errlen) < 0 ||
                   int_into(e, "engine", "shutdownTimeoutSeconds", 1, 86400,
                            &c->defaults.shutdown_timeout_s, err, errlen) < 0 ||
                   int_into(e, "engine", "deadlineSeconds", 1, 604800, &c->defaults.deadline_s, err,
                            errlen) < 0 ||
                   int_into(e, "engine", "maxEntries", 100, 1000000, &c->engine.max_entries, err,
                            errlen) < 0
               ? -1
               : 0;
}

static int parse_libvirt(struct hv_config *c, const hj *l, char *err, size_t errlen)
{
    static const char *const keys[] = {"uris", "keepaliveIntervalSeconds", "keepaliveCount",
                                       "connectTimeoutSeconds", NULL};
    if (hj_check_keys(l, "libvirt", keys, err, errlen) < 0)
        return -1;
    const hj *uris = hj_get(l, "uris");
    if (uris) {
        if (uris->type != HJ_ARRAY || uris->n == 0 || uris->n > 1024) {
            snprintf(err, errlen, "libvirt.uris must be an array of 1 to 1024 URIs");
            return -1;
        }
        for (size_t k = 0; k < uris->n; k++) {
            const hj *u = uris->items[k];
            if (u->type != HJ_STRING || u->slen == 0 || strlen(u->s) != u->slen ||
                !strstr(u->s, "://")) {
                snprintf(err, errlen, "libvirt.uris[%zu] must be a libvirt URI", k);
                return -1;
            }
            /* user@host is fine (ssh); user:password@host is a credential: never echo it. */
            const char *auth = strstr(u->s, "://") + 3;
            const char *at = memchr(auth, '@', strcspn(auth, "/?#"));
            if (at && memchr(auth, ':', (size_t)(at - auth))) {
                snprintf(err, errlen, "libvirt.uris[%zu] must not hold a password", k);
                return -1;
            }
            if (!hv_re_match(HV_RE_LIBVIRT_URI, u->s) || !hv_uri_ok(u->s)) {
                snprintf(err, errlen,
                         "libvirt.uris[%zu] must be a libvirt URI (scheme://[user@]host/path, "
                         "no spaces)",
                         k);
                return -1;
            }
            for (size_t j = 0; j < k; j++) {
                if (!strcmp(uris->items[j]->s, u->s)) {
                    snprintf(err, errlen, "libvirt.uris[%zu] repeats libvirt.uris[%zu]", k, j);
                    return -1;
                }
            }
        }
        for (size_t k = 0; k < c->n_libvirt_uris; k++)
            free(c->libvirt_uris[k]);
        free(c->libvirt_uris);
        c->libvirt_uris = calloc(uris->n, sizeof(char *));
        if (!c->libvirt_uris)
            abort();
        for (size_t k = 0; k < uris->n; k++)
            c->libvirt_uris[k] = xstrdup(uris->items[k]->s);
        c->n_libvirt_uris = uris->n;
    }
    return int_into(l, "libvirt", "keepaliveIntervalSeconds", 1, 3600, &c->keepalive_interval_s,
                    err, errlen) < 0 ||
                   int_into(l, "libvirt", "keepaliveCount", 1, 100, &c->keepalive_count, err,
                            errlen) < 0 ||
                   int_into(l, "libvirt", "connectTimeoutSeconds", 1, 600, &c->connect_timeout_s,
                            err, errlen) < 0
               ? -1
               : 0;
}

static int parse_vsphere(struct hv_config *c, const hj *v, char *err, size_t errlen)
{
    static const char *const keys[] = {"servers", NULL};
    static const char *const skeys[] = {"name",
                                        "url",
                                        "usernameFile",
                                        "passwordFile",
                                        "thumbprint",
                                        "caFile",
                                        "insecureSkipVerify",
                                        "identityFrom",
                                        "allowRequestThumbprint",
                                        NULL};
    if (hj_check_keys(v, "vsphere", keys, err, errlen) < 0)
        return -1;
    const hj *servers = hj_get(v, "servers");
    if (!servers)
        return 0;
    if (servers->type != HJ_ARRAY || servers->n > 256) {
        snprintf(err, errlen, "vsphere.servers must be an array of at most 256");
        return -1;
    }
    c->vsphere = calloc(servers->n ? servers->n : 1, sizeof(*c->vsphere));
    if (!c->vsphere)
        abort();
    for (size_t k = 0; k < servers->n; k++) {
        const hj *s = servers->items[k];
        struct hv_vsphere_cfg *d = &c->vsphere[k];
        char where[64];
        snprintf(where, sizeof(where), "vsphere.servers[%zu]", k);
        c->n_vsphere = k + 1;
        if (hj_check_keys(s, where, skeys, err, errlen) < 0 ||
            str_dup_member(s, where, "name", true, &d->name, err, errlen) < 0 ||
            str_dup_member(s, where, "url", true, &d->url, err, errlen) < 0 ||
            str_dup_member(s, where, "usernameFile", false, &d->username_file, err, errlen) < 0 ||
            str_dup_member(s, where, "passwordFile", false, &d->password_file, err, errlen) < 0 ||
            str_dup_member(s, where, "thumbprint", false, &d->thumbprint, err, errlen) < 0 ||
            str_dup_member(s, where, "caFile", false, &d->ca_file, err, errlen) < 0)
            return -1;
        const hj *from = hj_get(s, "identityFrom");
        if (from && (from->type != HJ_STRING || strcmp(from->s, "capv") != 0)) {
            snprintf(err, errlen, "%s.identityFrom must be \"capv\"", where);
            return -1;
        }
        d->identity_capv = from != NULL;
        if (!d->identity_capv && (!d->username_file || !d->password_file)) {
            snprintf(err, errlen, "%s.%s must be a non-empty string", where,
                     d->username_file ? "passwordFile" : "usernameFile");
            return -1;
        }
        if (!d->username_file != !d->password_file) {
            snprintf(err, errlen, "%s: usernameFile and passwordFile go together", where);
            return -1;
        }
        if (strncmp(d->url, "https://", 8)) {
            snprintf(err, errlen, "%s.url must start with https://", where);
            return -1;
        }
        /* Never echo the URL: user info in it is a credential. */
        if (memchr(d->url + 8, '@', strcspn(d->url + 8, "/?#"))) {
            snprintf(err, errlen,
                     "%s.url must not hold user info (the user name and password go in "
                     "usernameFile and passwordFile)",
                     where);
            return -1;
        }
        if (!hv_re_match(HV_RE_VSPHERE_URL, d->url) || !hv_uri_ok(d->url)) {
            snprintf(err, errlen, "%s.url must be https://HOST[:PORT]/PATH without spaces", where);
            return -1;
        }
        if (strlen(d->name) > 253 || !hv_re_match(HV_RE_SERVER_NAME, d->name)) {
            snprintf(err, errlen, "%s.name must be 1 to 253 characters without spaces", where);
            return -1;
        }
        if (d->thumbprint && !hv_re_match(HV_RE_THUMBPRINT, d->thumbprint)) {
            snprintf(err, errlen,
                     "%s.thumbprint must be a SHA-1 or SHA-256 fingerprint: 40 or 64 hex "
                     "digits, plain or as colon-separated pairs",
                     where);
            return -1;
        }
        const hj *ins = hj_get(s, "insecureSkipVerify");
        if (ins && ins->type != HJ_BOOL) {
            snprintf(err, errlen, "%s.insecureSkipVerify must be a boolean", where);
            return -1;
        }
        d->insecure_skip_verify = ins && ins->b;
        const hj *art = hj_get(s, "allowRequestThumbprint");
        if (art && art->type != HJ_BOOL) {
            snprintf(err, errlen, "%s.allowRequestThumbprint must be a boolean", where);
            return -1;
        }
        d->allow_request_thumbprint = art && art->b;
    }
    return 0;
}

/* "kubevirt": {"clusters": [{name, server, tokenFile, caFile, namespaces}], timeoutSeconds,
 * followInfraClusterSecretRef}.
 * No clusters (or an empty section): one, in-cluster, named "in-cluster". */
static int parse_kubevirt(struct hv_config *c, const hj *v, char *err, size_t errlen)
{
    static const char *const keys[] = {"clusters", "timeoutSeconds", "followInfraClusterSecretRef",
                                       NULL};
    static const char *const ckeys[] = {"name",   "server",     "tokenFile",
                                        "caFile", "namespaces", NULL};
    if (v->type != HJ_OBJECT) {
        snprintf(err, errlen, "kubevirt must be an object");
        return -1;
    }
    if (hj_check_keys(v, "kubevirt", keys, err, errlen) < 0 ||
        int_into(v, "kubevirt", "timeoutSeconds", 1, 60, &c->kubevirt_timeout_s, err, errlen) < 0)
        return -1;
    const hj *follow = hj_get(v, "followInfraClusterSecretRef");
    if (follow && follow->type != HJ_BOOL) {
        snprintf(err, errlen, "kubevirt.followInfraClusterSecretRef must be a boolean");
        return -1;
    }
    c->kubevirt_follow_secret = follow && follow->b;
    const hj *cl = hj_get(v, "clusters");
    if (cl && (cl->type != HJ_ARRAY || cl->n > 64)) {
        snprintf(err, errlen, "kubevirt.clusters must be an array of at most 64");
        return -1;
    }
    size_t n = cl && cl->n ? cl->n : 1;
    c->kubevirt = calloc(n, sizeof(*c->kubevirt));
    if (!c->kubevirt)
        abort();
    c->n_kubevirt = n;
    for (size_t k = 0; k < n; k++) {
        struct hv_kubevirt_cfg *d = &c->kubevirt[k];
        const hj *s = cl && cl->n ? cl->items[k] : NULL;
        char where[64];
        snprintf(where, sizeof(where), "kubevirt.clusters[%zu]", k);
        if (s && (hj_check_keys(s, where, ckeys, err, errlen) < 0 ||
                  str_dup_member(s, where, "name", false, &d->name, err, errlen) < 0 ||
                  str_dup_member(s, where, "server", false, &d->server, err, errlen) < 0 ||
                  str_dup_member(s, where, "tokenFile", false, &d->token_file, err, errlen) < 0 ||
                  str_dup_member(s, where, "caFile", false, &d->ca_file, err, errlen) < 0))
            return -1;
        if (!d->name)
            d->name = xstrdup(d->server ? "" : "in-cluster");
        if (!d->name[0] || strlen(d->name) > 253 || !hv_re_match(HV_RE_SERVER_NAME, d->name)) {
            snprintf(err, errlen, "%s.name must be 1 to 253 characters without spaces", where);
            return -1;
        }
        for (size_t j = 0; j < k; j++) {
            if (!strcmp(c->kubevirt[j].name, d->name)) {
                snprintf(err, errlen, "%s.name repeats kubevirt.clusters[%zu].name", where, j);
                return -1;
            }
        }
        if (d->server && (strncmp(d->server, "https://", 8) != 0 ||
                          !hv_re_match(HV_RE_VSPHERE_URL, d->server))) {
            snprintf(err, errlen, "%s.server must be https://HOST[:PORT] without spaces", where);
            return -1;
        }
        const hj *ns = s ? hj_get(s, "namespaces") : NULL;
        if (!ns)
            continue;
        if (ns->type != HJ_ARRAY || ns->n > 256) {
            snprintf(err, errlen, "%s.namespaces must be an array of at most 256", where);
            return -1;
        }
        d->namespaces = calloc(ns->n ? ns->n : 1, sizeof(char *));
        if (!d->namespaces)
            abort();
        for (size_t j = 0; j < ns->n; j++) {
            const hj *e = ns->items[j];
            if (e->type != HJ_STRING || !e->slen || e->slen > 63 || strlen(e->s) != e->slen ||
                strspn(e->s, "abcdefghijklmnopqrstuvwxyz0123456789-") != e->slen) {
                snprintf(err, errlen, "%s.namespaces[%zu] must be a namespace name", where, j);
                return -1;
            }
            d->namespaces[j] = xstrdup(e->s);
            d->n_namespaces = j + 1;
        }
    }
    return 0;
}

static int parse_kube(struct hv_config *c, const hj *k, char *err, size_t errlen)
{
    static const char *const keys[] = {
        "server", "tokenFile",       "caFile",        "capvNamespace", "timeoutSeconds",
        "events", "holdRemediation", "checkMachines", "dryRunClaims",  NULL};
    if (hj_check_keys(k, "kubernetes", keys, err, errlen) < 0 ||
        str_dup_member(k, "kubernetes", "server", false, &c->kube.server, err, errlen) < 0 ||
        str_dup_member(k, "kubernetes", "tokenFile", false, &c->kube.token_file, err, errlen) < 0 ||
        str_dup_member(k, "kubernetes", "caFile", false, &c->kube.ca_file, err, errlen) < 0 ||
        str_dup_member(k, "kubernetes", "capvNamespace", false, &c->kube.capv_namespace, err,
                       errlen) < 0 ||
        int_into(k, "kubernetes", "timeoutSeconds", 1, 30, &c->kube.timeout_s, err, errlen) < 0)
        return -1;
    if (c->kube.server && (strncmp(c->kube.server, "https://", 8) != 0 ||
                           !hv_re_match(HV_RE_VSPHERE_URL, c->kube.server))) {
        snprintf(err, errlen, "kubernetes.server must be https://HOST[:PORT] without spaces");
        return -1;
    }
    const hj *ev = hj_get(k, "events");
    if (ev && ev->type != HJ_BOOL) {
        snprintf(err, errlen, "kubernetes.events must be a boolean");
        return -1;
    }
    c->kube.events = ev && ev->b;
    const hj *hold = hj_get(k, "holdRemediation");
    if (hold && hold->type != HJ_BOOL) {
        snprintf(err, errlen, "kubernetes.holdRemediation must be a boolean");
        return -1;
    }
    c->kube.mhc_hold = hold && hold->b;
    const hj *chk = hj_get(k, "checkMachines");
    if (chk && chk->type != HJ_BOOL) {
        snprintf(err, errlen, "kubernetes.checkMachines must be a boolean");
        return -1;
    }
    c->kube.check_machines = chk ? chk->b : -1;
    const hj *dry = hj_get(k, "dryRunClaims"); /* kube/dryrun.h */
    if (dry && dry->type != HJ_BOOL) {
        snprintf(err, errlen, "kubernetes.dryRunClaims must be a boolean");
        return -1;
    }
    c->kube.dry_run_claims = dry && dry->b;
    return 0;
}

bool hv_config_checks_machines(const struct hv_config *c)
{
    if (c->kube.check_machines >= 0)
        return c->kube.check_machines == 1;
    if (c->kube.server || c->kube.events || c->kube.mhc_hold || c->kubevirt_follow_secret)
        return true;
    for (size_t k = 0; k < c->n_vsphere; k++)
        if (c->vsphere[k].identity_capv)
            return true;
    return false;
}

int hv_failure_policy_parse(const char *s, bool *ignore)
{
    if (!strcmp(s, "Fail"))
        *ignore = false;
    else if (!strcmp(s, "Ignore"))
        *ignore = true;
    else
        return -1;
    return 0;
}

static int parse_log(struct hv_config *c, const hj *l, char *err, size_t errlen)
{
    static const char *const keys[] = {"format", "level", NULL};
    if (hj_check_keys(l, "log", keys, err, errlen) < 0)
        return -1;
    const hj *f = hj_get(l, "format"), *v = hj_get(l, "level");
    int format = f && f->type == HJ_STRING ? hv_log_format_from_name(f->s) : -1;
    int level = v && v->type == HJ_STRING ? hv_log_level_from_name(v->s) : -1;
    if (f && format < 0) {
        snprintf(err, errlen, "log.format must be \"hvupdater\" or \"capi\"");
        return -1;
    }
    if (v && level < 0) {
        snprintf(err, errlen, "log.level must be \"debug\", \"info\", \"warn\" or \"error\"");
        return -1;
    }
    if (f)
        c->log.format = format;
    if (v)
        c->log.level = level;
    return 0;
}

int hv_config_parse(struct hv_config *c, const char *text, size_t len, char *err, size_t errlen)
{
    static const char *const keys[] = {"listen",
                                       "metricsListen",
                                       "clientCAFile",
                                       "maxBodyBytes",
                                       "handlerTimeoutSeconds",
                                       "canUpdateFailurePolicy",
                                       "defaults",
                                       "engine",
                                       "libvirt",
                                       "vsphere",
                                       "kubevirt",
                                       "profiles",
                                       "$schema",
                                       "downstream",
                                       "kubernetes",
                                       "log",
                                       NULL};
    char e[256];
    hj *doc = hj_parse(text, len, e, sizeof(e));
    if (!doc) {
        snprintf(err, errlen, "config: %s", e);
        return -1;
    }
    int rc = -1;
    long v = (long)c->max_body;
    /* The embedded default's in-process test:///default driver is for trying hvupdater out:
     * a config file names the real fleet, or no libvirt host at all. */
    for (size_t k = 0; k < c->n_libvirt_uris; k++)
        free(c->libvirt_uris[k]);
    c->n_libvirt_uris = 0;
    if (hj_check_keys(doc, "config", keys, err, errlen) < 0 ||
        str_dup_member(doc, "config", "listen", false, &c->listen, err, errlen) < 0 ||
        str_dup_member(doc, "config", "metricsListen", false, &c->metrics_listen, err, errlen) <
            0 ||
        str_dup_member(doc, "config", "clientCAFile", false, &c->client_ca_file, err, errlen) < 0 ||
        int_member(doc, "config", "maxBodyBytes", 1024, 64L << 20, &v, err, errlen) < 0 ||
        int_into(doc, "config", "handlerTimeoutSeconds", 1, 30, &c->handler_timeout_s, err,
                 errlen) < 0)
        goto out;
    c->max_body = (size_t)v;
    const hj *fp = hj_get(doc, "canUpdateFailurePolicy");
    if (fp) {
        if (fp->type != HJ_STRING || hv_failure_policy_parse(fp->s, &c->can_update_ignore) < 0) {
            snprintf(err, errlen, "config.canUpdateFailurePolicy must be Fail or Ignore");
            goto out;
        }
    }
    if (hj_get(doc, "$schema") && hj_get(doc, "$schema")->type != HJ_STRING) {
        snprintf(err, errlen, "config.$schema must be a string");
        goto out;
    }
    if (c->metrics_listen && !hv_re_match(HV_RE_LISTEN, c->metrics_listen)) {
        snprintf(err, errlen,
                 "config.metricsListen must be IPV4:PORT or [IPV6]:PORT with a numeric address "
                 "and a port from 1 to 65535");
        goto out;
    }
    if (c->listen && !hv_re_match(HV_RE_LISTEN, c->listen)) {
        snprintf(err, errlen,
                 "config.listen must be IPV4:PORT or [IPV6]:PORT with a numeric address and a "
                 "port from 1 to 65535");
        goto out;
    }
    if ((hj_get(doc, "defaults") && parse_defaults(c, hj_get(doc, "defaults"), err, errlen) < 0) ||
        (hj_get(doc, "engine") && parse_engine(c, hj_get(doc, "engine"), err, errlen) < 0) ||
        (hj_get(doc, "libvirt") && parse_libvirt(c, hj_get(doc, "libvirt"), err, errlen) < 0) ||
        (hj_get(doc, "vsphere") && parse_vsphere(c, hj_get(doc, "vsphere"), err, errlen) < 0) ||
        (hj_get(doc, "kubevirt") && parse_kubevirt(c, hj_get(doc, "kubevirt"), err, errlen) < 0) ||
        (hj_get(doc, "kubernetes") && parse_kube(c, hj_get(doc, "kubernetes"), err, errlen) < 0) ||
        (hj_get(doc, "log") && parse_log(c, hj_get(doc, "log"), err, errlen) < 0))
        goto out;
    if (hj_get(doc, "profiles") &&
        hv_profiles_load(&c->profiles, hj_get(doc, "profiles"), err, errlen) < 0)
        goto out;
    if (hj_get(doc, "downstream") &&
        hv_downstream_cfg_parse(&c->downstream, hj_get(doc, "downstream"), c->handler_timeout_s,
                                err, errlen) < 0)
        goto out;
    rc = 0;
out:
    hj_free(doc);
    return rc;
}

int hv_config_load_file(struct hv_config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "config %s: cannot open", path);
        return -1;
    }
    char *buf = malloc(MAX_CONFIG_BYTES + 1);
    if (!buf)
        abort();
    size_t n = fread(buf, 1, MAX_CONFIG_BYTES + 1, f);
    fclose(f);
    if (n > MAX_CONFIG_BYTES) {
        free(buf);
        snprintf(err, errlen, "config %s: larger than 1 MiB", path);
        return -1;
    }
    int rc = hv_config_parse(c, buf, n, err, errlen);
    free(buf);
    return rc;
}
