// Command vcsim runs govmomi's vCenter simulator (Debian's govmomi 0.24) for hvupdater's
// vSphere tests: a VPX model with -hosts hosts and -vms VMs in one cluster, served over TLS
// on loopback with a fresh ECDSA P-256 certificate (signed by a fresh CA), plus a thin
// HTTP layer in front of /sdk that injects faults, emulates what the 0.24 simulator lacks
// (config.changeVersion checks, ShutdownGuest needing VMware Tools, busy VMs) and counts
// calls. It writes ca.pem, cert.pem, password and info.json into -dir, prints one line
// "VCSIM_READY <url> <info.json>" and runs until SIGTERM/SIGINT (or stdin EOF with -stdin).
package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

const sessionCookie = "vmware_soap_session"

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// failRule makes Method fail Left more times with Fault, optionally only on one VM.
type failRule struct {
	Method string
	Fault  string
	VM     string
	Left   int
}

// vmInfo is what info.json says about one VM.
type vmInfo struct {
	Name           string `json:"name"`
	UUID           string `json:"uuid"`
	InstanceUUID   string `json:"instance_uuid"`
	Moref          string `json:"moref"`
	Host           string `json:"host"`
	MemoryMB       int32  `json:"memory_mb"`
	CPUs           int32  `json:"cpus"`
	CoresPerSocket int32  `json:"cores_per_socket"`
	MemoryHotAdd   bool   `json:"memory_hot_add"`
	CPUHotAdd      bool   `json:"cpu_hot_add"`
	CPUHotRemove   bool   `json:"cpu_hot_remove"`
	ToolsRunning   bool   `json:"tools_running"`
	Busy           bool   `json:"busy"`
	PoweredOn      bool   `json:"powered_on"`
	DiskMB         int64  `json:"disk_mb"` // capacity of the first virtual disk, MiB (-1: none)
}

type info struct {
	URL              string   `json:"url"`
	Host             string   `json:"host"`
	Username         string   `json:"username"`
	PasswordFile     string   `json:"password_file"`
	Cert             string   `json:"cert"`
	CA               string   `json:"ca"`
	ThumbprintSHA1   string   `json:"thumbprint_sha1"`
	ThumbprintSHA256 string   `json:"thumbprint_sha256"`
	ControlURL       string   `json:"control_url"`
	Pid              int      `json:"pid"`
	VMs              []vmInfo `json:"vms"`
}

// front sits before the simulator's /sdk handler.
type front struct {
	sdk           http.Handler
	changeVersion bool
	reconfigMu    sync.Mutex // serialises ReconfigVM_Task while changeVersion is checked

	// VM moref value -> how long its guest takes to go off after ShutdownGuest (0.24 powers
	// off at once; a real guest takes its time, and vCenter answers the call at once). Set
	// before serving, read-only after.
	shutdownDelay map[string]time.Duration

	mu       sync.Mutex // guards everything below
	fails    []*failRule
	busy     map[string]bool // VM moref value -> holds a running task
	revoked  map[string]bool // session cookies expired through /hvtest/expire-sessions
	seen     map[string]bool // session cookies seen so far
	calls    map[string]int
	requests int
	version  int
}

// mutating lists the VM methods a busy VM refuses with TaskInProgress.
var mutating = map[string]bool{
	"ReconfigVM_Task": true, "PowerOnVM_Task": true, "PowerOffVM_Task": true,
	"ShutdownGuest": true, "ResetVM_Task": true,
}

