/* fuzz_kube.c: libFuzzer target for what the Kubernetes API answers (src/kube): whoever can
 * write a Cluster, VSphereCluster, VSphereClusterIdentity, Namespace, Secret, Machine,
 * MachineSet or infra machine in the management cluster, or answer for the API server,
 * decides these bytes.
 *
 * The input is up to eight answers separated by NUL bytes. They are served:
 * - in turn to the CAPV identity lookup (hv_capv_credentials_io: Cluster, VSphereCluster,
 *   identity, Namespace, Secret; a document that does not parse is a 404);
 * - the first two as a label selector and a label set (hv_label_selector_match), the first as
 *   a Machine for the remediation hold (hv_mhc_read_machine, hv_mhc_decide);
 * - the first two to the machine check (hv_mc_io) as the Machine (MachineSet) and the infra
 *   machine (template) a fixed UpdateMachine, CanUpdateMachine and CanUpdateMachineSet request
 *   names, by their API paths;
 * - in turn to the dry-run claim check (hv_dryrun_io) of a CanUpdateMachine (the first is the
 *   answer to the dryRun=All patch) and of a CanUpdateMachineSet (pages of the Machine list,
 *   then the answer to the patch).
 * For the machine check and the dry run an answer is: a document that does not parse, no
 * answer (-1); a number from 100 to 599, that HTTP status without a body; an object with
 * "kind":"Status" and an integer "code" from 100 to 599, that status with that Status;
 * anything else, 200 with that document; none left, 404.
 *
 * Invariants: no crash or leak; CAPV credentials only with HV_CAPV_OK, NUL-terminated within
 * their buffers, and otherwise the buffers as given or wiped; the reason NUL-terminated and
 * never holding the password; a selector answer is -1, 0 or 1, and the same twice.
 * Machine check: only the two objects the request names are read; the first check waits and
 * queues both reads; the check on them passes or refuses (never waits); it passes exactly when
 * the answers carry what the check requires (derived here from the answers alone: both are
 * objects with HTTP 200, the uid, the infrastructureRef, for UpdateMachine CAPI's in-place
 * marks on both and the infra spec the request's); a pass of UpdateMachine hands back the API
 * server's specs; a refusal's message is NUL-terminated, printable, starts "machine check: ",
 * and is the same when the check reads the objects again.
 * Dry run: the first question is PENDING and makes no API call; the answer is one of the
 * verdicts, ACCEPTED exactly when the patch was answered 2xx, REFUSED only on 400, 403 or
 * 422, with a reason of at most 240 bytes without control characters, runs of spaces or the
 * machine's name; asked again it is the cached answer without a new API call.
 * Both: the same answers give the same verdict and message twice, the second time with every
 * answer's top-level "data" and "stringData" (a Secret's) replaced: no message depends on a
 * Secret's data.
 */
#include "capv.h"
#include "dryrun.h"
#include "log.h"
#include "machinecheck.h"
#include "mhc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DOCS 8

struct answers {
    const char *doc[DOCS];
    size_t len[DOCS];
    hj *tree[DOCS]; /* each parsed once (NULL: not JSON); the fakes serve copies */
    size_t n, next;
};

static bool trace; /* FUZZ_KUBE_TRACE set: each verdict on stderr (which path a seed reaches) */

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_kube: invariant broken: %s\n", what);
    abort();
}

static int fake_get(void *ctx, const char *path, int timeout_ms, hj **out, char *err, size_t errlen)
{
    struct answers *a = ctx;
    (void)timeout_ms;
    *out = NULL;
    if (a->next >= a->n) {
        snprintf(err, errlen, "kubernetes GET %s: HTTP 404", path);
        return 404;
    }
    size_t i = a->next++;
    *out = hj_parse(a->doc[i], a->len[i], err, errlen);
    return *out ? 200 : 404;
}

static bool all_is(const char *b, size_t n, char c)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != c)
            return false;
    return true;
}

/* ---- answers with an HTTP status (machine check, dry run) ---- */

