// Command provider is the CAPI lab's stand-in infrastructure provider for the kinds of
// hvupdater's built-in libvirt profile (infrastructure.cluster.x-k8s.io/v1alpha1
// LibvirtCluster, LibvirtMachine; LibvirtMachineTemplate needs no controller).
//
// A level-triggered loop over the API server (every -interval):
//   - LibvirtCluster: marks status.initialization.provisioned (CAPI's v1beta2 contract).
//   - LabBootstrapConfig (bootstrap.cluster.x-k8s.io/v1alpha1) and, when its CRD is there
//     (up.sh --kcp), KubeadmConfig (v1beta2): writes its data Secret and marks it created; a
//     KubeadmConfig also gets the certificates-expiry annotation KCP would otherwise read from
//     the API server's serving certificate on the Node. This stands in for CAPI's kubeadm
//     bootstrap manager (test/capi/README.md, "KubeadmControlPlane").
//   - LibvirtMachine owned by a Machine whose bootstrap data Secret exists: defines and starts
//     a QEMU domain (test/lab/domains/<spec.style>.xml, memory and vCPUs from the spec,
//     booting the lab guest), sets spec.providerID to libvirt://<domain UUID>, marks
//     status.initialization.provisioned, and keeps a Node of the same name with that
//     providerID and Ready=True in the "workload cluster" (the same API server: no kubelet
//     runs in the lab, so the provider writes what a kubelet would). For a KubeadmControlPlane's
//     Machine the Node carries kubeadm's node-role.kubernetes.io/control-plane label and NoSchedule
//     taint, and the static Pods
//     kube-system/{kube-apiserver,kube-controller-manager,kube-scheduler}-<node> are kept as a
//     kubelet mirrors them: Running and Ready (what KCP's preflight checks read).
//   - A deleted LibvirtMachine: its domain is destroyed and undefined, its Node deleted, its
//     finalizer removed (and its stand-in static Pods deleted).
//   - A Machine labelled lab.hvupdater.io/node-follows-domain=true (the MachineHealthCheck
//     scenario) gets a Node whose Ready follows its domain as a kubelet's would: False from
//     the moment the domain is not running until 20 s (a kubelet's start) after its guest,
//     started again, has printed its first "hvguest:" report line on the serial console.
//
// Once a domain exists, spec changes of memoryMiB and vcpu are not applied by the provider:
// in-place changes are hvupdater's job, which is what the lab tests.
//
// With -webhook-listen (up.sh with HV_CAPI_PROVIDER_WEBHOOK=1) it also serves a validating
// admission webhook for LibvirtMachine updates (webhook.go) that forbids changing
// spec.memoryMiB as CAPV's VSphereMachine webhook forbids spec changes: refused with
// `spec: Forbidden: cannot be modified` (an Invalid error, 422), dry runs included.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const finalizer = "lab.hvupdater.io/domain"

var (
	gvLab      = schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1"}
	lmGVR      = gvLab.WithResource("libvirtmachines")
	lcGVR      = gvLab.WithResource("libvirtclusters")
	machineGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}
	lbGVR      = schema.GroupVersionResource{Group: "bootstrap.cluster.x-k8s.io", Version: "v1alpha1", Resource: "labbootstrapconfigs"}
	kcGVR      = schema.GroupVersionResource{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Resource: "kubeadmconfigs"}
)

// certExpiryAnnotation is clusterv1.MachineCertificatesExpiryDateAnnotation: with it on every
// KubeadmConfig, KCP does not look for the API server's certificate behind the Node.
const certExpiryAnnotation = "machine.cluster.x-k8s.io/certificates-expiry"

// staticPods are the kubeadm control-plane components KCP's preflight checks look for (etcd
// is external in the lab's KCP scenario).
var staticPods = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// followLabel on a Machine: its Node's Ready follows its domain (guestUp).
const followLabel = "lab.hvupdater.io/node-follows-domain"

type provider struct {
	dyn        dynamic.Interface
	kube       kubernetes.Interface
	uri        string
	domainsDir string
	prefix     string
	runs       map[string]*domainRun // by domain name, for followLabel Machines
}

// domainRun is one run of a domain as the provider saw it: its libvirt id ("-": off), where
// its console log stood when the run was first seen, and whether its guest has reported.
type domainRun struct {
	id     string
	offset int64
	up     bool
	upAt   time.Time // when the guest's report was first seen (zero: up when first seen)
}

