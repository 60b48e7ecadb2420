#!/usr/bin/python3
"""kvlab.py: helpers for tests on the KubeVirt lab (eval "$(test/kubevirt/up.sh)" first), and a
command line that prints a VirtualMachine for it.

    kvlab.py vm NAME [--namespace NS] [--guest 1Gi] [--max-guest 3Gi] [--sockets 1]
                     [--max-sockets 4] [--cores 1] [--threads 1] [--switches hvguest.noonline]
                     [--halted]
        prints the VirtualMachine as JSON (kubectl apply -f - takes it)

From Python (sys.path.insert(0, "test/kubevirt")): vm(), kubectl(), get(), patch_vm(),
restart(), cond(), wait(), domain(), console_view(), vmem(), fault().
"""
import argparse
import json
import os
import re
import subprocess
import time

BIN = os.environ.get("HV_CAPI_BIN", "")
URI = os.environ.get("HV_LIBVIRT_LAB_URI", "qemu:///system")
NS = os.environ.get("HV_KUBEVIRT_NAMESPACE", "kubevirt-lab")
FAULTS = os.environ.get("HV_KUBEVIRT_FAULTS", "")
PREFIX = os.environ.get("HV_KUBEVIRT_DOMAIN_PREFIX", "hvt-kv-")
SUBRES = "/apis/subresources.kubevirt.io/v1/namespaces/%s/virtualmachines/%s/%s"


def vm(name, ns=NS, guest="1Gi", max_guest="3Gi", sockets=1, max_sockets=4, cores=1,
       threads=1, switches="", running=True):
    cpu = {"sockets": sockets, "cores": cores, "threads": threads}
    if max_sockets:
        cpu["maxSockets"] = max_sockets
    mem = {"guest": guest}
    if max_guest:
        mem["maxGuest"] = max_guest
    meta = {"name": name, "namespace": ns}
    if switches:
        meta["annotations"] = {"lab.hvupdater.io/guest-switches": switches}
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": meta,
            "spec": {"runStrategy": "Always" if running else "Halted",
                     "template": {"metadata": {"labels": {"kubevirt.io/vm": name}},
                                  "spec": {"domain": {"cpu": cpu, "memory": mem,
                                                      "devices": {}}}}}}


INFRA = "infrastructure.cluster.x-k8s.io/v1alpha1"


def capk_cluster(ns, name, cp_guest="1Gi"):
    """A CAPI Cluster (v1beta2) on a KubevirtCluster, with one control-plane Machine of its own
    on a KubevirtMachine (CAPI counts a Cluster without a controlPlaneRef as initialized once
    a control-plane Machine has a Node; the stand-in registers the Node of each CAPK VM), the
    lab's kubeconfig as the workload cluster's (the same API server) and bootstrap data from
    the CAPI lab's LabBootstrapConfig kind (its provider writes the Secret)."""
    boot = "bootstrap.cluster.x-k8s.io/v1alpha1"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
         "metadata": {"name": name + "-kubeconfig", "namespace": ns,
                      "labels": {"cluster.x-k8s.io/cluster-name": name}},
         "stringData": {"value": open(os.environ["KUBECONFIG"]).read()}},
        {"apiVersion": INFRA, "kind": "KubevirtCluster", "metadata": {"name": name, "namespace": ns},
         "spec": {"controlPlaneServiceTemplate": {"spec": {"type": "ClusterIP"}}}},
        {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
         "metadata": {"name": name, "namespace": ns},
         "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                        "kind": "KubevirtCluster", "name": name}}},
        {"apiVersion": boot, "kind": "LabBootstrapConfig", "metadata": {"name": name + "-cp", "namespace": ns},
         "spec": {"data": "#!/bin/sh\n# the lab guest needs none\n"}},
        {"apiVersion": boot, "kind": "LabBootstrapConfigTemplate", "metadata": {"name": "boot", "namespace": ns},
         "spec": {"template": {"spec": {"data": "#!/bin/sh\n# the lab guest needs none\n"}}}},
        {"apiVersion": INFRA, "kind": "KubevirtMachine", "metadata": {"name": name + "-cp", "namespace": ns},
         "spec": capk_machine_spec(name + "-cp", cp_guest)},
        {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
         "metadata": {"name": name + "-cp", "namespace": ns,
                      "labels": {"cluster.x-k8s.io/control-plane": ""}},
         "spec": {"clusterName": name, "version": "v1.36.3",
                  "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
                                              "kind": "LabBootstrapConfig", "name": name + "-cp"}},
                  "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                        "kind": "KubevirtMachine", "name": name + "-cp"}}},
    ]


def capk_machine_spec(name, guest="1Gi", max_guest="3Gi", sockets=1, max_sockets=4, cores=1):
    """a KubevirtMachine's spec: CAPK's virtualMachineTemplate (KubeVirt's VM spec), no SSH
    bootstrap check (the lab guest has no network)"""
    t = vm(name, guest=guest, max_guest=max_guest, sockets=sockets, max_sockets=max_sockets,
           cores=cores)
    return {"virtualMachineTemplate": {"spec": t["spec"]},
            "virtualMachineBootstrapCheck": {"checkStrategy": "none"}}