func main() {
	var (
		dir       = flag.String("dir", "", "directory for ca.pem, cert.pem, password, info.json (required)")
		listen    = flag.String("listen", "127.0.0.1:0", "listen address (loopback only)")
		user      = flag.String("username", "hvuser", "login user name")
		pass      = flag.String("password", "", "login password (default: random)")
		hosts     = flag.Int("hosts", 2, "hosts in the cluster")
		vms       = flag.Int("vms", 4, "VMs in the cluster (placed on random hosts)")
		idle      = flag.Duration("session-idle", 0, "expire sessions idle this long (0: never)")
		cv        = flag.Bool("change-version", true, "maintain config.changeVersion and refuse stale ReconfigVM_Task specs with ConcurrentAccess")
		stdinExit = flag.Bool("stdin", false, "also exit when stdin reaches EOF (parent died)")
		delays    listFlag
		fails     listFlag
		vmSpecs   listFlag
	)
	flag.Var(&delays, "delay", "Method=duration: delay every call of Method (repeatable), e.g. ReconfigVM_Task=200ms")
	flag.Var(&fails, "fail", "Method=N:Fault[@vm]: Method fails N times with Fault (repeatable); *_Task methods fail in the task")
	flag.Var(&vmSpecs, "vm", "selector:key[=value],...: per-VM settings (repeatable, applied in order); "+
		"selector: all | N | N-M | name; keys: memory, cpus, cores, memhotadd, cpuhotadd, "+
		"cpuhotremove, limit, increment, tools, busy, off, disk (GiB of the first disk), "+
		"thick (that disk thick-provisioned), idedisk (that disk on the IDE controller), "+
		"snapshot (the VM has a snapshot), shutdowndelay (seconds its guest takes to go off "+
		"after ShutdownGuest)")
	flag.Parse()
	log.SetPrefix("vcsim: ")
	log.SetFlags(0)
	if *dir == "" {
		log.Fatal("-dir is required")
	}
	if *pass == "" {
		*pass = randomHex(12)
	}
	if host, _, err := net.SplitHostPort(*listen); err != nil || !net.ParseIP(host).IsLoopback() {
		log.Fatalf("-listen %q: only loopback addresses (127.0.0.0/8, ::1) are allowed", *listen)
	}

	m := simulator.VPX()
	m.Host = 0 // no standalone hosts: one cluster holds every host and VM
	m.ClusterHost = *hosts
	m.Machine = *vms
	m.DelayConfig.MethodDelay = map[string]int{}
	for _, d := range delays {
		name, val, ok := strings.Cut(d, "=")
		dur, err := time.ParseDuration(val)
		if !ok || err != nil {
			log.Fatalf("bad -delay %q", d)
		}
		m.DelayConfig.MethodDelay[name] = int(dur / time.Millisecond)
	}
	simulator.SessionIdleTimeout = *idle
	if err := m.Create(); err != nil {
		log.Fatalf("create model: %v", err)
	}
	defer m.Remove()

	f := &front{
		changeVersion: *cv,
		busy:          map[string]bool{},
		shutdownDelay: map[string]time.Duration{},
		revoked:       map[string]bool{},
		seen:          map[string]bool{},
		calls:         map[string]int{},
	}
	for _, s := range fails {
		f.fails = append(f.fails, parseFail(s))
	}
	machines := sortedVMs()
	for _, s := range vmSpecs {
		applyVMSpec(f, machines, s)
	}
	if f.changeVersion {
		for _, vm := range machines {
			vm.Config.ChangeVersion = f.nextVersion()
		}
	}

	// Serve /sdk ourselves rather than through Service.NewServer, so the fault layer can sit
	// in front of the simulator's handler.
	svc := m.Service
	svc.Listen = &url.URL{Host: *listen, User: url.UserPassword(*user, *pass)}
	svc.RegisterSDK(simulator.Map)
	f.sdk = svc.ServeMux

	caPEM, certPEM, tlsCert, leaf := makeCerts()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	srv := &http.Server{
		Handler:           f,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{tlsCert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(os.Stderr, "vcsim http: ", 0),
	}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != http.ErrServerClosed {
			log.Fatalf("serve: %v", err)
		}
	}()

	out := info{
		URL:              "https://" + addr + "/sdk",
		Host:             addr,
		Username:         *user,
		PasswordFile:     filepath.Join(*dir, "password"),
		Cert:             filepath.Join(*dir, "cert.pem"),
		CA:               filepath.Join(*dir, "ca.pem"),
		ThumbprintSHA1:   thumbprint(sha1.Sum(leaf.Raw)),
		ThumbprintSHA256: thumbprint(sha256.Sum256(leaf.Raw)),
		ControlURL:       "https://" + addr + "/hvtest",
		Pid:              os.Getpid(),
	}
	for _, vm := range machines {
		out.VMs = append(out.VMs, describe(f, vm))
	}
	writeFile(out.CA, caPEM, 0o644)
	writeFile(out.Cert, certPEM, 0o644)
	writeFile(out.PasswordFile, []byte(*pass+"\n"), 0o600)
	js, _ := json.MarshalIndent(out, "", "  ")
	infoPath := filepath.Join(*dir, "info.json")
	writeFile(infoPath, append(js, '\n'), 0o644)
	fmt.Printf("VCSIM_READY %s %s\n", out.URL, infoPath)

	done := make(chan os.Signal, 1)
	signal.Notify(done, syscall.SIGTERM, syscall.SIGINT)
	if *stdinExit {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			done <- syscall.SIGTERM
		}()
	}
	<-done
	_ = srv.Close()
}

