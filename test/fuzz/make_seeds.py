#!/usr/bin/env python3
"""make_seeds.py SOURCE_DIR OUT_DIR: seed inputs for the parser fuzz targets.

Writes OUT_DIR/<target>/<name> for fuzz_soap (vim25 answers shaped like vCenter's and the
simulator's), fuzz_domxml (libvirt domain XML of the lab's kinds, record metadata),
fuzz_oprecord (records of every phase), fuzz_config (every JSON block of docs/settings.md and
a few configs), fuzz_base64 and fuzz_kube (Kubernetes API answers: CAPV identities, selectors,
Machines and infra machines as CAPI v1.14.2 holds them during an in-place update, Machine
lists and dryRun=All answers). Generated at build time; only this script is committed.
"""
import base64
import json
import os
import re
import sys

ENV_HEAD = ('<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope '
            'xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/" '
            'xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" '
            'xmlns:xsd="http://www.w3.org/2001/XMLSchema" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>')
ENV_TAIL = '</soapenv:Body></soapenv:Envelope>'
XSI = ('xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" '
       'XMLSchema-instance:type=')

PHASES = ["none", "planned", "live", "wait-live", "shutdown", "power-off", "reconfigure",
          "power-on", "done", "failed"]


def record(phase, mem=8192, cpus=4, cold=False, message=None):
    r = {"v": 1, "desired": {"memoryMiB": mem, "cpus": cpus, "coresPerSocket": 1},
         "phase": phase, "cold": cold,
         "plan": {"memory": "live:dimm", "cpus": "live", "cores": "none"},
         "attempts": 1, "recycles": 0, "startedAt": 1700000000, "stepAt": 1700000042,
         "owner": "hv-0:1234", "policy": "IfNeeded/TrySoft/120/300/1800"}
    if message:
        r["message"] = message
    return json.dumps(r, separators=(",", ":"))


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def prop(name, typ, val):
    return '<propSet><name>%s</name><val %s"%s">%s</val></propSet>' % (name, XSI, typ, val)


def vm_answer(power="poweredOn", rec=None, task_state="running"):
    extra = ('<OptionValue XMLSchema-instance:type="OptionValue"><key>govcsim</key>'
             '<value XMLSchema-instance:type="xsd:string">TRUE</value></OptionValue>')
    if rec is not None:
        extra += ('<OptionValue XMLSchema-instance:type="OptionValue"><key>hvupdater.operation'
                  '</key><value XMLSchema-instance:type="xsd:string">%s</value></OptionValue>'
                  % esc(rec))
    return (ENV_HEAD + '<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><objects>'
            '<obj type="VirtualMachine">vm-42</obj>'
            + prop("runtime.powerState", "VirtualMachinePowerState", power)
            + prop("config.hardware.memoryMB", "xsd:int", "4096")
            + prop("config.hardware.numCPU", "xsd:int", "2")
            + prop("config.hardware.numCoresPerSocket", "xsd:int", "1")
            + prop("config.memoryHotAddEnabled", "xsd:boolean", "true")
            + prop("config.cpuHotAddEnabled", "xsd:boolean", "false")
            + prop("config.cpuHotRemoveEnabled", "xsd:boolean", "false")
            + prop("config.hotPlugMemoryLimit", "xsd:long", "16384")
            + prop("config.hotPlugMemoryIncrementSize", "xsd:long", "128")
            + prop("config.changeVersion", "xsd:string", "2024-01-01T00:00:00.000003Z")
            + prop("guest.toolsRunningStatus", "xsd:string", "guestToolsRunning")
            + prop("config.extraConfig", "ArrayOfOptionValue", extra)
            + '</objects><objects><obj type="Task">task-7</obj>'
            + prop("info.state", "TaskInfoState", task_state)
            + '</objects></returnval></RetrievePropertiesExResponse>' + ENV_TAIL)