// kubeletStart is how long after its guest's first report a followLabel Machine's Node turns
// Ready again: the time a kubelet takes to start and post Ready after a boot. The lab guest
// boots in seconds; a real node's NotReady window after a power cycle is longer.
const kubeletStart = 20 * time.Second

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the management cluster")
	uri := flag.String("uri", "qemu:///system", "libvirt URI the domains are defined on")
	domainsDir := flag.String("domains", "", "test/lab/domains: the domain XML styles")
	prefix := flag.String("prefix", "hvt-capi-", "domain name prefix (hvt- so the lab's down script removes leftovers)")
	interval := flag.Duration("interval", 300*time.Millisecond, "pause between two passes")
	webhookListen := flag.String("webhook-listen", "", "serve the LibvirtMachine validating webhook on this address (HTTPS; off when empty)")
	webhookCert := flag.String("webhook-cert", "", "the webhook's serving certificate (PEM)")
	webhookKey := flag.String("webhook-key", "", "the webhook's key (PEM)")
	flag.Parse()
	if *webhookListen != "" {
		go serveWebhook(*webhookListen, *webhookCert, *webhookKey)
	}
	if *domainsDir == "" {
		log.Fatal("provider: -domains is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("provider: kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	p := &provider{uri: *uri, domainsDir: *domainsDir, prefix: *prefix, runs: map[string]*domainRun{}}
	if p.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		log.Fatal(err)
	}
	if p.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		log.Fatal(err)
	}
	log.Printf("provider: started (uri %s, prefix %s)", p.uri, p.prefix)
	ctx := context.Background()
	for {
		p.pass(ctx)
		time.Sleep(*interval)
	}
}

func (p *provider) pass(ctx context.Context) {
	lcs, err := p.dyn.Resource(lcGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		log.Printf("provider: list LibvirtClusters: %v", err)
		return
	}
	for i := range lcs.Items {
		lc := &lcs.Items[i]
		if ok, _, _ := unstructured.NestedBool(lc.Object, "status", "initialization", "provisioned"); !ok {
			p.patchStatus(ctx, lcGVR, lc, map[string]any{"initialization": map[string]any{"provisioned": true}})
		}
	}
	lbs, err := p.dyn.Resource(lbGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		log.Printf("provider: list LabBootstrapConfigs: %v", err)
		return
	}
	for i := range lbs.Items {
		if err := p.reconcileBootstrap(ctx, lbGVR, &lbs.Items[i]); err != nil {
			log.Printf("provider: LabBootstrapConfig %s/%s: %v", lbs.Items[i].GetNamespace(), lbs.Items[i].GetName(), err)
		}
	}
	kcs, err := p.dyn.Resource(kcGVR).List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) { // NotFound: no KubeadmConfig CRD (up.sh without --kcp)
		log.Printf("provider: list KubeadmConfigs: %v", err)
		return
	}
	if err == nil {
		for i := range kcs.Items {
			if err := p.reconcileBootstrap(ctx, kcGVR, &kcs.Items[i]); err != nil {
				log.Printf("provider: KubeadmConfig %s/%s: %v", kcs.Items[i].GetNamespace(), kcs.Items[i].GetName(), err)
			}
		}
	}
	lms, err := p.dyn.Resource(lmGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		log.Printf("provider: list LibvirtMachines: %v", err)
		return
	}
	for i := range lms.Items {
		if err := p.reconcileMachine(ctx, &lms.Items[i]); err != nil {
			log.Printf("provider: LibvirtMachine %s/%s: %v", lms.Items[i].GetNamespace(), lms.Items[i].GetName(), err)
		}
	}
}

