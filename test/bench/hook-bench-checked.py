#!/usr/bin/python3
"""hook-bench-checked.py BUILD_DIR [--kube-bin DIR]: hook-bench.sh with the machine check on
(issue 31 item 4: the hook figures with the management-cluster checks on, reads cached).

Starts a real Kubernetes API server (etcd and kube-apiserver, test/e2e/kubeapi.py; the binaries
test/capi/build.sh builds, in $HV_KUBE_BIN or --kube-bin), creates the bench request's Machine
and LibvirtMachine there (from make_request.py's body, as CAPI would have stored them), a
ServiceAccount and its token, and runs test/bench/hook-bench.sh with a config that names that
API server (kubernetes.server, tokenFile, caFile, checkMachines true; libvirt's
test:///default as in the embedded default). Every CanUpdateMachine then passes the machine
check (src/kube/machinecheck.c: the Machine exists, its infrastructureRef names the request's
infra machine, which exists) before the judgement, from the check's cache; the check's own
reads run on its threads, and hook-bench prints how many it made
(hvupdater_machine_check_api_requests_total) and its verdicts over the run. BENCH_* variables
pass through to hook-bench.sh (BENCH_NGINX=0 skips the peers). Nothing is asserted beyond what
hook-bench asserts (every answer a Success); the exit status is hook-bench's.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import kubeapi  # noqa: E402
from kube_e2e import crd  # noqa: E402 (the CRDs of kinds hvupdater reads)


def stored(obj):
    """The object as the API server would hold it from CAPI: no uid, status or server fields."""
    o = json.loads(json.dumps(obj))
    o.pop("status", None)
    for k in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"):
        o["metadata"].pop(k, None)
    return o


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--kube-bin", default=os.environ.get("HV_KUBE_BIN"))
    a = ap.parse_args()
    if not a.kube_bin:
        sys.exit("hook-bench-checked: no --kube-bin and no $HV_KUBE_BIN (test/capi/build.sh "
                 "builds etcd and kube-apiserver and prints their directory)")
    body = json.loads(subprocess.run(
        [sys.executable, os.path.join(HERE, "make_request.py"),
         os.environ.get("BENCH_BODY_BYTES", "10240"), "--libvirt"],
        check=True, capture_output=True, text=True).stdout)
    machine = body["desired"]["machine"]
    infra = body["desired"]["infrastructureMachine"]
    ns = machine["metadata"]["namespace"]
    group, _, version = infra["apiVersion"].partition("/")
    api = kubeapi.ApiServer(a.kube_bin).start()
    tmp = tempfile.mkdtemp(prefix="hv-bench-checked-")
    try:
        api.apply([crd("cluster.x-k8s.io", "Machine", "machines", "Namespaced", ["v1beta2"]),
                   crd(group, infra["kind"], infra["kind"].lower() + "s", "Namespaced",
                       [version])])
        api.kubectl("wait", "--for", "condition=Established", "--timeout", "60s", "crd", "--all")
        api.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                   {"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "hvupdater-system"}},
                   {"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": "hvupdater", "namespace": "hvupdater-system"}},
                   {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": "hvupdater-bench"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": "view-machines"},
                    "subjects": [{"kind": "ServiceAccount", "name": "hvupdater",
                                  "namespace": "hvupdater-system"}]},
                   {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": "view-machines"},
                    "rules": [{"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines"],
                               "verbs": ["get"]},
                              {"apiGroups": [group], "resources": [infra["kind"].lower() + "s"],
                               "verbs": ["get"]}]}])
        api.apply([stored(machine), stored(infra)])
        token = api.token("hvupdater-system", "hvupdater", os.path.join(tmp, "token"))
        config = os.path.join(tmp, "config.json")
        with open(config, "w") as f:
            json.dump({"libvirt": {"uris": ["test:///default"]},
                       "kubernetes": {"server": api.url, "tokenFile": token, "caFile": api.ca,
                                      "checkMachines": True}}, f)
        env = dict(os.environ)
        env["BENCH_SERVER_ARGS"] = ("--config " + config + " " +
                                    env.get("BENCH_SERVER_ARGS", "")).strip()
        env["BENCH_METRICS"] = " ".join([
            "hvupdater_machine_check_api_requests_total",
            'hvupdater_machine_checks_total{verdict="pass"}',
            'hvupdater_machine_checks_total{verdict="wait"}',
            'hvupdater_machine_checks_total{verdict="fail"}'])
        print("hook-bench-checked: machine check on, API server %s, Machine %s/%s, %s %s"
              % (api.url, ns, machine["metadata"]["name"], infra["kind"],
                 infra["metadata"]["name"]), flush=True)
        return subprocess.run(["sh", os.path.join(HERE, "hook-bench.sh"), a.build],
                              env=env).returncode
    finally:
        api.stop()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    sys.exit(main())
