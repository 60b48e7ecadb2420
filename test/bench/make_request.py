#!/usr/bin/env python3
"""make_request.py [TARGET_BYTES] [--libvirt]: print a realistic CanUpdateMachine request (~10 KB)
on stdout.

With --libvirt the infra machine is a LibvirtMachine named "test" (libvirt's test:///default
driver has a domain of that name, which the embedded default serves) growing from 2048 to
4096 MiB: the covered path a real call takes, the VM probed (and the answer then served from
the probe's cache). Without it, the VSphereMachine below.

A KubeadmControlPlane Machine of cluster "prod-eu1" whose VSphereMachine grows from 4096 to
8192 MiB (all else equal), with the Machine, VSphereMachine and KubeadmConfig as CAPI sends
them: metadata with the usual labels and annotations, full specs, no status. The KubeadmConfig
carries files, commands and users; labels/annotations are padded until the request reaches
TARGET_BYTES (default 10240).
"""
import copy
import json
import sys

API = "hooks.runtime.cluster.x-k8s.io/v1alpha1"
NAME = "prod-eu1-cp-7x9kq"
UUID = "4205c9f4-1d3e-4a5b-9c1d-0123456789ab"
SSH_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF3q0Zc2l6mO0w6j1m0Q9vXc3Jm3QfKXjv8nJ0oWb7Xp "
           "capi@bastion.prod-eu1")


def machine():
    return {
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Machine",
        "metadata": {
            "name": NAME,
            "namespace": "clusters",
            "labels": {
                "cluster.x-k8s.io/cluster-name": "prod-eu1",
                "cluster.x-k8s.io/control-plane": "",
                "cluster.x-k8s.io/control-plane-name": "prod-eu1-cp",
                "topology.cluster.x-k8s.io/owned": "",
            },
            "annotations": {
                "controlplane.cluster.x-k8s.io/kubeadm-cluster-configuration": json.dumps({
                    "etcd": {"local": {"dataDir": "/var/lib/etcd"}},
                    "networking": {"podSubnet": "192.168.0.0/16",
                                   "serviceSubnet": "10.96.0.0/12",
                                   "dnsDomain": "cluster.local"},
                    "apiServer": {"extraArgs": {"cloud-provider": "external",
                                                "audit-log-maxage": "30",
                                                "profiling": "false"}},
                    "controllerManager": {"extraArgs": {"cloud-provider": "external",
                                                        "profiling": "false"}},
                    "scheduler": {"extraArgs": {"profiling": "false"}},
                    "controlPlaneEndpoint": "10.20.30.40:6443",
                    "kubernetesVersion": "v1.31.4"}, separators=(",", ":")),
                "controlplane.cluster.x-k8s.io/remediation-for": "",
            },
        },
        "spec": {
            "clusterName": "prod-eu1",
            "version": "v1.31.4",
            "providerID": "vsphere://" + UUID,
            "failureDomain": "eu1-az1",
            "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
                                        "kind": "KubeadmConfig", "name": NAME}},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                  "kind": "VSphereMachine", "name": NAME},
            "deletion": {"nodeDrainTimeoutSeconds": 300, "nodeDeletionTimeoutSeconds": 10},
        },
    }


def vsphere_machine(memory):
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereMachine",
        "metadata": {
            "name": NAME,
            "namespace": "clusters",
            "labels": {"cluster.x-k8s.io/cluster-name": "prod-eu1",
                       "cluster.x-k8s.io/control-plane": ""},
            "annotations": {"cluster.x-k8s.io/cloned-from-name": "prod-eu1-cp-v1-31-4",
                            "cluster.x-k8s.io/cloned-from-groupkind":
                                "VSphereMachineTemplate.infrastructure.cluster.x-k8s.io"},
        },
        "spec": {
            "server": "vcenter.eu1.example.com",
            "datacenter": "EU1-DC",
            "datastore": "vsanDatastore",
            "folder": "/EU1-DC/vm/prod-eu1",
            "resourcePool": "/EU1-DC/host/EU1-Cluster/Resources/prod-eu1",
            "storagePolicyName": "vSAN Default Storage Policy",
            "template": "ubuntu-2204-kube-v1.31.4",
            "thumbprint": "5C:9E:2B:61:0D:7A:33:E4:91:08:AF:6C:12:D5:4B:E0:77:3F:9A:C8",
            "cloneMode": "linkedClone",
            "numCPUs": 4,
            "numCoresPerSocket": 2,
            "memoryMiB": memory,
            "diskGiB": 80,
            "os": "Linux",
            "powerOffMode": "trySoft",
            "providerID": "vsphere://" + UUID,
            "failureDomain": "eu1-az1",
            "network": {"devices": [
                {"networkName": "prod-eu1-nodes", "dhcp4": False,
                 "ipAddrs": ["10.20.30.11/24"], "gateway4": "10.20.30.1",
                 "nameservers": ["10.0.0.53", "10.0.1.53"]}]},
            "tagIDs": ["urn:vmomi:InventoryServiceTag:1b6f1c1e:GLOBAL",
                       "urn:vmomi:InventoryServiceTag:8d3e7a2f:GLOBAL"],
        },
    }


