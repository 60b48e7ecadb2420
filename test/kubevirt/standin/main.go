// Command standin is the KubeVirt lab's stand-in for virt-controller, virt-handler and
// virt-api (which cannot run without nodes): it turns each running kubevirt.io/v1
// VirtualMachine into a VirtualMachineInstance and a QEMU domain of the lab guest, and applies
// KubeVirt's LiveUpdate rules to that domain. It reads and writes KubeVirt's own field names
// (the kubevirt.io/api types pinned in ../go.mod) and talks to libvirt through virsh, as the
// CAPI lab's provider does.
//
// A level-triggered loop over the API server (every -interval):
//   - A VM to run (runStrategy Always/RerunOnFailure, or running: true) without a VMI gets one
//     (spec = the VM's template, memory.maxGuest and cpu.maxSockets filled in from the KubeVirt
//     CR's liveUpdateConfiguration as KubeVirt does) and a domain hvt-kv-NS-NAME: q35, TCG,
//     memory.guest at boot plus one virtio-mem device of maxGuest-guest, maxSockets*cores*
//     threads vCPUs of which sockets*cores*threads online, booting the lab guest.
//   - A VM to stop, or a deleted VM: its VMI is deleted and its domain destroyed/undefined.
//   - A running VM whose template differs from what its VMI booted with: with the KubeVirt
//     CR's vmRolloutStrategy LiveUpdate (also when unset), a change of memory.guest within
//     [guestAtBoot, maxGuest] and an increase of cpu.sockets up to maxSockets are live: the
//     VMI's spec follows, its HotMemoryChange / HotVCPUChange condition is set and a migration
//     is recorded in status.migrationState; after -migration-delay the migration "completes"
//     (it is SKIPPED: the same domain is changed in place: virtio-mem requested size, live vCPU
//     count), completed: true, and the condition removed. Any other difference (cores,
//     threads, a shrink below the boot size, above the max, fewer sockets, anything else in the
//     template, or every change under vmRolloutStrategy Stage) sets the VM's RestartRequired
//     condition, which stays until the VMI is restarted; while it is set no live update is
//     made (KubeVirt's addRestartRequiredIfNeeded).
//   - VMI status.memory (guestAtBoot, guestCurrent = boot + the virtio-mem device's current
//     size, which only grows as the guest's driver plugs blocks, guestRequested),
//     status.currentCPUTopology (the domain's live vCPUs), AgentConnected (the agent channel is connected);
//     VM status created/ready/printableStatus and its conditions.
//   - VM status.stateChangeRequests [Stop uid, Start] (what the restart subresource writes):
//     the VMI and domain are removed and made again from the VM's current template.
//   - A running VMI whose domain ended (virsh domstate: shut off, crashed, or no domain) is
//     removed and a new one starts. A virsh that fails (libvirtd busy) is no state: that pass
//     leaves the VMI and its status as they are.
//
// The HTTPS server (-listen, -cert, -key) serves subresources.kubevirt.io/v1 for the API
// server's aggregator: PUT (or POST) .../namespaces/NS/virtualmachines/NAME/restart.
//
// Fault switches, files in -faults read on every pass: "down" (do nothing, answer 503; a
// number N in it: for N seconds from its mtime), "stuck-guestcurrent" (kubevirt #12101: the
// migration of a memory change completes but the domain is not resized; empty: every VM, else
// NS/NAME lines) and "hold-migration" (a live update's migration does not complete while it
// exists: its Hot*Change condition stays), "refuse-patch" (a number N in it: the validating
// webhook refuses the next N changes of a VirtualMachine with 409 Conflict, as virt-api's
// VM validator may; the file goes at 0).
//
// The stand-in is also virt-api's validating webhook for VirtualMachine updates (up.sh
// registers it, failurePolicy Fail as KubeVirt's): it allows every change, except under the
// "refuse-patch" switch, and while "down" it answers 503, so the API server refuses VM
// changes as it does when virt-api is not there.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	k8sv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	v1 "kubevirt.io/api/core/v1"
)

var (
	vmGVR   = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	vmiGVR  = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
	kvGVR   = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}
	nodeGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

// clusterLabel on a VM (CAPK sets it): its guest is a node of that workload cluster, and the
// stand-in keeps the Node its kubelet would register (same API server: the lab has no kubelet)
const clusterLabel = "cluster.x-k8s.io/cluster-name"

const (
	annDomain   = "lab.hvupdater.io/domain"
	annBoot     = "lab.hvupdater.io/template-at-boot" // the VM's template spec the VMI booted with (JSON)
	annSwitches = "lab.hvupdater.io/guest-switches"
	annGen      = "kubevirt.io/vm-generation" // KubeVirt's: the VM generation the VMI runs
	nodeName    = "hvt-lab"
	restartMsg  = "a non-live-updatable field was changed in the template spec"
	mib         = int64(1 << 20)
)

type standin struct {
	dyn      dynamic.Interface
	uri      string
	prefix   string
	guestDir string
	faults   string
	delay    time.Duration
	mu       sync.Mutex        // one pass at a time; the HTTP handler reads VMs on its own
	refuseMu sync.Mutex        // the refuse-patch switch's count
	keep     map[string]bool   // domains of the VMIs this pass kept or made
	lastErr  map[string]string // by VM: the last error logged (each error once)
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server")
	uri := flag.String("uri", "qemu:///system", "libvirt URI")
	prefix := flag.String("prefix", "hvt-kv-", "domain name prefix")
	guestDir := flag.String("guest", "/var/cache/hvupdater-lab/guest", "the lab guest's vmlinuz and initrd.img")
	faults := flag.String("faults", "", "directory of the fault switch files")
	listen := flag.String("listen", "127.0.0.1:17450", "HTTPS address of the subresources API")
	cert := flag.String("cert", "", "serving certificate")
	key := flag.String("key", "", "serving key")
	interval := flag.Duration("interval", 300*time.Millisecond, "pause between two passes")
	delay := flag.Duration("migration-delay", 2*time.Second, "how long a (skipped) live migration takes")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("standin: kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	s := &standin{uri: *uri, prefix: *prefix, guestDir: *guestDir, faults: *faults, delay: *delay,
		lastErr: map[string]string{}}
	if s.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		log.Fatal(err)
	}
	if *cert != "" {
		go s.serve(*listen, *cert, *key)
	}
	log.Printf("standin: started (uri %s, prefix %s, migration delay %s)", s.uri, s.prefix, s.delay)
	ctx := context.Background()
	wasDown := false
	for {
		down := s.down()
		if down != wasDown {
			log.Printf("standin: fault switch down: %v", down)
			wasDown = down
		}
		if !down {
			s.mu.Lock()
			s.pass(ctx)
			s.mu.Unlock()
		}
		time.Sleep(*interval)
	}
}

