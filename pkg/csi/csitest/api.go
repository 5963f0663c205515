package csitest

import (
	"encoding/json"
	"strings"
	"time"
)

// The Go mirror of the mock driver's HTTP API (hack/tools/kube/mockcsi,
// a separate module, so its types cannot be imported).

// Faults is the body of PUT /faults and the --faults flag.
type Faults struct {
	Rules []Rule `json:"rules"`
}

// Rule is one fault; see hack/tools/kube/mockcsi/faults.go for the full
// semantics. Every rule matching a call applies.
type Rule struct {
	// Method: "CreateSnapshot", "/csi.v1.Controller/CreateSnapshot", or
	// "" / "*" for every method.
	Method string `json:"method,omitempty"`
	// Match: path.Match glob on the snapshot name or id of the call.
	Match string `json:"match,omitempty"`
	// Times: only the first Times matching calls get Latency, Code, Hang.
	Times int `json:"times,omitempty"`
	// Latency before the call reaches the mock.
	Latency Duration `json:"latency,omitempty"`
	// Code: a gRPC code name such as "Unavailable".
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// AfterCall: fail after the mock performed the call.
	AfterCall bool `json:"afterCall,omitempty"`
	// NotReady: first N CreateSnapshot / ListSnapshots(id) answers per
	// snapshot id report readyToUse=false (Probe: ready=false).
	NotReady int `json:"notReady,omitempty"`
	// Hang / HangUntilDeadline: hold a CreateSnapshot after the snapshot was
	// created.
	Hang              Duration `json:"hang,omitempty"`
	HangUntilDeadline bool     `json:"hangUntilDeadline,omitempty"`
	// SizeBytes: CreateSnapshot / ListSnapshots answers about the matching
	// snapshots report this size (the mock itself says 0, unknown).
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// NoCreationTime: those answers carry no creation time, and no size
	// unless a SizeBytes rule applies too.
	NoCreationTime bool `json:"noCreationTime,omitempty"`
}

// Duration is a time.Duration that travels as "250ms".
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// FaultsState is the body of GET /faults.
type FaultsState struct {
	Version int64  `json:"version"`
	Source  string `json:"source"`
	Faults
}

// Calls counts calls by full gRPC method and result code name, as in
// GET /calls: calls["/csi.v1.Controller/CreateSnapshot"]["OK"].
type Calls map[string]map[string]int64

// Count returns the calls of a method (full gRPC name or short name such as
// "CreateSnapshot") with the given code name; an empty code counts all.
func (c Calls) Count(method, code string) int64 {
	var n int64
	for m, byCode := range c {
		if m != method && m[strings.LastIndex(m, "/")+1:] != method {
			continue
		}
		for k, v := range byCode {
			if code == "" || k == code {
				n += v
			}
		}
	}
	return n
}

// BackendSnapshot is one entry of GET /snapshots: the mock's own state,
// without faults applied.
type BackendSnapshot struct {
	ID             string    `json:"id"`
	Name           string    `json:"name,omitempty"`
	SourceVolumeID string    `json:"sourceVolumeId"`
	ReadyToUse     bool      `json:"readyToUse"`
	CreationTime   time.Time `json:"creationTime"`
	SizeBytes      int64     `json:"sizeBytes"`
	// Builtin marks "Mock Snapshot 1..3", which the mock starts with.
	Builtin bool `json:"builtin"`
}

// CallLogEntry is one CSI call as GET /calllog shows it: secrets appear
// only as their sorted keys.
type CallLogEntry struct {
	Seq        int64     `json:"seq"`
	Time       time.Time `json:"time"`
	Method     string    `json:"method"`     // short: "CreateSnapshot"
	FullMethod string    `json:"fullMethod"` // "/csi.v1.Controller/CreateSnapshot"
	// Name is the CreateSnapshot name, or the name the snapshot a
	// DeleteSnapshot / ListSnapshots is about was created with.
	Name string `json:"name,omitempty"`
	// SnapshotID is the id a call is about, or the one a CreateSnapshot
	// answered.
	SnapshotID     string            `json:"snapshotId,omitempty"`
	SourceVolumeID string            `json:"sourceVolumeId,omitempty"`
	SecretKeys     []string          `json:"secretKeys,omitempty"`
	Parameters     map[string]string `json:"parameters,omitempty"`
	Code           string            `json:"code"` // "OK", "Unavailable", ...
	// ReadyToUse, SizeBytes, HasCreationTime: the snapshot a CreateSnapshot
	// answered, as the caller saw it.
	ReadyToUse      *bool `json:"readyToUse,omitempty"`
	SizeBytes       int64 `json:"sizeBytes,omitempty"`
	HasCreationTime bool  `json:"hasCreationTime,omitempty"`
	// Entries: how many snapshots a ListSnapshots answered.
	Entries *int `json:"entries,omitempty"`
}

// CallLog is the body of GET /calllog.
type CallLog struct {
	Entries []CallLogEntry `json:"entries"`
	// Last is the highest seq handed out so far: pass it as since to read
	// only newer calls.
	Last    int64 `json:"last"`
	Dropped int64 `json:"dropped"`
}
