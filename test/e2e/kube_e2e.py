#!/usr/bin/python3
"""kube_e2e.py: hvupdater against a real Kubernetes API server (etcd + kube-apiserver built by
test/capi/build.sh, see kubeapi.py) and govmomi's vCenter simulator (test/vcsim):

- vCenter credentials the CAPV way (vsphere.servers[].identityFrom "capv"): per cluster, from
  the VSphereCluster's identityRef (a Secret in the cluster's namespace, or a
  VSphereClusterIdentity whose Secret is in CAPV's namespace, with ready and
  allowedNamespaces), read with a ServiceAccount token bound to the RBAC of
  deploy/kubernetes/components/capv-identity; the thumbprint from the VSphereMachine's
  spec.thumbprint when the server entry has none and allows it (allowRequestThumbprint), and
  never without it.
- Warning Events on the Machine (kubernetes.events) with the RBAC of
  deploy/kubernetes/components/events.

CRDs are minimal schemas (x-kubernetes-preserve-unknown-fields) of the kinds hvupdater reads.
Run: /usr/bin/python3 test/e2e/kube_e2e.py --build build --vcsim BIN --kube-bin DIR [-k NAME]
(--kube-bin defaults to $HV_KUBE_BIN: the bin directory test/capi/build.sh prints).
"""
import argparse
import base64
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvtest  # noqa: E402
import kubeapi  # noqa: E402
import vsphere_e2e as vse  # noqa: E402

if sys.flags.optimize:  # python -O / PYTHONOPTIMIZE strips assert, and these checks are asserts
    raise SystemExit("%s: run without -O or PYTHONOPTIMIZE: its checks are assert statements"
                     % os.path.basename(__file__))

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPONENTS = os.path.join(ROOT, "deploy", "kubernetes", "components")
KUBE_BIN = None
FAST = {"shutdownTimeoutSeconds": "3", "liveTimeoutSeconds": "5"}
CREDS_MSG = "hvupdater cannot read the vCenter credentials of the machine's cluster"


def crd(group, kind, plural, scope, versions):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "%s.%s" % (plural, group)},
            "spec": {"group": group, "scope": scope,
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                               "listKind": kind + "List"},
                     "versions": [{"name": v, "served": True, "storage": i == 0,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}
                                  for i, v in enumerate(versions)]}}


CRDS = [crd("cluster.x-k8s.io", "Cluster", "clusters", "Namespaced", ["v1beta2"]),
        crd("cluster.x-k8s.io", "Machine", "machines", "Namespaced", ["v1beta2"]),
        crd("infrastructure.cluster.x-k8s.io", "VSphereCluster", "vsphereclusters",
            "Namespaced", ["v1beta1"]),
        crd("infrastructure.cluster.x-k8s.io", "VSphereClusterIdentity",
            "vsphereclusteridentities", "Cluster", ["v1beta1"]),
        crd("infrastructure.cluster.x-k8s.io", "VSphereMachine", "vspheremachines",
            "Namespaced", ["v1beta1"])]


def ns(name, labels=None):
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels or {}}}


def secret(namespace, name, user, password):
    enc = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "data": {"username": enc(user), "password": enc(password)}}


def cluster(namespace, name, identity_ref):
    """A Cluster whose infrastructureRef names a VSphereCluster <name>-vc with identity_ref."""
    vc = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereCluster",
          "metadata": {"name": name + "-vc", "namespace": namespace},
          "spec": {"server": vse.SERVER}}
    if identity_ref:
        vc["spec"]["identityRef"] = identity_ref
    return [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
             "metadata": {"name": name, "namespace": namespace},
             "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                            "kind": "VSphereCluster", "name": name + "-vc"}}},
            vc]


