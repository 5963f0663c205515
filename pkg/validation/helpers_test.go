package validation

import (
	"strings"
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// lookupOf builds a StaticLookup from test objects.
func lookupOf(t *testing.T, objs ...any) *StaticLookup {
	t.Helper()
	l := &StaticLookup{}
	if err := l.Add(objs...); err != nil {
		t.Fatal(err)
	}
	return l
}

// expect checks a verdict: wantErr "" means admitted, otherwise the denial
// message must contain it; wantWarning "" means no warning is expected.
func expect(t *testing.T, errs field.ErrorList, warnings []string, wantErr, wantWarning string) {
	t.Helper()
	msg := Message(errs)
	switch {
	case wantErr == "" && len(errs) > 0:
		t.Errorf("denied, want admitted:\n%s", msg)
	case wantErr != "" && len(errs) == 0:
		t.Errorf("admitted, want denial containing %q (warnings: %q)", wantErr, warnings)
	case wantErr != "" && !strings.Contains(msg, wantErr):
		t.Errorf("denial\n%s\ndoes not contain %q", msg, wantErr)
	}
	joined := strings.Join(warnings, "\n")
	switch {
	case wantWarning == "" && len(warnings) > 0:
		t.Errorf("unexpected warnings: %q", warnings)
	case wantWarning != "" && !strings.Contains(joined, wantWarning):
		t.Errorf("warnings %q do not contain %q", warnings, wantWarning)
	}
}

// verdictCase is a row of the tables that run one object through one of
// Validator's kind methods: the class, content and snapshot tests of both
// the single and the group kinds share it and runVerdicts.
type verdictCase[T comparable] struct {
	// existing are the objects the lookup holds besides the test's world.
	existing []any
	// fresh is what the lookup's fresh read of the class kind T returns.
	fresh               []T
	lookupErr, freshErr error
	// old set makes the case an update, otherwise it is a create.
	obj, old             T
	wantErr, wantWarning string
}

// runVerdicts runs every case as a subtest: a lookup of world (may be nil)
// and the case's objects, validate with Create or Update, and expect on
// the verdict.
func runVerdicts[T comparable](t *testing.T, world func() []any, validate func(Validator, Operation, T, T) (field.ErrorList, []string), tests map[string]verdictCase[T]) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var objs []any
			if world != nil {
				objs = append(objs, world()...)
			}
			l := lookupOf(t, append(objs, tc.existing...)...)
			l.Err, l.FreshErr = tc.lookupErr, tc.freshErr
			switch fresh := any(tc.fresh).(type) {
			case []*snapv1.VolumeSnapshotClass:
				l.FreshClasses = fresh
			case []*groupv1.VolumeGroupSnapshotClass:
				l.FreshGroupClasses = fresh
			default:
				if tc.fresh != nil {
					t.Fatalf("the lookup has no fresh read of %T", tc.fresh)
				}
			}
			op := Create
			var none T
			if tc.old != none {
				op = Update
			}
			errs, warnings := validate(Validator{Lookup: l}, op, tc.obj, tc.old)
			expect(t, errs, warnings, tc.wantErr, tc.wantWarning)
		})
	}
}
