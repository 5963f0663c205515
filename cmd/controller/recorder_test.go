package main

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// recordGoroutines counts the goroutines running in client-go's event
// recorder (the broadcaster and its sink).
func recordGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "k8s.io/client-go/tools/record") {
			n++
		}
	}
	return n
}

// The event broadcaster stops with the component (v8.7.0 fixed a leak of
// the community snapshot controller's broadcaster when its Run returns):
// ours is bound to the component's context, so its goroutines end when the
// component stops, and a recorder used after that sends nothing.
func TestEventBroadcasterStopsWithTheComponent(t *testing.T) {
	before := recordGoroutines()
	kube := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	rec := newRecorder(ctx, kube, "snapshot-controller")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	rec.Event(pod, corev1.EventTypeNormal, "Started", "one")
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the event was not recorded: %d events", len(l.Items))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if recordGoroutines() <= before {
		t.Fatal("no recorder goroutine runs while the component runs")
	}
	cancel()
	for recordGoroutines() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d recorder goroutines still run after the component stopped", recordGoroutines()-before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
