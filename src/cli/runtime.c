/* runtime.c: builds backends from the config (libvirt hosts, vCenters, KubeVirt clusters), the
 * engine over them,
 * and the hooks context the server answers with. Owns all of them; frees in reverse order
 * (engine first: its workers use the backends). */
#include "runtime.h"
#include "capk.h"
#include "capv.h"
#include "compose.h"
#include "dryrun.h"
#include "events.h"
#include "engine.h"
#include "log.h"
#include "machinecheck.h"
#include "metrics.h"
#include "mhc.h"
#include "oprecord.h"
#include "phase.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef HV_HAVE_BACKEND_libvirt
#include "libvirt_backend.h"
#endif
#ifdef HV_HAVE_BACKEND_vsphere
#include "vsphere_backend.h"
#endif
#ifdef HV_HAVE_BACKEND_kubevirt
#include "kubevirt_backend.h"
#endif

struct hv_runtime {
    struct hv_hooks_ctx hooks;
    struct hv_plan_hooks plan_hooks;
    struct hv_engine *engine;
    struct hv_compose *compose;
    struct hv_backend *bes[3];
    size_t n_bes;
    bool kv_curl;             /* curl_global_init was called for the KubeVirt backend */
    struct hv_kube *kube;     /* only when something needs the API server (capv, events) */
    const char *capv_ns;      /* borrowed from the config */
    struct hv_events *events; /* kubernetes.events: Warning Events on Machines */
    struct hv_mhc *mhc;       /* kubernetes.holdRemediation */
    struct hv_mc *mc;         /* kubernetes.checkMachines */
    struct hv_dryrun *dryrun; /* kubernetes.dryRunClaims */
    int step_timeout_s;       /* engine.stepTimeoutSeconds (hv_rec_in_power_cycle) */
};

/* ---- machine check ---- */
/* hv_gate_fn over kube/machinecheck.h (the same verdicts). */
_Static_assert((int)HV_GATE_WAIT == (int)HV_MC_WAIT && (int)HV_GATE_FAIL == (int)HV_MC_FAIL,
               "machine check verdicts");
static enum hv_gate check_machine(void *ctx, enum hv_hook h, const hj *req, hj **req_out, char *msg,
                                  size_t msglen)
{
    return (enum hv_gate)hv_mc_check(ctx, h, req, req_out, msg, msglen);
}

/* hv_resume_confirm_fn (engine/books.h): a power cycle the engine's scan found in flight, as
 * the API server holds its Machine and infra machine now (read on the scan's thread). */
enum hv_resume_verdict hv_runtime_confirm_resume(struct hv_mc *mc,
                                                 const struct hv_profiles *profiles,
                                                 const char *backend, const struct hv_vm_ref *vm,
                                                 const struct hv_hw *desired, char *msg,
                                                 size_t msglen)
{
    const struct hv_machine_id *m = &vm->machine;
    struct hv_mc_resume_ask a = {.ns = m->ns,
                                 .name = m->name,
                                 .uid = m->uid,
                                 .infra_api_version = m->infra_api_version,
                                 .infra_kind = m->infra_kind,
                                 .infra_name = m->infra_name};
    hj *machine = NULL, *infra = NULL;
    enum hv_mc_resume v = hv_mc_resume_read(mc, &a, &machine, &infra, msg, msglen);
    if (v == HV_MC_RESUME_OK &&
        hv_resume_matches(profiles, backend, machine, infra, vm, desired, msg, msglen) < 0)
        v = HV_MC_RESUME_REFUSED;
    hj_free(machine);
    hj_free(infra);
    return v == HV_MC_RESUME_OK        ? HV_RESUME_CONFIRMED
           : v == HV_MC_RESUME_REFUSED ? HV_RESUME_REFUSED
                                       : HV_RESUME_UNKNOWN;
}

static enum hv_resume_verdict confirm_resume(void *ctx, const char *backend,
                                             const struct hv_vm_ref *vm,
                                             const struct hv_hw *desired, char *msg, size_t msglen)
{
    struct hv_runtime *rt = ctx;
    return hv_runtime_confirm_resume(rt->mc, rt->hooks.profiles, backend, vm, desired, msg, msglen);
}
/* ---- end machine check ---- */

/* hv_machine_vm_fn: the Machine's VM, for the remediation hold (queues only). The reference
 * is the JSON of its non-empty fields, which vm_state reads back. */
