/* lv_backend.c: hv_libvirt_new() and the ops table that ties the libvirt backend's files to
 * backends/backend.h. The struct lv_backend allocated here owns the fleet (lv_conn.c) and is
 * freed, connections closed, by ops->free. act() routes each step to lv_live.c / lv_cold.c.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>

#include "lv_internal.h"

static pthread_once_t lv_init_once = PTHREAD_ONCE_INIT;
static int lv_init_rc;

static void lv_global_init(void)
{
    /* libvirt writes to sockets that die with libvirtd: with SIGPIPE at its default the
     * whole process would be killed on the first call after a daemon restart */
    struct sigaction sa;
    if (sigaction(SIGPIPE, NULL, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) &&
        sa.sa_handler == SIG_DFL)
        signal(SIGPIPE, SIG_IGN);
    xmlInitParser();
    lv_init_rc = virInitialize();
    lv_error_init();
}

struct lv_act_arg {
    const struct hv_step *s;
    const char *disk; /* the disk's target device */
};

static int lv_act_body(struct lv_dom *d, void *arg, struct hv_err *err)
{
    const struct lv_act_arg *a = arg;
    const struct hv_step *s = a->s;
    switch (s->kind) {
    case HV_STEP_LIVE_MEMORY:
        return lv_act_live_memory(d, s, err);
    case HV_STEP_LIVE_CPUS:
        return lv_act_live_cpus(d, s, err);
    case HV_STEP_LIVE_DISK:
        return lv_act_live_disk(d, a->disk, s, err);
    case HV_STEP_SHUTDOWN:
    case HV_STEP_POWER_OFF:
    case HV_STEP_RECONFIGURE:
    case HV_STEP_POWER_ON:
        return lv_act_cold(d, s, a->disk, err);
    default:
        return lv_seterr(err, HV_E_INTERNAL, "unknown step kind %d", (int)s->kind);
    }
}

static int lv_act_op(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_step *s,
                     struct hv_err *err)
{
    struct hv_err dummy;
    err = lv_err_start(err, &dummy);
    if (!ref || !s)
        return lv_seterr(err, HV_E_INTERNAL, "act: missing ref or step");
    bool found;
    struct lv_act_arg a = {s, ref->disk};
    int rc = lv_with_dom(b->priv, ref, lv_act_body, &a, &found, err);
    if (rc == HV_OK && !found)
        return lv_seterr(err, HV_E_NOT_FOUND, "domain not found on any configured host");
    return rc;
}

static void lv_free_op(struct hv_backend *b)
{
    if (!b)
        return;
    struct lv_backend *be = b->priv;
    lv_fleet_free(be);
    free(be);
}

static void lv_check_op(struct hv_backend *b, const struct hv_hw *desired,
                        struct hv_field_plan plan[HV_F_COUNT])
{
    (void)b;
    lv_check(desired, plan);
}

static const struct hv_backend_ops lv_ops = {
    .name = "libvirt",
    .serves = lv_serves,
    .observe = lv_observe_op,
    .plan = lv_plan_op,
    .act = lv_act_op,
    .write_record = lv_record_write_op,
    .free = lv_free_op,
    .check = lv_check_op,
    .watch = lv_watch,
    .observe_guest = lv_observe_guest_op,
    .list_records = lv_list_records,
};

struct hv_backend *hv_libvirt_new(const struct hv_libvirt_opts *o, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    err[0] = '\0';
    if (!o || !o->uris || o->n_uris == 0) {
        snprintf(err, errlen, "libvirt backend: no URI configured");
        return NULL;
    }
    for (size_t i = 0; i < o->n_uris; i++) {
        if (!o->uris[i] || !o->uris[i][0] || strlen(o->uris[i]) >= HV_NAME_MAX) {
            snprintf(err, errlen, "libvirt backend: URI %zu is empty or too long", i);
            return NULL;
        }
    }
    if (o->keepalive_interval_s < 0 || o->keepalive_count < 0 || o->call_timeout_ms < 0 ||
        o->connect_timeout_ms < 0) {
        snprintf(err, errlen, "libvirt backend: negative keepalive or timeout");
        return NULL;
    }
    pthread_once(&lv_init_once, lv_global_init);
    if (lv_init_rc < 0) {
        snprintf(err, errlen, "libvirt backend: virInitialize failed");
        return NULL;
    }
    struct lv_backend *be = calloc(1, sizeof(*be));
    if (!be) {
        snprintf(err, errlen, "libvirt backend: out of memory");
        return NULL;
    }
    be->pub.ops = &lv_ops;
    be->pub.priv = be;
    be->ka_interval = o->keepalive_interval_s;
    be->ka_count = o->keepalive_count;
    be->call_timeout_ms = o->call_timeout_ms > 0 ? o->call_timeout_ms : 10000;
    be->connect_timeout_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 10000;
    if (lv_fleet_init(be, o, err, errlen) < 0) {
        lv_fleet_free(be);
        free(be);
        return NULL;
    }
    return &be->pub;
}