// --- fault switches

// down: the "down" file exists (and its N seconds have not passed)
func (s *standin) down() bool {
	if s.faults == "" {
		return false
	}
	f := filepath.Join(s.faults, "down")
	st, err := os.Stat(f)
	if err != nil {
		return false
	}
	raw, _ := os.ReadFile(f)
	if n, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
		if time.Since(st.ModTime()) >= time.Duration(n)*time.Second {
			os.Remove(f)
			return false
		}
	}
	return true
}

func (s *standin) fault(name string) bool {
	if s.faults == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(s.faults, name))
	return err == nil
}

func (s *standin) stuck(ns, name string) bool {
	if s.faults == "" {
		return false
	}
	raw, err := os.ReadFile(filepath.Join(s.faults, "stuck-guestcurrent"))
	if err != nil {
		return false
	}
	lines := strings.Fields(string(raw))
	if len(lines) == 0 {
		return true
	}
	for _, l := range lines {
		if l == ns+"/"+name {
			return true
		}
	}
	return false
}

// --- the KubeVirt CR

type kvConfig struct {
	live       bool
	ratio      uint32
	maxSockets *uint32
	maxGuest   *resource.Quantity
}

func (s *standin) config(ctx context.Context) kvConfig {
	c := kvConfig{live: true, ratio: 4}
	list, err := s.dyn.Resource(kvGVR).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		return c
	}
	var kv v1.KubeVirt
	if runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[0].Object, &kv) != nil {
		return c
	}
	conf := kv.Spec.Configuration
	if conf.VMRolloutStrategy != nil && *conf.VMRolloutStrategy != v1.VMRolloutStrategyLiveUpdate {
		c.live = false
	}
	if l := conf.LiveUpdateConfiguration; l != nil {
		if l.MaxHotplugRatio > 0 {
			c.ratio = l.MaxHotplugRatio
		}
		c.maxSockets, c.maxGuest = l.MaxCpuSockets, l.MaxGuest
	}
	return c
}

// --- the pass

func (s *standin) pass(ctx context.Context) {
	conf := s.config(ctx)
	vms, err := s.dyn.Resource(vmGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		log.Printf("standin: list VirtualMachines: %v", err)
		return
	}
	vmis, err := s.dyn.Resource(vmiGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		log.Printf("standin: list VirtualMachineInstances: %v", err)
		return
	}
	byKey := map[string]*v1.VirtualMachineInstance{}
	for i := range vmis.Items {
		var vmi v1.VirtualMachineInstance
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(vmis.Items[i].Object, &vmi); err != nil {
			log.Printf("standin: VMI %s: %v", vmis.Items[i].GetName(), err)
			continue
		}
		byKey[vmi.Namespace+"/"+vmi.Name] = &vmi
	}
	wanted := map[string]bool{}
	s.keep = map[string]bool{}
	for i := range vms.Items {
		var vm v1.VirtualMachine
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(vms.Items[i].Object, &vm); err != nil {
			log.Printf("standin: VM %s: %v", vms.Items[i].GetName(), err)
			continue
		}
		key := vm.Namespace + "/" + vm.Name
		wanted[key] = true
		err := s.syncVM(ctx, conf, &vm, byKey[key])
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != s.lastErr[key] && msg != "" {
			log.Printf("standin: VM %s: %v", key, err)
		}
		s.lastErr[key] = msg
	}
	// VMIs of deleted VMs (no garbage collector runs in the lab), and stray domains
	for key, vmi := range byKey {
		if !wanted[key] {
			log.Printf("standin: VM %s gone: removing its VMI and domain", key)
			s.removeVMI(ctx, vmi)
			if vmi.Labels[clusterLabel] != "" {
				s.removeNode(ctx, vmi.Name)
			}
		}
	}
	doms, err := s.virshOut("list", "--all", "--name")
	if err == nil {
		for _, d := range strings.Fields(doms) {
			if !strings.HasPrefix(d, s.prefix) {
				continue
			}
			if !s.keep[d] {
				log.Printf("standin: domain %s has no VMI: removing it", d)
				s.removeDomain(d)
			}
		}
	}
}

func (s *standin) domainName(key string) string {
	return s.prefix + strings.ReplaceAll(key, "/", "-")
}

func runs(vm *v1.VirtualMachine) bool {
	rs, err := vm.RunStrategy()
	return err == nil && (rs == v1.RunStrategyAlways || rs == v1.RunStrategyRerunOnFailure)
}

