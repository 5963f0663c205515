package upgrade

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// probeClass is a class the webhook must deny (a snapshotter secret name
// without its namespace). The API server sends it to the webhook on a dry
// run too (sideEffects None), so the probe leaves nothing behind.
func probeClass() *snapv1.VolumeSnapshotClass {
	return &snapv1.VolumeSnapshotClass{
		ObjectMeta:     metav1.ObjectMeta{Name: "upgrade-probe"},
		Driver:         framework.MockDriverName,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
		Parameters:     map[string]string{"csi.storage.k8s.io/snapshotter-secret-name": "only-the-name"},
	}
}

// outcome of one probe request.
type outcome int

const (
	judged   outcome = iota // denied by our webhook: it judged the request
	refused                 // the API server could not get an answer (failurePolicy Fail)
	admitted                // nobody judged it: must never happen
)

// judge sends one dry-run create of probeClass through the API server.
func judge(ctx context.Context, env *framework.Env) (outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err := env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(ctx, probeClass(),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return admitted, nil
	case strings.Contains(err.Error(), "volumesnapshotclasses.validation.snapkeeper.io") && strings.Contains(err.Error(), "denied the request"):
		return judged, nil
	default:
		return refused, err
	}
}

// probe keeps asking the webhook to judge while the test swaps it.
type probe struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	total    int
	refused  int
	admitted int
	first    time.Time // first refusal
	last     time.Time // last refusal
	errs     []string  // the first few refusals
}

// startProbe sends a request every interval (one at a time) until stop.
func startProbe(env *framework.Env, interval time.Duration) *probe {
	ctx, cancel := context.WithCancel(context.Background())
	p := &probe{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			o, err := judge(ctx, env)
			if ctx.Err() != nil {
				return
			}
			p.record(o, err)
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
	}()
	return p
}

func (p *probe) record(o outcome, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total++
	switch o {
	case admitted:
		p.admitted++
	case refused:
		now := time.Now()
		if p.refused == 0 {
			p.first = now
		}
		p.refused++
		p.last = now
		if len(p.errs) < 3 {
			p.errs = append(p.errs, fmt.Sprintf("%s: %v", now.Format("15:04:05.000"), err))
		}
	}
}

// probeReport is what the probe saw.
type probeReport struct {
	Total, Refused, Admitted int
	// Span is the time from the first refusal to the last (0 for one or
	// none).
	Span   time.Duration
	Errors []string
}

func (r probeReport) String() string {
	s := fmt.Sprintf("%d requests, %d refused, %d admitted unjudged", r.Total, r.Refused, r.Admitted)
	if r.Refused > 0 {
		s += fmt.Sprintf(" (refusals over %s: %s)", r.Span.Round(time.Millisecond), strings.Join(r.Errors, "; "))
	}
	return s
}

// stop ends the probe and reports.
func (p *probe) stop() probeReport {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	r := probeReport{Total: p.total, Refused: p.refused, Admitted: p.admitted, Errors: p.errs}
	if p.refused > 1 {
		r.Span = p.last.Sub(p.first)
	}
	return r
}
