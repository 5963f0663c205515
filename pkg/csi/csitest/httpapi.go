package csitest

// The mock driver's HTTP API (calls, call log, faults, backend snapshots and
// groups, volume sizes).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// HTTPAddress is host:port of the running driver's HTTP API.
func (m *Mock) HTTPAddress() string { return m.httpAddr }

// The HTTP API comes twice: methods taking a context return errors, for
// callers without a test; the ones taking a TB fail the test instead.

// GetCalls returns the call counts (GET /calls).
func (m *Mock) GetCalls(ctx context.Context) (Calls, error) {
	var out struct {
		Calls Calls `json:"calls"`
	}
	err := m.do(ctx, http.MethodGet, "/calls", nil, &out)
	return out.Calls, err
}

// Calls is GetCalls for a test.
func (m *Mock) Calls(t TB) Calls {
	t.Helper()
	c, err := m.GetCalls(context.Background())
	return must(t, c, err)
}

// ResetCalls zeroes the call counts (DELETE /calls).
func (m *Mock) ResetCalls(t TB) {
	t.Helper()
	m.mustDo(t, http.MethodDelete, "/calls", nil, nil)
}

// GetCallLog returns the calls logged after seq since (0: all kept), with
// their secret keys and parameters (GET /calllog). Pass the answer's Last
// as the next since.
func (m *Mock) GetCallLog(ctx context.Context, since int64) (CallLog, error) {
	var out CallLog
	err := m.do(ctx, http.MethodGet, fmt.Sprintf("/calllog?since=%d", since), nil, &out)
	return out, err
}

// CallLog is GetCallLog for a test.
func (m *Mock) CallLog(t TB, since int64) CallLog {
	t.Helper()
	l, err := m.GetCallLog(context.Background(), since)
	return must(t, l, err)
}

// ResetCallLog empties the call log (DELETE /calllog).
func (m *Mock) ResetCallLog(t TB) {
	t.Helper()
	m.mustDo(t, http.MethodDelete, "/calllog", nil, nil)
}

// PutFaults replaces the live faults (PUT /faults) and resets their
// counters.
func (m *Mock) PutFaults(ctx context.Context, f Faults) (FaultsState, error) {
	if f.Rules == nil {
		f.Rules = []Rule{}
	}
	var out FaultsState
	err := m.do(ctx, http.MethodPut, "/faults", f, &out)
	return out, err
}

// SetFaults is PutFaults for a test.
func (m *Mock) SetFaults(t TB, f Faults) FaultsState {
	t.Helper()
	s, err := m.PutFaults(context.Background(), f)
	return must(t, s, err)
}

// FaultsState reads the live faults (GET /faults).
func (m *Mock) FaultsState(t TB) FaultsState {
	t.Helper()
	var out FaultsState
	m.mustDo(t, http.MethodGet, "/faults", nil, &out)
	return out
}

// GetSnapshots lists the backend's snapshots, built-in ones included,
// without faults and without counting a CSI call (GET /snapshots).
func (m *Mock) GetSnapshots(ctx context.Context) ([]BackendSnapshot, error) {
	var out struct {
		Snapshots []BackendSnapshot `json:"snapshots"`
	}
	err := m.do(ctx, http.MethodGet, "/snapshots", nil, &out)
	return out.Snapshots, err
}

// Snapshots is GetSnapshots for a test.
func (m *Mock) Snapshots(t TB) []BackendSnapshot {
	t.Helper()
	s, err := m.GetSnapshots(context.Background())
	return must(t, s, err)
}

// GetCreated lists the backend's snapshots except the three built-in ones.
func (m *Mock) GetCreated(ctx context.Context) ([]BackendSnapshot, error) {
	all, err := m.GetSnapshots(ctx)
	var out []BackendSnapshot
	for _, s := range all {
		if !s.Builtin {
			out = append(out, s)
		}
	}
	return out, err
}

// Created is GetCreated for a test.
func (m *Mock) Created(t TB) []BackendSnapshot {
	t.Helper()
	s, err := m.GetCreated(context.Background())
	return must(t, s, err)
}

// GetGroups lists the backend's live group snapshots, without faults and
// without counting a CSI call (GET /groups).
func (m *Mock) GetGroups(ctx context.Context) ([]BackendGroup, error) {
	var out struct {
		Groups []BackendGroup `json:"groups"`
	}
	err := m.do(ctx, http.MethodGet, "/groups", nil, &out)
	return out.Groups, err
}

// Groups is GetGroups for a test.
func (m *Mock) Groups(t TB) []BackendGroup {
	t.Helper()
	g, err := m.GetGroups(context.Background())
	return must(t, g, err)
}

// VolumeSizes returns the per-volume snapshot sizes (GET /volume-sizes).
func (m *Mock) VolumeSizes(t TB) VolumeSizes {
	t.Helper()
	out := VolumeSizes{}
	m.mustDo(t, http.MethodGet, "/volume-sizes", nil, &out)
	return out
}

// SetVolumeSizes replaces every per-volume snapshot size (PUT
// /volume-sizes): from now on every answer about a snapshot of such a
// volume (CreateSnapshot, ListSnapshots, group answers, Snapshots) reports
// that size, whenever the snapshot was cut; other volumes fall back to a
// SizeBytes rule (--snapshot-size), else 0. A nil or empty map clears them.
// The sizes survive Restart only when given in Options.VolumeSizes.
func (m *Mock) SetVolumeSizes(t TB, sizes VolumeSizes) VolumeSizes {
	t.Helper()
	if sizes == nil {
		sizes = VolumeSizes{}
	}
	out := VolumeSizes{}
	m.mustDo(t, http.MethodPut, "/volume-sizes", sizes, &out)
	return out
}

// SetVolumeSize sets the snapshot size of one volume, leaving the others
// alone (PATCH /volume-sizes); 0 removes the volume's size.
func (m *Mock) SetVolumeSize(t TB, volumeID string, sizeBytes int64) VolumeSizes {
	t.Helper()
	out, err := m.PatchVolumeSize(context.Background(), volumeID, sizeBytes)
	return must(t, out, err)
}

// PatchVolumeSize is SetVolumeSize for callers without a test.
func (m *Mock) PatchVolumeSize(ctx context.Context, volumeID string, sizeBytes int64) (VolumeSizes, error) {
	out := VolumeSizes{}
	err := m.do(ctx, http.MethodPatch, "/volume-sizes", VolumeSizes{volumeID: sizeBytes}, &out)
	return out, err
}

func must[V any](t TB, v V, err error) V {
	t.Helper()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return v
}

func (m *Mock) mustDo(t TB, method, path string, in, out any) {
	t.Helper()
	if err := m.do(context.Background(), method, path, in, out); err != nil {
		t.Fatalf("%v", err)
	}
}

func (m *Mock) do(ctx context.Context, method, path string, in, out any) error {
	if m.cmd == nil {
		return fmt.Errorf("%s %s: mock CSI driver is not running", method, path)
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+m.httpAddr+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: reading body: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decoding %q: %w", method, path, b, err)
		}
	}
	return nil
}