func (s *standin) syncVM(ctx context.Context, conf kvConfig, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	key := vm.Namespace + "/" + vm.Name
	vmOrig := vm.Status.DeepCopy()
	var vmiOrig *v1.VirtualMachineInstanceStatus
	if vmi != nil {
		vmiOrig = vmi.Status.DeepCopy()
	}
	// the restart subresource's requests: Stop (of this VMI), then Start
	if reqs := vm.Status.StateChangeRequests; len(reqs) > 0 {
		if vmi != nil {
			log.Printf("standin: VM %s: restart requested: stopping VMI %s", key, vmi.UID)
			s.removeVMI(ctx, vmi)
			vmi = nil
		}
		if err := s.patchVMStatus(ctx, vm, map[string]any{"stateChangeRequests": nil}); err != nil {
			return err
		}
		vm.Status.StateChangeRequests = nil
	}
	if !runs(vm) {
		if vmi != nil {
			log.Printf("standin: VM %s: stopping", key)
			s.removeVMI(ctx, vmi)
		}
		return s.vmStatus(ctx, vm, vmOrig, nil, false)
	}
	if vmi != nil && vmi.Status.Phase == v1.Running {
		state, err := s.domState(s.domainName(key))
		if err != nil {
			return err
		}
		if ended(state) {
			log.Printf("standin: VM %s: domain %s %s: the VMI ends and a new one starts", key, s.domainName(key), state)
			s.removeVMI(ctx, vmi)
			vmi = nil
		}
	}
	if vmi != nil && vmi.Status.Phase == v1.Failed {
		log.Printf("standin: VM %s: VMI failed: a new one starts", key)
		s.removeVMI(ctx, vmi)
		vmi = nil
	}
	if vmi == nil {
		var err error
		if vmi, err = s.startVMI(ctx, conf, vm); err != nil {
			return err
		}
		vmiOrig = &v1.VirtualMachineInstanceStatus{}
		// a new VMI runs the VM's current template: RestartRequired goes
		conds := vm.Status.Conditions[:0]
		for _, c := range vm.Status.Conditions {
			if c.Type != v1.VirtualMachineRestartRequired {
				conds = append(conds, c)
			}
		}
		vm.Status.Conditions = conds
	}
	s.keep[s.domainName(key)] = true
	restart := s.restartRequired(conf, vm, vmi)
	if !restart && conf.live {
		if err := s.liveUpdate(ctx, vm, vmi); err != nil {
			return err
		}
	}
	if gen := strconv.FormatInt(vm.Generation, 10); !restart && vmi.Annotations[annGen] != gen {
		// the VMI runs this generation of the VM (KubeVirt's observedGeneration)
		if err := s.patch(ctx, vmiGVR, vmi.Namespace, vmi.Name, "",
			map[string]any{"metadata": map[string]any{"annotations": map[string]any{annGen: gen}}}); err != nil {
			return err
		}
		vmi.Annotations[annGen] = gen
	}
	if err := s.vmiStatus(ctx, vmi, vmiOrig); err != nil {
		return err
	}
	if vm.Labels[clusterLabel] != "" {
		if err := s.node(ctx, vm, vmi); err != nil {
			return err
		}
	}
	return s.vmStatus(ctx, vm, vmOrig, vmi, restart)
}

// --- VMI and domain

func quantityMiB(q *resource.Quantity) int64 {
	if q == nil {
		return 0
	}
	return q.Value() / mib
}

func miQ(n int64) *resource.Quantity { return resource.NewQuantity(n*mib, resource.BinarySI) }

// vmiSpec: the VM's template with KubeVirt's live-update defaults filled in
func vmiSpec(conf kvConfig, vm *v1.VirtualMachine) (v1.VirtualMachineInstanceSpec, error) {
	spec := *vm.Spec.Template.Spec.DeepCopy()
	d := &spec.Domain
	if d.Memory == nil || d.Memory.Guest == nil {
		return spec, fmt.Errorf("spec.template.spec.domain.memory.guest is required in the lab")
	}
	if d.CPU == nil {
		d.CPU = &v1.CPU{}
	}
	for _, p := range []*uint32{&d.CPU.Sockets, &d.CPU.Cores, &d.CPU.Threads} {
		if *p == 0 {
			*p = 1
		}
	}
	if d.CPU.MaxSockets == 0 {
		if conf.maxSockets != nil {
			d.CPU.MaxSockets = *conf.maxSockets
		} else {
			d.CPU.MaxSockets = d.CPU.Sockets * conf.ratio
		}
		if d.CPU.MaxSockets < d.CPU.Sockets {
			d.CPU.MaxSockets = d.CPU.Sockets
		}
	}
	if d.Memory.MaxGuest == nil {
		if conf.maxGuest != nil {
			d.Memory.MaxGuest = conf.maxGuest
		} else {
			d.Memory.MaxGuest = miQ(quantityMiB(d.Memory.Guest) * int64(conf.ratio))
		}
	}
	if d.Memory.MaxGuest.Cmp(*d.Memory.Guest) < 0 { // (KubeVirt's webhook refuses that VM; the lab boots it)
		d.Memory.MaxGuest = d.Memory.Guest
	}
	if quantityMiB(d.Memory.Guest) < 1024 {
		return spec, fmt.Errorf("memory.guest %s: the lab needs at least 1Gi (KubeVirt's minimum for memory hot-plug)", d.Memory.Guest.String())
	}
	return spec, nil
}

// vmiLabels: the template's labels (KubeVirt copies the template's metadata), the node's
func vmiLabels(vm *v1.VirtualMachine) map[string]string {
	l := map[string]string{}
	if vm.Spec.Template != nil {
		for k, v := range vm.Spec.Template.ObjectMeta.Labels {
			l[k] = v
		}
	}
	l["kubevirt.io/nodeName"] = nodeName
	return l
}

func (s *standin) startVMI(ctx context.Context, conf kvConfig, vm *v1.VirtualMachine) (*v1.VirtualMachineInstance, error) {
	key := vm.Namespace + "/" + vm.Name
	spec, err := vmiSpec(conf, vm)
	if err != nil {
		return nil, err
	}
	boot, _ := json.Marshal(vm.Spec.Template.Spec)
	dom := s.domainName(key)
	ctrl := true
	vmi := &v1.VirtualMachineInstance{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{
			Name: vm.Name, Namespace: vm.Namespace,
			Labels: vmiLabels(vm),
			Annotations: map[string]string{annDomain: dom, annBoot: string(boot),
				annGen: strconv.FormatInt(vm.Generation, 10)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine",
				Name: vm.Name, UID: vm.UID, Controller: &ctrl, BlockOwnerDeletion: &ctrl}},
		},
		Spec: spec,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(vmi)
	if err != nil {
		return nil, err
	}
	delete(obj, "status")
	created, err := s.dyn.Resource(vmiGVR).Namespace(vm.Namespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create VMI: %v", err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, vmi); err != nil {
		return nil, err
	}
	s.removeDomain(dom) // a leftover of an earlier run
	if err := s.defineDomain(dom, &spec, vm.Annotations[annSwitches]); err != nil {
		s.patchVMIStatus(ctx, vmi, map[string]any{"phase": "Failed"})
		return nil, err
	}
	d := spec.Domain
	log.Printf("standin: VM %s: VMI %s and domain %s started: memory %dMi (max %dMi), sockets %d (max %d), cores %d, threads %d",
		key, vmi.UID, dom, quantityMiB(d.Memory.Guest), quantityMiB(d.Memory.MaxGuest), d.CPU.Sockets, d.CPU.MaxSockets, d.CPU.Cores, d.CPU.Threads)
	return vmi, nil
}