// reconcileBootstrap writes a bootstrap config's data Secret (owned by it) and marks it
// created: CAPI's v1beta2 bootstrap contract (status.dataSecretName,
// status.initialization.dataSecretCreated). A KubeadmConfig's data is a placeholder (the lab
// guest runs no kubeadm) and it gets the certificates-expiry annotation.
func (p *provider) reconcileBootstrap(ctx context.Context, gvr schema.GroupVersionResource, lb *unstructured.Unstructured) error {
	if gvr == kcGVR {
		if _, ok := lb.GetAnnotations()[certExpiryAnnotation]; !ok {
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
				certExpiryAnnotation: time.Now().Add(365 * 24 * time.Hour).UTC().Format(time.RFC3339)}}})
			if _, err := p.dyn.Resource(gvr).Namespace(lb.GetNamespace()).Patch(ctx, lb.GetName(),
				types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return err
			}
		}
	}
	if ok, _, _ := unstructured.NestedBool(lb.Object, "status", "initialization", "dataSecretCreated"); ok {
		return nil
	}
	data, _, _ := unstructured.NestedString(lb.Object, "spec", "data")
	if gvr == kcGVR {
		data = "#!/bin/sh\n# stand-in for kubeadm's bootstrap data: the lab guest needs none\n"
	}
	name := lb.GetName() + "-bootstrap"
	_, err := p.kube.CoreV1().Secrets(lb.GetNamespace()).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: lb.GetNamespace(),
			Labels: map[string]string{"cluster.x-k8s.io/cluster-name": lb.GetLabels()["cluster.x-k8s.io/cluster-name"]},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: lb.GetAPIVersion(), Kind: lb.GetKind(),
				Name: lb.GetName(), UID: lb.GetUID()}}},
		Type:       "cluster.x-k8s.io/secret",
		StringData: map[string]string{"value": data, "format": "cloud-config"},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	p.patchStatus(ctx, gvr, lb, map[string]any{"dataSecretName": name,
		"initialization": map[string]any{"dataSecretCreated": true}})
	return nil
}

func (p *provider) domainName(lm *unstructured.Unstructured) string { return p.prefix + lm.GetName() }

