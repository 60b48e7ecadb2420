#!/usr/bin/env bash
# up.sh: start the KubeVirt lab: the CAPI lab (test/capi/up.sh, as it is: etcd, the real
# kube-apiserver, CAPI's manager, the libvirt stand-in provider, hvupdater serve, on the QEMU
# lab), then KubeVirt's CRDs (crds/kubevirt-crds.yaml), the KubeVirt CR kubevirt/kubevirt
# (vmRolloutStrategy LiveUpdate), the namespace kubevirt-lab for the tests' VMs, the restart
# subresource's APIService and the KubeVirt stand-in (standin/, built by build.sh, cached).
# Run it as root under `flock /tmp/hv-lab.lock` (the caller takes the lock, as for the CAPI
# lab); stop everything with down.sh. README.md describes the interface.
#
# State: $HV_KUBEVIRT_STATE (/run/hvupdater-kubevirt); the stand-in's HTTPS port:
# $HV_CAPI_PORT_BASE (17000) + 450. HV_KUBEVIRT_MIGRATION_DELAY: how long the stand-in's
# skipped migration of a live update takes (Go duration, default 2s).
# Usage: up.sh          stdout: export lines (the CAPI lab's and HV_KUBEVIRT_*)
#        up.sh --capk   as well: CAPK's controller (capk/build.sh: CAPK v0.1.10 with its own
#                       go.mod), its CRDs labelled for CAPI's v1beta1 contract and its
#                       KubevirtMachineTemplate webhook; prints HV_KUBEVIRT_CAPK=1 too
#                       (ports: base +451 webhooks, +452 health)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
STATE=${HV_KUBEVIRT_STATE:-/run/hvupdater-kubevirt}
BASE=${HV_CAPI_PORT_BASE:-17000}
PORT=$((BASE + 450))
WAIT_S=${HV_CAPI_WAIT_S:-120}
NS=kubevirt-lab

log() { echo "kubevirt-up: $(date +%T) $*" >&2; }
die() { log "$*"; exit 1; }

