// gopeer: a minimal Cluster API Runtime Extension in Go, the peer hvupdater's hook path is
// measured against (test/bench/hook-bench.sh). It answers CanUpdateMachine the way a small
// extension written with the standard library would: decode the request, compare the current
// and desired objects, and cover a change of the infra machine's memoryMiB, vcpu or numCPUs
// with a JSON patch, answering the same bytes hvupdater answers for a live memory grow. No
// hypervisor is asked: the peer does less than hvupdater, which answers from its probe cache.
//
// Usage: gopeer -listen 127.0.0.1:0 -cert tls.crt -key tls.key -port-file FILE
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
)

const path = "/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachine/can-update-machine"

type objects struct {
	Machine               map[string]any `json:"machine"`
	InfrastructureMachine map[string]any `json:"infrastructureMachine"`
	BootstrapConfig       map[string]any `json:"bootstrapConfig"`
}

type request struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Current    objects `json:"current"`
	Desired    objects `json:"desired"`
}

type patch struct {
	PatchType string `json:"patchType"`
	Patch     string `json:"patch"`
}

type response struct {
	APIVersion                 string `json:"apiVersion"`
	Kind                       string `json:"kind"`
	Status                     string `json:"status"`
	Message                    string `json:"message,omitempty"`
	InfrastructureMachinePatch *patch `json:"infrastructureMachinePatch,omitempty"`
	AffectsAvailability        bool   `json:"affectsAvailability,omitempty"`
}

type op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

var fields = []string{"memoryMiB", "vcpu", "numCPUs"}

func spec(o map[string]any) map[string]any {
	s, _ := o["spec"].(map[string]any)
	return s
}

// answer covers the listed infra fields that changed, when nothing else did.
func answer(req *request) response {
	r := response{APIVersion: req.APIVersion, Kind: "CanUpdateMachineResponse", Status: "Success"}
	if !reflect.DeepEqual(req.Current.Machine, req.Desired.Machine) ||
		!reflect.DeepEqual(req.Current.BootstrapConfig, req.Desired.BootstrapConfig) {
		return r // not ours: no patch, CAPI replaces
	}
	cur, des := spec(req.Current.InfrastructureMachine), spec(req.Desired.InfrastructureMachine)
	var ops []op
	var msg []string
	for _, f := range fields {
		if des[f] != nil && !reflect.DeepEqual(cur[f], des[f]) {
			ops = append(ops, op{"replace", "/spec/" + f, des[f]})
			msg = append(msg, fmt.Sprintf("%s %v->%v live", f, cur[f], des[f]))
		}
	}
	if len(ops) == 0 {
		return r
	}
	b, _ := json.Marshal(ops)
	r.Message = strings.Join(msg, "; ")
	r.InfrastructureMachinePatch = &patch{"JSONPatch", base64.StdEncoding.EncodeToString(b)}
	r.AffectsAvailability = true
	return r
}

func handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed: use POST", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
	if err != nil {
		http.Error(w, "request body larger than the limit", http.StatusRequestEntityTooLarge)
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "invalid JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // "2048->4096" as written, like hvupdater
	enc.Encode(answer(&req))
	w.Header().Set("Content-Type", "application/json")
	w.Write(bytes.TrimSuffix(out.Bytes(), []byte("\n")))
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address")
	cert := flag.String("cert", "", "PEM certificate chain")
	key := flag.String("key", "", "PEM key")
	portFile := flag.String("port-file", "", "write the bound port here")
	flag.Parse()
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	if *portFile != "" {
		port := ln.Addr().(*net.TCPAddr).Port
		if err := os.WriteFile(*portFile, []byte(fmt.Sprintf("%d\n", port)), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc(path, handle)
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}}
	log.Fatal(srv.ServeTLS(ln, "", ""))
}
