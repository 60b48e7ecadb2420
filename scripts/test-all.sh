#!/usr/bin/env bash
# test-all.sh: set everything up on a fresh Debian 12 (as root) and run the whole test suite:
# build with warnings as errors, unit + schema + integration tests, the same unit tests under
# ASan+UBSan and valgrind, the vCenter simulator scenarios, the QEMU lab (its own libvirtd),
# Cluster API's own controllers driving hvupdater on it and clusterctl installing and removing
# the hvupdater provider (the CAPI lab, test/capi), the Kubernetes API scenarios (CAPV
# identities, Events) on an API server from the same cached binaries, the KubeVirt lab
# (test/kubevirt: KubeVirt's CRDs and a KubeVirt stand-in on QEMU guests),
# a short fuzz run of every parser of untrusted input, and a format check. Starts every daemon it needs and stops them on exit.
# Usage: scripts/test-all.sh [--quick]   (--quick: skip valgrind, fuzzing and the labs)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
JOBS=$(nproc)
FUZZ_SECONDS=${HV_FUZZ_SECONDS:-20} # per fuzz target

section() { printf '\n=== %s (%s)\n' "$*" "$(date +%H:%M:%S)"; }

section "packages"
./scripts/bootstrap.sh all

section "build (Debug, -Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug -DHV_WERROR=ON >/dev/null
cmake --build build -j"$JOBS"

section "format"
# clang-format's own exit status decides (a missing clang-format is a failure, never "clean")
command -v clang-format >/dev/null || { echo "clang-format is not installed" >&2; exit 1; }
if ! git ls-files -z '*.c' '*.h' | xargs -0 clang-format --dry-run --Werror; then
    echo "clang-format: the files above are not formatted (clang-format -i FILE)" >&2
    exit 1
fi
echo "clang-format: clean"
# Every room's folder on the include path (cmake/rooms.txt), as the build gives each its own.
cppcheck --quiet --enable=warning,portability --std=c11 --error-exitcode=1 \
    --suppress=missingIncludeSystem -I src $(printf -- '-I %s ' src/*/ backends backends/*/) \
    src backends
echo "cppcheck: clean"

section "unit, schema and integration tests"
(cd build && ctest --no-tests=error --output-on-failure -j"$JOBS" -L 'unit|schema|integration|deploy')

section "unit and integration tests under ASan + UBSan (the server binary too)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DHV_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$JOBS"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --no-tests=error --output-on-failure -j"$JOBS" -L 'unit|integration' -E 'deploy|docs')

if [ "$QUICK" = 1 ]; then
    echo "quick run: valgrind, labs and fuzzing skipped"
    exit 0
fi

section "unit tests under valgrind"
# (sim.seeds.* and sim.honest.* are left out: 10,000 simulated runs take hours under valgrind, and
# the honest world's 2,000 took 264 s of this stage's 399 s at its first CI run; sim.seeds_short
# runs 100 of the seeded ones there, the honest world's regression seeds run there too, and all
# run natively and under ASan above). -j: each test is its own valgrind process, so the two cores
# share them (one at a time this stage took 6.4 min in CI; every test's timeout is far from its
# time under valgrind, test/CMakeLists.txt)
(cd build && ctest --no-tests=error --output-on-failure -j"$JOBS" -L unit -E "deploy|docs|sim\.seeds\.|sim\.honest\." -T memcheck \
    --overwrite MemoryCheckCommandOptions="--leak-check=full --errors-for-leak-kinds=definite --error-exitcode=1" \
    >/tmp/hv-memcheck.log 2>&1) || { tail -50 /tmp/hv-memcheck.log; exit 1; }
if grep -q "Memory checking results:" /tmp/hv-memcheck.log &&
    sed -n '/Memory checking results:/,$p' /tmp/hv-memcheck.log | grep -qE ' - [1-9]'; then
    sed -n '/Memory checking results:/,$p' /tmp/hv-memcheck.log
    exit 1
