// Command govmomi-reconfig is the baseline for test/bench/vsphere-bench.sh: it does with
// govmomi directly what hvupdater does for a batch of hot-add changes. It logs in once (the
// launcher's CA verifies the certificate), finds every VM of the launcher's info.json by
// BIOS UUID and starts ReconfigVM_Task(memoryMB) for all of them concurrently, then waits
// for every task. Prints one JSON line: VMs, seconds, errors. Built in GOPATH mode against
// Debian's govmomi like test/vcsim/build.sh does.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

type info struct {
	URL          string `json:"url"`
	Username     string `json:"username"`
	PasswordFile string `json:"password_file"`
	CA           string `json:"ca"`
	VMs          []struct {
		UUID string `json:"uuid"`
	} `json:"vms"`
}

type result struct {
	VMs      int     `json:"vms"`
	Seconds  float64 `json:"seconds"`
	StartS   float64 `json:"start_seconds"` // login + all tasks started
	Errors   int     `json:"errors"`
	MemoryMB int32   `json:"memory_mb"`
}

func main() {
	infoPath := flag.String("info", "", "the launcher's info.json (required)")
	memory := flag.Int("memory", 8192, "memoryMB to set on every VM")
	count := flag.Int("count", 0, "first N VMs only (0: all)")
	flag.Parse()
	log.SetPrefix("govmomi-reconfig: ")
	log.SetFlags(0)
	if *infoPath == "" {
		log.Fatal("-info is required")
	}
	raw, err := os.ReadFile(*infoPath)
	if err != nil {
		log.Fatal(err)
	}
	var in info
	if err := json.Unmarshal(raw, &in); err != nil {
		log.Fatalf("%s: %v", *infoPath, err)
	}
	pw, err := os.ReadFile(in.PasswordFile)
	if err != nil {
		log.Fatal(err)
	}
	vms := in.VMs
	if *count > 0 && *count < len(vms) {
		vms = vms[:*count]
	}

	ctx := context.Background()
	t0 := time.Now()
	u, err := soap.ParseURL(in.URL)
	if err != nil {
		log.Fatal(err)
	}
	sc := soap.NewClient(u, false)
	if err := sc.SetRootCAs(in.CA); err != nil {
		log.Fatal(err)
	}
	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		log.Fatalf("connect: %v", err)
	}
	sm := session.NewManager(c)
	if err := sm.Login(ctx, url.UserPassword(in.Username, strings.TrimSpace(string(pw)))); err != nil {
		log.Fatalf("login: %v", err)
	}
	si := object.NewSearchIndex(c)

	var (
		mu     sync.Mutex
		errs   int
		wg     sync.WaitGroup
		tasks  = make([]*object.Task, len(vms))
		failed = func(what string, err error) {
			mu.Lock()
			errs++
			mu.Unlock()
			log.Printf("%s: %v", what, err)
		}
	)
	for i := range vms {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ref, err := si.FindByUuid(ctx, nil, vms[i].UUID, true, nil)
			if err != nil || ref == nil {
				failed("find "+vms[i].UUID, err)
				return
			}
			vm := object.NewVirtualMachine(c, ref.Reference())
			t, err := vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{MemoryMB: int64(*memory)})
			if err != nil {
				failed("reconfigure "+vms[i].UUID, err)
				return
			}
			tasks[i] = t
		}(i)
	}
	wg.Wait()
	started := time.Since(t0)
	for i, t := range tasks {
		if t == nil {
			continue
		}
		wg.Add(1)
		go func(i int, t *object.Task) {
			defer wg.Done()
			if err := t.Wait(ctx); err != nil {
				failed("task of "+vms[i].UUID, err)
			}
		}(i, t)
	}
	wg.Wait()
	took := time.Since(t0)
	_ = sm.Logout(ctx)
	js, _ := json.Marshal(result{VMs: len(vms), Seconds: took.Seconds(), StartS: started.Seconds(),
		Errors: errs, MemoryMB: int32(*memory)})
	fmt.Println(string(js))
	if errs > 0 {
		os.Exit(1)
	}
}