/* Answer i as the API server would give it (see the top); *out is the document or NULL. With
 * redact, a Secret's top-level data and stringData are replaced. */
static int serve(const struct answers *a, size_t i, bool redact, hj **out, char *err, size_t errlen)
{
    *out = NULL;
    if (i >= a->n) {
        snprintf(err, errlen, "HTTP 404");
        return 404;
    }
    if (!a->tree[i]) {
        snprintf(err, errlen, "not JSON");
        return -1;
    }
    hj *v = hj_clone(a->tree[i]);
    if (v->type == HJ_INT) {
        int64_t c = v->i;
        hj_free(v);
        snprintf(err, errlen, "HTTP %d", (int)(c % 1000));
        return c >= 100 && c <= 599 ? (int)c : -1;
    }
    if (redact && v->type == HJ_OBJECT) {
        static const char *const keys[] = {"data", "stringData"};
        for (size_t k = 0; k < 2; k++)
            if (hj_get(v, keys[k]))
                hj_obj_set_take(v, keys[k], hj_new_string("redacted by fuzz_kube"));
    }
    const char *kind = hj_get_str(v, "kind");
    const hj *code = hj_get(v, "code");
    int st = 200;
    if (kind && !strcmp(kind, "Status") && code && code->type == HJ_INT && code->i >= 100 &&
        code->i <= 599)
        st = (int)code->i;
    *out = v;
    return st;
}

/* A message as hvupdater puts it in an answer: NUL-terminated within cap, no control
 * characters, and ASCII unless high (a webhook's reason may be any UTF-8). */
static void check_text(const char *msg, size_t cap, bool high, const char *what)
{
    const char *end = memchr(msg, '\0', cap);
    if (!end)
        fail(what);
    for (const char *p = msg; p < end; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f || (!high && (unsigned char)*p > 0x7e))
            fail(what);
}

/* ---- the machine check ---- */

#define MC_API   "hooks.runtime.cluster.x-k8s.io/v1alpha1"
#define MC_INFRA "infrastructure.cluster.x-k8s.io/v1beta1"
#define MC_GROUP "infrastructure.cluster.x-k8s.io"
#define MC_UID   "6f1c2d8e-3b4a-4c5d-9e7f-0a1b2c3d4e5f"
#define MC_SPEC  "{\"providerID\":\"libvirt://" MC_UID "\",\"memoryMiB\":4096,\"vcpu\":2}"
/* A Machine m1 in a request; md: more of its metadata */
#define MC_MACHINE(md)                                                                             \
    "{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\",\"metadata\":{\"name\":"    \
    "\"m1\",\"namespace\":\"ns\"" md "},\"spec\":{\"clusterName\":\"c1\",\"providerID\":"          \
    "\"libvirt://" MC_UID "\",\"infrastructureRef\":{\"apiGroup\":\"" MC_GROUP "\","               \
    "\"kind\":\"LibvirtMachine\",\"name\":\"lm1\"}}}"
#define MC_INFRA_MACHINE                                                                           \
    "{\"apiVersion\":\"" MC_INFRA "\",\"kind\":\"LibvirtMachine\",\"metadata\":{\"name\":\"lm1\"," \
    "\"namespace\":\"ns\"},\"spec\":" MC_SPEC "}"

#define MC_MD_UID ",\"uid\":\"" MC_UID "\""

/* The requests the machine check is asked about, as CAPI v1.14.2 sends them (UpdateMachine
 * without the Machine's uid; CanUpdateMachine here with one). */
static const char upd_text[] =
    "{\"apiVersion\":\"" MC_API "\",\"kind\":\"UpdateMachineRequest\","
    "\"desired\":{\"machine\":" MC_MACHINE("") ","
                                               "\"infrastructureMachine\":" MC_INFRA_MACHINE "}}";
static const char can_text[] =
    "{\"apiVersion\":\"" MC_API "\",\"kind\":\"CanUpdateMachineRequest\","
    "\"current\":{\"machine\":" MC_MACHINE(
        MC_MD_UID) ","
                   "\"infrastructureMachine\":" MC_INFRA_MACHINE "},"
                   "\"desired\":{\"machine\":" MC_MACHINE(
                       MC_MD_UID) ","
                                  "\"infrastructureMachine\":" MC_INFRA_MACHINE "}}";
