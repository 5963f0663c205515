package binder

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

// The in-flight operations gauge is written by every worker at once and
// scraped meanwhile (v8.7.0 fixed a data race in the community's): under
// the race detector (`make unit` runs -race) 16 workers start and finish
// 2,000 operations, a scraper reads the gauge all along, and the gauge ends
// at what is still in flight.
func TestInFlightGaugeUnderConcurrentWorkers(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	const workers, perWorker = 16, 125
	stop := make(chan struct{})
	scraped := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				scraped <- n
				return
			default:
			}
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
			}
			n++
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				uid := types.UID(fmt.Sprintf("uid-%d-%d", w, i))
				m.start(uid, OpCreateSnapshot)
				m.start(uid, OpCreateSnapshot) // idempotent: a retried sync
				if i%5 != 0 {                  // every fifth stays in flight
					m.finish(uid, OpCreateSnapshot, "drv", typeDynamic, "success", time.Now())
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if n := <-scraped; n == 0 {
		t.Fatal("the gauge was never scraped while workers ran")
	}
	if got, want := testutil.ToFloat64(m.inFlight), float64(workers*perWorker/5); got != want {
		t.Fatalf("in flight = %v, want %v", got, want)
	}
	if got, want := testutil.CollectAndCount(m.duration), 1; got != want {
		t.Fatalf("duration series = %d, want %d", got, want)
	}
}
