// capiclient: the Cluster API stand-in of test/bench/vsphere-bench.sh. CAPI runs on other
// machines; on the bench's machine it should cost as little CPU as it can, since the bench's
// two cores are shared with hvupdater and the simulator. It does what the bench's Python
// clients did, without their per-call overhead (one interpreter lock for 64 threads, a
// json.dumps of every request body):
//
// -clients keep-alive TLS connections (the server verified against -ca), each posts
// Discovery once; when every one has, the clock starts (t0) and each connection takes the VM
// whose next UpdateMachine call is due soonest, waits until it is due, posts its request (the
// bytes of -requests, a JSON array of UpdateMachine requests, one per VM, sent as they are)
// and puts it back due -poll seconds later until an answer says done (retryAfterSeconds 0).
// A Failure answer, an HTTP error or a VM not done within -timeout seconds stops every
// connection. A connection that breaks is made again once for the call (as the Python client
// did).
//
// Prints one JSON line: t0 (unix seconds), wall (the last done answer's time from t0),
// hook_ms (every UpdateMachine call's latency at the client: request written to answer read),
// left (VMs not done) and errors.
//
// Usage: capiclient -addr HOST:PORT -ca CA.crt -requests FILE [-clients 64] [-poll 0.2]
// [-timeout 600]
package main

import (
	"bytes"
	"container/heap"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

const (
	api       = "hooks.runtime.cluster.x-k8s.io/v1alpha1"
	discovery = "/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery"
	update    = "/hooks.runtime.cluster.x-k8s.io/v1alpha1/updatemachine/update-machine?timeout=10s"
)

// due is a VM and when its next call is due (seconds from t0).
type due struct {
	at float64
	vm int
}

type dueHeap []due

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].vm < h[j].vm
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(due)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type answer struct {
	Status            string `json:"status"`
	Message           string `json:"message"`
	RetryAfterSeconds *int   `json:"retryAfterSeconds"`
}

type state struct {
	mu     sync.Mutex
	due    dueHeap
	left   int
	errs   []string
	hookMs []float64
	doneAt []time.Time
}

func (s *state) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err.Error())
	s.mu.Unlock()
}

// post sends body to path on c and decodes the answer; one more try on a new connection
// when the first breaks (the transport makes it).
func post(c *http.Client, url string, body []byte) (answer, float64, error) {
	var a answer
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		t0 := time.Now()
		var resp *http.Response
		resp, err = c.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			continue
		}
		var raw []byte
		raw, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		ms := float64(time.Since(t0).Nanoseconds()) / 1e6
		if err != nil {
			continue
		}
		if resp.StatusCode != 200 {
			return a, ms, fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, raw)
		}
		if err = json.Unmarshal(raw, &a); err != nil {
			return a, ms, fmt.Errorf("answer is not JSON: %v", err)
		}
		return a, ms, nil
	}
	return a, 0, err
}

func main() {
	addr := flag.String("addr", "", "hvupdater's HOST:PORT")
	caFile := flag.String("ca", "", "the CA that signed the server's certificate")
	reqFile := flag.String("requests", "", "JSON array of UpdateMachine requests, one per VM")
	clients := flag.Int("clients", 64, "keep-alive connections")
	poll := flag.Float64("poll", 0.2, "seconds between a VM's calls")
	timeout := flag.Float64("timeout", 600, "seconds a VM may take")
	flag.Parse()

	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "capiclient:", err)
		os.Exit(2)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		fmt.Fprintln(os.Stderr, "capiclient: no certificate in", *caFile)
		os.Exit(2)
	}
	rawReqs, err := os.ReadFile(*reqFile)
	var reqs []json.RawMessage
	if err == nil {
		err = json.Unmarshal(rawReqs, &reqs)
	}
	if err != nil || len(reqs) == 0 {
		fmt.Fprintln(os.Stderr, "capiclient: cannot read the requests:", err)
		os.Exit(2)
	}
	n := len(reqs)
	if *clients > n {
		*clients = n
	}
	if *clients < 1 {
		*clients = 1
	}
	s := &state{left: n, hookMs: make([]float64, 0, 16*n)}
	for i := 0; i < n; i++ {
		s.due = append(s.due, due{0, i})
	}
	heap.Init(&s.due)
	disc, _ := json.Marshal(map[string]string{"apiVersion": api, "kind": "DiscoveryRequest"})
	base := "https://" + *addr

	var t0 time.Time
	var ready, started sync.WaitGroup
	ready.Add(*clients)
	started.Add(1)
	var aborted bool // set before started is released when a client could not get ready
	var wg sync.WaitGroup
	for k := 0; k < *clients; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{
				TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
				MaxIdleConnsPerHost: 1,
				MaxConnsPerHost:     1,
				DisableCompression:  true,
			}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			_, _, err := post(c, base+discovery, disc)
			if err != nil {
				s.fail(fmt.Errorf("Discovery: %v", err))
			}
			ready.Done()
			started.Wait()
			if err != nil || aborted {
				return
			}
			for {
				s.mu.Lock()
				if len(s.errs) > 0 || s.left == 0 {
					s.mu.Unlock()
					return
				}
				if len(s.due) == 0 { // every VM is in another connection's hands
					s.mu.Unlock()
					time.Sleep(5 * time.Millisecond)
					continue
				}
				job := heap.Pop(&s.due).(due)
				s.mu.Unlock()
				if wait := time.Until(t0.Add(time.Duration(job.at * float64(time.Second)))); wait > 0 {
					time.Sleep(wait)
				}
				if time.Since(t0).Seconds() > *timeout {
					s.fail(fmt.Errorf("m%d still in progress after %.0f s", job.vm, *timeout))
					return
				}
				a, ms, err := post(c, base+update, reqs[job.vm])
				if err == nil && a.RetryAfterSeconds == nil {
					err = errors.New("the answer has no retryAfterSeconds")
				}
				if err == nil && a.Status == "Failure" {
					err = errors.New(a.Message)
				}
				s.mu.Lock()
				if ms > 0 {
					s.hookMs = append(s.hookMs, ms)
				}
				if err != nil {
					s.errs = append(s.errs, fmt.Sprintf("m%d: %v", job.vm, err))
					s.mu.Unlock()
					return
				}
				if *a.RetryAfterSeconds == 0 {
					s.doneAt = append(s.doneAt, time.Now())
					s.left--
				} else {
					heap.Push(&s.due, due{time.Since(t0).Seconds() + *poll, job.vm})
				}
				s.mu.Unlock()
			}
		}()
	}
	ready.Wait()
	s.mu.Lock()
	aborted = len(s.errs) > 0
	s.mu.Unlock()
	t0 = time.Now()
	started.Done()
	wg.Wait()

	wall := 0.0
	for _, d := range s.doneAt {
		if w := d.Sub(t0).Seconds(); w > wall {
			wall = w
		}
	}
	out := map[string]any{
		"t0":      float64(t0.UnixNano()) / 1e9,
		"wall":    wall,
		"hook_ms": s.hookMs,
		"left":    s.left,
		"errors":  s.errs,
	}
	if s.errs == nil {
		out["errors"] = []string{}
	}
	enc, _ := json.Marshal(out)
	fmt.Println(string(enc))
}