class Lab:
    """API server + vcsim + hvupdater (identityFrom capv, no thumbprint in its config)."""

    def __init__(self, events=False, capv=True, events_rbac=True, allow_thumb=True,
                 check=False):
        self.api = kubeapi.ApiServer(KUBE_BIN).start()
        self.sim = None
        self.server = None
        try:
            self.sim = vse.Launcher(vms=4)
            api = self.api
            api.apply(CRDS)
            api.kubectl("wait", "--for", "condition=Established", "--timeout", "60s", "crd",
                        "--all")
            api.apply([ns("hvupdater-system"), ns("capv-system"),
                       {"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": "hvupdater", "namespace": "hvupdater-system"},
                        "automountServiceAccountToken": False}])
            comps = (["capv-identity"] if capv else []) + (
                ["events"] if events and events_rbac else [])
            for comp in comps:
                api.kubectl("apply", "-f", os.path.join(COMPONENTS, comp, "rbac.yaml"))
            if check:  # the machine check's role, as the base of deploy/kubernetes binds it
                api.kubectl("apply", "-f", os.path.join(ROOT, "deploy", "kubernetes", "base",
                                                        "machinecheck-rbac.yaml"))
            token = api.token("hvupdater-system", "hvupdater",
                              os.path.join(api.dir, "hv-token"))
            # the VSphereMachines' spec.thumbprint pins the simulator (allowed for this entry)
            srv = {"name": vse.SERVER, "url": self.sim.info["url"], "identityFrom": "capv",
                   "allowRequestThumbprint": allow_thumb}
            cfg = {"vsphere": {"servers": [srv]}, "engine": vse.ENGINE,
                   "kubernetes": {"server": api.url, "tokenFile": token, "caFile": api.ca,
                                  "events": events,
                                  # most requests here name no Machine of the API server:
                                  # the machine check is on only where a test asks for it
                                  "checkMachines": check}}
            self.server = hvtest.Server(vse.BINARY, cfg).start()
            self.client = self.server.client()
        except Exception:
            self.close()
            raise

    def grant_secrets(self, namespaces):
        """What the chart's capvIdentity.secretNamespaces adds: the component's Secret Role
        and its binding (applied in capv-system) in each of namespaces too."""
        for kind in ("role", "rolebinding"):
            o = self.api.get(kind, "-n", "capv-system", "hvupdater-capv-identity-secrets")
            for n in namespaces:
                o["metadata"] = {"name": o["metadata"]["name"], "namespace": n,
                                 "labels": o["metadata"].get("labels", {})}
                self.api.apply(o)

    def thumb(self):
        return self.sim.info["thumbprint_sha256"]

    def request(self, i, namespace, cluster_name, mem, thumbprint=True):
        v = self.sim.vm(i)
        infra = vse.vsphere_machine("m%d" % i, mem, 2)
        infra["metadata"]["namespace"] = namespace
        if thumbprint:
            infra["spec"]["thumbprint"] = self.thumb()
        mach = vse.machine("m%d" % i, "vsphere://" + v["uuid"])
        mach["metadata"]["namespace"] = namespace
        mach["spec"]["clusterName"] = cluster_name
        return hvtest.update_request(infra, mach, FAST)

    def update(self, req, timeout=120):
        last, msgs, _ = hvtest.drive(self.client, req, timeout=timeout)
        for m in msgs:
            for s in (self.sim.password, self.sim.user):
                assert s not in (m or ""), "credentials in an answer: %r" % m
        return last, msgs

    def memory(self, i):
        return self.sim.vim.vm(self.sim.vm(i)["moref"])["memory"]

    def log(self):
        return open(self.server.log_path).read()

    def close(self):
        try:
            if self.server:
                vse.stop_server(self.server)
        finally:
            try:
                if self.sim:
                    self.sim.stop()
            finally:
                self.api.stop()