bare() { # a daemon keeps no inherited descriptor but 0-2 (the caller's flock must not live on)
    local fd
    for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"
    done
    exec "$@"
}
alive() { [ -s "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }

CAPK=0
[ "${1:-}" = --capk ] && { CAPK=1; shift; }
[ $# = 0 ] || die "usage: $0 [--capk]"
[ "$(id -u)" = 0 ] || die "must run as root (the QEMU lab's privileged libvirtd)"
alive standin && die "a KubeVirt lab is already running ($STATE): down.sh first"

T0=$(date +%s%N)
BIN=$("$HERE/build.sh") # before the CAPI lab: a cold build is the slow part
[ "$CAPK" = 0 ] || CAPK_BIN=$("$HERE/capk/build.sh")
capi_env=$("$ROOT/test/capi/up.sh")
eval "$capi_env"
K() { "$HV_CAPI_BIN/kubectl" "$@"; }
rm -rf "$STATE"
mkdir -p "$STATE/faults"

# the stand-in's serving certificate, from the CAPI lab's webhook CA, for the name the
# aggregator checks (the Service's, virt-api.kubevirt.svc)
PKI=$HV_CAPI_STATE/pki
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=virt-api.kubevirt.svc \
    -keyout "$STATE/tls.key" -out "$STATE/tls.csr" 2>/dev/null
printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:virt-api.kubevirt.svc,DNS:localhost,IP:127.0.0.1\n' >"$STATE/tls.ext"
openssl x509 -req -in "$STATE/tls.csr" -CA "$PKI/webhook-ca.crt" -CAkey "$PKI/webhook-ca.key" \
    -CAcreateserial -days 2 -extfile "$STATE/tls.ext" -out "$STATE/tls.crt" 2>/dev/null

log "KubeVirt CRDs"
K apply --server-side -f "$HERE/crds/kubevirt-crds.yaml" >/dev/null
# (kubectl wait fails at once on a CRD whose status has no conditions yet)
for ((i = 0; i < WAIT_S * 10; i++)); do
    n=$(K get crd 2>/dev/null -o jsonpath='{range .items[?(@.spec.group=="kubevirt.io")]}{.status.conditions[?(@.type=="Established")].status}{"\n"}{end}' |
        grep -c True || true)
    [ "$n" = 4 ] && break
    sleep 0.1
done
[ "$n" = 4 ] || die "KubeVirt's CRDs not established: $n of 4"
K create namespace kubevirt >/dev/null
K create namespace "$NS" >/dev/null
K apply --server-side -f - >/dev/null <<YAML
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata: {name: kubevirt, namespace: kubevirt}
spec:
  configuration:
    vmRolloutStrategy: LiveUpdate
    liveUpdateConfiguration: {maxHotplugRatio: 4, maxCpuSockets: 4, maxGuest: 4Gi}
---
# the aggregator proxies subresources.kubevirt.io to the stand-in: an ExternalName Service is
# resolved to its name and the APIService's port (no Endpoints, no cluster IP on loopback)
apiVersion: v1
kind: Service
metadata: {name: virt-api, namespace: kubevirt}
spec: {type: ExternalName, externalName: localhost}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.subresources.kubevirt.io}
spec:
  group: subresources.kubevirt.io
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  caBundle: $(base64 -w0 <"$PKI/webhook-ca.crt")
  service: {namespace: kubevirt, name: virt-api, port: $PORT}
YAML
# as virt-operator reports a deployed KubeVirt
K patch kubevirt kubevirt -n kubevirt --subresource status --type merge \
    -p '{"status":{"phase":"Deployed","observedDeploymentID":"hvupdater-lab"}}' >/dev/null

log "stand-in"
(bare setsid "$BIN/standin" -kubeconfig "$KUBECONFIG" -uri "$HV_LIBVIRT_LAB_URI" \
    -faults "$STATE/faults" -listen "127.0.0.1:$PORT" -cert "$STATE/tls.crt" -key "$STATE/tls.key" \
    -migration-delay "${HV_KUBEVIRT_MIGRATION_DELAY:-2s}" \
    </dev/null >>"$STATE/standin.log" 2>&1) &
echo $! >"$STATE/standin.pid"
for ((i = 0; i < WAIT_S * 10; i++)); do
    K get --raw /apis/subresources.kubevirt.io/v1 >/dev/null 2>&1 && break
    alive standin || die "the stand-in exited; log tail:
$(tail -20 "$STATE/standin.log")"
    sleep 0.1
done
K get --raw /apis/subresources.kubevirt.io/v1 >/dev/null ||
    die "the aggregator does not reach the stand-in: $(K get apiservice v1.subresources.kubevirt.io -o jsonpath='{.status.conditions}')"
# virt-api's VirtualMachine validator, as KubeVirt registers it (failurePolicy Fail: while
# virt-api is not there, the API server refuses VM changes), answered by the stand-in
K apply --server-side -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: virt-api-validator}
webhooks:
- name: virtualmachine-validator.kubevirt.io
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 10
  rules:
  - {apiGroups: [kubevirt.io], apiVersions: [v1], operations: [UPDATE], resources: [virtualmachines]}
  clientConfig:
    url: https://127.0.0.1:$PORT/validate-virtualmachine
    caBundle: $(base64 -w0 <"$PKI/webhook-ca.crt")
YAML
# --- CAPK (--capk): its CRDs with the label CAPI reads a provider's contract from (CAPK's
# config/crd kustomization adds cluster.x-k8s.io/v1beta1: v1alpha1), its manager on the CAPI
# lab's webhook certificate (127.0.0.1, the webhook CA), its webhook pointed at it
if [ "$CAPK" = 1 ]; then
    log "CAPK"
    for f in "$CAPK_BIN"/capk-config/crd/*.yaml; do
        K apply --server-side -f "$f" >/dev/null
        K label --overwrite -f "$f" cluster.x-k8s.io/v1beta1=v1alpha1 cluster.x-k8s.io/provider=kubevirt >/dev/null
    done
    K create namespace capk-system >/dev/null
    (bare setsid env KUBECONFIG="$KUBECONFIG" "$CAPK_BIN/capk-manager" --leader-elect=false \
        --webhook-port $((BASE + 451)) --webhook-cert-dir "$HV_CAPI_STATE/webhook-certs" \
        --health-addr "127.0.0.1:$((BASE + 452))" --metrics-bind-addr 0 \
        </dev/null >>"$STATE/capk-manager.log" 2>&1) &
    echo $! >"$STATE/capk-manager.pid"
    for ((i = 0; i < WAIT_S * 10; i++)); do
        curl -sf "http://127.0.0.1:$((BASE + 452))/readyz" >/dev/null 2>&1 && break
        alive capk-manager || die "capk-manager exited; log tail:
$(tail -20 "$STATE/capk-manager.log")"
        sleep 0.1
    done
    curl -sf "http://127.0.0.1:$((BASE + 452))/readyz" >/dev/null || die "capk-manager not ready"
    python3 - "$CAPK_BIN/capk-config/webhook.yaml" "https://127.0.0.1:$((BASE + 451))" "$PKI/webhook-ca.crt" <<'PY' |
import base64, json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ca = base64.b64encode(open(sys.argv[3], "rb").read()).decode()
for d in docs:
    d["metadata"] = {"name": "capk-" + d["metadata"]["name"]}
    for w in d["webhooks"]:
        path = w["clientConfig"]["service"]["path"]
        w["clientConfig"] = {"url": sys.argv[2] + path, "caBundle": ca}
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
PY
        K apply --server-side -f - >/dev/null
fi
log "up in $((($(date +%s%N) - T0) / 1000000)) ms (the CAPI lab included)"

echo "$capi_env"
echo "export HV_KUBEVIRT_STATE=$STATE"
echo "export HV_KUBEVIRT_NAMESPACE=$NS"
echo "export HV_KUBEVIRT_FAULTS=$STATE/faults"
echo "export HV_KUBEVIRT_STANDIN_LOG=$STATE/standin.log"
echo "export HV_KUBEVIRT_CRDS=$HERE/crds/kubevirt-crds.yaml"
echo "export HV_KUBEVIRT_DOMAIN_PREFIX=hvt-kv-"
[ "$CAPK" = 0 ] || echo "export HV_KUBEVIRT_CAPK=1"