SOAP = {
    "find": ENV_HEAD + '<FindByUuidResponse xmlns="urn:vim25"><returnval type="VirtualMachine">'
    'vm-42</returnval></FindByUuidResponse>' + ENV_TAIL,
    "find-empty": ENV_HEAD + '<FindByUuidResponse xmlns="urn:vim25"></FindByUuidResponse>'
    + ENV_TAIL,
    "vm-on": vm_answer(),
    "vm-off-record": vm_answer("poweredOff", record("reconfigure", cold=True), "success"),
    "vm-suspended": vm_answer("suspended", "not a record", "queued"),
    "task-error": ENV_HEAD + '<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><objects>'
    '<obj type="Task">task-7</obj>' + prop("info.state", "TaskInfoState", "error")
    + '<propSet><name>info.error</name><val ' + XSI + '"LocalizedMethodFault"><fault '
    'XMLSchema-instance:type="InvalidPowerState"><existingState>poweredOn</existingState>'
    '</fault><localizedMessage>*types.InvalidPowerState</localizedMessage></val></propSet>'
    '</objects></returnval></RetrievePropertiesExResponse>' + ENV_TAIL,
    "fault": ENV_HEAD + '<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>The '
    'attempted operation cannot be performed in the current state (Powered on).</faultstring>'
    '<detail><InvalidPowerStateFault xmlns="urn:vim25" xsi:type="InvalidPowerState">'
    '<existingState>poweredOn</existingState></InvalidPowerStateFault></detail></soapenv:Fault>'
    + ENV_TAIL,
    "fault-notype": ENV_HEAD + '<soapenv:Fault><faultcode>ServerFaultCode</faultcode>'
    '<faultstring>x</faultstring><detail><NotAuthenticatedFault xmlns="urn:vim25"/></detail>'
    '</soapenv:Fault>' + ENV_TAIL,
    "empty": ENV_HEAD + '<RetrievePropertiesExResponse xmlns="urn:vim25">'
    '</RetrievePropertiesExResponse>' + ENV_TAIL,
    "login": ENV_HEAD + '<LoginResponse xmlns="urn:vim25"><returnval><key>52a</key><userName>'
    'user</userName></returnval></LoginResponse>' + ENV_TAIL,
    "reconfig": ENV_HEAD + '<ReconfigVM_TaskResponse xmlns="urn:vim25"><returnval type="Task">'
    'task-7</returnval></ReconfigVM_TaskResponse>' + ENV_TAIL,
}

DIMM_LIVE = (
    "<domain type='qemu' id='7'><name>hvt-x</name>"
    "<uuid>71685b29-9606-4fec-8013-545635eb64f1</uuid>"
    "<maxMemory slots='8' unit='KiB'>8388608</maxMemory>"
    "<memory unit='KiB'>1572864</memory><currentMemory unit='KiB'>1572864</currentMemory>"
    "<vcpu placement='static' current='1'>4</vcpu><features><acpi/><apic/></features>"
    "<cpu mode='custom'><topology sockets='4' dies='1' cores='1' threads='1'/>"
    "<numa><cell id='0' cpus='0-3' memory='1048576' unit='KiB'/></numa></cpu>"
    "<devices><memballoon model='virtio'/>"
    "<memory model='dimm'><target><size unit='KiB'>524288</size><node>0</node></target>"
    "<alias name='dimm0'/><address type='dimm' slot='0' base='0x100000000'/></memory>"
    "<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0' "
    "state='connected'/></channel></devices></domain>")
VMEM_LIVE = (
    "<domain type='qemu' id='8'><name>hvt-v</name>"
    "<maxMemory slots='8' unit='KiB'>8388608</maxMemory>"
    "<memory unit='KiB'>2097152</memory><currentMemory unit='KiB'>1048576</currentMemory>"
    "<vcpu placement='static' current='1'>2</vcpu><features><acpi/></features>"
    "<cpu><numa><cell id='0' cpus='0-1' memory='1048576' unit='KiB'/></numa></cpu>"
    "<devices><memballoon model='virtio'/>"
    "<memory model='virtio-mem'><target><size unit='KiB'>1048576</size><node>0</node>"
    "<block unit='KiB'>2048</block><requested unit='KiB'>262144</requested>"
    "<current unit='KiB'>0</current></target><alias name='virtiomem0'/>"
    "<address type='pci' domain='0x0000' bus='0x03' slot='0x00' function='0x0'/></memory>"
    "<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>"
    "</devices></domain>")