var domainXML = template.Must(template.New("d").Parse(`<domain type='qemu'>
  <name>{{.Name}}</name>
  {{- if .VmemMiB}}
  <maxMemory slots='8' unit='MiB'>{{.TotalMiB}}</maxMemory>
  {{- end}}
  <memory unit='MiB'>{{.TotalMiB}}</memory>
  <currentMemory unit='MiB'>{{.BootMiB}}</currentMemory>
  <vcpu placement='static' current='{{.CurVCPU}}'>{{.MaxVCPU}}</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>{{.GuestDir}}/vmlinuz</kernel>
    <initrd>{{.GuestDir}}/initrd.img</initrd>
    <cmdline>console=ttyS0 panic=-1 loglevel=4{{.Switches}}</cmdline>
  </os>
  <features>
    <acpi/>
    <apic/>
  </features>
  <cpu>
    <topology sockets='{{.MaxSockets}}' dies='1' cores='{{.Cores}}' threads='{{.Threads}}'/>
    <numa>
      <cell id='0' cpus='0-{{.LastCPU}}' memory='{{.BootMiB}}' unit='MiB'/>
    </numa>
  </cpu>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    {{- if .VmemMiB}}
    <memory model='virtio-mem'>
      <target>
        <size unit='MiB'>{{.VmemMiB}}</size>
        <node>0</node>
        <block unit='MiB'>2</block>
        <requested unit='MiB'>0</requested>
      </target>
    </memory>
    {{- end}}
    <serial type='file'>
      <source path='/var/log/libvirt/qemu/{{.Name}}.console.log' append='on'/>
      <target port='0'/>
    </serial>
    <channel type='unix'>
      <target type='virtio' name='org.qemu.guest_agent.0'/>
    </channel>
    <memballoon model='none'/>
  </devices>
</domain>
`))

func (s *standin) defineDomain(name string, spec *v1.VirtualMachineInstanceSpec, switches string) error {
	d := spec.Domain
	boot, max := quantityMiB(d.Memory.Guest), quantityMiB(d.Memory.MaxGuest)
	sw := ""
	for _, f := range strings.Fields(switches) {
		if !strings.HasPrefix(f, "hvguest.") {
			return fmt.Errorf("annotation %s: %q is not a guest switch", annSwitches, f)
		}
		sw += " " + f
	}
	perSocket := d.CPU.Cores * d.CPU.Threads
	var buf bytes.Buffer
	err := domainXML.Execute(&buf, map[string]any{
		"Name": name, "BootMiB": boot, "VmemMiB": max - boot, "TotalMiB": max,
		"CurVCPU": d.CPU.Sockets * perSocket, "MaxVCPU": d.CPU.MaxSockets * perSocket,
		"LastCPU": d.CPU.MaxSockets*perSocket - 1, "MaxSockets": d.CPU.MaxSockets,
		"Cores": d.CPU.Cores, "Threads": d.CPU.Threads, "GuestDir": s.guestDir, "Switches": sw,
	})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "standin-*.xml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	tmp.Write(buf.Bytes())
	tmp.Close()
	os.Remove("/var/log/libvirt/qemu/" + name + ".console.log")
	if err := s.virsh("define", tmp.Name()); err != nil {
		return err
	}
	return s.virsh("start", name)
}

func (s *standin) removeDomain(name string) {
	if s.virsh("domuuid", name) != nil {
		return
	}
	_ = s.virsh("destroy", name)
	_ = s.virsh("undefine", name)
}

func (s *standin) removeVMI(ctx context.Context, vmi *v1.VirtualMachineInstance) {
	s.removeDomain(s.domainName(vmi.Namespace + "/" + vmi.Name))
	err := s.dyn.Resource(vmiGVR).Namespace(vmi.Namespace).Delete(ctx, vmi.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &vmi.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		log.Printf("standin: delete VMI %s/%s: %v", vmi.Namespace, vmi.Name, err)
	}
}

