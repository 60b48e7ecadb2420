/* fuzz_kube.c: libFuzzer target for what the Kubernetes API answers (src/kube): whoever can
 * write a Cluster, VSphereCluster, VSphereClusterIdentity, Namespace, Secret or Machine in the
 * management cluster decides these bytes.
 *
 * The input is up to eight answers separated by NUL bytes. They are served in turn to the
 * CAPV identity lookup (hv_capv_credentials_io: Cluster, VSphereCluster, identity, Namespace,
 * Secret; a document that does not parse is a 404), and the first two are also a label
 * selector and a label set (hv_label_selector_match) and the first a Machine for the
 * remediation hold (hv_mhc_read_machine, hv_mhc_decide).
 * Invariants: no crash or leak; credentials only with HV_CAPV_OK, NUL-terminated within their
 * buffers, and otherwise the buffers as given or wiped; the reason NUL-terminated and never holding
 * the password; a selector answer is -1, 0 or 1, and the same twice.
 */
#include "capv.h"
#include "mhc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DOCS 8

struct answers {
    const char *doc[DOCS];
    size_t len[DOCS];
    size_t n, next;
};

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct answers a = {.n = 0};
    for (size_t at = 0; a.n < DOCS && at <= size;) {
        size_t l = strnlen(text + at, size - at);
        a.doc[a.n] = text + at;
        a.len[a.n++] = l;
        at += l + 1;
    }

    struct hv_kube_io io = {&a, fake_get};
    char user[64], pass[64], why[256];
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

    hj *sel = a.n > 0 ? hj_parse(a.doc[0], a.len[0], why, sizeof(why)) : NULL;
    hj *labels = a.n > 1 ? hj_parse(a.doc[1], a.len[1], why, sizeof(why)) : NULL;
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
    hj_free(sel);
    hj_free(labels);
    free(text);
    return 0;
}
