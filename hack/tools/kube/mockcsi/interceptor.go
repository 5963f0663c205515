package main

import (
	"context"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/klog/v2"
)

// injector wraps the mock service (and our groupServer): it serializes
// calls, injects faults and counts calls. The e2e mock service is not safe under concurrent calls
// (DeleteSnapshot finds an index, then removes that index in a second step,
// so two concurrent deletes can remove the wrong entry and a leak check
// would lie), hence every call into it holds serial.
type injector struct {
	// serial is a one-slot semaphore rather than a mutex so that a caller
	// whose deadline passes while queued gives up instead of waiting.
	serial chan struct{}
	// stop is closed at shutdown to release hanging calls.
	stop <-chan struct{}

	mu      sync.Mutex // guards the fields below; never held across a wait
	faults  Faults
	rules   []*ruleState
	version int64
	source  string
	// names maps snapshot ids (and group snapshot ids) to the names they
	// were created with, so that a Match glob on a name also catches
	// DeleteSnapshot(id), ListSnapshots(id) and the group calls by id.
	names map[string]string
	// builtin holds the ids the mock starts with ("Mock Snapshot 1..3").
	builtin map[string]bool
	calls   map[string]map[string]int64
	// log is the call log (GET /calllog), at most callLogMax entries.
	log callLog
	// hidden are capabilities removed from ControllerGetCapabilities and
	// GroupControllerGetCapabilities (--hide-capabilities); set before
	// serving.
	hidden hiddenCaps
	// groups are the volume group snapshots (groups.go).
	groups groupStore
	// volumeSizes are per-volume snapshot sizes in bytes (PUT /volume-sizes,
	// --volume-sizes): every answer about a snapshot of such a volume
	// reports this size.
	volumeSizes map[string]int64
	// data keeps volumes and snapshots on disk (--data-dir, data.go); nil
	// without. Set before serving.
	data *dataStore
	// nodeID replaces the node id of NodeGetInfo answers (--node-id) unless
	// empty. Set before serving.
	nodeID string
	// memberDelete lets DeleteSnapshot delete a member of a live group
	// (--allow-member-delete). Set before serving.
	memberDelete bool
}

type ruleState struct {
	Rule
	code     codes.Code
	fired    int
	notReady map[string]int       // snapshot or group id ("" for Probe) -> not-ready answers given
	seen     map[string]time.Time // id -> first answer about it (ReadyAfter)
}

func newInjector(stop <-chan struct{}) *injector {
	return &injector{
		serial:  make(chan struct{}, 1),
		stop:    stop,
		names:   map[string]string{},
		builtin: map[string]bool{},
		calls:   map[string]map[string]int64{},
		log:     callLog{max: callLogMax},
		groups:  newGroupStore(),
		// Per-volume sizes: PUT /volume-sizes, --volume-sizes.
		volumeSizes: map[string]int64{},
	}
}

// setFaults installs f (already validated) and resets all rule counters.
func (in *injector) setFaults(f Faults, source string) int64 {
	states := make([]*ruleState, 0, len(f.Rules))
	rules := make([]Rule, len(f.Rules))
	for i, r := range f.Rules {
		st := &ruleState{Rule: r, notReady: map[string]int{}, seen: map[string]time.Time{}}
		if r.Code != "" {
			st.code, _ = parseCode(r.Code) // validated by ParseFaults
			r.Code = st.code.String()      // GET /faults shows the canonical name
			st.Rule.Code = r.Code
		}
		rules[i] = r
		states = append(states, st)
	}
	f.Rules = rules
	in.mu.Lock()
	defer in.mu.Unlock()
	in.faults, in.rules, in.source = f, states, source
	in.version++
	klog.InfoS("Faults installed", "source", source, "version", in.version, "rules", len(f.Rules))
	return in.version
}

// callPlan is what the matching rules do to one call.
type callPlan struct {
	latency   time.Duration
	err       error
	afterCall bool
	hang      time.Duration
	hangUntil bool // until the caller's deadline
}

// plan evaluates the rules for a call about snapshot name/id and consumes
// their Times budget.
func (in *injector) plan(method, name, id string) callPlan {
	in.mu.Lock()
	defer in.mu.Unlock()
	if name == "" && id != "" {
		name = in.names[id]
	}
	var p callPlan
	for _, r := range in.rules {
		if !r.injectsCallFault() || !r.matchesMethod(method) || !r.matchesSnapshot(name, id) {
			continue
		}
		if r.Times > 0 && r.fired >= r.Times {
			continue
		}
		r.fired++
		p.latency += time.Duration(r.Latency)
		if r.Code != "" && p.err == nil {
			msg := r.Message
			if msg == "" {
				msg = "injected fault"
			}
			p.err, p.afterCall = status.Error(r.code, msg), r.AfterCall
		}
		p.hang = max(p.hang, time.Duration(r.Hang))
		p.hangUntil = p.hangUntil || r.HangUntilDeadline
	}
	return p
}