// ServeHTTP handles the /hvtest control endpoints and screens every /sdk call.
func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/hvtest/stats":
		f.mu.Lock()
		js, _ := json.Marshal(map[string]interface{}{"requests": f.requests, "calls": f.calls})
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(js)
		return
	case "/hvtest/expire-sessions":
		f.mu.Lock()
		n := len(f.seen)
		for c := range f.seen {
			f.revoked[c] = true
		}
		f.seen = map[string]bool{}
		f.mu.Unlock()
		fmt.Fprintf(w, "{\"expired\":%d}\n", n)
		return
	}
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/sdk") {
		f.sdk.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))

	f.mu.Lock()
	f.requests++
	if c, err := r.Cookie(sessionCookie); err == nil {
		if f.revoked[c.Value] {
			// Behave as if the server had dropped the session: the simulator sees no cookie.
			r.Header.Del("Cookie")
		} else {
			f.seen[c.Value] = true
		}
	}
	f.mu.Unlock()

	method, err := simulator.UnmarshalBody(types.TypeFunc(), body)
	if err != nil {
		f.sdk.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	f.calls[method.Name]++
	f.mu.Unlock()

	var vm *simulator.VirtualMachine
	if method.This.Type == "VirtualMachine" {
		vm, _ = simulator.Map.Get(method.This).(*simulator.VirtualMachine)
	}
	if fault := f.injected(method, vm); fault != "" {
		refuse(w, method, fault)
		return
	}
	if vm != nil && method.Name == "ReconfigVM_Task" && f.changeVersion {
		f.reconfigure(w, r, method, vm)
		return
	}
	if vm != nil && method.Name == "ShutdownGuest" && f.shutdownDelay[vm.Self.Value] > 0 {
		f.slowShutdown(w, r, body, f.shutdownDelay[vm.Self.Value])
		return
	}
	f.sdk.ServeHTTP(w, r)
}

// slowShutdown answers ShutdownGuest at once, as vCenter does, and lets the guest go off
// only after delay: the same call is handed to the simulator then (it fails harmlessly if
// the VM is off by that time).
func (f *front) slowShutdown(w http.ResponseWriter, r *http.Request, body []byte,
	delay time.Duration) {
	later := httptest.NewRequest(http.MethodPost, r.URL.String(), bytes.NewReader(body))
	later.Header = r.Header.Clone()
	go func() {
		time.Sleep(delay)
		f.sdk.ServeHTTP(httptest.NewRecorder(), later)
	}()
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?>`+
		`<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/">`+
		`<soapenv:Body><ShutdownGuestResponse xmlns="urn:vim25"></ShutdownGuestResponse>`+
		`</soapenv:Body></soapenv:Envelope>`)
}

// injected returns the fault this call must fail with, or "".
func (f *front) injected(method *simulator.Method, vm *simulator.VirtualMachine) string {
	if fault := f.ruleFault(method, vm); fault != "" {
		return fault
	}
	if vm != nil && method.Name == "ShutdownGuest" {
		running := false
		simulator.Map.WithLock(vm, func() {
			running = vm.Guest != nil && vm.Guest.ToolsRunningStatus == "guestToolsRunning"
		})
		if !running {
			return "ToolsUnavailable" // real vCenter: ShutdownGuest needs VMware Tools
		}
	}
	return ""
}

// ruleFault applies the -fail rules and the busy flag.
func (f *front) ruleFault(method *simulator.Method, vm *simulator.VirtualMachine) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rule := range f.fails {
		if rule.Method != method.Name || rule.Left <= 0 {
			continue
		}
		if rule.VM != "" && (vm == nil || rule.VM != vm.Name) {
			continue
		}
		rule.Left--
		return rule.Fault
	}
	if vm != nil && f.busy[vm.Self.Value] && mutating[method.Name] {
		return "TaskInProgress"
	}
	return ""
}

