package main

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestInformersHaveTheirOwnConnection checks that the informers' clients
// reach the API server over one HTTP/2 connection, and the writers' clients
// over another: the watch events must not queue behind the workers'
// requests.
func TestInformersHaveTheirOwnConnection(t *testing.T) {
	var mu sync.Mutex
	byConn := map[string]map[string]bool{} // remote address -> client kinds
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if byConn[r.RemoteAddr] == nil {
			byConn[r.RemoteAddr] = map[string]bool{}
		}
		byConn[r.RemoteAddr][r.URL.Query().Get("labelSelector")] = true
		mu.Unlock()
		if r.ProtoMajor != 2 {
			t.Errorf("%s %s over %s, want HTTP/2", r.Method, r.URL.Path, r.Proto)
		}
		w.Header().Set("Content-Type", "application/json")
		kind := "NamespaceList"
		if strings.Contains(r.URL.Path, "volumesnapshots") {
			kind = "VolumeSnapshotList"
		}
		_, _ = w.Write([]byte(`{"kind":"` + kind + `","metadata":{},"items":[]}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	base := &rest.Config{Host: srv.URL, UserAgent: "test"}
	base.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cl, err := newClients(base, "binder")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		kube kubernetes.Interface
		snap snapclient.Interface
	}{
		{"writer", cl.kube, cl.snap},
		{"informer", cl.watchKube, cl.watchSnap},
	} {
		// The selector tells the server which client sent the request.
		o := metav1.ListOptions{LabelSelector: "client=" + c.name}
		if _, err := c.kube.CoreV1().Namespaces().List(ctx, o); err != nil {
			t.Fatalf("%s, namespaces: %v", c.name, err)
		}
		if _, err := c.snap.SnapshotV1().VolumeSnapshots("").List(ctx, o); err != nil {
			t.Fatalf("%s, snapshots: %v", c.name, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(byConn) != 2 {
		t.Fatalf("requests came over %d connections (%v), want 2: the writers' and the informers'", len(byConn), byConn)
	}
	for addr, kinds := range byConn {
		if len(kinds) != 1 {
			t.Errorf("connection %s carried the requests of %v, want one kind of client", addr, kinds)
		}
	}
}