// notReady reports whether the response about snapshot (or group) id should
// say "not ready"; consume counts this response against the rules' NotReady
// budget.
func (in *injector) notReady(method, id string, consume bool) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	name := in.names[id]
	result := false
	for _, r := range in.rules {
		if !r.notReadyApplies(method) || !r.matchesSnapshot(name, id) {
			continue
		}
		if r.notReady[id] < r.NotReady {
			result = true
			if consume {
				r.notReady[id]++
			}
		}
		if r.ReadyAfter > 0 {
			first, ok := r.seen[id]
			if !ok {
				first = time.Now()
				r.seen[id] = first
			}
			if time.Since(first) < r.readyDelay(id) {
				result = true
			}
		}
	}
	return result
}

// shape applies SizeBytes and NoCreationTime rules, per-volume sizes and
// the group snapshot id of group members to a snapshot in an answer (a
// private copy).
func (in *injector) shape(method string, s *csi.Snapshot) {
	in.shapeAs(method, "", s.GetSnapshotId(), s)
}

// shapeAs is shape with the rules matched against name/id (a group's in
// group answers; name "" means the name id was created with). It reports
// whether a NoCreationTime rule applied.
func (in *injector) shapeAs(method, name, id string, s *csi.Snapshot) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if name == "" {
		name = in.names[id]
	}
	var size int64
	omit := false
	for _, r := range in.rules {
		if !r.shapesAnswers(method) || !r.matchesSnapshot(name, id) {
			continue
		}
		if r.SizeBytes > 0 && size == 0 {
			size = r.SizeBytes
		}
		omit = omit || r.NoCreationTime
	}
	if omit {
		s.CreationTime = nil
		s.SizeBytes = 0
	}
	if size > 0 {
		s.SizeBytes = size
	}
	// A volume's own size is the backend's truth: it wins over the rules.
	if v := in.volumeSizes[s.GetSourceVolumeId()]; v > 0 {
		s.SizeBytes = v
	}
	// The e2e mock knows nothing about groups.
	if gid := in.groups.memberOf[s.GetSnapshotId()]; gid != "" && s.GetGroupSnapshotId() == "" {
		s.GroupSnapshotId = gid
	}
	return omit
}

func (in *injector) count(method string, code codes.Code) {
	in.mu.Lock()
	defer in.mu.Unlock()
	byCode := in.calls[method]
	if byCode == nil {
		byCode = map[string]int64{}
		in.calls[method] = byCode
	}
	byCode[code.String()]++
}

// wait blocks for d (d < 0: until ctx ends); it fails when ctx ends first or
// the driver shuts down.
func (in *injector) wait(ctx context.Context, d time.Duration) error {
	var timer <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-timer:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-in.stop:
		return status.Error(codes.Unavailable, "mock CSI driver is shutting down")
	}
}

// lockMock takes the serialization slot, or gives up with ctx.
func (in *injector) lockMock(ctx context.Context) error {
	select {
	case in.serial <- struct{}{}:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-in.stop:
		return status.Error(codes.Unavailable, "mock CSI driver is shutting down")
	}
}

func (in *injector) unlockMock() { <-in.serial }

// Unary is the gRPC unary server interceptor.
func (in *injector) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	_, id := snapshotOf(req)
	known := ""
	if id != "" {
		known = in.nameOf(id)
	}
	resp, err := in.serve(ctx, req, info.FullMethod, handler)
	code := status.Code(err)
	in.count(info.FullMethod, code)
	in.record(info.FullMethod, req, resp, code, known)
	klog.V(4).InfoS("CSI call", "method", info.FullMethod, "code", code.String())
	return resp, err
}

// unknownService answers calls to services the mock does not implement
// (such as csi.v1.GroupController with --no-group-controller) with
// Unimplemented, like gRPC would, but
// counts them, so tests can see that a client asked.
func (in *injector) unknownService(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	in.count(method, codes.Unimplemented)
	in.record(method, nil, nil, codes.Unimplemented, "")
	return status.Errorf(codes.Unimplemented, "unknown service or method %s", method)
}