static void track_machine(void *ctx, const hj *machine, const char *backend,
                          const struct hv_vm_ref *ref)
{
    const hj *md = hj_get(machine, "metadata");
    hj *o = hv_vm_ref_to_json(ref);
    char *text = hj_dump(o, NULL);
    hj_free(o);
    if (text)
        hv_mhc_track(ctx, hj_get_str(md, "namespace"), hj_get_str(md, "name"), backend, text);
    free(text);
}

/* hv_mhc_vm_fn: is the VM in a power cycle, by the operation record stored on it. */
static enum hv_mhc_vm vm_state(void *ctx, const char *backend, const char *ref_text)
{
    struct hv_runtime *rt = ctx;
    struct hv_backend *be = hv_engine_backend(rt->engine, backend);
    char e[128];
    hj *o = hj_parse(ref_text, strlen(ref_text), e, sizeof(e));
    if (!be || !o || o->type != HJ_OBJECT) {
        hj_free(o);
        return HV_MHC_VM_UNKNOWN;
    }
    struct hv_vm_ref ref;
    memset(&ref, 0, sizeof(ref));
    hv_vm_ref_from_json(o, &ref);
    hj_free(o);
    struct hv_vm_obs *obs = calloc(1, sizeof(*obs));
    if (!obs)
        abort();
    struct hv_err err = {0};
    enum hv_mhc_vm out = HV_MHC_VM_UNKNOWN;
    if (be->ops->observe(be, &ref, obs, &err) == HV_OK) {
        struct hv_oprecord rec;
        out = HV_MHC_VM_QUIET; /* no VM, no record or not ours: nothing hvupdater cycles */
        if (obs->found && hv_oprecord_read(&rec, obs->record) &&
            hv_rec_in_power_cycle(&rec, rt->step_timeout_s, (int64_t)time(NULL)))
            out = HV_MHC_VM_CYCLING;
    }
    free(obs);
    return out;
}

/* hv_event_fn: queue a Warning Event about the request's object (never blocks). */
static void post_event(void *ctx, const hj *obj, const char *reason, const char *message)
{
    const hj *md = hj_get(obj, "metadata");
    struct hv_event_obj o = {
        .api_version = hj_get_str(obj, "apiVersion"),
        .kind = hj_get_str(obj, "kind"),
        .namespace_ = hj_get_str(md, "namespace"),
        .name = hj_get_str(md, "name"),
        .uid = hj_get_str(md, "uid"),
    };
    hv_events_post(ctx, &o, reason, message);
}

#ifdef HV_HAVE_BACKEND_vsphere
/* hv_vs_creds_fn for identityFrom capv: CAPV's identity of the machine's cluster, read at each
 * vCenter login of that cluster's session (on a worker or probe thread). */
static int capv_creds(void *ctx, const char *server, const char *identity, char *user, size_t ulen,
                      char *pass, size_t plen, int timeout_ms, struct hv_err *err)
{
    struct hv_runtime *rt = ctx;
    (void)server;
    int t = hv_kube_timeout(rt->kube);
    enum hv_capv_rc rc = hv_capv_credentials(
        rt->kube, rt->capv_ns, identity, timeout_ms > 0 && timeout_ms < t ? timeout_ms : t, user,
        ulen, pass, plen, err->detail, sizeof(err->detail));
    err->code = rc == HV_CAPV_OK ? HV_OK : rc == HV_CAPV_NONE ? HV_E_NOT_FOUND : HV_E_CREDENTIALS;
    return (int)err->code;
}
#endif

#ifdef HV_HAVE_BACKEND_kubevirt
/* hv_kubevirt_infra_fn for kubevirt.followInfraClusterSecretRef: CAPK's infraClusterSecretRef
 * of the machine, read through the management cluster's client (on a worker or probe
 * thread). The kubeconfig's bytes go to the backend, which parses, caches and wipes them. */
int hv_runtime_capk_infra(void *kube, const char *cluster, const char *machine, int timeout_ms,
                          struct hv_kubevirt_infra *out, struct hv_err *err)
{
    int t = hv_kube_timeout(kube);
    struct hv_kube_io io = hv_kube_io(kube);
    struct hv_capk_infra in;
    memset(out, 0, sizeof(*out));
    if (hv_capk_infra_io(&io, cluster, machine, timeout_ms > 0 && timeout_ms < t ? timeout_ms : t,
                         &in, err->detail, sizeof(err->detail)) < 0) {
        err->code = HV_E_INFRA_SECRET;
        return HV_E_INFRA_SECRET;
    }
    _Static_assert(sizeof(out->secret) >= sizeof(in.secret) &&
                       sizeof(out->secret_ns) >= sizeof(in.secret_ns) &&
                       sizeof(out->template_ns) >= sizeof(in.template_ns),
                   "capk infra sizes");
    snprintf(out->secret, sizeof(out->secret), "%s", in.secret);
    snprintf(out->rv, sizeof(out->rv), "%s", in.rv);
    snprintf(out->secret_ns, sizeof(out->secret_ns), "%s", in.secret_ns);
    snprintf(out->template_ns, sizeof(out->template_ns), "%s", in.template_ns);
    out->kubeconfig = in.kubeconfig;
    out->kubeconfig_len = in.kubeconfig_len;
    err->code = HV_OK;
    return HV_OK;
}
#endif