DOMXML = {
    "dimm-live": DIMM_LIVE,
    "vmem-live": VMEM_LIVE,
    "plain": "<domain type='qemu'><name>hvt-p</name><memory unit='MiB'>1024</memory>"
    "<vcpu>2</vcpu><devices><memballoon model='none'/></devices></domain>",
    "metadata": '<record xmlns="https://hvupdater.dev/xmlns/record/1">%s</record>'
    % esc(record("wait-live")),
    "sizes": "1024\n",
    "cpuset": "0-3,^2,5\n",
    "test-default": "<domain type='test'><name>test</name>"
    "<uuid>6695eb01-f6a4-8304-79aa-97f2502e193f</uuid><memory unit='KiB'>8388608</memory>"
    "<currentMemory unit='KiB'>2097152</currentMemory><vcpu placement='static'>2</vcpu>"
    "<os><type arch='i686'>hvm</type><boot dev='hd'/></os><devices/></domain>",
}

CONFIGS = {
    "empty": "{}",
    "full": json.dumps({
        "listen": "0.0.0.0:9443", "maxBodyBytes": 1048576, "handlerTimeoutSeconds": 5,
        "defaults": {"powerCycle": "Never", "liveTimeoutSeconds": 60},
        "engine": {"workers": 8, "maxPowerCycles": 2, "maxPowerCyclesPerHost": 1,
                   "stepTimeoutSeconds": 30},
        "libvirt": {"uris": ["qemu:///system", "qemu+tls://h1/system"],
                    "keepaliveIntervalSeconds": 5, "keepaliveCount": 3},
        "vsphere": {"servers": [{"name": "vc1", "url": "https://vc1/sdk",
                                 "usernameFile": "/u", "passwordFile": "/p",
                                 "thumbprint": "AA:BB"}]},
        "profiles": [{"apiGroup": "infrastructure.example.com", "kind": "FooMachine",
                      "backend": "libvirt", "fields": {"memoryMiB": "/spec/memory"}}]}),
}


MC_UID = "6f1c2d8e-3b4a-4c5d-9e7f-0a1b2c3d4e5f"
IN_PROGRESS = "in-place-updates.internal.cluster.x-k8s.io/update-in-progress"
PENDING = "runtime.cluster.x-k8s.io/pending-hooks"
INFRA = "infrastructure.cluster.x-k8s.io"


def capi_machine(annotations, ref_name="lm1"):
    """Machine ns/m1 as CAPI v1.14.2 holds it while it updates it in place."""
    return {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {
            "name": "m1", "namespace": "ns", "uid": MC_UID, "resourceVersion": "40211",
            "generation": 3, "creationTimestamp": "2026-11-30T09:12:44Z",
            "labels": {"cluster.x-k8s.io/cluster-name": "c1",
                       "cluster.x-k8s.io/deployment-name": "md-0",
                       "cluster.x-k8s.io/set-name": "ms1"},
            "annotations": annotations,
            "finalizers": ["machine.cluster.x-k8s.io"],
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
                                 "name": "ms1", "uid": "0b5e3c1a-7f44-4d2e-9a61-3c2f0e9d8b17",
                                 "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [{"manager": "manager", "operation": "Apply",
                               "apiVersion": "cluster.x-k8s.io/v1beta2",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]},
        "spec": {
            "clusterName": "c1",
            "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
                                        "kind": "KubeadmConfig", "name": "m1-bootstrap"},
                          "dataSecretName": "m1-bootstrap"},
            "infrastructureRef": {"apiGroup": INFRA, "kind": "LibvirtMachine",
                                  "name": ref_name},
            "providerID": "libvirt://" + MC_UID, "version": "v1.33.1",
            "deletion": {"nodeDrainTimeoutSeconds": 30}},
        "status": {"phase": "Running", "nodeRef": {"name": "c1-md-0-m1"},
                   "conditions": [{"type": "Updating", "status": "True",
                                   "reason": "InPlaceUpdating",
                                   "lastTransitionTime": "2026-12-01T10:00:00Z"}]}}