// domState: the domain's state as virsh domstate prints it ("running", "paused", "shut off",
// "crashed", ...), "absent" when there is no such domain. An error is no state: a virsh that
// failed (libvirtd busy, a timeout) never ends a VMI nor rewrites its status.
func (s *standin) domState(name string) (string, error) {
	out, err := s.virshOut("domstate", name)
	if err != nil {
		if strings.Contains(err.Error(), "failed to get domain") || strings.Contains(err.Error(), "Domain not found") {
			return "absent", nil
		}
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// ended: a domain state after which the VMI is over (KubeVirt: the virt-launcher's QEMU exited)
func ended(state string) bool {
	return state == "shut off" || state == "crashed" || state == "absent"
}

// live is what the running domain shows
type live struct {
	running bool
	vcpus   uint32
	vmem    bool
	reqMiB  int64 // the virtio-mem device's requested size
	curMiB  int64 // and its current (plugged) size
	agent   bool
}

type domXML struct {
	VCPU struct {
		Current uint32 `xml:"current,attr"`
		Max     uint32 `xml:",chardata"`
	} `xml:"vcpu"`
	Channels []struct {
		Target struct {
			Name  string `xml:"name,attr"`
			State string `xml:"state,attr"`
		} `xml:"target"`
	} `xml:"devices>channel"`
	Memory []struct {
		Model  string `xml:"model,attr"`
		Target struct {
			Requested kib `xml:"requested"`
			Current   kib `xml:"current"`
		} `xml:"target"`
	} `xml:"devices>memory"`
}

type kib struct {
	Unit  string `xml:"unit,attr"`
	Value int64  `xml:",chardata"`
}

func (k kib) mib() int64 {
	switch k.Unit {
	case "MiB", "M":
		return k.Value
	case "GiB", "G":
		return k.Value << 10
	case "b", "bytes":
		return k.Value >> 20
	default: // KiB
		return k.Value >> 10
	}
}

// observe: what the domain shows; an error when virsh could not tell (the status stays as is)
func (s *standin) observe(name string) (live, error) {
	state, err := s.domState(name)
	l := live{running: state == "running"}
	if err != nil || !l.running {
		return l, err
	}
	out, err := s.virshOut("dumpxml", name)
	if err != nil {
		return l, err
	}
	var x domXML
	if err := xml.Unmarshal([]byte(out), &x); err != nil {
		return l, fmt.Errorf("domain %s: %v", name, err)
	}
	l.vcpus = x.VCPU.Current
	if l.vcpus == 0 {
		l.vcpus = x.VCPU.Max
	}
	for _, m := range x.Memory {
		if m.Model == "virtio-mem" {
			l.vmem, l.reqMiB, l.curMiB = true, m.Target.Requested.mib(), m.Target.Current.mib()
		}
	}
	for _, c := range x.Channels { // libvirt's view of the agent channel, as backends/libvirt reads it
		if c.Target.Name == "org.qemu.guest_agent.0" && c.Target.State == "connected" {
			l.agent = true
		}
	}
	return l, nil
}

// --- KubeVirt's LiveUpdate rules

// restartRequired: KubeVirt's addRestartRequiredIfNeeded. The template the VMI booted with,
// with the live-updatable fields that are within the rules taken from the VM, must equal the
// VM's template; once set, the condition stays until the VMI is restarted.
func (s *standin) restartRequired(conf kvConfig, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) bool {
	for _, c := range vm.Status.Conditions {
		if c.Type == v1.VirtualMachineRestartRequired && c.Status == k8sv1.ConditionTrue {
			return true
		}
	}
	var boot v1.VirtualMachineInstanceSpec
	if json.Unmarshal([]byte(vmi.Annotations[annBoot]), &boot) != nil {
		return false
	}
	now := vm.Spec.Template.Spec.DeepCopy()
	if conf.live && boot.Domain.Memory != nil && boot.Domain.Memory.Guest != nil &&
		now.Domain.Memory != nil && now.Domain.Memory.Guest != nil {
		// from the boot size (a shrink down to it is a virtio-mem unplug) up to maxGuest
		g := now.Domain.Memory.Guest
		if max := vmi.Spec.Domain.Memory.MaxGuest; max != nil && g.Cmp(*boot.Domain.Memory.Guest) >= 0 && g.Cmp(*max) <= 0 {
			boot.Domain.Memory.Guest = g
		}
	}
	if conf.live && boot.Domain.CPU != nil && now.Domain.CPU != nil && vmi.Spec.Domain.CPU != nil {
		// more sockets, up to maxSockets (the lab unplugs no vCPU: fewer sockets need a restart)
		sk := now.Domain.CPU.Sockets
		if sk >= vmi.Spec.Domain.CPU.Sockets && sk <= vmi.Spec.Domain.CPU.MaxSockets {
			boot.Domain.CPU.Sockets = sk
		}
	}
	return !reflect.DeepEqual(normal(&boot), normal(now))
}

// normal: a spec as JSON, so that nil and empty compare equal
func normal(spec *v1.VirtualMachineInstanceSpec) any {
	raw, _ := json.Marshal(spec)
	var m any
	json.Unmarshal(raw, &m)
	return m
}

// liveUpdate: a live-updatable change of the VM's template reaches the VMI's spec, with its
// Hot*Change condition and a (skipped) migration; a migration older than the delay completes.
func (s *standin) liveUpdate(ctx context.Context, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	key := vm.Namespace + "/" + vm.Name
	want := vm.Spec.Template.Spec.Domain
	have := &vmi.Spec.Domain
	specPatch := map[string]any{}
	var conds []v1.VirtualMachineInstanceConditionType
	if want.Memory != nil && want.Memory.Guest != nil && want.Memory.Guest.Cmp(*have.Memory.Guest) != 0 {
		log.Printf("standin: VM %s: live memory change %s -> %s (HotMemoryChange; the migration is skipped)",
			key, have.Memory.Guest.String(), want.Memory.Guest.String())
		have.Memory.Guest = want.Memory.Guest
		specPatch["memory"] = map[string]any{"guest": want.Memory.Guest.String()}
		conds = append(conds, v1.VirtualMachineInstanceMemoryChange)
	}
	if want.CPU != nil && want.CPU.Sockets != have.CPU.Sockets && want.CPU.Sockets != 0 {
		log.Printf("standin: VM %s: live vCPU change, sockets %d -> %d (HotVCPUChange; the migration is skipped)",
			key, have.CPU.Sockets, want.CPU.Sockets)
		have.CPU.Sockets = want.CPU.Sockets
		specPatch["cpu"] = map[string]any{"sockets": want.CPU.Sockets}
		conds = append(conds, v1.VirtualMachineInstanceVCPUChange)
	}
	if len(specPatch) > 0 {
		if err := s.patch(ctx, vmiGVR, vmi.Namespace, vmi.Name, "", map[string]any{"spec": map[string]any{"domain": specPatch}}); err != nil {
			return err
		}
		now := metav1.Now()
		for _, t := range conds {
			setVMICond(vmi, t, k8sv1.ConditionTrue, "", "")
		}
		vmi.Status.MigrationState = &v1.VirtualMachineInstanceMigrationState{
			StartTimestamp: &now, SourceNode: nodeName, TargetNode: nodeName,
			MigrationUID: types.UID(fmt.Sprintf("lab-skipped-%d", now.UnixNano())),
		}
		return nil
	}
	m := vmi.Status.MigrationState
	if m != nil && !m.Completed && m.StartTimestamp != nil && time.Since(m.StartTimestamp.Time) >= s.delay &&
		!s.fault("hold-migration") {
		now := metav1.Now()
		m.Completed, m.EndTimestamp = true, &now
		for _, t := range []v1.VirtualMachineInstanceConditionType{v1.VirtualMachineInstanceMemoryChange, v1.VirtualMachineInstanceVCPUChange} {
			removeVMICond(vmi, t)
		}
		log.Printf("standin: VM %s: the (skipped) migration completed", key)
	}
	return nil
}

// applyDomain: once no migration is pending, the domain gets the VMI's memory and sockets
// (the virtio-mem requested size, the live vCPU count); not the memory under stuck-guestcurrent
func (s *standin) applyDomain(vmi *v1.VirtualMachineInstance, l live) live {
	if m := vmi.Status.MigrationState; m != nil && !m.Completed {
		return l
	}
	key := vmi.Namespace + "/" + vmi.Name
	dom := s.domainName(key)
	d := vmi.Spec.Domain
	boot := quantityMiB(vmi.Status.Memory.GuestAtBoot)
	if req := quantityMiB(d.Memory.Guest) - boot; l.vmem && req != l.reqMiB && !s.stuck(vmi.Namespace, vmi.Name) {
		if err := s.virsh("update-memory-device", dom, "--live", "--requested-size", fmt.Sprintf("%dMiB", req)); err != nil {
			log.Printf("standin: VM %s: %v", key, err)
		} else {
			log.Printf("standin: VM %s: domain %s virtio-mem requested %d MiB", key, dom, req)
			l.reqMiB = req
		}
	}
	if n := d.CPU.Sockets * d.CPU.Cores * d.CPU.Threads; n != l.vcpus && n > l.vcpus {
		if err := s.virsh("setvcpus", dom, strconv.Itoa(int(n)), "--live"); err != nil {
			log.Printf("standin: VM %s: %v", key, err)
		} else {
			log.Printf("standin: VM %s: domain %s has %d vCPUs", key, dom, n)
			l.vcpus = n
		}
	}
	return l
}

// --- status

func setVMICond(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType, st k8sv1.ConditionStatus, reason, msg string) {
	for i := range vmi.Status.Conditions {
		c := &vmi.Status.Conditions[i]
		if c.Type == t {
			if c.Status != st {
				c.LastTransitionTime = metav1.Now()
			}
			c.Status, c.Reason, c.Message = st, reason, msg
			return
		}
	}
	vmi.Status.Conditions = append(vmi.Status.Conditions, v1.VirtualMachineInstanceCondition{
		Type: t, Status: st, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()})
}

func removeVMICond(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType) {
	out := vmi.Status.Conditions[:0]
	for _, c := range vmi.Status.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	vmi.Status.Conditions = out
}

func vmiCondJSON(cs []v1.VirtualMachineInstanceCondition) []any {
	out := []any{}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Type < cs[j].Type })
	for _, c := range cs {
		m := map[string]any{"type": string(c.Type), "status": string(c.Status),
			"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339), "lastProbeTime": nil}
		if c.Reason != "" {
			m["reason"] = c.Reason
		}
		if c.Message != "" {
			m["message"] = c.Message
		}
		out = append(out, m)
	}
	return out
}

// vmiStatus: the VMI's status from the domain; patched when it differs from orig (the API
// server's copy)
func (s *standin) vmiStatus(ctx context.Context, vmi *v1.VirtualMachineInstance, orig *v1.VirtualMachineInstanceStatus) error {
	dom := s.domainName(vmi.Namespace + "/" + vmi.Name)
	if vmi.Status.Memory == nil || vmi.Status.Memory.GuestAtBoot == nil {
		var boot v1.VirtualMachineInstanceSpec
		if json.Unmarshal([]byte(vmi.Annotations[annBoot]), &boot) != nil || boot.Domain.Memory == nil {
			return fmt.Errorf("VMI %s/%s has no readable %s annotation", vmi.Namespace, vmi.Name, annBoot)
		}
		vmi.Status.Memory = &v1.MemoryStatus{GuestAtBoot: boot.Domain.Memory.Guest}
	}
	seen, err := s.observe(dom)
	if err != nil {
		return err
	}
	l := s.applyDomain(vmi, seen)
	boot := quantityMiB(vmi.Status.Memory.GuestAtBoot)
	d := vmi.Spec.Domain
	phase := "Scheduling"
	if l.running {
		phase = "Running"
		setVMICond(vmi, v1.VirtualMachineInstanceReady, k8sv1.ConditionTrue, "", "")
	} else {
		setVMICond(vmi, v1.VirtualMachineInstanceReady, k8sv1.ConditionFalse, "DomainNotRunning", "the lab's domain "+dom+" is not running")
	}
	// the lab's migrations are skipped, and KubeVirt counts a VM with a virtio-mem device and no
	// host devices as migratable (CAPK copies this condition to its KubevirtMachine)
	setVMICond(vmi, v1.VirtualMachineInstanceIsMigratable, k8sv1.ConditionTrue, "", "")
	if l.agent {
		setVMICond(vmi, v1.VirtualMachineInstanceAgentConnected, k8sv1.ConditionTrue, "", "")
	} else {
		removeVMICond(vmi, v1.VirtualMachineInstanceAgentConnected)
	}
	perSocket := d.CPU.Cores * d.CPU.Threads
	st := map[string]any{
		"phase":    phase,
		"nodeName": nodeName,
		"memory": map[string]any{
			"guestAtBoot":    miQ(boot).String(),
			"guestCurrent":   miQ(boot + l.curMiB).String(),
			"guestRequested": d.Memory.Guest.String(),
		},
		"conditions": vmiCondJSON(vmi.Status.Conditions),
		// the lab guest has no network: one interface with a loopback address, because CAPK
		// waits for status.interfaces[0].ipAddress before it marks its KubevirtMachine ready
		// (nothing dials it)
		"interfaces": []any{map[string]any{"name": "default", "ipAddress": "127.0.0.1",
			"ipAddresses": []any{"127.0.0.1"}, "infoSource": "domain"}},
	}
	if l.running && perSocket > 0 {
		st["currentCPUTopology"] = map[string]any{"sockets": l.vcpus / perSocket, "cores": d.CPU.Cores, "threads": d.CPU.Threads}
	}
	if m := vmi.Status.MigrationState; m != nil {
		ms := map[string]any{"startTimestamp": m.StartTimestamp.UTC().Format(time.RFC3339), "completed": m.Completed,
			"sourceNode": m.SourceNode, "targetNode": m.TargetNode, "migrationUid": string(m.MigrationUID)}
		if m.EndTimestamp != nil {
			ms["endTimestamp"] = m.EndTimestamp.UTC().Format(time.RFC3339)
		}
		st["migrationState"] = ms
	}
	if old, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(orig); sameFields(old, st) {
		return nil
	}
	return s.patchVMIStatus(ctx, vmi, st)
}

func (s *standin) patchVMIStatus(ctx context.Context, vmi *v1.VirtualMachineInstance, st map[string]any) error {
	return s.patch(ctx, vmiGVR, vmi.Namespace, vmi.Name, "status", map[string]any{"status": st})
}

// sameFields: every field of want is in have with the same JSON value
func sameFields(have map[string]any, want map[string]any) bool {
	a, _ := json.Marshal(want)
	var w map[string]any
	json.Unmarshal(a, &w)
	b, _ := json.Marshal(have)
	var h map[string]any
	json.Unmarshal(b, &h)
	for k, v := range w {
		if v == nil {
			if h[k] != nil {
				return false
			}
			continue
		}
		if !reflect.DeepEqual(h[k], v) {
			return false
		}
	}
	return true
}

func (s *standin) vmStatus(ctx context.Context, vm *v1.VirtualMachine, orig *v1.VirtualMachineStatus, vmi *v1.VirtualMachineInstance, restart bool) error {
	conds := map[v1.VirtualMachineConditionType]v1.VirtualMachineCondition{}
	for _, c := range vm.Status.Conditions {
		conds[c.Type] = c
	}
	set := func(t v1.VirtualMachineConditionType, st k8sv1.ConditionStatus, reason, msg string) {
		c, ok := conds[t]
		if !ok || c.Status != st {
			c.LastTransitionTime = metav1.Now()
		}
		c.Type, c.Status, c.Reason, c.Message = t, st, reason, msg
		conds[t] = c
	}
	ready := false
	printable := v1.VirtualMachineStatusStopped
	if vmi != nil {
		printable = v1.VirtualMachineStatusStarting
		for _, c := range vmi.Status.Conditions {
			if c.Type == v1.VirtualMachineInstanceReady && c.Status == k8sv1.ConditionTrue {
				ready, printable = true, v1.VirtualMachineStatusRunning
			}
		}
	}
	if ready {
		set(v1.VirtualMachineReady, k8sv1.ConditionTrue, "", "")
	} else {
		set(v1.VirtualMachineReady, k8sv1.ConditionFalse, "NotRunning", "VMI does not exist or is not ready")
	}
	if restart && vmi != nil {
		if c, ok := conds[v1.VirtualMachineRestartRequired]; !ok || c.Status != k8sv1.ConditionTrue {
			log.Printf("standin: VM %s/%s: RestartRequired", vm.Namespace, vm.Name)
		}
		set(v1.VirtualMachineRestartRequired, k8sv1.ConditionTrue, "", restartMsg)
	} else {
		delete(conds, v1.VirtualMachineRestartRequired)
	}
	keys := make([]string, 0, len(conds))
	for t := range conds {
		keys = append(keys, string(t))
	}
	sort.Strings(keys)
	cj := []any{}
	for _, t := range keys {
		c := conds[v1.VirtualMachineConditionType(t)]
		m := map[string]any{"type": t, "status": string(c.Status),
			"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339), "lastProbeTime": nil}
		if c.Reason != "" {
			m["reason"] = c.Reason
		}
		if c.Message != "" {
			m["message"] = c.Message
		}
		cj = append(cj, m)
	}
	// desiredGeneration: the VM generation the stand-in has seen; observedGeneration: the one
	// its VMI runs (both as KubeVirt sets them)
	st := map[string]any{"created": vmi != nil, "ready": ready, "printableStatus": string(printable),
		"conditions": cj, "desiredGeneration": vm.Generation}
	if vmi != nil {
		g, _ := strconv.ParseInt(vmi.Annotations[annGen], 10, 64)
		st["observedGeneration"] = g
	}
	if old, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(orig); sameFields(old, st) {
		return nil
	}
	return s.patchVMStatus(ctx, vm, st)
}

func (s *standin) patchVMStatus(ctx context.Context, vm *v1.VirtualMachine, st map[string]any) error {
	return s.patch(ctx, vmGVR, vm.Namespace, vm.Name, "status", map[string]any{"status": st})
}

func (s *standin) patch(ctx context.Context, gvr schema.GroupVersionResource, ns, name, sub string, body map[string]any) error {
	raw, _ := json.Marshal(body)
	var subs []string
	if sub != "" {
		subs = []string{sub}
	}
	_, err := s.dyn.Resource(gvr).Namespace(ns).Patch(ctx, name, types.MergePatchType, raw, metav1.PatchOptions{}, subs...)
	if err != nil {
		return fmt.Errorf("patch %s %s/%s %s: %v", gvr.Resource, ns, name, sub, err)
	}
	return nil
}

// node keeps the Node of a CAPK VM's guest, named as the VM (CAPK looks it up by its
// KubevirtMachine's name and sets its providerID, as no KubeVirt cloud provider runs), Ready
// while the VMI is; the providerID is left to CAPK.
func (s *standin) node(ctx context.Context, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	ready := "False"
	for _, c := range vmi.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceReady && c.Status == k8sv1.ConditionTrue {
			ready = "True"
		}
	}
	nodes := s.dyn.Resource(nodeGVR)
	n, err := nodes.Get(ctx, vm.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": vm.Name, "labels": map[string]any{
				"kubernetes.io/hostname": vm.Name, "lab.hvupdater.io/kubevirt-vm": vm.Namespace + "." + vm.Name}}}}
		if n, err = nodes.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create Node %s: %v", vm.Name, err)
		}
		log.Printf("standin: VM %s/%s: Node %s registered (as its guest's kubelet would)", vm.Namespace, vm.Name, vm.Name)
	} else if err != nil {
		return err
	}
	// Ready and the three pressure conditions a kubelet reports: CAPI's NodeHealthy counts a
	// missing one as Unknown (core/reconcilers/machine/machine_controller_status.go
	// summarizeNodeConditions), and a Machine whose Node is not healthy is never Available
	want := map[string]string{"Ready": ready, "MemoryPressure": "False", "DiskPressure": "False",
		"PIDPressure": "False"}
	conds, _, _ := unstructured.NestedSlice(n.Object, "status", "conditions")
	have := 0
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			if t, _ := m["type"].(string); want[t] != "" && m["status"] == want[t] {
				have++
			}
		}
	}
	if have == len(want) {
		return nil
	}
	now := time.Now().UTC().Format(time.RFC3339)
	list := []any{}
	for _, t := range []string{"Ready", "MemoryPressure", "DiskPressure", "PIDPressure"} {
		list = append(list, map[string]any{"type": t, "status": want[t], "reason": "StandIn",
			"message": "the KubeVirt lab's VMI " + vmi.Name, "lastHeartbeatTime": now,
			"lastTransitionTime": now})
	}
	st := map[string]any{"status": map[string]any{"conditions": list}}
	raw, _ := json.Marshal(st)
	_, err = nodes.Patch(ctx, vm.Name, types.MergePatchType, raw, metav1.PatchOptions{}, "status")
	return err
}

