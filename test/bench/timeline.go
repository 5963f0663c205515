package main

import (
	"slices"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
)

// Stages of a snapshot's trip, as the benchmark's informers see them. They
// show where the time goes (which hop dominates), for every system alike.
const (
	stageFinalizer     = "VolumeSnapshot has its finalizer"
	stageContent       = "content created"
	stageContentReady  = "content readyToUse"
	stageSnapshotReady = "VolumeSnapshot readyToUse"
	stageDeleting      = "content has deletionTimestamp"
	stageContentGone   = "content gone"
	stageSnapshotGone  = "VolumeSnapshot gone"
)

var createStages = []string{stageFinalizer, stageContent, stageContentReady, stageSnapshotReady}
var deleteStages = []string{stageDeleting, stageContentGone, stageSnapshotGone}

const snapshotAsSourceFinalizer = "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection"

// timeline records when each snapshot first reached each stage.
type timeline struct {
	mu    sync.Mutex
	first map[string]map[string]time.Time // stage -> snapshot name -> time
}

func newTimeline() *timeline { return &timeline{first: map[string]map[string]time.Time{}} }

func (t *timeline) mark(stage, name string) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.first[stage]
	if m == nil {
		m = map[string]time.Time{}
		t.first[stage] = m
	}
	if _, ok := m[name]; !ok {
		m[name] = now
	}
}

func (t *timeline) observeSnapshot(vs *snapv1.VolumeSnapshot, gone bool) {
	switch {
	case gone:
		t.mark(stageSnapshotGone, vs.Name)
		return
	case vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse:
		t.mark(stageSnapshotReady, vs.Name)
	}
	if slices.Contains(vs.Finalizers, snapshotAsSourceFinalizer) {
		t.mark(stageFinalizer, vs.Name)
	}
}

func (t *timeline) observeContent(c *snapv1.VolumeSnapshotContent, gone bool) {
	name := c.Spec.VolumeSnapshotRef.Name
	if gone {
		t.mark(stageContentGone, name)
		return
	}
	t.mark(stageContent, name)
	if c.Status != nil && c.Status.ReadyToUse != nil && *c.Status.ReadyToUse {
		t.mark(stageContentReady, name)
	}
	if c.DeletionTimestamp != nil {
		t.mark(stageDeleting, name)
	}
}

// at is when the snapshot name first reached stage.
func (t *timeline) at(stage, name string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.first[stage][name]
	return at, ok
}

// stageTimes is the median and the last time a stage was reached, from start.
type stageTimes struct {
	Count     int
	P50, Last time.Duration
}

// summary returns the times of stages reached after start.
func (t *timeline) summary(start time.Time, stages []string) map[string]stageTimes {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]stageTimes{}
	for _, s := range stages {
		var ds []time.Duration
		for _, at := range t.first[s] {
			if !at.Before(start) {
				ds = append(ds, at.Sub(start))
			}
		}
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		out[s] = stageTimes{Count: len(ds), P50: ds[len(ds)/2], Last: ds[len(ds)-1]}
	}
	return out
}