def libvirt_machine(annotations, memory=4096):
    """LibvirtMachine ns/lm1 with the spec CAPI wrote before it called UpdateMachine."""
    return {
        "apiVersion": INFRA + "/v1beta1", "kind": "LibvirtMachine",
        "metadata": {"name": "lm1", "namespace": "ns", "uid": "9d0c6a55-2e1b-4f7a-8c3d-5b6e7f809a1b",
                     "annotations": annotations,
                     "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                     "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2",
                                          "kind": "Machine", "name": "m1", "uid": MC_UID}]},
        "spec": {"providerID": "libvirt://" + MC_UID, "memoryMiB": memory, "vcpu": 2},
        "status": {"ready": True}}


def status(code, reason, message, **extra):
    d = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason, "code": code}
    d.update(extra)
    return json.dumps(d)


def machine_list(items, cont=None):
    md = {"resourceVersion": "40300"}
    if cont:
        md["continue"] = cont
    return json.dumps({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineList",
                       "metadata": md, "items": items})


def set_machine(name, infra, set_label=True, deleting=False):
    md = {"name": name, "namespace": "ns"}
    if set_label:
        md["labels"] = {"cluster.x-k8s.io/set-name": "ms1"}
    else:
        md["ownerReferences"] = [{"kind": "MachineSet", "name": "ms1"}]
    if deleting:
        md["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    return {"metadata": md, "spec": {"infrastructureRef": {
        "apiGroup": INFRA, "kind": "VSphereMachine", "name": infra}}}