// reconfigure emulates config.changeVersion: a spec naming a stale version fails with
// ConcurrentAccess; an applied change gets a new version. Reconfigurations are serialised.
func (f *front) reconfigure(w http.ResponseWriter, r *http.Request, method *simulator.Method,
	vm *simulator.VirtualMachine) {
	req := method.Body.(*types.ReconfigVM_Task)
	f.reconfigMu.Lock()
	defer f.reconfigMu.Unlock()
	var current string
	var modified time.Time
	simulator.Map.WithLock(vm, func() {
		current = vm.Config.ChangeVersion
		modified = vm.Config.Modified
	})
	if req.Spec.ChangeVersion != "" && req.Spec.ChangeVersion != current {
		refuse(w, method, "ConcurrentAccess")
		return
	}
	rec := httptest.NewRecorder()
	f.sdk.ServeHTTP(rec, r)
	simulator.Map.WithLock(vm, func() {
		if !vm.Config.Modified.Equal(modified) {
			vm.Config.ChangeVersion = f.nextVersion()
		}
	})
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// refuse fails a call the way vCenter does: a *_Task method returns a task that ends in
// error, anything else answers with a SOAP fault.
func refuse(w http.ResponseWriter, method *simulator.Method, fault string) {
	kind, ok := types.TypeFunc()(fault)
	if !ok {
		kind, _ = types.TypeFunc()("RuntimeFault")
	}
	mf, ok := reflect.New(kind).Interface().(types.BaseMethodFault)
	if !ok {
		mf = &types.RuntimeFault{}
	}
	const head = `<?xml version="1.0" encoding="UTF-8"?>` +
		`<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/" ` +
		`xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" ` +
		`xmlns:xsd="http://www.w3.org/2001/XMLSchema" ` +
		`xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>`
	const tail = `</soapenv:Body></soapenv:Envelope>`
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	if strings.HasSuffix(method.Name, "_Task") {
		name := strings.TrimSuffix(strings.TrimSuffix(method.Name, "_Task"), "VM")
		name = strings.ToLower(name[:1]) + name[1:]
		task := simulator.CreateTask(method.This, name,
			func(*simulator.Task) (types.AnyType, types.BaseMethodFault) { return nil, mf })
		ref := task.Run()
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, `%s<%sResponse xmlns="urn:vim25"><returnval type="Task">%s</returnval></%sResponse>%s`,
			head, method.Name, ref.Value, method.Name, tail)
		return
	}
	w.WriteHeader(http.StatusInternalServerError)
	fmt.Fprintf(w, `%s<soapenv:Fault><faultcode>ServerFaultCode</faultcode>`+
		`<faultstring>injected %s</faultstring><detail><%sFault xmlns="urn:vim25" xsi:type="%s">`+
		`</%sFault></detail></soapenv:Fault>%s`, head, fault, fault, fault, fault, tail)
}

func (f *front) nextVersion() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version++
	t := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(f.version) * time.Microsecond)
	return t.Format("2006-01-02T15:04:05.000000Z")
}

func parseFail(s string) *failRule {
	method, rest, ok := strings.Cut(s, "=")
	count, fault, ok2 := strings.Cut(rest, ":")
	n, err := strconv.Atoi(count)
	if !ok || !ok2 || err != nil || n < 0 || fault == "" {
		log.Fatalf("bad -fail %q (want Method=N:Fault[@vm])", s)
	}
	fault, vm, _ := strings.Cut(fault, "@")
	if _, ok := types.TypeFunc()(fault); !ok {
		log.Fatalf("bad -fail %q: unknown fault type %s", s, fault)
	}
	return &failRule{Method: method, Fault: fault, VM: vm, Left: n}
}

// sortedVMs returns the model's VMs ordered by their number (DC0_C0_RP0_VM<n>).
func sortedVMs() []*simulator.VirtualMachine {
	var out []*simulator.VirtualMachine
	for _, e := range simulator.Map.All("VirtualMachine") {
		out = append(out, e.(*simulator.VirtualMachine))
	}
	num := func(vm *simulator.VirtualMachine) int {
		i := strings.LastIndex(vm.Name, "_VM")
		n, _ := strconv.Atoi(vm.Name[i+3:])
		return n
	}
	sort.Slice(out, func(a, b int) bool { return num(out[a]) < num(out[b]) })
	return out
}