static const char set_text[] =
    "{\"apiVersion\":\"" MC_API "\",\"kind\":\"CanUpdateMachineSetRequest\",\"current\":{"
    "\"machineSet\":{\"metadata\":{\"name\":\"ms1\",\"namespace\":\"ns\"}},"
    "\"infrastructureMachineTemplate\":{\"apiVersion\":\"" MC_INFRA "\","
    "\"kind\":\"LibvirtMachineTemplate\",\"metadata\":{\"name\":\"t1\",\"namespace\":\"ns\"},"
    "\"spec\":{\"template\":{\"spec\":" MC_SPEC "}}}},\"desired\":{}}";

struct mc_case {
    enum hv_hook h;
    hj *req;
    const char *uid;                           /* the request's Machine uid, or NULL */
    const char *ref_ptr;                       /* where the Machine (MachineSet) keeps its ref */
    const char *ikind, *iname, *mpath, *ipath; /* what the request names */
};
static struct mc_case mc_cases[3];

struct mc_fake {
    const struct mc_case *c;
    const struct answers *a;
    bool redact;
    int gets;
};

static int mc_get(void *ctx, const char *path, hj **out, char *err, size_t errlen)
{
    struct mc_fake *f = ctx;
    size_t i = strcmp(path, f->c->mpath) ? 1 : 0;
    if (i == 1 && strcmp(path, f->c->ipath))
        fail("the machine check read an object the request does not name");
    f->gets++;
    int st = serve(f->a, i, f->redact, out, err, errlen);
    if (st != 200) {
        hj_free(*out);
        *out = NULL;
    }
    return st;
}

static int64_t mc_clock_now = 1000000;
static int64_t mc_clock(void)
{
    return mc_clock_now;
}

/* Whether the comma-separated list has the word (items trimmed of spaces). */
static bool has_word(const char *list, const char *word)
{
    size_t wl = strlen(word);
    while (list) {
        const char *comma = strchr(list, ',');
        const char *b = list, *e = comma ? comma : list + strlen(list);
        while (b < e && *b == ' ')
            b++;
        while (e > b && e[-1] == ' ')
            e--;
        if ((size_t)(e - b) == wl && !memcmp(b, word, wl))
            return true;
        list = comma ? comma + 1 : NULL;
    }
    return false;
}

static bool str_is(const char *s, const char *want)
{
    return s && !strcmp(s, want);
}

/* What the check must answer, from the answers alone: a pass exactly when this is true. */
static bool mc_should_pass(const struct mc_case *c, int mst, const hj *m, int ist, const hj *im)
{
    if (mst != 200 || !m || m->type != HJ_OBJECT || ist != 200 || !im || im->type != HJ_OBJECT)
        return false;
    const hj *mmd = hj_get(m, "metadata");
    if (c->uid && !str_is(hj_get_str(mmd, "uid"), c->uid))
        return false;
    const hj *ref = hj_ptr(m, c->ref_ptr);
    if (!str_is(hj_get_str(ref, "apiGroup"), MC_GROUP) ||
        !str_is(hj_get_str(ref, "kind"), c->ikind) || !str_is(hj_get_str(ref, "name"), c->iname))
        return false;
    if (c->h != HV_HOOK_UPDATE_MACHINE)
        return true;
    const hj *ann = hj_get(mmd, "annotations");
    const hj *iann = hj_get(hj_get(im, "metadata"), "annotations");
    return hj_get_str(ann, HV_MC_IN_PROGRESS) &&
           has_word(hj_get_str(ann, HV_MC_PENDING_HOOKS), "UpdateMachine") &&
           hj_get_str(iann, HV_MC_IN_PROGRESS) &&
           hj_equal(hj_ptr(c->req, "/desired/infrastructureMachine/spec"), hj_get(im, "spec"));
}