func (s *standin) removeNode(ctx context.Context, name string) {
	err := s.dyn.Resource(nodeGVR).Delete(ctx, name, metav1.DeleteOptions{})
	if err == nil {
		log.Printf("standin: Node %s deleted (its VM is gone)", name)
	}
}

// --- virsh

func (s *standin) virsh(args ...string) error {
	_, err := s.virshOut(args...)
	return err
}

func (s *standin) virshOut(args ...string) (string, error) {
	out, err := exec.Command("virsh", append([]string{"-q", "-c", s.uri}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("virsh %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// --- subresources.kubevirt.io/v1 for the aggregator

func (s *standin) serve(addr, cert, key string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("/apis/subresources.kubevirt.io/v1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"kind": "APIResourceList", "apiVersion": "v1",
			"groupVersion": "subresources.kubevirt.io/v1", "resources": []any{
				map[string]any{"name": "virtualmachines/restart", "namespaced": true, "kind": "VirtualMachine", "verbs": []string{"update"}},
			}})
	})
	mux.HandleFunc("/apis/subresources.kubevirt.io", func(w http.ResponseWriter, r *http.Request) {
		gv := map[string]any{"groupVersion": "subresources.kubevirt.io/v1", "version": "v1"}
		writeJSON(w, http.StatusOK, map[string]any{"kind": "APIGroup", "apiVersion": "v1",
			"name": "subresources.kubevirt.io", "versions": []any{gv}, "preferredVersion": gv})
	})
	mux.HandleFunc("/apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachines/{name}/restart", s.restart)
	mux.HandleFunc("/validate-virtualmachine", s.validate)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServeTLS(cert, key))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	st := "Failure"
	if code < 300 {
		st = "Success"
	}
	writeJSON(w, code, map[string]any{"kind": "Status", "apiVersion": "v1", "status": st,
		"reason": reason, "message": msg, "code": code})
}

