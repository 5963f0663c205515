package validation

import (
	"errors"
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

// The group class rules are the class rules (one code path, class.go):
// these cases show the group kind gets them with its own kind, annotation
// and lookups, and never mixes with VolumeSnapshotClasses.
func TestGroupClass(t *testing.T) {
	group := NewGroupClass("group-standard", WithDriver(ebs), AsGroupDefault())
	tests := map[string]verdictCase[*groupv1.VolumeGroupSnapshotClass]{
		"a plain group class is admitted": {
			obj: NewGroupClass("group-fast"),
		},
		"a second default group class for the same driver is denied naming field, rule and fix": {
			existing: []any{group},
			obj:      NewGroupClass("group-fast", WithDriver(ebs), AsGroupDefault()),
			wantErr:  `VolumeGroupSnapshotClass "group-fast" cannot be the default for driver "ebs.csi.aws.com": "group-standard" already is; remove the annotation from "group-standard" first (field metadata.annotations[groupsnapshot.storage.kubernetes.io/is-default-class])`,
		},
		"a default group class for another driver is admitted": {
			existing: []any{group},
			obj:      NewGroupClass("group-fast", AsGroupDefault()),
		},
		"a default VolumeSnapshotClass of the driver does not count": {
			existing: []any{NewClass("standard", WithDriver(ebs), AsDefault())},
			obj:      NewGroupClass("group-fast", WithDriver(ebs), AsGroupDefault()),
		},
		"the single-snapshot annotation does not make a group class default": {
			existing: []any{NewGroupClass("group-standard", WithDriver(ebs), AsDefault())},
			obj:      NewGroupClass("group-fast", WithDriver(ebs), AsGroupDefault()),
		},
		"a default group class being deleted does not count": {
			existing: []any{NewGroupClass("group-standard", WithDriver(ebs), AsGroupDefault(), Deleting())},
			obj:      NewGroupClass("group-fast", WithDriver(ebs), AsGroupDefault()),
		},
		"re-applying an unchanged default is admitted beside another default": {
			existing: []any{group, NewGroupClass("group-fast", WithDriver(ebs), AsGroupDefault())},
			obj:      NewGroupClass("group-fast", WithDriver(ebs), AsGroupDefault()),
			old:      NewGroupClass("group-fast", WithDriver(ebs), AsGroupDefault()),
		},
		"an update that newly sets the annotation is denied": {
			existing: []any{group},
			obj:      NewGroupClass("group-fast", WithDriver(ebs), AsGroupDefault()),
			old:      NewGroupClass("group-fast", WithDriver(ebs)),
			wantErr:  `"group-standard" already is`,
		},
		"a default created a moment ago is seen through the fresh read": {
			fresh:   []*groupv1.VolumeGroupSnapshotClass{group},
			obj:     NewGroupClass("group-fast", WithDriver(ebs), AsGroupDefault()),
			wantErr: `"group-standard" already is`,
		},
		"a failing fresh read falls back to the cache with a warning": {
			existing:    []any{group},
			freshErr:    errors.New("connection refused"),
			obj:         NewGroupClass("group-fast", WithDriver(ebs), AsGroupDefault()),
			wantErr:     `"group-standard" already is`,
			wantWarning: "could not read VolumeGroupSnapshotClasses from the API server",
		},
		"a failing cache and API server deny with a retry hint, as for VolumeSnapshotClass": {
			lookupErr:   errors.New("cache broken"),
			freshErr:    errors.New("connection refused"),
			obj:         NewGroupClass("group-fast", AsGroupDefault()),
			wantErr:     "could not read VolumeGroupSnapshotClasses to check this rule",
			wantWarning: "checked the default class against the cache",
		},
		"a default value other than true or false is a warning naming the group annotation": {
			obj:         NewGroupClass("group-fast", WithAnnotation(snapshot.AnnGroupDefaultClass, "yes")),
			wantWarning: `VolumeGroupSnapshotClass "group-fast" has groupsnapshot.storage.kubernetes.io/is-default-class: "yes"`,
		},
		"an invalid driver name is denied": {
			obj:     NewGroupClass("group-fast", WithDriver("my driver!")),
			wantErr: `VolumeGroupSnapshotClass "group-fast" has an invalid driver "my driver!"`,
		},
		"a deletion policy outside the enum is denied": {
			obj:     NewGroupClass("group-fast", WithPolicy("Keep")),
			wantErr: `has deletionPolicy "Keep": it must be "Delete" or "Retain"; set one of them (field deletionPolicy)`,
		},
		"a misspelt reserved parameter is denied with a suggestion": {
			obj:     NewGroupClass("group-fast", WithParam("csi.storage.k8s.io/group-snapshoter-secret-name", "s")),
			wantErr: `did you mean "csi.storage.k8s.io/group-snapshotter-secret-name"?`,
		},
		"group secret templates are admitted": {
			obj: NewGroupClass("group-fast",
				WithParam(snapshot.ParamGroupSecretName, "${volumegroupsnapshot.name}-creds"),
				WithParam(snapshot.ParamGroupSecretNamespace, "${volumegroupsnapshot.namespace}")),
		},
		"a changed driver of a group class is not looked up for use: the CRD refuses the change": {
			existing: []any{NewContent("c1", WithClass("group-fast"))},
			obj:      NewGroupClass("group-fast", WithDriver(ebs)),
			old:      NewGroupClass("group-fast"),
		},
		"a group class being deleted is admitted whatever it changes": {
			existing: []any{group},
			obj:      NewGroupClass("group-fast", WithDriver(ebs), AsGroupDefault(), Deleting()),
			old:      NewGroupClass("group-fast", WithDriver(ebs), Deleting()),
		},
	}
	runVerdicts(t, nil, Validator.GroupClass, tests)
}

// A VolumeSnapshotClass never conflicts with a default group class.
func TestClassIgnoresGroupClasses(t *testing.T) {
	l := lookupOf(t, NewGroupClass("group-standard", WithDriver(ebs), AsGroupDefault(), AsDefault()))
	errs, warnings := Validator{Lookup: l}.Class(Create, NewClass("fast", WithDriver(ebs), AsDefault()), nil)
	expect(t, errs, warnings, "", "")
}