struct mc_result {
    enum hv_mc_verdict v;
    char msg[512];
};

static void mc_refusal_ok(const char *msg)
{
    check_text(msg, 512, false, "machine check message");
    if (strncmp(msg, "machine check: ", 15))
        fail("machine check message not its own");
}

static void mc_run(const struct mc_case *c, const struct answers *a, bool redact,
                   struct mc_result *r)
{
    struct mc_fake f = {.c = c, .a = a, .redact = redact};
    struct hv_mc_cfg cfg = {.io = {&f, mc_get}, .drive = true, .clock_ms = mc_clock};
    struct hv_mc *mc = hv_mc_new(&cfg);
    if (!mc)
        fail("hv_mc_new");
    hj *out = NULL;
    memset(r->msg, 0, sizeof(r->msg));
    if (hv_mc_check(mc, c->h, c->req, &out, r->msg, sizeof(r->msg)) != HV_MC_WAIT || out ||
        !strstr(r->msg, "retry"))
        fail("the first machine check does not wait for its reads");
    if (hv_mc_work(mc) != 2 || f.gets != 2)
        fail("the machine check does not read the two objects once");
    mc_clock_now += 1000;
    memset(r->msg, 0, sizeof(r->msg));
    r->v = hv_mc_check(mc, c->h, c->req, &out, r->msg, sizeof(r->msg));
    if (r->v == HV_MC_PASS) {
        if ((c->h == HV_HOOK_UPDATE_MACHINE) != (out != NULL))
            fail("a pass without the API server's request (or with one)");
        if (out) { /* the specs are the API server's */
            hj *m = NULL, *im = NULL;
            char err[128];
            serve(a, 0, redact, &m, err, sizeof(err));
            serve(a, 1, redact, &im, err, sizeof(err));
            const hj *ms = hj_get(m, "spec"), *is = hj_get(im, "spec");
            if ((ms && !hj_equal(ms, hj_ptr(out, "/desired/machine/spec"))) ||
                (is && !hj_equal(is, hj_ptr(out, "/desired/infrastructureMachine/spec"))))
                fail("a pass hands on a spec that is not the API server's");
            hj_free(m);
            hj_free(im);
        }
        hj_free(out);
        out = NULL;
        /* within the TTL: the same pass, without a read */
        char again[512];
        if (hv_mc_check(mc, c->h, c->req, &out, again, sizeof(again)) != HV_MC_PASS ||
            hv_mc_work(mc) != 0)
            fail("a cached pass is not a pass");
        hj_free(out);
    } else if (r->v == HV_MC_FAIL) {
        if (out)
            fail("a refusal with a request");
        mc_refusal_ok(r->msg);
        /* the refusal is not repeated on the same reads: they are read again, and refuse
         * the same way */
        char again[512];
        if (hv_mc_check(mc, c->h, c->req, &out, again, sizeof(again)) != HV_MC_WAIT || out ||
            hv_mc_work(mc) != 2)
            fail("a refusal is not read again");
        mc_clock_now += 1000;
        if (hv_mc_check(mc, c->h, c->req, &out, again, sizeof(again)) != HV_MC_FAIL || out ||
            strcmp(again, r->msg))
            fail("the same answers refuse differently");
    } else {
        fail("a machine check on fresh reads waits");
    }
    hv_mc_free(mc);
}

static void mc_fuzz(const struct answers *a)
{
    char err[128];
    hj *m = NULL, *im = NULL;
    int mst = serve(a, 0, false, &m, err, sizeof(err));
    int ist = serve(a, 1, false, &im, err, sizeof(err));
    for (size_t k = 0; k < sizeof(mc_cases) / sizeof(mc_cases[0]); k++) {
        const struct mc_case *c = &mc_cases[k];
        struct mc_result r1, r2;
        mc_run(c, a, false, &r1);
        if ((r1.v == HV_MC_PASS) != mc_should_pass(c, mst, m, ist, im))
            fail(r1.v == HV_MC_PASS ? "the machine check passes what it must refuse"
                                    : "the machine check refuses what it must pass");
        if (trace)
            fprintf(stderr, "fuzz_kube: machine check %s: %s %s\n", hv_hook_name(c->h),
                    r1.v == HV_MC_PASS ? "pass" : "refused", r1.v == HV_MC_PASS ? "" : r1.msg);
        mc_run(c, a, true, &r2);
        if (r1.v != r2.v || (r1.v != HV_MC_PASS && strcmp(r1.msg, r2.msg)))
            fail("the machine check's answer depends on a Secret's data or is not repeatable");
    }
    hj_free(m);
    hj_free(im);
}