static int need_kube(const struct hv_config *cfg)
{
    if (cfg->kube.events || cfg->kube.mhc_hold || hv_config_checks_machines(cfg) ||
        cfg->kubevirt_follow_secret)
        return 1;
    for (size_t k = 0; k < cfg->n_vsphere; k++)
        if (cfg->vsphere[k].identity_capv)
            return 1;
    return 0;
}

static int add_backends(struct hv_runtime *rt, const struct hv_config *cfg, char *err,
                        size_t errlen)
{
#ifdef HV_HAVE_BACKEND_libvirt
    if (cfg->n_libvirt_uris) {
        struct hv_libvirt_opts lo = {
            .uris = (const char *const *)cfg->libvirt_uris,
            .n_uris = cfg->n_libvirt_uris,
            .keepalive_interval_s = cfg->keepalive_interval_s,
            .keepalive_count = cfg->keepalive_count,
            .call_timeout_ms = cfg->engine.step_timeout_s * 1000,
            .connect_timeout_ms = cfg->connect_timeout_s * 1000,
        };
        struct hv_backend *b = hv_libvirt_new(&lo, err, errlen);
        if (!b)
            return -1;
        rt->bes[rt->n_bes++] = b;
    }
#endif
#ifdef HV_HAVE_BACKEND_vsphere
    if (cfg->n_vsphere) {
        struct hv_vsphere_server *vs = calloc(cfg->n_vsphere, sizeof(*vs));
        if (!vs)
            abort();
        for (size_t k = 0; k < cfg->n_vsphere; k++) {
            const struct hv_vsphere_cfg *c = &cfg->vsphere[k];
            vs[k] = (struct hv_vsphere_server){
                .name = c->name,
                .url = c->url,
                .username_file = c->username_file,
                .password_file = c->password_file,
                .thumbprint = c->thumbprint,
                .ca_file = c->ca_file,
                .insecure_skip_verify = c->insecure_skip_verify,
                .allow_request_thumbprint = c->allow_request_thumbprint,
                .call_timeout_ms = 10000,
            };
            if (c->identity_capv) {
                vs[k].creds = capv_creds;
                vs[k].creds_ctx = rt;
            }
            if (c->insecure_skip_verify)
                hv_log(HV_LOG_WARN, "insecure-tls", "server", c->name, "detail",
                       "TLS verification of this vCenter is OFF (insecureSkipVerify): "
                       "anyone on the path can impersonate it and read its credentials",
                       (char *)NULL);
        }
        struct hv_backend *b = hv_vsphere_new(vs, cfg->n_vsphere, err, errlen);
        free(vs);
        if (!b)
            return -1;
        rt->bes[rt->n_bes++] = b;
    }
#endif
#ifdef HV_HAVE_BACKEND_kubevirt
    if (cfg->n_kubevirt) {
        struct hv_kubevirt_cluster *kc = calloc(cfg->n_kubevirt, sizeof(*kc));
        if (!kc)
            abort();
        for (size_t k = 0; k < cfg->n_kubevirt; k++) {
            const struct hv_kubevirt_cfg *c = &cfg->kubevirt[k];
            kc[k] = (struct hv_kubevirt_cluster){
                .name = c->name,
                .server = c->server,
                .token_file = c->token_file,
                .ca_file = c->ca_file,
                .namespaces = (const char *const *)c->namespaces,
                .n_namespaces = c->n_namespaces,
            };
        }
        struct hv_kubevirt_opts ko = {.clusters = kc,
                                      .n_clusters = cfg->n_kubevirt,
                                      .timeout_ms = cfg->kubevirt_timeout_s * 1000};
        if (cfg->kubevirt_follow_secret) { /* need_kube made rt->kube */
            ko.infra = hv_runtime_capk_infra;
            ko.infra_ctx = rt->kube;
        }
        struct hv_backend *b = hv_kubevirt_new(&ko, err, errlen);
        free(kc);
        if (!b)
            return -1;
        curl_global_init(CURL_GLOBAL_DEFAULT);
        rt->kv_curl = true;
        rt->bes[rt->n_bes++] = b;
    }
#endif
    (void)cfg;
    (void)err;
    (void)errlen;
    return 0;
}