func (in *injector) serve(ctx context.Context, req any, method string, handler grpc.UnaryHandler) (any, error) {
	name, id := snapshotOf(req)
	p := in.plan(method, name, id)
	if p.latency > 0 {
		if err := in.wait(ctx, p.latency); err != nil {
			return nil, err
		}
	}
	if p.err != nil && !p.afterCall {
		return nil, p.err
	}
	resp, err := in.callMock(ctx, req, handler)
	if err != nil {
		return nil, err
	}
	in.rewriteResponse(method, req, resp)
	if p.err != nil {
		return nil, p.err
	}
	if isCreate(req) && (p.hang > 0 || p.hangUntil) {
		d := p.hang
		if p.hangUntil {
			d = -1
		}
		klog.V(2).InfoS("Holding the answer after the snapshot was created", "method", method, "name", name, "hang", d)
		if err := in.wait(ctx, d); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// callMock runs the mock handler under the serialization slot and returns a
// private copy of its response: the mock returns pointers into its own cache
// and the copy is what may be rewritten and marshalled after unlocking.
// A DeleteSnapshot of a member of a live group is refused here, under the
// slot, so that it cannot race with the group's own calls. The data on
// disk (--data-dir) follows the mock's answer under the slot too, so that
// a copy and a delete of the same volume or snapshot never overlap.
func (in *injector) callMock(ctx context.Context, req any, handler grpc.UnaryHandler) (any, error) {
	if err := in.lockMock(ctx); err != nil {
		return nil, err
	}
	defer in.unlockMock()
	if err := in.refuseMemberDelete(req); err != nil {
		return nil, err
	}
	if err := in.beforeMockCall(req); err != nil {
		return nil, err
	}
	resp, err := handler(ctx, req)
	if err != nil {
		return nil, err
	}
	if m, ok := resp.(proto.Message); ok {
		resp = proto.Clone(m)
	}
	if err := in.afterMockCall(ctx, req, resp); err != nil {
		return nil, err
	}
	in.learnNames(req, resp)
	return resp, nil
}

// learnNames keeps the id -> name map current.
func (in *injector) learnNames(req, resp any) {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch r := req.(type) {
	case *csi.CreateSnapshotRequest:
		if s := resp.(*csi.CreateSnapshotResponse).GetSnapshot(); s != nil {
			in.names[s.GetSnapshotId()] = r.GetName()
		}
	case *csi.DeleteSnapshotRequest:
		delete(in.names, r.GetSnapshotId())
	}
}

// rewriteResponse applies NotReady, SizeBytes and NoCreationTime rules,
// per-volume sizes, group ids of members, hidden capabilities and
// --node-id to resp, a private clone.
func (in *injector) rewriteResponse(method string, req, resp any) {
	switch r := resp.(type) {
	case *csi.CreateSnapshotResponse:
		if s := r.GetSnapshot(); s != nil {
			if in.notReady(method, s.GetSnapshotId(), true) {
				s.ReadyToUse = false
			}
			in.shape(method, s)
		}
	case *csi.ListSnapshotsResponse:
		filtered := req.(*csi.ListSnapshotsRequest).GetSnapshotId() != ""
		for _, e := range r.GetEntries() {
			if s := e.GetSnapshot(); s != nil {
				if in.notReady(method, s.GetSnapshotId(), filtered) {
					s.ReadyToUse = false
				}
				in.shape(method, s)
			}
		}
	case *csi.CreateVolumeGroupSnapshotResponse:
		in.shapeGroup(method, r.GetGroupSnapshot())
	case *csi.GetVolumeGroupSnapshotResponse:
		in.shapeGroup(method, r.GetGroupSnapshot())
	case *csi.ControllerGetCapabilitiesResponse:
		kept := r.Capabilities[:0]
		for _, c := range r.GetCapabilities() {
			if !in.hidden.ctrl[c.GetRpc().GetType()] {
				kept = append(kept, c)
			}
		}
		r.Capabilities = kept
	case *csi.GroupControllerGetCapabilitiesResponse:
		kept := r.Capabilities[:0]
		for _, c := range r.GetCapabilities() {
			if !in.hidden.group[c.GetRpc().GetType()] {
				kept = append(kept, c)
			}
		}
		r.Capabilities = kept
	case *csi.ProbeResponse:
		if in.notReady(method, "", true) {
			r.Ready = wrapperspb.Bool(false)
		}
	case *csi.NodeGetInfoResponse:
		// The mock says its driver name; the kubelet stores the id in
		// CSINode, where it should name the node.
		if in.nodeID != "" {
			r.NodeId = in.nodeID
		}
	}
}

// snapshotOf returns the snapshot (or group snapshot) name or id a request
// is about.
func snapshotOf(req any) (name, id string) {
	switch r := req.(type) {
	case *csi.CreateSnapshotRequest:
		return r.GetName(), ""
	case *csi.DeleteSnapshotRequest:
		return "", r.GetSnapshotId()
	case *csi.ListSnapshotsRequest:
		return "", r.GetSnapshotId()
	case *csi.CreateVolumeRequest:
		// A restore is about the snapshot it restores from, so that a
		// rule can match the restores of one snapshot.
		return "", r.GetVolumeContentSource().GetSnapshot().GetSnapshotId()
	case *csi.CreateVolumeGroupSnapshotRequest:
		return r.GetName(), ""
	case *csi.GetVolumeGroupSnapshotRequest:
		return "", r.GetGroupSnapshotId()
	case *csi.DeleteVolumeGroupSnapshotRequest:
		return "", r.GetGroupSnapshotId()
	}
	return "", ""
}

// isCreate reports whether req cuts snapshots (the calls Hang applies to).
func isCreate(req any) bool {
	switch req.(type) {
	case *csi.CreateSnapshotRequest, *csi.CreateVolumeGroupSnapshotRequest:
		return true
	}
	return false
}
