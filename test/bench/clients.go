package main

import (
	"net/http"
	"strings"
	"sync"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// ownWrites counts every write request the benchmark itself sends, retries
// included, keyed like the API server's counters, so that they can be
// subtracted from apiserver_request_total exactly.
type ownWrites struct {
	mu     sync.Mutex
	counts writeCounts
}

func newOwnWrites() *ownWrites { return &ownWrites{counts: newWriteCounts()} }

// Snapshot returns a copy of the counts so far.
func (o *ownWrites) Snapshot() writeCounts {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := newWriteCounts()
	for k, v := range o.counts.ByKey {
		out.ByKey[k] = v
	}
	return out
}

func (o *ownWrites) record(req *http.Request) {
	verb := req.Method
	if verb == http.MethodPatch && strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
		verb = "APPLY"
	}
	if !writeVerbs[verb] {
		return
	}
	res := resourceOfPath(req.URL.Path)
	if ignoredResources[strings.SplitN(res, "/", 2)[0]] {
		return
	}
	o.mu.Lock()
	o.counts.ByKey[writeKey{Verb: verb, Resource: res}]++
	o.mu.Unlock()
}

// resourceOfPath maps a REST path to "resource[/subresource]":
// /apis/g/v/namespaces/ns/volumesnapshots/x/status -> volumesnapshots/status.
func resourceOfPath(p string) string {
	seg := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(seg) >= 2 && seg[0] == "api":
		seg = seg[2:]
	case len(seg) >= 3 && seg[0] == "apis":
		seg = seg[3:]
	default:
		return p
	}
	if len(seg) > 2 && seg[0] == "namespaces" {
		seg = seg[2:]
	}
	switch {
	case len(seg) == 0:
		return ""
	case len(seg) >= 3:
		return seg[0] + "/" + seg[2]
	default:
		return seg[0]
	}
}

type countingTransport struct {
	next http.RoundTripper
	own  *ownWrites
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.own.record(req)
	return t.next.RoundTrip(req)
}

// clients are the benchmark's own API clients; every write they send is
// counted in own.
type clients struct {
	kube kubernetes.Interface
	snap snapclient.Interface
	own  *ownWrites
}

func newClients(env *framework.Env) (*clients, error) {
	return newClientsFor(env.Config)
}

// newClientsFor is newClients for another identity (config), still without
// a client-side limit.
func newClientsFor(config *rest.Config) (*clients, error) {
	own := newOwnWrites()
	cfg := rest.CopyConfig(config)
	cfg.QPS = -1
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, own: own} }
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	snap, err := snapclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{kube: kube, snap: snap, own: own}, nil
}