def check_seeds():
    """The machine check (the first two answers: the Machine or MachineSet and its infra
    machine or template) and the dry run (in turn: the patch's answer, or Machine list pages
    then the patch's answer)."""
    j = json.dumps
    marks = {IN_PROGRESS: "", PENDING: "UpdateMachine"}
    infra_marks = {IN_PROGRESS: ""}
    machine_set = {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
        "metadata": {"name": "ms1", "namespace": "ns", "uid": "0b5e3c1a"},
        "spec": {"clusterName": "c1", "replicas": 3, "template": {"spec": {
            "clusterName": "c1", "infrastructureRef": {
                "apiGroup": INFRA, "kind": "LibvirtMachineTemplate", "name": "t1"}}}}}
    template = {"apiVersion": INFRA + "/v1beta1", "kind": "LibvirtMachineTemplate",
                "metadata": {"name": "t1", "namespace": "ns"},
                "spec": {"template": {"spec": {"memoryMiB": 4096, "vcpu": 2}}}}
    capv = ('admission webhook "validation.vspheremachine.infrastructure.x-k8s.io" denied the '
            'request: VSphereMachine.infrastructure.cluster.x-k8s.io "vm-a" is invalid: spec: '
            'Forbidden: cannot be modified')
    secret = j({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "vc-creds"},
                "data": {"password": base64.b64encode(b"s3cret").decode()}})
    page1 = machine_list([set_machine("m-0", "vm-0", deleting=True),
                          set_machine("m-c", "vm-c")], cont="p2")
    page2 = machine_list([set_machine("m-b", "vm-b", set_label=False),
                          {"metadata": {"name": "m-a", "labels": {
                              "cluster.x-k8s.io/set-name": "other"}},
                           "spec": {"infrastructureRef": {"kind": "VSphereMachine",
                                                          "name": "vm-x"}}}])
    vsm = j({"apiVersion": INFRA + "/v1beta1", "kind": "VSphereMachine",
             "metadata": {"name": "vm-a", "namespace": "ns"}, "spec": {"memoryMiB": 8192}})
    return {
        "mc-update-accepted": "\0".join([j(capi_machine(marks)),
                                         j(libvirt_machine(infra_marks))]),
        "mc-update-pending-list": "\0".join([
            j(capi_machine({IN_PROGRESS: "", PENDING: "CanUpdateMachine, UpdateMachine"})),
            j(libvirt_machine(infra_marks))]),
        "mc-update-pending-spaces": "\0".join([
            j(capi_machine({IN_PROGRESS: "", PENDING: " UpdateMachine ,CanUpdateMachine"})),
            j(libvirt_machine(infra_marks))]),
        "mc-update-not-marked": "\0".join([j(capi_machine({})), j(libvirt_machine({}))]),
        "mc-update-spec-differs": "\0".join([j(capi_machine(marks)),
                                             j(libvirt_machine(infra_marks, 8192))]),
        "mc-other-infra": "\0".join([j(capi_machine(marks, "lm2")),
                                     j(libvirt_machine(infra_marks))]),
        "mc-machine-forbidden": "\0".join(["403", j(libvirt_machine(infra_marks))]),
        "mc-infra-missing": "\0".join([j(capi_machine(marks)),
                                       status(404, "NotFound", 'libvirtmachines "lm1" not found')]),
        "mc-machine-set": "\0".join([j(machine_set), j(template)]),
        "dr-capv-refused": "\0".join([status(422, "Invalid", capv), page2]),
        "dr-webhook-403": status(403, "Forbidden",
                                 'admission webhook "x" denied the request: no\n\tmemory  '
                                 'changes'),
        "dr-rbac-403": status(403, "Forbidden",
                              'vspheremachines.infrastructure.cluster.x-k8s.io "vm-a" is '
                              'forbidden: User "system:serviceaccount:h:h" cannot patch'),
        "dr-reason-utf8": status(422, "Invalid", "spec.memoryMiB: Gr\u00f6\u00dfe \u00e4ndern"),
        "dr-reason-utf8-end": status(422, "Invalid", "spec: Forbidden: cannot be modified \u00e9"),
        "dr-reason-blank": status(422, "Invalid", " \t\n "),
        # cut at 240 bytes inside a 3-byte sequence after a space
        "dr-reason-cut": status(422, "Invalid", "y" * 238 + " \u20ac and more"),
        "dr-token-401": "401",
        "dr-error-500": status(500, "InternalError", "failed calling webhook"),
        "dr-secret-status": "\0".join([
            status(422, "Invalid", "denied", data={"password": "czNjcmV0"}), secret]),
        "dr-accepted": vsm,
        "dr-set-accepted": "\0".join([page1, page2, vsm]),
        "dr-set-refused": "\0".join([page1, page2,
                                     status(422, "Invalid", capv.replace("vm-a", "vm-b"))]),
        "dr-set-list-forbidden": "\0".join([status(403, "Forbidden", "cannot list"), "-1"]),
    }