func (p *provider) reconcileMachine(ctx context.Context, lm *unstructured.Unstructured) error {
	name := p.domainName(lm)
	if lm.GetDeletionTimestamp() != nil {
		if p.domainExists(name) {
			_ = p.virsh("destroy", name) // may already be off
			if err := p.virsh("undefine", name); err != nil {
				return err
			}
			log.Printf("provider: domain %s removed", name)
		}
		if err := p.kube.CoreV1().Nodes().Delete(ctx, lm.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		for _, c := range staticPods {
			err := p.kube.CoreV1().Pods("kube-system").Delete(ctx, c+"-"+lm.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return p.setFinalizer(ctx, lm, false)
	}
	if !hasString(lm.GetFinalizers(), finalizer) {
		return p.setFinalizer(ctx, lm, true)
	}
	owner := ""
	for _, o := range lm.GetOwnerReferences() {
		if o.Kind == "Machine" {
			owner = o.Name
		}
	}
	if owner == "" {
		return nil // CAPI sets the owner reference first
	}
	m, err := p.dyn.Resource(machineGVR).Namespace(lm.GetNamespace()).Get(ctx, owner, metav1.GetOptions{})
	if err != nil {
		return err
	}
	secret, _, _ := unstructured.NestedString(m.Object, "spec", "bootstrap", "dataSecretName")
	if secret == "" {
		return nil
	}
	if _, err := p.kube.CoreV1().Secrets(lm.GetNamespace()).Get(ctx, secret, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("bootstrap data secret %s: %w", secret, err)
	}
	pid, _, _ := unstructured.NestedString(lm.Object, "spec", "providerID")
	if pid == "" {
		if !p.domainExists(name) {
			if err := p.boot(lm, name); err != nil {
				return err
			}
		}
		uuid, err := p.virshOut("domuuid", name)
		if err != nil {
			return err
		}
		pid = "libvirt://" + strings.TrimSpace(uuid)
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"providerID": pid}})
		if _, err := p.dyn.Resource(lmGVR).Namespace(lm.GetNamespace()).Patch(ctx, lm.GetName(),
			types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		log.Printf("provider: %s/%s is %s (domain %s)", lm.GetNamespace(), lm.GetName(), pid, name)
	}
	// a KubeadmControlPlane's Machine (KCP sets this label; the lab's own control-plane
	// Machines of the MachineDeployment clusters need no kubeadm look)
	_, controlPlane := m.GetLabels()["cluster.x-k8s.io/control-plane-name"]
	ready := true
	if m.GetLabels()[followLabel] == "true" {
		ready = p.guestUp(name)
	}
	if err := p.ensureNode(ctx, lm.GetName(), pid, controlPlane, ready); err != nil {
		return err
	}
	if controlPlane {
		for _, c := range staticPods {
			if err := p.ensureStaticPod(ctx, c, lm.GetName()); err != nil {
				return err
			}
		}
	}
	if ok, _, _ := unstructured.NestedBool(lm.Object, "status", "initialization", "provisioned"); !ok {
		p.patchStatus(ctx, lmGVR, lm, map[string]any{
			"initialization": map[string]any{"provisioned": true},
			"addresses":      []any{map[string]any{"type": "InternalIP", "address": "127.0.0.1"}},
		})
	}
	return nil
}

var styleName = regexp.MustCompile(`^[a-z]+$`)

// boot defines and starts the domain from the style's XML with the spec's memory and vCPUs.
func (p *provider) boot(lm *unstructured.Unstructured, name string) error {
	style, _, _ := unstructured.NestedString(lm.Object, "spec", "style")
	if style == "" {
		style = "dimm"
	}
	if !styleName.MatchString(style) {
		return fmt.Errorf("bad style %q", style)
	}
	mem, _, _ := unstructured.NestedInt64(lm.Object, "spec", "memoryMiB")
	vcpu, _, _ := unstructured.NestedInt64(lm.Object, "spec", "vcpu")
	if mem <= 0 || vcpu <= 0 {
		return fmt.Errorf("spec.memoryMiB and spec.vcpu must be positive")
	}
	raw, err := os.ReadFile(filepath.Join(p.domainsDir, style+".xml"))
	if err != nil {
		return err
	}
	x := regexp.MustCompile(`hvt-`+style+`([<.])`).ReplaceAllString(string(raw), name+"$1")
	x = regexp.MustCompile(`<memory unit='MiB'>\d+</memory>`).ReplaceAllString(x, fmt.Sprintf("<memory unit='MiB'>%d</memory>", mem))
	x = regexp.MustCompile(`<currentMemory unit='MiB'>\d+</currentMemory>`).ReplaceAllString(x, fmt.Sprintf("<currentMemory unit='MiB'>%d</currentMemory>", mem))
	x = regexp.MustCompile(`(<cell id='0' cpus='[^']*' memory=')\d+(')`).ReplaceAllString(x, fmt.Sprintf("${1}%d${2}", mem))
	if strings.Contains(x, "current='") {
		x = regexp.MustCompile(`(<vcpu placement='static' current=')\d+(')`).ReplaceAllString(x, fmt.Sprintf("${1}%d${2}", vcpu))
	} else {
		x = regexp.MustCompile(`<vcpu placement='static'>\d+</vcpu>`).ReplaceAllString(x, fmt.Sprintf("<vcpu placement='static'>%d</vcpu>", vcpu))
	}
	if args, _, _ := unstructured.NestedString(lm.Object, "spec", "guestArgs"); args != "" {
		x = strings.Replace(x, "</cmdline>", " "+args+"</cmdline>", 1)
	}
	for _, f := range []string{name + ".console.log", name + ".log"} {
		_ = os.Remove(filepath.Join("/var/log/libvirt/qemu", f))
	}
	tmp, err := os.CreateTemp("", "provider-*.xml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(x); err != nil {
		return err
	}
	tmp.Close()
	if err := p.virsh("define", tmp.Name()); err != nil {
		return err
	}
	if err := p.virsh("start", name); err != nil {
		return err
	}
	log.Printf("provider: domain %s started (%s, %d MiB, %d vCPUs)", name, style, mem, vcpu)
	return nil
}

// guestUp says whether domain name's Node is Ready as a kubelet would make it: the domain runs
// and, if it was seen off or with another run before, its guest has printed an "hvguest:"
// report on the console since this run was first seen, kubeletStart ago. A run seen first as
// running counts as up.
func (p *provider) guestUp(name string) bool {
	out, err := p.virshOut("domid", name)
	id := strings.TrimSpace(out)
	if err != nil || id == "" || id == "-" {
		p.runs[name] = &domainRun{id: "-"}
		return false
	}
	console := filepath.Join("/var/log/libvirt/qemu", name+".console.log")
	r := p.runs[name]
	if r == nil {
		r = &domainRun{id: id, up: true}
		p.runs[name] = r
	} else if r.id != id {
		var size int64
		if fi, err := os.Stat(console); err == nil {
			size = fi.Size()
		}
		r = &domainRun{id: id, offset: size}
		p.runs[name] = r
		log.Printf("provider: domain %s runs again (id %s): its Node is NotReady until the guest reports", name, id)
	}
	if !r.up {
		if f, err := os.Open(console); err == nil {
			if _, err := f.Seek(r.offset, 0); err == nil {
				buf := make([]byte, 1<<16)
				n, _ := f.Read(buf)
				if r.up = strings.Contains(string(buf[:n]), "hvguest: MemTotal="); r.up {
					r.upAt = time.Now()
				}
			}
			f.Close()
		}
	}
	return r.up && time.Since(r.upAt) >= kubeletStart
}

// ensureNode keeps the Node a kubelet would register: providerID and Ready (True, or False when
// ready is false), and kubeadm's control-plane role label and NoSchedule taint on a
// control-plane Machine's Node.
func (p *provider) ensureNode(ctx context.Context, name, providerID string, controlPlane, ready bool) error {
	nodes := p.kube.CoreV1().Nodes()
	labels := map[string]string{"lab.hvupdater.io/stand-in": "true"}
	if controlPlane {
		labels["node-role.kubernetes.io/control-plane"] = ""
	}
	n, err := nodes.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		spec := corev1.NodeSpec{ProviderID: providerID}
		if controlPlane { // kubeadm's taint, which KCP's NodeKubeadmLabelsAndTaintsSet checks
			spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
		}
		n, err = nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: spec},
			metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	// what a healthy kubelet reports, and CAPI's NodeHealthy condition reads
	readyStatus := corev1.ConditionTrue
	if !ready {
		readyStatus = corev1.ConditionFalse
	}
	want := map[corev1.NodeConditionType]corev1.ConditionStatus{
		corev1.NodeReady: readyStatus, corev1.NodeMemoryPressure: corev1.ConditionFalse,
		corev1.NodeDiskPressure: corev1.ConditionFalse, corev1.NodePIDPressure: corev1.ConditionFalse,
	}
	have := 0
	for _, c := range n.Status.Conditions {
		if st, ok := want[c.Type]; ok && c.Status == st {
			have++
		}
	}
	if have == len(want) {
		return nil
	}
	now := metav1.Now()
	n.Status.Conditions = nil
	for _, t := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure,
		corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		msg := "written by the CAPI lab's stand-in provider (no kubelet)"
		if t == corev1.NodeReady && !ready {
			msg = "the domain is off or its guest has not reported since it started (stand-in provider)"
		}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: t, Status: want[t], Reason: "StandIn", LastHeartbeatTime: now, LastTransitionTime: now,
			Message: msg,
		})
	}
	if !ready {
		log.Printf("provider: Node %s NotReady", name)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

// ensureStaticPod keeps kube-system/<component>-<node> as a kubelet mirrors a kubeadm static
// Pod: bound to the Node, Running, Ready.
func (p *provider) ensureStaticPod(ctx context.Context, component, node string) error {
	pods := p.kube.CoreV1().Pods("kube-system")
	name := component + "-" + node
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		pod, err = pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system",
				Labels:      map[string]string{"component": component, "tier": "control-plane", "lab.hvupdater.io/stand-in": "true"},
				Annotations: map[string]string{"kubernetes.io/config.mirror": "stand-in", "kubernetes.io/config.source": "file"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: component,
				Image: "registry.k8s.io/" + component + ":stand-in"}}},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	if pod.Status.Phase == corev1.PodRunning {
		return nil
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized,
		corev1.ContainersReady, corev1.PodReady} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t,
			Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	pod.Status.StartTime = &now
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}