// selectVMs resolves a selector: all | N | N-M | exact name.
func selectVMs(all []*simulator.VirtualMachine, sel string) []*simulator.VirtualMachine {
	if sel == "all" {
		return all
	}
	lo, hi, isRange := strings.Cut(sel, "-")
	a, errA := strconv.Atoi(lo)
	b, errB := a, error(nil)
	if isRange {
		b, errB = strconv.Atoi(hi)
	}
	if errA == nil && errB == nil {
		if a < 0 || b >= len(all) || a > b {
			log.Fatalf("VM selector %q out of range (0-%d)", sel, len(all)-1)
		}
		return all[a : b+1]
	}
	for _, vm := range all {
		if vm.Name == sel {
			return []*simulator.VirtualMachine{vm}
		}
	}
	log.Fatalf("VM selector %q matches nothing", sel)
	return nil
}

// applyVMSpec sets hardware, hot-plug flags, tools, busy or power state on selected VMs,
// before the server starts (so plain field writes are safe).
func applyVMSpec(f *front, all []*simulator.VirtualMachine, spec string) {
	sel, keys, ok := strings.Cut(spec, ":")
	if !ok {
		log.Fatalf("bad -vm %q (want selector:key[=value],...)", spec)
	}
	for _, vm := range selectVMs(all, sel) {
		c := vm.Config
		for _, kv := range strings.Split(keys, ",") {
			key, val, hasVal := strings.Cut(kv, "=")
			n, err := strconv.Atoi(val)
			if hasVal && err != nil {
				log.Fatalf("bad value in -vm %q", spec)
			}
			on := !hasVal || n != 0
			switch key {
			case "memory":
				c.Hardware.MemoryMB = int32(n)
				vm.Summary.Config.MemorySizeMB = int32(n)
			case "cpus":
				c.Hardware.NumCPU = int32(n)
				vm.Summary.Config.NumCpu = int32(n)
			case "cores":
				c.Hardware.NumCoresPerSocket = int32(n)
			case "memhotadd":
				c.MemoryHotAddEnabled = types.NewBool(on)
			case "cpuhotadd":
				c.CpuHotAddEnabled = types.NewBool(on)
			case "cpuhotremove":
				c.CpuHotRemoveEnabled = types.NewBool(on)
			case "limit":
				c.HotPlugMemoryLimit = int64(n)
			case "increment":
				c.HotPlugMemoryIncrementSize = int64(n)
			case "tools":
				// Same effect as extraConfig SET.guest.toolsRunningStatus=guestToolsRunning,
				// which 0.24 turns into a guest.toolsRunningStatus property update.
				status := types.VirtualMachineToolsRunningStatusGuestToolsNotRunning
				if on {
					status = types.VirtualMachineToolsRunningStatusGuestToolsRunning
				}
				vm.Guest.ToolsRunningStatus = string(status)
			case "busy":
				setBusy(f, vm, on)
			case "shutdowndelay":
				f.shutdownDelay[vm.Self.Value] = time.Duration(n) * time.Second
			case "disk":
				d := firstDisk(vm)
				d.CapacityInKB = int64(n) * 1024 * 1024
				d.CapacityInBytes = int64(n) * 1024 * 1024 * 1024
			case "thick":
				if b, ok := firstDisk(vm).Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok {
					b.ThinProvisioned = types.NewBool(!on)
				}
			case "idedisk":
				// vSphere cannot hot-extend a disk on IDE; the simulator does not care
				d := firstDisk(vm)
				for _, dev := range c.Hardware.Device {
					if ide, ok := dev.(*types.VirtualIDEController); ok {
						d.ControllerKey = ide.Key
						d.UnitNumber = types.NewInt32(1)
						break
					}
				}
			case "snapshot":
				// what CreateSnapshot_Task leaves in the "snapshot" property (0.24 keeps no
				// rootSnapshot list elsewhere)
				vm.Snapshot = &types.VirtualMachineSnapshotInfo{
					RootSnapshotList: []types.VirtualMachineSnapshotTree{{
						Snapshot: types.ManagedObjectReference{Type: "VirtualMachineSnapshot",
							Value: "snapshot-" + vm.Self.Value},
						Vm:         vm.Self,
						Name:       "before-upgrade",
						CreateTime: time.Now(),
						State:      vm.Runtime.PowerState,
					}},
				}
			case "off":
				state := types.VirtualMachinePowerStatePoweredOn
				if on {
					state = types.VirtualMachinePowerStatePoweredOff
				}
				vm.Runtime.PowerState = state
				vm.Summary.Runtime.PowerState = state
			default:
				log.Fatalf("unknown key %q in -vm %q", key, spec)
			}
		}
	}
}

