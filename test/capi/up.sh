#!/usr/bin/env bash
# up.sh: start the CAPI lab on loopback: etcd, kube-apiserver (certificates made now), CAPI's
# CRDs, CAPI's core manager (InPlaceUpdates + RuntimeSDK on, its webhooks served and
# registered, CRD conversion through it), the lab's Libvirt* CRDs, the stand-in
# infrastructure provider (QEMU domains through the QEMU lab's libvirtd), and hvupdater serve
# registered by an ExtensionConfig (CAPI runs discovery itself) and posting Warning Events
# (deploy/kubernetes/components/events) with a service account token.
#
# hvupdater runs with kubernetes.dryRunClaims (the chart's default: CanUpdateMachine(Set)
# covers an infra change only once a dry run on an infra machine passes) and the chart's
# dry-run RBAC; HV_CAPI_DRY_RUN_CLAIMS=0 leaves the option out of its config.
# HV_CAPI_PROVIDER_WEBHOOK=1: the stand-in provider also serves a validating webhook for
# LibvirtMachine updates that forbids memoryMiB changes as CAPV's VSphereMachine webhook
# forbids spec changes (provider/webhook.go), registered for UPDATE (port +449, the lab's
# webhook certificate); prints HV_CAPI_WEBHOOK=1 too, and capi_e2e.py then runs its webhook
# scenarios.
#
# HV_CAPI_LOG_FORMAT=json: CAPI's managers log with --logging-format=json (component-base's
# JSON logs) and hvupdater with its config's "log": {"format": "capi"}, for log_compare.py;
# unset (the default): the text formats and hvupdater's own, as the scenarios read them.
#
# Binaries: build.sh (cached). Needs the QEMU lab (test/lab/libvirt-up.sh is run here, it is
# idempotent) and the hvupdater binary (HV_BUILD, default build/ of this checkout).
# State, certificates, logs and pid files: $HV_CAPI_STATE (/run/hvupdater-capi); ports from
# $HV_CAPI_PORT_BASE (17000): etcd +379/+380, kube-apiserver +443, CAPI webhooks +444,
# CAPI health +440, CAPI diagnostics +441, hvupdater +445; with --kcp: KCP webhooks +446, KCP
# health +447, KCP diagnostics +448.
#
# Usage: up.sh                      start everything; stdout: export lines (KUBECONFIG,
#                                   HV_CAPI_BIN with kubectl and clusterctl, HV_CAPI_STATE,
#                                   HV_CAPI_HVUPDATER_LOG, HV_LIBVIRT_LAB_URI)
#        up.sh --kcp                as well: CAPI's KubeadmControlPlane manager (kcp-manager, its
#                                   CRDs, conversion and webhooks) and the KubeadmConfig CRDs
#                                   (storage version only; provider/ stands in for the kubeadm
#                                   bootstrap manager); prints HV_CAPI_KCP=1 too
#        up.sh --restart-hvupdater  stop hvupdater serve (SIGTERM) and start it again with the
#                                   same port, certificate and config; only the start when
#                                   the process is gone already (a test killed it: kill -9)
#                                   (HV_CAPI_HVUPDATER_FLAGS: extra serve flags, e.g. --mhc-hold)
# Stop with down.sh.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
STATE=${HV_CAPI_STATE:-/run/hvupdater-capi}
BASE=${HV_CAPI_PORT_BASE:-17000}
HV_BIN=${HV_BUILD:-$ROOT/build}/hvupdater
ETCD_PORT=$((BASE + 379)) ETCD_PEER=$((BASE + 380)) API_PORT=$((BASE + 443))
HOOK_PORT=$((BASE + 444)) HEALTH_PORT=$((BASE + 440)) DIAG_PORT=$((BASE + 441))
HV_PORT=$((BASE + 445)) KCP_HOOK_PORT=$((BASE + 446)) KCP_HEALTH_PORT=$((BASE + 447))
KCP_DIAG_PORT=$((BASE + 448)) PROVIDER_HOOK_PORT=$((BASE + 449))
WEBHOOK=${HV_CAPI_PROVIDER_WEBHOOK:-0}
DRY_RUN_CFG=',
                "dryRunClaims": true'