/* ---- the dry run ---- */

#define DR_NS      "ns"
#define DR_LIST    "/apis/cluster.x-k8s.io/v1beta2/namespaces/" DR_NS "/machines"
#define DR_PREFIX  "/apis/" MC_INFRA "/namespaces/" DR_NS "/vspheremachines/"
#define DR_NAME    "vm-a"
#define DR_PATCH   "{\"spec\":{\"memoryMiB\":8192}}"
#define DR_WHY_CAP 400

struct dr_fake {
    const struct answers *a;
    size_t next;
    bool redact;
    bool set;
    int lists, patches, http;
    char name[256];   /* the infra machine patched */
    char reason[300]; /* the Status's message, else its reason ("" none, cut if longer) */
};

static int dr_list(void *ctx, const char *path, const char *cont, hj **out, char *err,
                   size_t errlen)
{
    struct dr_fake *f = ctx;
    (void)cont;
    if (!f->set || strcmp(path, DR_LIST))
        fail("the dry run lists what it must not");
    f->lists++;
    int st = serve(f->a, f->next++, f->redact, out, err, errlen);
    if (st != 200) {
        hj_free(*out);
        *out = NULL;
    }
    return st;
}

static int dr_patch(void *ctx, const char *path, const char *patch, hj **status, char *err,
                    size_t errlen)
{
    struct dr_fake *f = ctx;
    size_t pl = strlen(DR_PREFIX);
    if (strncmp(path, DR_PREFIX, pl) || !hv_kube_name_ok(path + pl) ||
        (!f->set && strcmp(path + pl, DR_NAME)))
        fail("the dry run patches an object it was not asked about");
    if (strcmp(patch, DR_PATCH))
        fail("the dry run patches with another patch");
    if (f->patches++)
        fail("two dry-run patches for one question");
    snprintf(f->name, sizeof(f->name), "%s", path + pl);
    hj *v = NULL;
    int st = serve(f->a, f->next++, f->redact, &v, err, errlen);
    f->http = st;
    const char *reason = hj_get_str(v, "message");
    if (!reason || !reason[0])
        reason = hj_get_str(v, "reason");
    snprintf(f->reason, sizeof(f->reason), "%s", reason ? reason : "");
    if (st >= 200 && st <= 299) {
        hj_free(v);
        v = NULL;
    }
    *status = v;
    return st;
}

static int64_t dr_now(void *ctx)
{
    (void)ctx;
    return 5000000;
}

struct dr_result {
    enum hv_dryrun_verdict v;
    char why[DR_WHY_CAP];
    int lists, patches;
};

/* Whether a reason needs no sanitising: no control characters, no runs of spaces nor spaces
 * at its ends, not the machine's name, at most 240 bytes. */
