package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"path"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
)

// Faults is the live fault configuration. It is the JSON shape of --faults,
// of the --faults-file and of GET/PUT /faults:
//
//	{"rules": [
//	  {"method": "CreateSnapshot", "code": "Unavailable", "message": "backend busy", "times": 2},
//	  {"method": "DeleteSnapshot", "match": "snapshot-bad-*", "code": "Internal"},
//	  {"method": "*", "latency": "50ms"},
//	  {"method": "CreateSnapshot", "notReady": 3},
//	  {"method": "CreateSnapshot", "hangUntilDeadline": true, "times": 1}
//	]}
//
// Every rule that matches a call applies: latencies add up, the first rule
// with a code decides the error, the longest hang wins. Replacing the faults
// (file change, PUT, start-up) resets every rule's counters.
type Faults struct {
	Rules []Rule `json:"rules"`
}

// Rule is one fault. A rule matches a call when Method and Match match it and,
// for Times > 0, fewer than Times matching calls happened since the rule was
// installed.
type Rule struct {
	// Method is the short CSI method name ("CreateSnapshot",
	// "CreateVolumeGroupSnapshot"), the full gRPC method
	// ("/csi.v1.Controller/CreateSnapshot",
	// "/csi.v1.GroupController/CreateVolumeGroupSnapshot"), or "" / "*" for
	// every method.
	Method string `json:"method,omitempty"`
	// Match is a path.Match glob over the snapshot the call is about: the
	// name of a CreateSnapshot, the id of a DeleteSnapshot or of a filtered
	// ListSnapshots or of the snapshot a CreateVolume restores from, where
	// an id also matches through the name it was created with. For the
	// group calls it is the group snapshot's name
	// (CreateVolumeGroupSnapshot) or id (Get/DeleteVolumeGroupSnapshot, also
	// matching through the name). Group members are named
	// "<group name>:<volume id>", so a glob on the group name ("grp-*")
	// also matches calls about its members by id. Empty matches every call;
	// a non-empty pattern never matches calls about no snapshot (Probe, an
	// unfiltered ListSnapshots, a CreateVolume of an empty volume).
	Match string `json:"match,omitempty"`
	// Times limits Latency, Code and Hang to the first Times matching calls;
	// 0 means every matching call.
	Times int `json:"times,omitempty"`
	// Latency delays the call before it reaches the mock (outside the
	// serialization lock, so slow calls still overlap like on a real backend).
	Latency Duration `json:"latency,omitempty"`
	// Code is a gRPC code name ("Unavailable", "DEADLINE_EXCEEDED") or number.
	Code string `json:"code,omitempty"`
	// Message is the status message of the injected error.
	Message string `json:"message,omitempty"`
	// AfterCall returns the error after the mock handled the call, so the
	// operation took effect on the backend while the caller sees a failure.
	// Default: the call fails before it reaches the mock.
	AfterCall bool `json:"afterCall,omitempty"`
	// NotReady makes the first NotReady CreateSnapshot / filtered
	// ListSnapshots responses of each snapshot id report readyToUse=false.
	// Unfiltered ListSnapshots entries show the current state without
	// consuming the count. Likewise the first NotReady
	// CreateVolumeGroupSnapshot / GetVolumeGroupSnapshot responses of each
	// group report the group and all its members not ready (counted per
	// group id; a ListSnapshots of a member counts per member id). For
	// Probe (named explicitly, never through "*") the first NotReady probes
	// answer ready=false.
	NotReady int `json:"notReady,omitempty"`
	// ReadyAfter makes the same answers as NotReady report not ready until
	// this long after the rule first answered about the snapshot (group)
	// id: a backend that cuts now and uploads for a while. With
	// ReadyAfterMax, each id waits a time spread evenly between the two (by
	// a hash of the id, so one id always waits as long).
	ReadyAfter    Duration `json:"readyAfter,omitempty"`
	ReadyAfterMax Duration `json:"readyAfterMax,omitempty"`
	// Hang blocks a CreateSnapshot (or CreateVolumeGroupSnapshot) for this
	// long AFTER the mock created the snapshot (or group) (or until the
	// caller's deadline, whichever comes first), then returns the result: a
	// create still in flight / timed out while the backend already holds
	// the snapshot.
	Hang Duration `json:"hang,omitempty"`
	// HangUntilDeadline blocks such a create until the caller's context
	// ends.
	HangUntilDeadline bool `json:"hangUntilDeadline,omitempty"`
	// SizeBytes makes CreateSnapshot, ListSnapshots and group answers about
	// the matching snapshots report this size (the e2e mock itself always
	// says 0, "unknown"). Like NotReady it rewrites a copy and ignores
	// Times. A per-volume size (PUT /volume-sizes, --volume-sizes) wins
	// over it.
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// NoCreationTime makes those answers carry no creation_time, and no size
	// unless SizeBytes (or a per-volume size) is set too: a driver that
	// reports neither. In group answers the group's creation_time goes too.
	NoCreationTime bool `json:"noCreationTime,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("250ms").
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler; it accepts "1.5s" strings.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"250ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ParseFaults decodes and validates a Faults document. Unknown fields are
// errors, so a typo in a test's fault file fails loudly instead of silently
// injecting nothing. Empty input means no faults.
func ParseFaults(data []byte) (Faults, error) {
	var f Faults
	if len(bytes.TrimSpace(data)) == 0 {
		return f, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Faults{}, fmt.Errorf("decoding faults: %w", err)
	}
	if err := f.Validate(); err != nil {
		return Faults{}, err
	}
	return f, nil
}

// Validate checks every rule.
func (f Faults) Validate() error {
	var errs []error
	for i, r := range f.Rules {
		if err := r.validate(); err != nil {
			errs = append(errs, fmt.Errorf("rules[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

func (r Rule) validate() error {
	var errs []error
	if r.Match != "" {
		if _, err := path.Match(r.Match, ""); err != nil {
			errs = append(errs, fmt.Errorf("match %q: %w", r.Match, err))
		}
	}
	if r.Code != "" {
		c, err := parseCode(r.Code)
		if err != nil {
			errs = append(errs, err)
		} else if c == codes.OK {
			errs = append(errs, errors.New("code OK injects nothing; leave code empty"))
		}
	}
	if r.Times < 0 || r.NotReady < 0 || r.Latency < 0 || r.Hang < 0 || r.SizeBytes < 0 || r.ReadyAfter < 0 {
		errs = append(errs, errors.New("times, notReady, latency, hang, sizeBytes and readyAfter must not be negative"))
	}
	if r.ReadyAfterMax != 0 && r.ReadyAfterMax < r.ReadyAfter {
		errs = append(errs, errors.New("readyAfterMax must not be below readyAfter"))
	}
	return errors.Join(errs...)
}

// parseCode accepts "Unavailable", "UNAVAILABLE", "unavailable",
// "DeadlineExceeded", "DEADLINE_EXCEEDED" and numbers.
func parseCode(s string) (codes.Code, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil && n <= 16 {
		return codes.Code(n), nil
	}
	want := strings.ToLower(strings.ReplaceAll(s, "_", ""))
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if strings.ToLower(c.String()) == want {
			return c, nil
		}
	}
	return codes.OK, fmt.Errorf("unknown gRPC code %q", s)
}

// shortMethod turns "/csi.v1.Controller/CreateSnapshot" into "CreateSnapshot".
func shortMethod(full string) string {
	return full[strings.LastIndex(full, "/")+1:]
}

// matchesMethod reports whether the rule is about this gRPC method.
func (r Rule) matchesMethod(full string) bool {
	return r.Method == "" || r.Method == "*" || r.Method == full || r.Method == shortMethod(full)
}

// matchesSnapshot reports whether the rule's glob matches a snapshot known by
// name and/or id (either may be empty).
func (r Rule) matchesSnapshot(name, id string) bool {
	if r.Match == "" {
		return true
	}
	for _, s := range []string{name, id} {
		if s == "" {
			continue
		}
		if ok, _ := path.Match(r.Match, s); ok {
			return true
		}
	}
	return false
}

// injectsCallFault reports whether the rule does anything to a call as a
// whole (as opposed to only rewriting readiness).
func (r Rule) injectsCallFault() bool {
	return r.Latency > 0 || r.Code != "" || r.Hang > 0 || r.HangUntilDeadline
}

// shapesAnswers reports whether the rule rewrites the size or creation time
// in answers of this method (the calls that answer snapshots only).
func (r Rule) shapesAnswers(full string) bool {
	if r.SizeBytes == 0 && !r.NoCreationTime {
		return false
	}
	switch shortMethod(full) {
	case "CreateSnapshot", "ListSnapshots", "CreateVolumeGroupSnapshot", "GetVolumeGroupSnapshot":
		return r.matchesMethod(full)
	}
	return false
}

// notReadyApplies reports whether the rule's NotReady is about this method.
func (r Rule) notReadyApplies(full string) bool {
	if r.NotReady == 0 && r.ReadyAfter == 0 {
		return false
	}
	switch short := shortMethod(full); short {
	case "CreateSnapshot", "ListSnapshots", "CreateVolumeGroupSnapshot", "GetVolumeGroupSnapshot":
		return r.matchesMethod(full)
	case "Probe":
		return r.Method == short || r.Method == full
	}
	return false
}

// readyDelay is how long after its first answer id stays not ready.
func (r Rule) readyDelay(id string) time.Duration {
	lo, hi := time.Duration(r.ReadyAfter), time.Duration(r.ReadyAfterMax)
	if hi <= lo {
		return lo
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return lo + time.Duration(h.Sum64()%uint64(hi-lo+1))
}
