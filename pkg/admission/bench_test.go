package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/validation"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

// BenchmarkAdmissionLatency measures admission latency straight to the
// webhook over TLS (keep-alive connections, as the API server holds them)
// at concurrency 1, 16 and 64, and reports p50 and p99 in milliseconds.
// The request is the costliest common one: a restore checked against a
// snapshot, its content and its size. The target is p99 < 5 ms (docs/benchmarks.md).
//
//	go test -run XXX -bench AdmissionLatency -benchtime 2000x ./pkg/admission/
func BenchmarkAdmissionLatency(b *testing.B) {
	ca := newTestCA(b)
	certs, _, _ := loadedReloader(b, ca, 1, time.Hour)
	world := &validation.StaticLookup{}
	if err := world.Add(NewClass("standard", AsDefault()),
		NewSnapshot("ns", "ready", FromContent("c1"), Ready("1Gi", "c1")),
		NewContent("c1", WithSnapshotHandle("h"), BoundTo("ns", "ready", ""))); err != nil {
		b.Fatal(err)
	}
	h := NewHandler(func(context.Context) validation.Lookup { return world }, validation.Options{}, 0, nil)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	defer cancel()
	addr := startRouter(b, ctx, certs, NewRouter(h, prometheus.NewRegistry(), nil))
	body, err := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta(), Request: &admissionv1.AdmissionRequest{
		UID: testUID, Kind: gvkOf("persistentvolumeclaims"), Resource: gvrOf("persistentvolumeclaims"),
		Operation: admissionv1.Create, Namespace: "ns", Object: rawNoT(NewPVC("ns", "p", RestoresFrom("ready"))),
	}})
	if err != nil {
		b.Fatal(err)
	}
	for _, conc := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
				TLSClientConfig:     &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12},
				MaxIdleConnsPerHost: conc,
			}}
			url := "https://" + addr + "/validate/persistentvolumeclaims"
			// Open the connections first: the API server keeps them, so
			// handshakes are not part of a request's latency.
			if _, err := runLoad(client, url, body, conc, 4*conc); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			lat, err := runLoad(client, url, body, conc, b.N)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
	cancel()
}

// runLoad sends n requests from conc workers and returns each latency.
func runLoad(client *http.Client, url string, body []byte, conc, n int) ([]time.Duration, error) {
	lat := make([]time.Duration, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				start := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("status %s", resp.Status)
					return
				}
				lat[i] = time.Since(start)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return lat, <-errs // nil when no worker failed
}