// refusal: under the "refuse-patch" switch, take one of its N refusals (true), else false
func (s *standin) refusal() bool {
	if s.faults == "" {
		return false
	}
	s.refuseMu.Lock()
	defer s.refuseMu.Unlock()
	f := filepath.Join(s.faults, "refuse-patch")
	raw, err := os.ReadFile(f)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || n <= 0 {
		os.Remove(f)
		return false
	}
	if n == 1 {
		os.Remove(f)
	} else {
		os.WriteFile(f, []byte(strconv.Itoa(n-1)), 0o644)
	}
	return true
}

// validate: the validating webhook of VirtualMachine updates (admission.k8s.io/v1)
func (s *standin) validate(w http.ResponseWriter, r *http.Request) {
	if s.down() {
		status(w, http.StatusServiceUnavailable, "ServiceUnavailable", "the KubeVirt stand-in is down (fault switch)")
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&review); err != nil || review.Request == nil {
		status(w, http.StatusBadRequest, "BadRequest", "not an AdmissionReview")
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if s.refusal() {
		resp.Allowed = false
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusConflict,
			Reason:  metav1.StatusReasonConflict,
			Message: "the KubeVirt stand-in refuses this change (fault switch refuse-patch)"}
		log.Printf("standin: VM %s/%s: change by %s refused (refuse-patch)", review.Request.Namespace,
			review.Request.Name, review.Request.UserInfo.Username)
	}
	review.Response = resp
	review.Request = nil
	writeJSON(w, http.StatusOK, review)
}