def kube_seeds():
    """fuzz_kube: NUL-separated answers of the CAPV identity lookup in the order it reads them
    (Cluster, VSphereCluster, [VSphereClusterIdentity, Namespace,] Secret), the first also a
    selector and a Machine; then those of the machine check and the dry run (check_seeds)."""
    j = json.dumps
    cl = j({"kind": "Cluster", "spec": {"infrastructureRef": {
        "kind": "VSphereCluster", "name": "a-vc"}}})
    vc_secret = j({"kind": "VSphereCluster", "spec": {"identityRef": {
        "kind": "Secret", "name": "vc-creds"}}})
    vc_ident = j({"kind": "VSphereCluster", "spec": {"identityRef": {
        "kind": "VSphereClusterIdentity", "name": "shared"}}})
    ident = j({"kind": "VSphereClusterIdentity", "spec": {
        "secretName": "shared-creds", "allowedNamespaces": {"selector": {
            "matchLabels": {"capv": "allowed"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}}},
        "status": {"ready": True}})
    nsobj = j({"kind": "Namespace", "metadata": {"labels": {"capv": "allowed"}}})
    sec = j({"kind": "Secret", "data": {"username": base64.b64encode(b"admin").decode(),
                                        "password": base64.b64encode(b"s3cret").decode()}})
    machine = j({"kind": "Machine", "metadata": {"annotations": {
        "cluster.x-k8s.io/skip-remediation": "", "hvupdater.io/remediation-held-for": "x"},
        "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"conditions": [{"type": "NodeReady", "status": "True"}]}})
    selector = j({"matchExpressions": [{"key": "a/b", "operator": "Exists"}],
                  "matchLabels": {"k": "v"}})
    return {"secret": "\0".join([cl, vc_secret, sec]),
            "identity": "\0".join([cl, vc_ident, ident, nsobj, sec]),
            "no-identity": "\0".join([cl, j({"kind": "VSphereCluster", "spec": {}})]),
            "machine": machine,
            "selector": "\0".join([selector, j({"k": "v", "a/b": ""})]),
            **check_seeds()}


def kubeconfig_seeds():
    """fuzz_kubeconfig: kubeconfigs as CAPK's infraClusterSecretRef Secrets hold them (a token,
    a client certificate, JSON form), and ones the reader refuses (exec, an alias)."""
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    ca = ca.decode()
    head = ("apiVersion: v1\nkind: Config\ncurrent-context: ctx\n"
            "clusters:\n- name: infra\n  cluster:\n    server: https://10.0.0.1:6443\n"
            "    certificate-authority-data: %s\n"
            "contexts:\n- name: ctx\n  context: {cluster: infra, user: hv, namespace: vms}\n"
            "users:\n- name: hv\n  user:\n" % ca)
    return {
        "token": head + "    token: abc.def\n",
        "cert": head + "    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ\n",
        "exec": head + "    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}\n",
        "alias": "a: &a [x, x]\nb: [*a, *a]\n",
        "json": json.dumps({"current-context": "c", "contexts": [
            {"name": "c", "context": {"cluster": "k", "user": "u"}}],
            "clusters": [{"name": "k", "cluster": {"server": "https://h"}}],
            "users": [{"name": "u", "user": {"token": "t"}}]}),
    }


def main():
    src, out = sys.argv[1], sys.argv[2]
    text = open(os.path.join(src, "docs", "settings.md")).read()
    for i, block in enumerate(re.findall(r"```json\n(.*?)```", text, re.S)):
        CONFIGS["settings-md-%d" % i] = block
    recs = {p: record(p, message="stub failure" if p == "failed" else None) for p in PHASES}
    recs["cold"] = record("shutdown", 2048, 1, cold=True)
    recs["garbage"] = '{"v":2}'
    # strings longer than their fields, cut where a character is multi-byte (CI's find)
    long = json.loads(record("failed", message="m" * 510 + "\u20ac"))
    long["owner"] = "a" * 94 + "\u00e9"
    long["ref"] = {"name": "vm\u00e9", "disk": "d" * 30 + "\u00e9"}
    recs["cut-characters"] = json.dumps(long, ensure_ascii=False, separators=(",", ":"))
    b64 = {"patch": base64.b64encode(b'[{"op":"replace","path":"/spec/memoryMiB","value":8192}]')
           .decode(), "one": "QQ==", "two": "QUI=", "empty": "", "bad": "QQ="}
    sets = {"fuzz_soap": SOAP, "fuzz_domxml": DOMXML, "fuzz_oprecord": recs,
            "fuzz_config": CONFIGS, "fuzz_base64": b64, "fuzz_kube": kube_seeds(),
            "fuzz_kubeconfig": kubeconfig_seeds()}
    for target, seeds in sets.items():
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