def capk_machine_deployment(ns, cluster, name, template, replicas=1):
    labels = {"cluster.x-k8s.io/cluster-name": cluster, "lab.hvupdater.io/md": name}
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterName": cluster, "replicas": replicas,
                     "selector": {"matchLabels": labels},
                     "rollout": {"strategy": {"type": "RollingUpdate",
                                              "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"clusterName": cluster, "version": "v1.36.3",
                                           "bootstrap": {"configRef": {
                                               "apiGroup": "bootstrap.cluster.x-k8s.io",
                                               "kind": "LabBootstrapConfigTemplate", "name": "boot"}},
                                           "infrastructureRef": {
                                               "apiGroup": "infrastructure.cluster.x-k8s.io",
                                               "kind": "KubevirtMachineTemplate", "name": template}}}}}


def capk_template(ns, name, **kw):
    spec = capk_machine_spec("unused", **kw)
    return {"apiVersion": INFRA, "kind": "KubevirtMachineTemplate", "metadata": {"name": name, "namespace": ns},
            "spec": {"template": {"spec": spec}}}


def apply(objs):
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))


def kubectl(*args, stdin=None, check=True):
    p = subprocess.run([os.path.join(BIN, "kubectl")] + list(args), input=stdin,
                       capture_output=True, text=True)
    if check and p.returncode:
        raise AssertionError("kubectl %s: %s" % (" ".join(args), p.stderr.strip()))
    return p if not check else p.stdout


def get(kind, name, ns=NS):
    """the object, or None when it does not exist"""
    p = kubectl("get", kind, name, "-n", ns, "-o", "json", check=False)
    if p.returncode:
        if "NotFound" in p.stderr:
            return None
        raise AssertionError("kubectl get %s %s: %s" % (kind, name, p.stderr.strip()))
    return json.loads(p.stdout)


def patch_vm(name, domain, ns=NS):
    """a merge patch of spec.template.spec.domain"""
    kubectl("patch", "virtualmachine", name, "-n", ns, "--type", "merge", "-p",
            json.dumps({"spec": {"template": {"spec": {"domain": domain}}}}))


def restart(name, ns=NS, method="PUT"):
    """the restart subresource through the API server: (exit status, kubectl's stderr)"""
    path = SUBRES % (ns, name, "restart")
    if method == "PUT":  # kubectl replace --raw sends a PUT, as virtctl restart does
        p = kubectl("replace", "--raw", path, "-f", "-", stdin="{}", check=False)
    else:
        p = kubectl("create", "--raw", path, "-f", "-", stdin="{}", check=False)
    return p.returncode, p.stderr.strip()


def cond(obj, typ):
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == typ:
            return c
    return {}


def wait(what, pred, timeout=180, every=0.3):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %ds waiting for %s" % (timeout, what))
        time.sleep(every)


def domain(name, ns=NS):
    return PREFIX + ns + "-" + name


def virsh(*args, check=True):
    p = subprocess.run(["virsh", "-q", "-c", URI] + list(args), capture_output=True, text=True)
    if check and p.returncode:
        raise AssertionError("virsh %s: %s" % (" ".join(args), p.stderr.strip()))
    return p.stdout.strip() if check else p


def vmem(dom):
    """the live virtio-mem device's (requested, current) sizes in MiB, vCPUs"""
    x = virsh("dumpxml", dom)
    m = re.search(r"<memory model='virtio-mem'>.*?</memory>", x, re.S)
    req = re.search(r"<requested unit='KiB'>(\d+)</requested>", m.group(0))
    cur = re.search(r"<current unit='KiB'>(\d+)</current>", m.group(0))
    v = re.search(r"<vcpu[^>]*current='(\d+)'", x) or re.search(r"<vcpu[^>]*>(\d+)<", x)
    return int(req.group(1)) // 1024, int(cur.group(1)) // 1024 if cur else 0, int(v.group(1))


def console_view(dom):
    """the guest's last report on its serial console: (MemTotal kB, online CPUs) or None"""
    try:
        text = open("/var/log/libvirt/qemu/%s.console.log" % dom, errors="replace").read()
    except FileNotFoundError:
        return None
    hits = re.findall(r"hvguest: MemTotal=(\d+) kB cpus=(\d+)", text)
    return (int(hits[-1][0]), int(hits[-1][1])) if hits else None


def fault(name, on=True, text=""):
    """turn a fault switch file of the stand-in on (with TEXT) or off"""
    f = os.path.join(FAULTS, name)
    if on:
        with open(f, "w") as fh:
            fh.write(text)
    elif os.path.exists(f):
        os.remove(f)


def main():
    ap = argparse.ArgumentParser(description="print a VirtualMachine for the KubeVirt lab")
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("vm")
    v.add_argument("name")
    v.add_argument("--namespace", default=NS)
    v.add_argument("--guest", default="1Gi")
    v.add_argument("--max-guest", default="3Gi", help="'' leaves it to the KubeVirt CR")
    v.add_argument("--sockets", type=int, default=1)
    v.add_argument("--max-sockets", type=int, default=4, help="0 leaves it to the KubeVirt CR")
    v.add_argument("--cores", type=int, default=1)
    v.add_argument("--threads", type=int, default=1)
    v.add_argument("--switches", default="", help="guest switches, e.g. hvguest.noonline")
    v.add_argument("--halted", action="store_true")
    a = ap.parse_args()
    print(json.dumps(vm(a.name, a.namespace, a.guest, a.max_guest, a.sockets, a.max_sockets,
                        a.cores, a.threads, a.switches, not a.halted), indent=1))


if __name__ == "__main__":
    main()