static bool clean_reason(const char *s, const char *name)
{
    size_t n = strlen(s);
    if (n == 0 || n > 240 || s[0] == ' ' || s[n - 1] == ' ' || strstr(s, "  ") || strstr(s, name))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

static void dr_reason_ok(const struct dr_result *r, const struct dr_fake *f, bool set)
{
    check_text(r->why, sizeof(r->why), r->v == HV_DRYRUN_REFUSED, "dry-run reason");
    size_t n = strlen(r->why);
    if ((r->v == HV_DRYRUN_ACCEPTED) != (n == 0))
        fail("a dry-run reason with an acceptance (or none with another verdict)");
    if (r->v != HV_DRYRUN_REFUSED)
        return;
    /* the webhook's reason, sanitised */
    if (n > 240 || r->why[0] == ' ' || r->why[n - 1] == ' ' || strstr(r->why, "  "))
        fail("a refusal's reason is not sanitised");
    if (!set && strstr(r->why, DR_NAME))
        fail("a refusal's reason names the machine");
    /* a reason that is fit as it is is given as it is */
    if (clean_reason(f->reason, f->name) && strcmp(r->why, f->reason))
        fail("a clean refusal reason is changed");
}

static void dr_run(const struct answers *a, bool set, bool redact, struct dr_result *r)
{
    struct dr_fake f = {.a = a, .redact = redact, .set = set, .http = 0};
    struct hv_dryrun_cfg cfg = {
        .io = {.ctx = &f, .list = dr_list, .dry_patch = dr_patch}, .drive = true, .now_ms = dr_now};
    struct hv_dryrun *d = hv_dryrun_new(&cfg);
    if (!d)
        fail("hv_dryrun_new");
    char err[64];
    hj *patch = hj_parse(DR_PATCH, strlen(DR_PATCH), err, sizeof(err));
    struct hv_dryrun_req q = {.machine_set = set,
                              .ns = DR_NS,
                              .owner = "ms1",
                              .api_version = MC_INFRA,
                              .kind = set ? "VSphereMachineTemplate" : "VSphereMachine",
                              .cur_name = set ? "tmpl-1" : DR_NAME,
                              .des_name = set ? "tmpl-2" : DR_NAME,
                              .patch = patch};
    memset(r->why, 'x', sizeof(r->why));
    if (hv_dryrun_ask(d, &q, r->why, sizeof(r->why)) != HV_DRYRUN_PENDING || r->why[0] ||
        f.lists + f.patches)
        fail("the first dry-run question is not pending, or asks on the hook's thread");
    if (hv_dryrun_pass(d) != 1)
        fail("one question, not one dry run");
    memset(r->why, 'x', sizeof(r->why));
    r->v = hv_dryrun_ask(d, &q, r->why, sizeof(r->why));
    r->lists = f.lists;
    r->patches = f.patches;
    if (r->v > HV_DRYRUN_ERROR || r->v == HV_DRYRUN_PENDING)
        fail("a dry run without a verdict");
    if (f.lists > HV_DRYRUN_LIST_PAGES || (!set && f.lists))
        fail("the dry run lists too much");
    bool ok2xx = f.patches == 1 && f.http >= 200 && f.http <= 299;
    if ((r->v == HV_DRYRUN_ACCEPTED) != ok2xx)
        fail("accepted without the API server's 2xx (or not with it)");
    if (r->v == HV_DRYRUN_REFUSED &&
        !(f.patches == 1 && (f.http == 400 || f.http == 403 || f.http == 422)))
        fail("refused without a 400, 403 or 422");
    dr_reason_ok(r, &f, set);
    /* asked again: the cached answer (an ERROR is queued again, its answer stands) */
    char again[DR_WHY_CAP];
    if (hv_dryrun_ask(d, &q, again, sizeof(again)) != r->v || strcmp(again, r->why) ||
        f.lists != r->lists || f.patches != r->patches)
        fail("a cached dry-run answer changes or asks again");
    hj_free(patch);
    hv_dryrun_free(d);
}

static void dr_fuzz(const struct answers *a)
{
    for (int set = 0; set < 2; set++) {
        struct dr_result r1, r2;
        dr_run(a, set, false, &r1);
        if (trace)
            fprintf(stderr, "fuzz_kube: dry run %s: verdict %d (%d lists, %d patches) %s\n",
                    set ? "CanUpdateMachineSet" : "CanUpdateMachine", (int)r1.v, r1.lists,
                    r1.patches, r1.why);
        dr_run(a, set, true, &r2);
        if (r1.v != r2.v || strcmp(r1.why, r2.why) || r1.lists != r2.lists ||
            r1.patches != r2.patches)
            fail("the dry run's answer depends on a Secret's data or is not repeatable");
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    hv_log_set_level(HV_LOG_ERROR); /* the checks log each read error and refusal */
    trace = getenv("FUZZ_KUBE_TRACE") != NULL;
    struct {
        enum hv_hook h;
        const char *text, *uid, *ref_ptr, *ikind, *iname, *mpath, *ipath;
    } def[3] = {
        {HV_HOOK_UPDATE_MACHINE, upd_text, NULL, "/spec/infrastructureRef", "LibvirtMachine", "lm1",
         "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m1",
         "/apis/" MC_INFRA "/namespaces/ns/libvirtmachines/lm1"},
        {HV_HOOK_CAN_UPDATE_MACHINE, can_text, MC_UID, "/spec/infrastructureRef", "LibvirtMachine",
         "lm1", "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m1",
         "/apis/" MC_INFRA "/namespaces/ns/libvirtmachines/lm1"},
        {HV_HOOK_CAN_UPDATE_MACHINE_SET, set_text, NULL, "/spec/template/spec/infrastructureRef",
         "LibvirtMachineTemplate", "t1",
         "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinesets/ms1",
         "/apis/" MC_INFRA "/namespaces/ns/libvirtmachinetemplates/t1"},
    };
    for (size_t k = 0; k < 3; k++) {
        char err[256];
        hj *req = hj_parse(def[k].text, strlen(def[k].text), err, sizeof(err));
        if (!req) {
            fprintf(stderr, "fuzz_kube: request %zu: %s\n", k, err);
            abort();
        }
        mc_cases[k] = (struct mc_case){def[k].h,     req,          def[k].uid,   def[k].ref_ptr,
                                       def[k].ikind, def[k].iname, def[k].mpath, def[k].ipath};
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char user[64], pass[64], why[256];
    struct answers a = {.n = 0};
    for (size_t at = 0; a.n < DOCS && at <= size;) {
        size_t l = strnlen(text + at, size - at);
        a.doc[a.n] = text + at;
        a.len[a.n] = l;
        a.tree[a.n++] = hj_parse(text + at, l, why, sizeof(why));
        at += l + 1;
    }

    struct hv_kube_io io = {&a, fake_get};
    memset(user, 'u', sizeof(user));
    memset(pass, 'p', sizeof(pass));
    enum hv_capv_rc rc = hv_capv_credentials_io(&io, "capv-system", "ns1/cluster-a", 5000, user,
                                                sizeof(user), pass, sizeof(pass), why, sizeof(why));
    if (!memchr(why, '\0', sizeof(why)))
        fail("reason not terminated");
    if (rc == HV_CAPV_OK) {
        if (!memchr(user, '\0', sizeof(user)) || !memchr(pass, '\0', sizeof(pass)))
            fail("credentials not terminated");
        if (pass[0] && strstr(why, pass))
            fail("the password in the reason");
    } else {
        /* refused: the buffers are as given or wiped, never half a decoded secret */
        if (!(all_is(user, sizeof(user), 'u') || all_is(user, sizeof(user), '\0')) ||
            !(all_is(pass, sizeof(pass), 'p') || all_is(pass, sizeof(pass), '\0')))
            fail("refused credentials left in the buffers");
    }

    const hj *sel = a.tree[0], *labels = a.tree[1];
    int m1 = hv_label_selector_match(sel, labels), m2 = hv_label_selector_match(sel, labels);
    if (m1 < -1 || m1 > 1 || m1 != m2)
        fail("selector answer");

    if (sel) {
        struct hv_mhc_seen seen;
        memset(&seen, 0, sizeof(seen));
        hv_mhc_read_machine(sel, &seen);
        for (int vm = HV_MHC_VM_UNKNOWN; vm <= HV_MHC_VM_CYCLING; vm++)
            (void)hv_mhc_act_name(hv_mhc_decide((enum hv_mhc_vm)vm, &seen, 30, 60));
    }

    mc_fuzz(&a);
    dr_fuzz(&a);
    for (size_t i = 0; i < a.n; i++)
        hj_free(a.tree[i]);
    free(text);
    return 0;
}