fi
echo "valgrind: clean"

section "vCenter simulator (Debian's govmomi, built in GOPATH mode)"
export HV_VCSIM_BIN="$ROOT/build/vcsim/vcsim"
test/vcsim/build.sh "$HV_VCSIM_BIN"
(cd build && ctest --no-tests=error --output-on-failure -L vsphere)
/usr/bin/python3 test/e2e/vsphere_e2e.py --build build --vcsim "$HV_VCSIM_BIN"

section "QEMU lab: libvirtd + TCG domains"
cleanup() {
    test/kubevirt/down.sh >/dev/null 2>&1 || true
    test/capi/down.sh >/dev/null 2>&1 || true
    test/lab/libvirt-down.sh >/dev/null 2>&1 || true
    [ -n "${VCSIM_PID:-}" ] && kill "$VCSIM_PID" 2>/dev/null || true
}
trap cleanup EXIT
lab_env=$(test/lab/libvirt-up.sh)
eval "$lab_env"
export HV_LIBVIRT_LAB_URI
(cd build && ctest --no-tests=error --output-on-failure -L libvirt)
/usr/bin/python3 test/e2e/libvirt_e2e.py --build build
# the libvirt bench at a small size (4 TCG guests, +512 MiB DIMM and +1 vCPU each, through the
# hooks as CAPI calls them): it fails when hvupdater answers done before the guest shows all of
# the DIMM by the bench's own measure (issue 26); its figures are printed, never asserted
/usr/bin/python3 test/bench/libvirt-bench.py build 4
# the QEMU lab stays up: the CAPI lab below runs on it

section "Cluster API lab: CAPI's own controllers drive hvupdater; the clusterctl provider (test/capi)"
# etcd, kube-apiserver, kubectl, CAPI's manager and clusterctl from Go modules, built once per
# pinned version and cached under /var/cache/hvupdater-lab (a cold build takes most of this
# stage); the same binaries serve the Kubernetes API stage after it.
HV_KUBE_BIN=${HV_KUBE_BIN:-$(test/capi/build.sh)}
# (up.sh's output is captured first: eval "$(...)" would lose its exit status)
capi_env=$(HV_BUILD=build test/capi/up.sh) # the QEMU lab is already up (up.sh starts it idempotently)
eval "$capi_env"
/usr/bin/python3 test/capi/capi_e2e.py
# then, on the same lab: clusterctl init --runtime-extension hvupdater, upgrade plan, delete
/usr/bin/python3 test/deploy/clusterctl_test.py --source .
test/capi/down.sh
# again with CAPI's manager on --logging-format=json and hvupdater on log.format capi: after
# an in-place rollout, a line of each about a Machine compared key by key
capi_env=$(HV_CAPI_LOG_FORMAT=json HV_BUILD=build test/capi/up.sh)
eval "$capi_env"
/usr/bin/python3 test/capi/capi_e2e.py -k scale_up -k in_place
/usr/bin/python3 test/capi/log_compare.py
test/capi/down.sh
# again with CAPI's KubeadmControlPlane manager: the KCP scenarios (CanUpdateMachine)
capi_env=$(HV_BUILD=build test/capi/up.sh --kcp)
eval "$capi_env"
/usr/bin/python3 test/capi/capi_e2e.py
test/capi/down.sh
unset HV_CAPI_KCP
# again with the stand-in provider's CAPV-style webhook (memoryMiB cannot change): hvupdater's
# dry run turns the in-place claim into a replacement instead of a Machine stuck updating
capi_env=$(HV_CAPI_PROVIDER_WEBHOOK=1 HV_BUILD=build test/capi/up.sh)
eval "$capi_env"
/usr/bin/python3 test/capi/capi_e2e.py
test/capi/down.sh
unset HV_CAPI_WEBHOOK

