package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func directLatency(ctx context.Context, wh *framework.Webhook, r admissionRequest, conc, n int) (latencyRow, error) {
	hc := wh.Client()
	hc.Transport.(*http.Transport).MaxIdleConnsPerHost = conc
	url := "https://" + wh.Addr + r.path
	send := func(ctx context.Context, _ int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(r.review))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("webhook answered %s: %s", resp.Status, body)
		}
		if out.Response == nil || !out.Response.Allowed {
			return fmt.Errorf("webhook denied the benchmark's request: %s", body)
		}
		return nil
	}
	// Open the connections first: the API server keeps them alive, so TLS
	// handshakes are not part of a request's latency.
	if _, _, err := load(ctx, conc, 4*conc, send); err != nil {
		return latencyRow{}, err
	}
	lat, elapsed, err := load(ctx, conc, n, send)
	if err != nil {
		return latencyRow{}, err
	}
	return row(r.name, "webhook (direct)", conc, lat, elapsed), nil
}

// apiLatency sends dry-run creates through the API server, request i as
// applier i mod len(as), and counts the API server's 429s and where APF
// dispatched them.
func apiLatency(ctx context.Context, api *apiServer, as []*clients, r admissionRequest, path string, conc, n int) (latencyRow, error) {
	send := func(ctx context.Context, i int) error { return r.dryRun(ctx, as[i%len(as)]) }
	if _, _, err := load(ctx, conc, 4*conc, send); err != nil {
		return latencyRow{}, err
	}
	press, err := api.apiPressure(ctx)
	if err != nil {
		return latencyRow{}, err
	}
	levels, err := api.dispatched(ctx)
	if err != nil {
		return latencyRow{}, err
	}
	lat, elapsed, err := load(ctx, conc, n, send)
	if err != nil {
		return latencyRow{}, fmt.Errorf("%s via %s: %w", r.name, path, err)
	}
	out := row(r.name, path, conc, lat, elapsed)
	out.Identity = fmt.Sprintf("%d ServiceAccounts", min(len(as), n))
	pressAfter, err := api.apiPressure(ctx)
	if err != nil {
		return out, err
	}
	levelsAfter, err := api.dispatched(ctx)
	if err != nil {
		return out, err
	}
	out.Code429 = pressAfter.Code429 - press.Code429
	out.Levels = mainLevels(levels, levelsAfter, n)
	return out, nil
}

// load sends n requests from conc goroutines and returns each latency.
func load(ctx context.Context, conc, n int, send func(ctx context.Context, i int) error) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	var mu sync.Mutex
	start := time.Now()
	err := parallel(ctx, n, conc, func(ctx context.Context, i int) error {
		t := time.Now()
		err := send(ctx, i)
		d := time.Since(t)
		mu.Lock()
		lat[i] = d
		mu.Unlock()
		return err
	})
	return lat, time.Since(start), err
}

func row(name, path string, conc int, lat []time.Duration, elapsed time.Duration) latencyRow {
	slices.Sort(lat)
	return latencyRow{Request: name, Path: path, Concurrency: conc, N: len(lat),
		P50: lat[len(lat)/2], P99: lat[(len(lat)*99)/100], PerSecond: float64(len(lat)) / elapsed.Seconds()}
}

// waitWebhookGone waits until the API server stops calling the webhook: a
// class with an unknown reserved parameter is then admitted (dry run).
func waitWebhookGone(ctx context.Context, cl *clients) error {
	return framework.PollContext(ctx, 30*time.Second, "the API server to stop calling the webhook", func() error {
		_, err := cl.snap.SnapshotV1().VolumeSnapshotClasses().Create(ctx, &snapv1.VolumeSnapshotClass{
			ObjectMeta:     metav1.ObjectMeta{Name: "bench-probe"},
			Driver:         "probe.example.com",
			DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
			Parameters:     map[string]string{"csi.storage.k8s.io/not-a-known-key": "x"},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
}
