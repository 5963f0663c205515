package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
	"github.com/snapkeeper/snapkeeper/pkg/writer"
)

// Both components' trackers are exposed on the one registry of the process,
// told apart by the component label.
func TestCacheLagGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	var lags []*cachelag.Tracker
	for _, component := range []string{"binder", "csi"} {
		componentReg := prometheus.WrapRegistererWith(prometheus.Labels{"component": component}, reg)
		w := writer.New(fake.NewClientset(), nil, componentReg)
		registerCacheLag(componentReg, w.Lag())
		lags = append(lags, w.Lag())
	}
	lags[1].Begin(cachelag.Update, &metav1.ObjectMeta{UID: "u", ResourceVersion: "1"}).
		Done(&metav1.ObjectMeta{UID: "u", ResourceVersion: "2"}, nil)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "snapkeeper_cache_lag_entries" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "component" {
					got[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	if len(got) != 2 || got["binder"] != 0 || got["csi"] != 1 {
		t.Errorf("snapkeeper_cache_lag_entries by component = %v, want binder 0, csi 1", got)
	}
}
