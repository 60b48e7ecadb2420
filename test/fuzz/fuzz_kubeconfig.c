/* fuzz_kubeconfig.c: libFuzzer target for the kubeconfig of CAPK's infraClusterSecretRef
 * Secret (backends/kubevirt/kv_kubeconfig.c, libyaml underneath): untrusted bytes from a
 * Secret anyone with write access to it controls.
 *
 * The reader either refuses with a message that is NUL-terminated within its buffer, or
 * accepts with an https:// server, a namespace that is a name, and a token or a client
 * certificate whose key comes with it; the credentials are freed (and wiped) without a leak.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_kubeconfig: invariant broken: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kv_kubeconfig kc;
    char why[200];
    memset(why, 'x', sizeof(why));
    if (kv_kubeconfig_parse((const char *)data, size, &kc, why, sizeof(why)) < 0) {
        if (!memchr(why, '\0', sizeof(why)))
            fail("refusal without a message");
        if (kc.token || kc.ca || kc.cert || kc.key)
            fail("credentials kept after a refusal");
        return 0;
    }
    if (strncmp(kc.server, "https://", 8) != 0)
        fail("server not https");
    if (strspn(kc.ns, "abcdefghijklmnopqrstuvwxyz0123456789-.") != strlen(kc.ns))
        fail("namespace not a name");
    if (!kc.token && !kc.cert)
        fail("accepted without credentials");
    if (!kc.cert != !kc.key)
        fail("certificate without its key");
    kv_kubeconfig_free(&kc);
    return 0;
}