func (s *standin) restart(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		status(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "restart takes PUT (or POST)")
		return
	}
	if s.down() {
		status(w, http.StatusServiceUnavailable, "ServiceUnavailable", "the KubeVirt stand-in is down (fault switch)")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := r.Context()
	vmi, err := s.dyn.Resource(vmiGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		status(w, http.StatusConflict, "Conflict", fmt.Sprintf("VM %s/%s is not running", ns, name))
		return
	}
	if err != nil {
		status(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	uid := vmi.GetUID()
	body := map[string]any{"status": map[string]any{"stateChangeRequests": []any{
		map[string]any{"action": string(v1.StopRequest), "uid": string(uid)},
		map[string]any{"action": string(v1.StartRequest)},
	}}}
	raw, _ := json.Marshal(body)
	if _, err := s.dyn.Resource(vmGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, raw, metav1.PatchOptions{}, "status"); err != nil {
		code := http.StatusInternalServerError
		if apierrors.IsNotFound(err) {
			code = http.StatusNotFound
		}
		status(w, code, "Error", err.Error())
		return
	}
	log.Printf("standin: VM %s/%s: restart subresource called (%s by %s)", ns, name, r.Method, r.Header.Get("X-Remote-User"))
	w.WriteHeader(http.StatusAccepted)
}