[ "${HV_CAPI_DRY_RUN_CLAIMS:-1}" = 0 ] && DRY_RUN_CFG=""
WAIT_S=${HV_CAPI_WAIT_S:-120}
case "${HV_CAPI_LOG_FORMAT:-}" in
"") CAPI_LOG=() HV_LOG_CFG="" ;;
json) CAPI_LOG=(--logging-format=json) HV_LOG_CFG=',
 "log": {"format": "capi"}' ;;
*) echo "capi-up: HV_CAPI_LOG_FORMAT must be json or unset" >&2; exit 1 ;;
esac

log() { echo "capi-up: $(date +%T) $*" >&2; }
die() { log "$*"; exit 1; }

# a daemon keeps no inherited descriptor but 0-2 (see test/lab/libvirt-up.sh: a flock held
# by the caller must not live on in it)
bare() {
    local fd
    for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"
    done
    exec "$@"
}

start() { # start NAME CMD...: run in the background, log to $STATE/NAME.log, pid file
    local name=$1
    shift
    (bare setsid "$@" </dev/null >>"$STATE/$name.log" 2>&1) &
    echo $! >"$STATE/$name.pid"
}

alive() { [ -s "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }

wait_for() { # wait_for WHAT NAME CMD...: until CMD succeeds; NAME's process must live
    local what=$1 name=$2 i
    shift 2
    for ((i = 0; i < WAIT_S * 10; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        alive "$name" || die "$name exited while waiting for $what; log tail:
$(tail -20 "$STATE/$name.log")"
        sleep 0.1
    done
    die "$what not ready within ${WAIT_S}s; $name log tail:
$(tail -20 "$STATE/$name.log")"
}

start_hvupdater() { # HV_CAPI_HVUPDATER_FLAGS: extra serve flags (capi_e2e's mhc: --mhc-hold)
    # shellcheck disable=SC2086
    start hvupdater "$HV_BIN" serve --listen "127.0.0.1:$HV_PORT" --cert-dir "$STATE/hvupdater-tls" \
        --config "$STATE/hvupdater.json" ${HV_CAPI_HVUPDATER_FLAGS:-}
    wait_for "hvupdater serve" hvupdater curl -sf --cacert "$STATE/hvupdater-tls/ca.crt" \
        "https://127.0.0.1:$HV_PORT/readyz"
}

if [ "${1:-}" = --restart-hvupdater ]; then
    pid=$(cat "$STATE/hvupdater.pid")
    # (a killed process nobody has reaped yet is a zombie: kill -0 still finds it)
    if kill -TERM "$pid" 2>/dev/null; then
        while kill -0 "$pid" 2>/dev/null && [[ "$(ps -o stat= -p "$pid")" != Z* ]]; do sleep 0.05; done
    fi
    start_hvupdater
    log "hvupdater restarted (pid $(cat "$STATE/hvupdater.pid"))"
    exit 0
fi
KCP=0
[ "${1:-}" = --kcp ] && { KCP=1; shift; }
[ $# = 0 ] || die "usage: $0 [--kcp | --restart-hvupdater]"
[ "$(id -u)" = 0 ] || die "must run as root (the QEMU lab's privileged libvirtd)"
[ -x "$HV_BIN" ] || die "no hvupdater binary at $HV_BIN (build it, or set HV_BUILD)"
for b in openssl curl virsh python3; do command -v $b >/dev/null || die "$b missing"; done
[ -d "$STATE" ] && alive etcd && die "a CAPI lab is already running ($STATE): down.sh first"

T0=$(date +%s%N)
lab_env=$("$ROOT/test/lab/libvirt-up.sh")
eval "$lab_env"
BIN=$("$HERE/build.sh")
rm -rf "$STATE"
mkdir -p "$STATE/pki" "$STATE/webhook-certs"
PKI=$STATE/pki

# --- certificates: one CA for the API server and its clients, one for the webhooks
log "certificates"
ossl() { openssl "$@" 2>/dev/null; }
mkca() { # mkca NAME CN
    ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=$2" -keyout "$PKI/$1.key" -out "$PKI/$1.crt"
}
mkcert() { # mkcert NAME CA SUBJECT [SAN]
    ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$3" \
        -keyout "$PKI/$1.key" -out "$PKI/$1.csr"
    local ext=$PKI/$1.ext
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n' >"$ext"
    if [ -n "${4:-}" ]; then
        printf 'extendedKeyUsage=serverAuth\nsubjectAltName=%s\n' "$4" >>"$ext"
    else
        printf 'extendedKeyUsage=clientAuth\n' >>"$ext"
    fi
    ossl x509 -req -in "$PKI/$1.csr" -CA "$PKI/$2.crt" -CAkey "$PKI/$2.key" -CAcreateserial \
        -days 2 -extfile "$ext" -out "$PKI/$1.crt"
}
mkca ca capi-lab-ca
mkcert apiserver ca "/CN=kube-apiserver" "IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc"
mkcert admin ca "/O=system:masters/CN=capi-lab-admin"
mkca webhook-ca capi-lab-webhook-ca
mkcert webhook webhook-ca "/CN=capi-webhooks" "IP:127.0.0.1,DNS:localhost"
cp "$PKI/webhook.crt" "$STATE/webhook-certs/tls.crt"
cp "$PKI/webhook.key" "$STATE/webhook-certs/tls.key"
ossl genrsa -out "$PKI/sa.key" 2048
ossl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"

KUBECONFIG=$STATE/kubeconfig
b64() { base64 -w0 <"$1"; }
cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: capi-lab
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority-data: "$(b64 "$PKI/ca.crt")"}
users:
- name: admin
  user: {client-certificate-data: "$(b64 "$PKI/admin.crt")", client-key-data: "$(b64 "$PKI/admin.key")"}
contexts:
- name: capi-lab
  context: {cluster: capi-lab, user: admin}
current-context: capi-lab
EOF
export KUBECONFIG
K() { "$BIN/kubectl" "$@"; }

# --- etcd and kube-apiserver
log "etcd"
start etcd "$BIN/etcd" --name lab --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
    --initial-cluster "lab=http://127.0.0.1:$ETCD_PEER" --unsafe-no-fsync --listen-metrics-urls "" \
    --log-level warn
wait_for etcd etcd curl -sf "http://127.0.0.1:$ETCD_PORT/health"

log "kube-apiserver"
start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$PKI/sa.pub" \
    --service-account-signing-key-file "$PKI/sa.key" --service-cluster-ip-range 10.96.0.0/24 \
    --endpoint-reconciler-type none --enable-priority-and-fairness=false --profiling=false \
    --cert-dir "$STATE/apiserver-certs"
wait_for kube-apiserver kube-apiserver curl -sf --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" \
    --key "$PKI/admin.key" "https://127.0.0.1:$API_PORT/readyz"

# --- CAPI's CRDs (conversion by the manager) and the lab's infrastructure CRDs
log "CRDs"
CFG=$BIN/capi-config
HOOK_URL=https://127.0.0.1:$HOOK_PORT
python3 "$HERE/manifests/render.py" crds "$CFG" "$HOOK_URL" "$PKI/webhook-ca.crt" |
    K apply --server-side -f - >/dev/null
K apply --server-side -f "$HERE/manifests/libvirt-crds.yaml" >/dev/null
K wait --for condition=Established --timeout 60s crd --all >/dev/null

# --- CAPI's core manager
log "capi-manager"
K create namespace capi-system >/dev/null
start capi-manager env POD_NAMESPACE=capi-system POD_NAME=capi-manager "$BIN/capi-manager" \
    --kubeconfig "$KUBECONFIG" --leader-elect=false \
    --feature-gates "InPlaceUpdates=true,RuntimeSDK=true,MachineSetPreflightChecks=true,ClusterTopology=false,MachinePool=false" \
    --webhook-port "$HOOK_PORT" --webhook-cert-dir "$STATE/webhook-certs" \
    --health-addr "127.0.0.1:$HEALTH_PORT" --diagnostics-address "127.0.0.1:$DIAG_PORT" \
    --insecure-diagnostics --v 2 ${CAPI_LOG[@]+"${CAPI_LOG[@]}"}
wait_for "capi-manager" capi-manager curl -sf "http://127.0.0.1:$HEALTH_PORT/readyz"
wait_for "capi webhooks" capi-manager curl -s --cacert "$PKI/webhook-ca.crt" "$HOOK_URL/convert"
python3 "$HERE/manifests/render.py" webhooks "$CFG" "$HOOK_URL" "$PKI/webhook-ca.crt" |
    K apply --server-side -f - >/dev/null

# --- KubeadmControlPlane's manager (--kcp), with the KubeadmConfig CRDs its Machines need
if [ "$KCP" = 1 ]; then
    log "kcp-manager"
    KCP_URL=https://127.0.0.1:$KCP_HOOK_PORT
    python3 "$HERE/manifests/render.py" crds-storage "$CFG" bootstrap/kubeadm | K apply --server-side -f - >/dev/null
    python3 "$HERE/manifests/render.py" crds "$CFG" "$KCP_URL" "$PKI/webhook-ca.crt" controlplane/kubeadm |
        K apply --server-side -f - >/dev/null
    K wait --for condition=Established --timeout 60s crd --all >/dev/null
    K create namespace capi-kubeadm-control-plane-system >/dev/null
    start kcp-manager env POD_NAMESPACE=capi-kubeadm-control-plane-system POD_NAME=kcp-manager \
        "$BIN/kcp-manager" --kubeconfig "$KUBECONFIG" --leader-elect=false \
        --feature-gates "InPlaceUpdates=true" \
        --webhook-port "$KCP_HOOK_PORT" --webhook-cert-dir "$STATE/webhook-certs" \
        --health-addr "127.0.0.1:$KCP_HEALTH_PORT" --diagnostics-address "127.0.0.1:$KCP_DIAG_PORT" \
        --insecure-diagnostics --v 2 ${CAPI_LOG[@]+"${CAPI_LOG[@]}"}
    wait_for "kcp-manager" kcp-manager curl -sf "http://127.0.0.1:$KCP_HEALTH_PORT/readyz"
    wait_for "kcp webhooks" kcp-manager curl -s --cacert "$PKI/webhook-ca.crt" "$KCP_URL/convert"
    python3 "$HERE/manifests/render.py" webhooks "$CFG" "$KCP_URL" "$PKI/webhook-ca.crt" controlplane/kubeadm |
        K apply --server-side -f - >/dev/null
fi

# --- the stand-in provider (with HV_CAPI_PROVIDER_WEBHOOK=1 its LibvirtMachine webhook)
log "provider"
PROVIDER_WEBHOOK=()
if [ "$WEBHOOK" = 1 ]; then
    PROVIDER_WEBHOOK=(-webhook-listen "127.0.0.1:$PROVIDER_HOOK_PORT"
        -webhook-cert "$STATE/webhook-certs/tls.crt" -webhook-key "$STATE/webhook-certs/tls.key")
fi
start provider "$BIN/provider" -kubeconfig "$KUBECONFIG" -uri "$HV_LIBVIRT_LAB_URI" \
    -domains "$ROOT/test/lab/domains" ${PROVIDER_WEBHOOK[@]+"${PROVIDER_WEBHOOK[@]}"}
if [ "$WEBHOOK" = 1 ]; then
    wait_for "the provider's webhook" provider curl -s --cacert "$PKI/webhook-ca.crt" \
        "https://127.0.0.1:$PROVIDER_HOOK_PORT/"
    K apply --server-side -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: lab-libvirtmachine
webhooks:
  - name: validation.libvirtmachine.lab.hvupdater.io
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Fail
    clientConfig:
      url: https://127.0.0.1:$PROVIDER_HOOK_PORT/validate-infrastructure-cluster-x-k8s-io-v1alpha1-libvirtmachine
      caBundle: $(b64 "$PKI/webhook-ca.crt")
    rules:
      - apiGroups: [infrastructure.cluster.x-k8s.io]
        apiVersions: [v1alpha1]
        operations: [UPDATE]
        resources: [libvirtmachines]
EOF
fi

# --- hvupdater, registered by an ExtensionConfig, with the optional Events component on: a
# service account bound by the component's own ClusterRole (create Events, nothing else), in
# a namespace of the lab's (clusterctl_test.py installs and deletes hvupdater-system)
log "hvupdater"
K create namespace hvupdater-lab >/dev/null
K create serviceaccount hvupdater -n hvupdater-lab >/dev/null
sed -e 's/namespace: "\{0,1\}hvupdater-system"\{0,1\}$/namespace: hvupdater-lab/' \
    -e 's/name: hvupdater-events$/name: hvupdater-lab-events/' \
    "$ROOT/deploy/kubernetes/components/events/rbac.yaml" | K apply --server-side -f - >/dev/null
# and the MachineHealthCheck hold's (get, list, patch Machines), used when capi_e2e's mhc
# scenario restarts hvupdater with --mhc-hold
sed -e 's/namespace: "\{0,1\}hvupdater-system"\{0,1\}$/namespace: hvupdater-lab/' \
    -e 's/name: hvupdater-mhc-hold$/name: hvupdater-lab-mhc-hold/' \
    "$ROOT/deploy/kubernetes/components/mhc/rbac.yaml" | K apply --server-side -f - >/dev/null
# and the machine check's (on: the config names the API server): get, list Machines and
# MachineSets, get the infra kinds; the same role the chart binds by default
sed -e 's/namespace: "\{0,1\}hvupdater-system"\{0,1\}$/namespace: hvupdater-lab/' \
    -e 's/name: hvupdater-machine-check$/name: hvupdater-lab-machine-check/' \
    "$ROOT/deploy/kubernetes/base/machinecheck-rbac.yaml" | K apply --server-side -f - >/dev/null
# and the dry-run claims' (patch on the infra machine resources, list Machines)
sed -e 's/namespace: "\{0,1\}hvupdater-system"\{0,1\}$/namespace: hvupdater-lab/' \
    -e 's/name: hvupdater-dry-run-claims$/name: hvupdater-lab-dry-run-claims/' \
    "$ROOT/deploy/kubernetes/base/dryrun-rbac.yaml" | K apply --server-side -f - >/dev/null
K create token hvupdater -n hvupdater-lab --duration 48h >"$STATE/hvupdater.token"
cat >"$STATE/hvupdater.json" <<EOF
{"libvirt": {"uris": ["$HV_LIBVIRT_LAB_URI"]},
 "engine": {"workers": 4, "maxConcurrentPowerCycles": 4, "maxPowerCyclesPerHost": 4},
 "kubernetes": {"server": "https://127.0.0.1:$API_PORT", "tokenFile": "$STATE/hvupdater.token",
                "caFile": "$PKI/ca.crt", "events": true$DRY_RUN_CFG}$HV_LOG_CFG}
EOF
start_hvupdater
K apply --server-side -f - >/dev/null <<EOF
apiVersion: runtime.cluster.x-k8s.io/v1beta2
kind: ExtensionConfig
metadata:
  name: hvupdater
spec:
  clientConfig:
    url: https://127.0.0.1:$HV_PORT
    caBundle: $(b64 "$STATE/hvupdater-tls/ca.crt")
EOF
# CAPI's discovery: the ExtensionConfig lists the three in-place handlers
for ((i = 0; i < WAIT_S * 10; i++)); do
    n=$(K get extensionconfig hvupdater -o jsonpath='{.status.handlers[*].name}' 2>/dev/null | wc -w)
    [ "$n" -ge 3 ] && break
    sleep 0.1
done
[ "$n" -ge 3 ] || die "CAPI's discovery of hvupdater did not finish: $(K get extensionconfig hvupdater -o jsonpath='{.status}')"
log "up in $((($(date +%s%N) - T0) / 1000000)) ms: handlers $(K get extensionconfig hvupdater -o jsonpath='{.status.handlers[*].name}')"

echo "export KUBECONFIG=$KUBECONFIG"
echo "export HV_CAPI_BIN=$BIN"
echo "export HV_CAPI_STATE=$STATE"
echo "export HV_CAPI_HVUPDATER_LOG=$STATE/hvupdater.log"
echo "export HV_LIBVIRT_LAB_URI=$HV_LIBVIRT_LAB_URI"
[ "$KCP" = 0 ] || echo "export HV_CAPI_KCP=1"
[ "$WEBHOOK" = 0 ] || echo "export HV_CAPI_WEBHOOK=1"