// setBusy gives the VM a task that stays running (listed in its recentTask), and makes the
// front refuse the VM's mutating methods with TaskInProgress.
func setBusy(f *front, vm *simulator.VirtualMachine, on bool) {
	f.busy[vm.Self.Value] = on
	if !on {
		vm.RecentTask = nil
		return
	}
	task := simulator.CreateTask(vm.Self, "reconfigVm",
		func(*simulator.Task) (types.AnyType, types.BaseMethodFault) { return nil, nil })
	task.Info.State = types.TaskInfoStateRunning
	task.Info.StartTime = types.NewTime(time.Now())
	vm.RecentTask = []types.ManagedObjectReference{task.Self}
}

// firstDisk returns the VM's first virtual disk (the model gives every VM one).
func firstDisk(vm *simulator.VirtualMachine) *types.VirtualDisk {
	for _, dev := range vm.Config.Hardware.Device {
		if d, ok := dev.(*types.VirtualDisk); ok {
			return d
		}
	}
	log.Fatalf("VM %s has no virtual disk", vm.Name)
	return nil
}

func describe(f *front, vm *simulator.VirtualMachine) vmInfo {
	host := ""
	if vm.Runtime.Host != nil {
		if h, ok := simulator.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem); ok {
			host = h.Name
		}
	}
	c := vm.Config
	return vmInfo{
		Name: vm.Name, UUID: c.Uuid, InstanceUUID: c.InstanceUuid, Moref: vm.Self.Value,
		Host: host, MemoryMB: c.Hardware.MemoryMB, CPUs: c.Hardware.NumCPU,
		CoresPerSocket: c.Hardware.NumCoresPerSocket, MemoryHotAdd: isTrue(c.MemoryHotAddEnabled),
		CPUHotAdd: isTrue(c.CpuHotAddEnabled), CPUHotRemove: isTrue(c.CpuHotRemoveEnabled),
		ToolsRunning: vm.Guest.ToolsRunningStatus == "guestToolsRunning",
		Busy:         f.busy[vm.Self.Value],
		PoweredOn:    vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn,
		DiskMB:       diskMB(vm),
	}
}

func diskMB(vm *simulator.VirtualMachine) int64 {
	for _, dev := range vm.Config.Hardware.Device {
		if d, ok := dev.(*types.VirtualDisk); ok {
			if d.CapacityInBytes > 0 {
				return d.CapacityInBytes >> 20
			}
			return d.CapacityInKB >> 10
		}
	}
	return -1
}

func isTrue(b *bool) bool { return b != nil && *b }

// makeCerts creates a CA and a server certificate for 127.0.0.1/localhost, both ECDSA P-256
// (the simulator's built-in RSA-1024 certificate is refused by Debian's OpenSSL).
func makeCerts() (caPEM, certPEM []byte, cert tls.Certificate, leaf *x509.Certificate) {
	now := time.Now()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "hvupdater test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		log.Fatalf("CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		log.Fatalf("CA certificate: %v", err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		log.Fatalf("server certificate: %v", err)
	}
	leaf, _ = x509.ParseCertificate(der)
	cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return caPEM, certPEM, cert, leaf
}

// thumbprint formats a digest the way vSphere shows it: upper-case hex pairs joined by ':'.
func thumbprint(sum interface{}) string {
	var b []byte
	switch s := sum.(type) {
	case [sha1.Size]byte:
		b = s[:]
	case [sha256.Size]byte:
		b = s[:]
	}
	parts := make([]string, len(b))
	for i, c := range b {
		parts[i] = fmt.Sprintf("%02X", c)
	}
	return strings.Join(parts, ":")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// writeFile writes atomically (temp file + rename) so readers never see half a file.
func writeFile(path string, data []byte, mode os.FileMode) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		log.Fatalf("write %s: %v", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		log.Fatalf("rename %s: %v", path, err)
	}
}