/* hv_plan_hooks.admit: the provider's word on a change, from kube/dryrun.h's cache. */
static int admit_claim(void *ctx, const struct hv_admit_ask *a, char *why, size_t whylen)
{
    struct hv_dryrun_req r = {.machine_set = a->machine_set,
                              .ns = a->ns,
                              .owner = a->owner,
                              .api_version = a->api_version,
                              .kind = a->kind,
                              .cur_name = a->cur_name,
                              .des_name = a->des_name,
                              .patch = a->patch};
    switch (hv_dryrun_ask(ctx, &r, why, whylen)) {
    case HV_DRYRUN_ACCEPTED:
        return HV_ADMIT_ACCEPTED;
    case HV_DRYRUN_REFUSED:
        return HV_ADMIT_REFUSED;
    case HV_DRYRUN_UNCHECKED:
        return HV_ADMIT_UNCHECKED;
    case HV_DRYRUN_PENDING:
        return HV_ADMIT_PENDING;
    default:
        return HV_ADMIT_ERROR;
    }
}

/* hv_plan_hooks.check: the rules of the profile's backend that hold whatever the VM. */
static void check_rules(void *ctx, const struct hv_profile *p, const struct hv_hw *desired,
                        struct hv_field_plan plan[HV_F_COUNT])
{
    struct hv_backend *be = hv_engine_backend(ctx, p->backend);
    memset(plan, 0, sizeof(plan[0]) * HV_F_COUNT);
    if (be && be->ops->check)
        be->ops->check(be, desired, plan);
}