def test_capv_identities_per_cluster():
    """Secret identity, VSphereClusterIdentity (allowed and refused namespaces), a wrong
    password in one cluster's Secret, no identity at all: each cluster gets what its own
    identity says, through the RBAC of components/capv-identity."""
    lab = Lab()
    try:
        s = lab.sim
        lab.api.apply([ns("team-a"), ns("team-b", {"capv": "allowed"}), ns("team-c"),
                       ns("team-d"), ns("team-e")])
        lab.grant_secrets(["team-a", "team-d"])  # not team-e
        lab.api.apply([secret("team-a", "vc-creds", s.user, s.password),
                       secret("capv-system", "shared-creds", s.user, s.password),
                       secret("team-d", "vc-creds", s.user, "Wr0ng-" + s.password[::-1]),
                       secret("team-e", "vc-creds", s.user, s.password)])
        ident = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                 "kind": "VSphereClusterIdentity", "metadata": {"name": "shared"},
                 "spec": {"secretName": "shared-creds", "allowedNamespaces": {"selector": {
                     "matchLabels": {"capv": "allowed"}}}}}
        lab.api.apply(ident)
        lab.api.kubectl("patch", "vsphereclusteridentity", "shared", "--subresource", "status",
                        "--type", "merge", "-p", '{"status":{"ready":true}}')
        lab.api.apply(cluster("team-a", "a", {"kind": "Secret", "name": "vc-creds"}) +
                      cluster("team-b", "b", {"kind": "VSphereClusterIdentity",
                                              "name": "shared"}) +
                      cluster("team-c", "c", {"kind": "VSphereClusterIdentity",
                                              "name": "shared"}) +
                      cluster("team-d", "d", {"kind": "Secret", "name": "vc-creds"}) +
                      cluster("team-e", "e", {"kind": "Secret", "name": "vc-creds"}))

        # team-a: its Secret; the thumbprint comes from the VSphereMachine
        last, msgs = lab.update(lab.request(0, "team-a", "a", 8192))
        vse.assert_done(last, msgs)
        assert lab.memory(0) == 8192, lab.memory(0)
        # team-b: the shared identity allows its namespace
        last, msgs = lab.update(lab.request(1, "team-b", "b", 8192))
        vse.assert_done(last, msgs)
        assert lab.memory(1) == 8192
        logins = s.stats()[0]["Login"]
        assert logins == 2, "one login per cluster, saw %d" % logins
        # team-c: the identity does not allow team-c (no label): never logs in
        last, msgs = lab.update(lab.request(2, "team-c", "c", 8192))
        assert last["status"] == "Failure", (last, msgs)
        assert CREDS_MSG in last["message"], last
        assert lab.memory(2) != 8192
        # team-d: its own Secret's wrong password, although team-a's session is logged in
        last, msgs = lab.update(lab.request(3, "team-d", "d", 8192))
        assert last["status"] == "Failure", (last, msgs)
        assert "refused hvupdater's credentials" in last["message"], last
        assert lab.memory(3) != 8192
        # team-e: the right Secret, but no Role lets hvupdater read Secrets in team-e
        # (Secrets are never granted cluster-wide): 403 on the Secret, the credentials message
        last, msgs = lab.update(lab.request(0, "team-e", "e", 6144))
        assert last["status"] == "Failure" and CREDS_MSG in last["message"], (last, msgs)
        assert lab.memory(0) == 8192
        log = lab.log()
        assert "team-e/secrets/vc-creds: HTTP 403" in log, lab.server.tail()
        assert "does not allow namespace team-c" in log, "no reason in the log"
        assert s.password not in log, "password in the server log"
        print("     team-c: %r" % last["message"])
    finally:
        lab.close()


def test_capv_thumbprint_from_request_and_missing_objects():
    """Without spec.thumbprint (and none configured) the system CAs do not know the
    simulator: the TLS message; a Cluster that does not exist: the credentials message."""
    lab = Lab()
    try:
        s = lab.sim
        lab.api.apply([ns("team-a")])
        lab.grant_secrets(["team-a"])
        lab.api.apply([secret("team-a", "vc-creds", s.user, s.password)] +
                      cluster("team-a", "a", {"kind": "Secret", "name": "vc-creds"}))
        last, msgs = lab.update(lab.request(0, "team-a", "a", 8192, thumbprint=False))
        assert last["status"] == "Failure", (last, msgs)
        assert "certificate does not match" in last["message"], last
        last, msgs = lab.update(lab.request(1, "team-a", "nope", 8192))
        assert last["status"] == "Failure" and CREDS_MSG in last["message"], last
        assert s.stats()[0]["Login"] == 0
        # the VSphereMachine gains its thumbprint (and a new size, so the failure above is
        # not the answer for it): the same VM and cluster now work
        last, msgs = lab.update(lab.request(0, "team-a", "a", 6144))
        vse.assert_done(last, msgs)
        assert lab.memory(0) == 6144
    finally:
        lab.close()


def test_request_thumbprint_ignored_unless_allowed():
    """issue 28: a server entry without allowRequestThumbprint ignores the VSphereMachine's
    spec.thumbprint: the system CAs do not know the simulator, so the same request that the
    allowed entry serves fails at TLS, and no login is tried."""
    lab = Lab(allow_thumb=False)
    try:
        s = lab.sim
        lab.api.apply([ns("team-a")])
        lab.api.apply([secret("team-a", "vc-creds", s.user, s.password)] +
                      cluster("team-a", "a", {"kind": "Secret", "name": "vc-creds"}))
        last, msgs = lab.update(lab.request(0, "team-a", "a", 8192))
        assert last["status"] == "Failure", (last, msgs)
        assert "certificate does not match" in last["message"], last
        assert s.stats()[0]["Login"] == 0
        assert lab.memory(0) != 8192
    finally:
        lab.close()


