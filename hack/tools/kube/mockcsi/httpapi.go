package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"
)

// maxBody caps request bodies of the HTTP API.
const maxBody = 1 << 20

// CallsResponse is the body of GET /calls: call counts by full gRPC method
// and result code name, e.g.
//
//	{"calls": {"/csi.v1.Controller/CreateSnapshot": {"OK": 3, "Unavailable": 1}}}
type CallsResponse struct {
	Calls map[string]map[string]int64 `json:"calls"`
}

// FaultsResponse is the body of GET /faults and of a successful PUT /faults.
type FaultsResponse struct {
	// Version increases with every install (start-up, file change, PUT), so a
	// test that rewrote the faults file can wait until the change is live.
	Version int64 `json:"version"`
	// Source is "flags", "file" or "http".
	Source string `json:"source"`
	Faults
}

// SnapshotEntry is one element of GET /snapshots.
type SnapshotEntry struct {
	ID             string    `json:"id"`
	Name           string    `json:"name,omitempty"`
	SourceVolumeID string    `json:"sourceVolumeId"`
	ReadyToUse     bool      `json:"readyToUse"`
	CreationTime   time.Time `json:"creationTime"`
	// SizeBytes is the source volume's size when one was set (PUT
	// /volume-sizes, --volume-sizes), else what the mock says (0): fault
	// rules do not apply here.
	SizeBytes int64 `json:"sizeBytes"`
	// GroupSnapshotID is the group snapshot the snapshot is a member of.
	GroupSnapshotID string `json:"groupSnapshotId,omitempty"`
	// Builtin marks the three snapshots the mock starts with; tests must
	// count only the snapshots they created.
	Builtin bool `json:"builtin"`
}

// SnapshotsResponse is the body of GET /snapshots: the backend's truth,
// read without faults and without being counted in /calls.
type SnapshotsResponse struct {
	Snapshots []SnapshotEntry `json:"snapshots"`
}

func (in *injector) handler(ctrl csi.ControllerServer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /calls", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, CallsResponse{Calls: in.snapshotCalls()})
	})
	mux.HandleFunc("DELETE /calls", func(w http.ResponseWriter, _ *http.Request) {
		in.mu.Lock()
		in.calls = map[string]map[string]int64{}
		in.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /calllog", func(w http.ResponseWriter, r *http.Request) {
		var since int64
		if v := r.URL.Query().Get("since"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				writeError(w, http.StatusBadRequest, fmt.Errorf("since must be a non-negative integer, got %q", v))
				return
			}
			since = n
		}
		in.mu.Lock()
		resp := in.log.since(since)
		in.mu.Unlock()
		writeJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("DELETE /calllog", func(w http.ResponseWriter, _ *http.Request) {
		in.mu.Lock()
		in.log.reset()
		in.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /faults", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, in.currentFaults())
	})
	mux.HandleFunc("PUT /faults", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, err)
			return
		}
		f, err := ParseFaults(body)
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		in.setFaults(f, "http")
		writeJSON(w, http.StatusOK, in.currentFaults())
	})
	mux.HandleFunc("GET /snapshots", func(w http.ResponseWriter, r *http.Request) {
		list, err := in.listBackend(r.Context(), ctrl)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, http.StatusOK, SnapshotsResponse{Snapshots: list})
	})
	mux.HandleFunc("GET /groups", func(w http.ResponseWriter, r *http.Request) {
		list, err := in.listGroups(r.Context(), ctrl)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, http.StatusOK, GroupsResponse{Groups: list})
	})
	mux.HandleFunc("GET /data", in.serveData)
	mux.HandleFunc("GET /volume-sizes", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, in.currentVolumeSizes())
	})
	// PUT replaces every per-volume size; PATCH sets the given volumes only,
	// 0 removing a volume's size.
	for _, method := range []string{http.MethodPut, http.MethodPatch} {
		mux.HandleFunc(method+" /volume-sizes", func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
			if err != nil {
				writeError(w, http.StatusRequestEntityTooLarge, err)
				return
			}
			sizes, err := parseVolumeSizesJSON(body)
			if err != nil {
				writeError(w, http.StatusBadRequest, err)
				return
			}
			in.setVolumeSizes(sizes, method == http.MethodPut)
			writeJSON(w, http.StatusOK, in.currentVolumeSizes())
		})
	}
	return mux
}

// VolumeSizes is the body of GET, PUT and PATCH /volume-sizes: snapshot
// sizes in bytes by source volume id, e.g. {"vol-1": 1073741824}.
type VolumeSizes map[string]int64