func (p *provider) patchStatus(ctx context.Context, gvr schema.GroupVersionResource, o *unstructured.Unstructured, status map[string]any) {
	patch, _ := json.Marshal(map[string]any{"status": status})
	if _, err := p.dyn.Resource(gvr).Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.MergePatchType,
		patch, metav1.PatchOptions{}, "status"); err != nil {
		log.Printf("provider: status of %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
}

func (p *provider) setFinalizer(ctx context.Context, lm *unstructured.Unstructured, on bool) error {
	var fins []string
	for _, f := range lm.GetFinalizers() {
		if f != finalizer {
			fins = append(fins, f)
		}
	}
	if on {
		fins = append(fins, finalizer)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": fins, "resourceVersion": lm.GetResourceVersion()}})
	_, err := p.dyn.Resource(lmGVR).Namespace(lm.GetNamespace()).Patch(ctx, lm.GetName(), types.MergePatchType,
		patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (p *provider) domainExists(name string) bool {
	return exec.Command("virsh", "-q", "-c", p.uri, "domuuid", name).Run() == nil
}

func (p *provider) virsh(args ...string) error {
	_, err := p.virshOut(args...)
	return err
}

func (p *provider) virshOut(args ...string) (string, error) {
	out, err := exec.Command("virsh", append([]string{"-q", "-c", p.uri}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("virsh %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func hasString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