def test_machine_check_forged_calls_leave_the_vm():
    """issue 28, the machine check on (its ClusterRole from deploy/kubernetes/base): forged
    UpdateMachine calls for a real simulator VM whose Machine and VSphereMachine the API
    server holds (an unknown Machine, a wrong uid, a Machine Cluster API is not updating, and,
    marked as CAPI marks it, a desired spec that is not the stored one) are each refused
    naming the check, and vCenter shows the VM's memory, CPUs and power unchanged; then the
    stored spec is the desired one and the same call updates the VM (control)."""
    lab = Lab(check=True)
    try:
        s = lab.sim
        lab.api.apply([ns("team-a")])
        lab.grant_secrets(["team-a"])
        lab.api.apply([secret("team-a", "vc-creds", s.user, s.password)] +
                      cluster("team-a", "a", {"kind": "Secret", "name": "vc-creds"}))
        req = lab.request(0, "team-a", "a", 8192)
        mach = req["desired"]["machine"]
        infra = req["desired"]["infrastructureMachine"]
        moref = s.vm(0)["moref"]
        before = (s.vim.vm(moref), s.vim.events(moref))
        stored = json.loads(json.dumps(infra))
        stored["spec"]["memoryMiB"] = before[0]["memory"]
        lab.api.apply([mach, stored])

        def refused(r, want, what):
            last, msgs = lab.update(r)
            assert last["status"] == "Failure" and last["message"].startswith(want), (
                what, last, msgs)
            print("     %s: %s" % (what, last["message"]))
        unknown = json.loads(json.dumps(req))
        unknown["desired"]["machine"]["metadata"]["name"] = "no-such-machine"
        refused(unknown, "machine check: Machine team-a/no-such-machine does not exist",
                "unknown Machine")
        uid = json.loads(json.dumps(req))
        uid["desired"]["machine"]["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
        refused(uid, "machine check: Machine team-a/m0 in the API server has another uid",
                "wrong uid")
        refused(req, "machine check: Machine team-a/m0 is not being updated in place",
                "not being updated")
        marks = {"in-place-updates.internal.cluster.x-k8s.io/update-in-progress": ""}
        mach["metadata"]["annotations"] = dict(
            marks, **{"runtime.cluster.x-k8s.io/pending-hooks": "UpdateMachine"})
        stored["metadata"]["annotations"] = dict(marks)
        lab.api.apply([mach, stored])
        refused(req, "machine check: the request's desired spec of VSphereMachine team-a/m0 "
                "is not the one in the API server", "desired spec not the stored one")
        # vCenter's view: power, memory, CPUs, cores, disk, hvupdater's record and the VM's
        # event history (no power operation) as before the four calls
        after = (s.vim.vm(moref), s.vim.events(moref))
        assert after == before, (before, after)
        assert s.stats()[0].get("ReconfigVM_Task", 0) == 0, s.stats()[0]
        # control: CAPI writes the desired spec before it calls; then the call acts
        stored["spec"]["memoryMiB"] = 8192
        lab.api.apply([stored])
        last, msgs = lab.update(req)
        vse.assert_done(last, msgs)
        assert lab.memory(0) == 8192
        print("     control, the stored spec: %s" % last["message"])
    finally:
        lab.close()


def test_capv_without_rbac_fails_with_the_credentials_message():
    """The service account without components/capv-identity's role: 403 -> the credentials
    message, the log names the object."""
    lab = Lab(capv=False)
    try:
        s = lab.sim
        lab.api.apply([ns("team-a")])
        lab.api.apply([secret("team-a", "vc-creds", s.user, s.password)] +
                      cluster("team-a", "a", {"kind": "Secret", "name": "vc-creds"}))
        last, msgs = lab.update(lab.request(0, "team-a", "a", 8192))
        assert last["status"] == "Failure" and CREDS_MSG in last["message"], last
        assert "HTTP 403" in lab.log(), lab.server.tail()
        assert s.stats()[0]["Login"] == 0
    finally:
        lab.close()


def machine_events(api, namespace):
    return [e for e in api.get("events.events.k8s.io", "-n", namespace)["items"]
            if e.get("reportingController") == "hvupdater"]


def wait_events(api, namespace, n, timeout=30):
    """Poll until n hvupdater Events are in namespace (the poster thread is asynchronous)."""
    deadline = time.monotonic() + timeout
    while True:
        evs = machine_events(api, namespace)
        if len(evs) >= n or time.monotonic() > deadline:
            return evs
        time.sleep(0.2)


def test_events_on_machines():
    """kubernetes.events with components/events' create-only role: a Warning Event on the
    Machine for settings that fail to parse, a Block and a failed UpdateMachine, each once
    however often CAPI repeats the call; hook answers stay fast meanwhile."""
    lab = Lab(events=True)
    try:
        api = lab.api
        api.apply([ns("team-e")])
        # settings that fail to parse
        bad = lab.request(0, "team-e", "e", 8192)
        bad["settings"] = {"powerCycle": "Sometimes"}
        for _ in range(3):
            resp, ms = lab.client.post("UpdateMachine", bad)
            assert resp["status"] == "Failure" and ms < 500, (resp, ms)
        # a Block: a disk shrink under onUncoverable=Block
        v = lab.sim.vm(1)
        cur = vse.vsphere_machine("m1", 4096, 2, disk_gib=25)
        des = vse.vsphere_machine("m1", 4096, 2, disk_gib=20)
        mach = vse.machine("m1", "vsphere://" + v["uuid"])
        for o in (cur, des, mach):
            o["metadata"]["namespace"] = "team-e"
        mach["spec"]["clusterName"] = "e"
        mach["metadata"]["uid"] = "0b7f4c2e-1111-4222-8333-944445555666"
        blk = hvtest.can_update_request(cur, des, mach, {"onUncoverable": "Block"})
        for _ in range(2):
            resp, ms = lab.client.post("CanUpdateMachine", blk)
            assert resp["status"] == "Failure", resp
        # a failed UpdateMachine: cluster e has no Cluster object, so no credentials
        last, msgs = lab.update(lab.request(2, "team-e", "e", 8192))
        assert last["status"] == "Failure" and CREDS_MSG in last["message"], last
        evs = wait_events(api, "team-e", 3)
        got = sorted((e["reason"], e["regarding"]["name"], e["type"]) for e in evs)
        assert got == [("InvalidSettings", "m0", "Warning"), ("UpdateBlocked", "m1", "Warning"),
                       ("UpdateFailed", "m2", "Warning")], got
        for e in evs:
            assert e["regarding"]["kind"] == "Machine", e
            assert e["regarding"]["namespace"] == "team-e", e
            assert lab.sim.password not in e["note"], e
        blocked = [e for e in evs if e["reason"] == "UpdateBlocked"][0]
        assert blocked["regarding"]["uid"] == mach["metadata"]["uid"], blocked
        assert blocked["note"].startswith("cannot update in place (onUncoverable=Block):"), blocked
        failed = [e for e in evs if e["reason"] == "UpdateFailed"][0]
        assert CREDS_MSG in failed["note"], failed
        # repeats were posted once: still three after the poster has had time for more
        lab.client.post("UpdateMachine", bad)
        assert len(wait_events(api, "team-e", 4, timeout=3)) == 3
        for e in evs:
            print("     %s %s: %s" % (e["reason"], e["regarding"]["name"], e["note"][:90]))
    finally:
        lab.close()


def test_events_without_rbac_are_logged_and_answers_unchanged():
    """kubernetes.events on but no role to create Events: the answer is the same Failure,
    the Event's refusal (403) is in the log, nothing is created."""
    lab = Lab(events=True, events_rbac=False)
    try:
        lab.api.apply([ns("team-f")])
        bad = lab.request(0, "team-f", "f", 8192)
        bad["settings"] = {"powerCycle": "Sometimes"}
        resp, _ = lab.client.post("UpdateMachine", bad)
        assert resp["status"] == "Failure", resp
        deadline = time.monotonic() + 30
        while "event-error" not in lab.log() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "HTTP 403" in lab.log(), lab.server.tail()
        assert machine_events(lab.api, "team-f") == []
    finally:
        lab.close()


CASES = [test_capv_identities_per_cluster, test_capv_thumbprint_from_request_and_missing_objects,
         test_request_thumbprint_ignored_unless_allowed,
         test_machine_check_forged_calls_leave_the_vm,
         test_capv_without_rbac_fails_with_the_credentials_message, test_events_on_machines,
         test_events_without_rbac_are_logged_and_answers_unchanged]

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--vcsim", default=os.environ.get("HV_VCSIM_BIN"))
    ap.add_argument("--kube-bin", default=os.environ.get("HV_KUBE_BIN"))
    ap.add_argument("-k", action="append", help="run cases whose name contains this")
    a = ap.parse_args()
    vse.BINARY = os.path.abspath(os.path.join(a.build, "hvupdater"))
    vse.VCSIM = os.path.abspath(a.vcsim or os.path.join(a.build, "vcsim", "vcsim"))
    if not a.kube_bin:
        sys.exit("kube_e2e: no --kube-bin or HV_KUBE_BIN (test/capi/build.sh prints it)")
    KUBE_BIN = os.path.abspath(a.kube_bin)
    for path in (vse.BINARY, vse.VCSIM):
        if not os.access(path, os.X_OK):
            sys.exit("kube_e2e: %s is missing" % path)
    sys.exit(hvtest.run(CASES, a.k))