// parseVolumeSizesJSON decodes a VolumeSizes object; negative sizes and
// empty volume ids are refused.
func parseVolumeSizesJSON(data []byte) (VolumeSizes, error) {
	var v VolumeSizes
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&v); err != nil {
		return nil, fmt.Errorf("decoding volume sizes (want {\"volume-id\": bytes, ...}): %w", err)
	}
	return v, v.validate()
}

// parseVolumeSizesFlag parses --volume-sizes: "vol-1=1073741824,vol-2=5368709120".
func parseVolumeSizesFlag(list string) (VolumeSizes, error) {
	out := VolumeSizes{}
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		vol, size, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want volume-id=bytes", item)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(size), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: size must be a number of bytes: %w", item, err)
		}
		out[strings.TrimSpace(vol)] = n
	}
	return out, out.validate()
}

func (v VolumeSizes) validate() error {
	for vol, n := range v {
		if vol == "" {
			return errors.New("volume sizes: empty volume id")
		}
		if n < 0 {
			return fmt.Errorf("volume sizes: negative size %d for volume %q", n, vol)
		}
	}
	return nil
}

// setVolumeSizes replaces (replace) or updates the per-volume sizes; a size
// of 0 removes the volume's size.
func (in *injector) setVolumeSizes(sizes VolumeSizes, replace bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if replace {
		in.volumeSizes = map[string]int64{}
	}
	for vol, n := range sizes {
		if n == 0 {
			delete(in.volumeSizes, vol)
		} else {
			in.volumeSizes[vol] = n
		}
	}
}

func (in *injector) currentVolumeSizes() VolumeSizes {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(VolumeSizes, len(in.volumeSizes))
	for vol, n := range in.volumeSizes {
		out[vol] = n
	}
	return out
}

func (in *injector) snapshotCalls() map[string]map[string]int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[string]map[string]int64, len(in.calls))
	for m, byCode := range in.calls {
		c := make(map[string]int64, len(byCode))
		for k, v := range byCode {
			c[k] = v
		}
		out[m] = c
	}
	return out
}

func (in *injector) currentFaults() FaultsResponse {
	in.mu.Lock()
	defer in.mu.Unlock()
	f := in.faults
	if f.Rules == nil {
		f.Rules = []Rule{}
	}
	return FaultsResponse{Version: in.version, Source: in.source, Faults: f}
}

// listBackend pages through the mock's ListSnapshots directly, bypassing
// the interceptor (no faults, not counted) but holding the serialization
// slot.
func (in *injector) listBackend(ctx context.Context, ctrl csi.ControllerServer) ([]SnapshotEntry, error) {
	if err := in.lockMock(ctx); err != nil {
		return nil, err
	}
	defer in.unlockMock()
	out := []SnapshotEntry{}
	token := ""
	for {
		resp, err := ctrl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: token})
		if err != nil {
			return nil, err
		}
		in.mu.Lock()
		for _, e := range resp.GetEntries() {
			s := e.GetSnapshot()
			size := s.GetSizeBytes()
			if v := in.volumeSizes[s.GetSourceVolumeId()]; v > 0 {
				size = v
			}
			out = append(out, SnapshotEntry{
				ID:              s.GetSnapshotId(),
				Name:            in.names[s.GetSnapshotId()],
				SourceVolumeID:  s.GetSourceVolumeId(),
				ReadyToUse:      s.GetReadyToUse(),
				CreationTime:    s.GetCreationTime().AsTime(),
				SizeBytes:       size,
				GroupSnapshotID: in.groups.memberOf[s.GetSnapshotId()],
				Builtin:         in.builtin[s.GetSnapshotId()],
			})
		}
		in.mu.Unlock()
		if resp.GetNextToken() == "" || resp.GetNextToken() == token {
			break
		}
		token = resp.GetNextToken()
	}
	// The mock's ids are decimal counters: order by length, then text.
	sort.Slice(out, func(i, j int) bool { return idLess(out[i].ID, out[j].ID) })
	return out, nil
}

// recordBuiltins remembers the snapshots the mock starts with.
func (in *injector) recordBuiltins(ctx context.Context, ctrl csi.ControllerServer) error {
	list, err := in.listBackend(ctx, ctrl)
	if err != nil {
		return err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, s := range list {
		in.builtin[s.ID] = true
		// service.New names them "Mock Snapshot <n>" with ids "1".."3";
		// ListSnapshots does not return names, so restate them here.
		in.names[s.ID] = "Mock Snapshot " + s.ID
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		klog.ErrorS(err, "Writing HTTP response")
	}
}

func writeError(w http.ResponseWriter, code int, err error) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		code = http.StatusRequestEntityTooLarge
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