struct hv_runtime *hv_runtime_new(const struct hv_config *cfg, char *err, size_t errlen)
{
    struct hv_runtime *rt = calloc(1, sizeof(*rt));
    if (!rt)
        return NULL;
    rt->hooks.profiles = &cfg->profiles;
    rt->hooks.defaults = cfg->defaults;
    rt->hooks.timeout_s = cfg->handler_timeout_s;
    rt->hooks.can_update_ignore = cfg->can_update_ignore;
    rt->hooks.libvirt_uris = (const char *const *)cfg->libvirt_uris;
    rt->hooks.n_libvirt_uris = cfg->n_libvirt_uris;
    rt->hooks.only_vcenter = cfg->n_vsphere == 1 ? cfg->vsphere[0].name : NULL;
    char no_client[300] = ""; /* dryRunClaims without an API server: its claims say so */
    if (need_kube(cfg) || cfg->kube.dry_run_claims) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        struct hv_kube_cfg kc = {.server = cfg->kube.server,
                                 .token_file = cfg->kube.token_file,
                                 .ca_file = cfg->kube.ca_file,
                                 .timeout_ms = cfg->kube.timeout_s * 1000};
        rt->kube = hv_kube_new(&kc, err, errlen);
        if (!rt->kube && !need_kube(cfg)) {
            snprintf(no_client, sizeof(no_client), "%s", err);
            err[0] = '\0';
            curl_global_cleanup();
        } else if (!rt->kube) {
            hv_runtime_free(rt);
            return NULL;
        }
        rt->capv_ns = cfg->kube.capv_namespace ? cfg->kube.capv_namespace : "capv-system";
    }
    if (hv_config_checks_machines(cfg)) { /* machine check */
        struct hv_mc_cfg mcc = {.threads = HV_MC_THREADS};
        hv_mc_kube_io(rt->kube, &mcc.io);
        rt->mc = hv_mc_new(&mcc);
        if (!rt->mc) {
            snprintf(err, errlen, "cannot start the machine check's threads");
            hv_runtime_free(rt);
            return NULL;
        }
        rt->hooks.gate = check_machine;
        rt->hooks.gate_ctx = rt->mc;
    }
    if (cfg->kube.events) {
        char host[128] = "";
        const char *pod = getenv("POD_NAME");
        if (!pod || !*pod)
            pod = gethostname(host, sizeof(host) - 1) == 0 ? host : "hvupdater";
        rt->events = hv_events_new(rt->kube, pod);
        if (!rt->events) {
            snprintf(err, errlen, "cannot start the Event thread");
            hv_runtime_free(rt);
            return NULL;
        }
        rt->hooks.event = post_event;
        rt->hooks.event_ctx = rt->events;
    }
    if (add_backends(rt, cfg, err, errlen) < 0) {
        hv_runtime_free(rt);
        return NULL;
    }
    struct hv_engine_cfg ec;
    hv_engine_cfg_default(&ec);
    ec.workers = cfg->engine.workers;
    ec.max_power_cycles = cfg->engine.max_power_cycles;
    ec.max_power_cycles_per_host = cfg->engine.max_power_cycles_per_host;
    ec.step_timeout_s = cfg->engine.step_timeout_s;
    rt->step_timeout_s = cfg->engine.step_timeout_s;
    ec.max_entries = cfg->engine.max_entries;
    if (rt->mc) { /* machine check: a cycle found in flight is confirmed by the API server */
        ec.confirm_resume = confirm_resume;
        ec.confirm_ctx = rt;
    }
    rt->engine = hv_engine_new(&ec, rt->bes, rt->n_bes);
    if (!rt->engine) {
        snprintf(err, errlen, "cannot start the engine");
        hv_runtime_free(rt);
        return NULL;
    }
    hv_metrics_set_gauges(hv_engine_gauges, rt->engine);
    for (size_t k = 0; k < cfg->n_libvirt_uris; k++)
        hv_metrics_register_server("libvirt", cfg->libvirt_uris[k]);
    for (size_t k = 0; k < cfg->n_vsphere; k++)
        hv_metrics_register_server("vsphere", cfg->vsphere[k].name);
    for (size_t k = 0; k < cfg->n_kubevirt; k++)
        hv_metrics_register_server("kubevirt", cfg->kubevirt[k].name);
    rt->plan_hooks.ctx = rt->engine;
    rt->plan_hooks.available = hv_engine_available;
    rt->plan_hooks.probe = hv_engine_probe;
    rt->plan_hooks.check = check_rules;
    rt->hooks.plan_hooks = &rt->plan_hooks;
    if (cfg->kube.dry_run_claims) {
        struct hv_dryrun_cfg dc = {.wait_ms = HV_DRYRUN_WAIT_MS,
                                   .no_client = rt->kube ? NULL : no_client};
        if (rt->kube)
            hv_dryrun_kube_io(rt->kube, &dc.io);
        else
            hv_log(HV_LOG_WARN, "dry-run", "detail", no_client, (char *)NULL);
        rt->dryrun = hv_dryrun_new(&dc);
        if (!rt->dryrun) {
            snprintf(err, errlen, "cannot start the dry-run thread");
            hv_runtime_free(rt);
            return NULL;
        }
        rt->plan_hooks.admit = admit_claim;
        rt->plan_hooks.admit_ctx = rt->dryrun;
    }
    rt->hooks.update = hv_engine_update;
    rt->hooks.update_ctx = rt->engine;
    if (cfg->kube.mhc_hold) {
        struct hv_mhc_cfg mc = {.vm_state = vm_state, .vm_ctx = rt};
        hv_mhc_kube_io(rt->kube, &mc.io);
        rt->mhc = hv_mhc_new(&mc);
        if (!rt->mhc) {
            snprintf(err, errlen, "cannot start the remediation hold's thread");
            hv_runtime_free(rt);
            return NULL;
        }
        rt->hooks.machine_vm = track_machine;
        rt->hooks.machine_vm_ctx = rt->mhc;
    }
    if (cfg->downstream.n) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        rt->compose = hv_compose_new(&cfg->downstream);
        hv_compose_discover_all(rt->compose, cfg->handler_timeout_s);
        rt->hooks.compose = rt->compose;
        rt->hooks.chain = hv_compose_handle;
    }
    return rt;
}

const struct hv_hooks_ctx *hv_runtime_hooks(const struct hv_runtime *rt)
{
    return &rt->hooks;
}

struct hv_engine *hv_runtime_engine(const struct hv_runtime *rt)
{
    return rt->engine;
}

void hv_runtime_free(struct hv_runtime *rt)
{
    if (!rt)
        return;
    hv_metrics_set_gauges(NULL, NULL);
    if (rt->compose) {
        hv_compose_free(rt->compose);
        curl_global_cleanup();
    }
    hv_mhc_free(rt->mhc); /* its thread observes through the backends */
    hv_dryrun_free(rt->dryrun);
    hv_engine_free(rt->engine);
    for (size_t k = 0; k < rt->n_bes; k++)
        rt->bes[k]->ops->free(rt->bes[k]);
    if (rt->kv_curl)
        curl_global_cleanup();
    hv_events_free(rt->events);
    hv_mc_free(rt->mc);
    if (rt->kube) {
        hv_kube_free(rt->kube);
        curl_global_cleanup();
    }
    free(rt);
}