def kubeadm_config():
    return {
        "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
        "kind": "KubeadmConfig",
        "metadata": {"name": NAME, "namespace": "clusters",
                     "labels": {"cluster.x-k8s.io/cluster-name": "prod-eu1",
                                "cluster.x-k8s.io/control-plane": ""}},
        "spec": {
            "joinConfiguration": {"nodeRegistration": {
                "name": "{{ local_hostname }}", "criSocket": "/var/run/containerd/containerd.sock",
                "kubeletExtraArgs": [{"name": "cloud-provider", "value": "external"},
                                     {"name": "rotate-server-certificates", "value": "true"}]}},
            "files": [
                {"path": "/etc/kubernetes/manifests/kube-vip.yaml", "owner": "root:root",
                 "permissions": "0644",
                 "content": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-vip\n"
                            "  namespace: kube-system\nspec:\n  containers:\n  - name: kube-vip\n"
                            "    image: ghcr.io/kube-vip/kube-vip:v0.8.7\n    args: [manager]\n"
                            "    env:\n    - name: vip_arp\n      value: \"true\"\n"
                            "    - name: address\n      value: 10.20.30.40\n"
                            "    - name: port\n      value: \"6443\"\n  hostNetwork: true\n"},
                {"path": "/etc/sysctl.d/90-kubernetes.conf", "owner": "root:root",
                 "permissions": "0644",
                 "content": "net.ipv4.ip_forward = 1\nnet.bridge.bridge-nf-call-iptables = 1\n"
                            "fs.inotify.max_user_instances = 8192\nvm.max_map_count = 262144\n"},
            ],
            "preKubeadmCommands": ["hostnamectl set-hostname \"{{ ds.meta_data.hostname }}\"",
                                   "echo \"::1 ipv6-localhost\" >> /etc/hosts",
                                   "sysctl --system"],
            "postKubeadmCommands": ["rm -f /etc/kubernetes/manifests/kube-vip.yaml.bak"],
            "users": [{"name": "capv", "sudo": "ALL=(ALL) NOPASSWD:ALL",
                       "sshAuthorizedKeys": [SSH_KEY]}],
            "ntp": {"enabled": True, "servers": ["0.pool.ntp.org", "1.pool.ntp.org"]},
            "format": "cloud-config",
        },
    }


def libvirt_machine(memory):
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": "LibvirtMachine",
        "metadata": {
            "name": "test",
            "namespace": "clusters",
            "labels": {"cluster.x-k8s.io/cluster-name": "prod-eu1",
                       "cluster.x-k8s.io/control-plane": ""},
            "annotations": {
                "cluster.x-k8s.io/cloned-from-name": "prod-eu1-cp-v1-31-4",
                "cluster.x-k8s.io/cloned-from-groupkind":
                    "LibvirtMachineTemplate.infrastructure.cluster.x-k8s.io"},
        },
        "spec": {"memoryMiB": memory, "vcpu": 2},
    }


def request(pad, libvirt=False):
    m = machine()
    if libvirt:
        del m["spec"]["providerID"]
        m["spec"]["infrastructureRef"] = {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                          "kind": "LibvirtMachine", "name": "test"}
    cur = {"machine": m,
           "infrastructureMachine": libvirt_machine(2048) if libvirt else vsphere_machine(4096),
           "bootstrapConfig": kubeadm_config()}
    for k in range(pad):  # team/owner/cost labels and annotations, as organisations add them
        for obj in cur.values():
            obj["metadata"]["labels"][f"example.com/team-{k:02d}"] = "platform-runtime"
            obj["metadata"]["annotations"] = obj["metadata"].get("annotations", {})
            obj["metadata"]["annotations"][f"example.com/cost-center-{k:02d}"] = "cc-4711-eu"
    des = copy.deepcopy(cur)
    des["infrastructureMachine"]["spec"]["memoryMiB"] = 4096 if libvirt else 8192
    return {"apiVersion": API, "kind": "CanUpdateMachineRequest", "current": cur,
            "desired": des}


def main():
    args = [a for a in sys.argv[1:] if a != "--libvirt"]
    libvirt = "--libvirt" in sys.argv[1:]
    target = int(args[0]) if args else 10240
    pad = 0
    text = json.dumps(request(pad, libvirt), separators=(",", ":"))
    while len(text) < target - 300:
        pad += 1
        text = json.dumps(request(pad, libvirt), separators=(",", ":"))
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