section "KubeVirt lab: KubeVirt's CRDs from kubevirt.io/api, the KubeVirt stand-in on QEMU guests (test/kubevirt)"
# the CAPI lab again (its cached binaries) with KubeVirt's CRDs, the restart subresource's
# APIService, the stand-in and CAPK's controller (v0.1.10 with its own go.mod; both built once
# per version and cached beside the CAPI binaries: CAPK's cold build is about 10 min)
kv_t0=$(date +%s)
test/kubevirt/crds/gen.sh --check
kv_env=$(HV_BUILD=build test/kubevirt/up.sh --capk)
eval "$kv_env"
/usr/bin/python3 test/kubevirt/kubevirt_lab_test.py
test/kubevirt/down.sh
test/lab/libvirt-down.sh
# hvupdater's KubeVirt backend against the same lab (its own up and down): plan, live grow,
# the #12101 trap, a restart beyond maxGuest, a cycle finished by a second process, refused
# under Never, virt-api's validator refusing changes (409), KubeVirt down for 60 s, kill -9 at
# each step of a restart, the plan property over random pairs
# (HV_LAB_LOCK_HELD=1: this suite runs under `flock /tmp/hv-lab.lock .ci/run`; the script's own
# flock on a new descriptor would wait for that lock for ever)
HV_LAB_LOCK_HELD=1 HV_BUILD=build test/kvbackend/lab-test.sh
# CAPI itself drives hvupdater on CAPK Machines (CAPK v0.1.10's controller): a MachineDeployment
# grows memory and sockets in place, also through virt-api's validator refusing patches (409),
# KubeVirt down for 60 s, the VMs' cluster reached only through CAPK's infraClusterSecretRef
# kubeconfig Secret (its identity; the Secret removed: refused) and hvupdater killed (kill -9)
# mid-operation; beyond maxGuest refused
# under Never, a restart under IfNeeded (its own up --capk and down)
HV_LAB_LOCK_HELD=1 HV_BUILD=build test/kubevirt/capi-test.sh
# the KubeVirt tutorial (docs/tutorial-kubevirt.md) as a reader runs it: its own lab up and down
(cd build && HV_LAB_LOCK_HELD=1 ctest --no-tests=error --output-on-failure -R '^docs\.tutorial\.kubevirt$')
echo "KubeVirt lab stage: $(($(date +%s) - kv_t0)) s"

section "the Kubernetes API: CAPV identities, Events, helm install/uninstall (etcd + kube-apiserver of the CAPI lab's build)"
# its own API server (RBAC, a CAPV-shaped CRD set of its own) from the binaries above: the
# CAPI lab's server holds CAPI's real CRDs and controllers, which would act on its Clusters
/usr/bin/python3 test/e2e/kube_e2e.py --build build --vcsim "$HV_VCSIM_BIN" --kube-bin "$HV_KUBE_BIN"
# CanUpdateMachine with the machine check on, reads from a real API server of its own (the
# same binaries), 10 s at 64 connections (Debug build: the figures mean little here, a Release
# build gives issue 31's): every answer must be a Success; before the check read hot objects
# again ahead of their expiry, about 1.6% of such calls were answered "reading ...; retry"
BENCH_NGINX=0 /usr/bin/python3 test/bench/hook-bench-checked.py build --kube-bin "$HV_KUBE_BIN"
# the Helm chart installed and uninstalled for real: release namespace, the user's namespace
# and Secrets left alone, a misspelt setting refused (its own API server, the same binaries)
/usr/bin/python3 test/deploy/chart_install_test.py --source . --tools "$(test/helm/build.sh)" \
    --kube-bin "$HV_KUBE_BIN"

section "fuzzing (${FUZZ_SECONDS}s per target)"
# (two targets at a time, one per core: each still fuzzes for its whole budget)
FUZZ_PARALLEL=$JOBS test/fuzz/run.sh build-fuzz "$FUZZ_SECONDS"
(cd build-fuzz && ctest --no-tests=error --output-on-failure -L fuzz)

section "all tests passed"
