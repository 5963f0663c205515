package validation

import (
	"errors"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

const ebs = "ebs.csi.aws.com"

func TestClass(t *testing.T) {
	standard := NewClass("standard", WithDriver(ebs), AsDefault())
	tests := map[string]verdictCase[*snapv1.VolumeSnapshotClass]{
		"a plain class is admitted": {
			obj: NewClass("fast"),
		},
		"a second default class for the same driver is denied with the issue's message": {
			existing: []any{standard},
			obj:      NewClass("fast", WithDriver(ebs), AsDefault()),
			wantErr:  `VolumeSnapshotClass "fast" cannot be the default for driver "ebs.csi.aws.com": "standard" already is; remove the annotation from "standard" first (field metadata.annotations[snapshot.storage.kubernetes.io/is-default-class])`,
		},
		"a default class for another driver is admitted": {
			existing: []any{standard},
			obj:      NewClass("fast", AsDefault()),
		},
		"a default that is being deleted does not count": {
			existing: []any{NewClass("standard", WithDriver(ebs), AsDefault(), Deleting())},
			obj:      NewClass("fast", WithDriver(ebs), AsDefault()),
		},
		"two existing defaults are both named": {
			existing: []any{standard, NewClass("legacy", WithDriver(ebs), AsDefault())},
			obj:      NewClass("fast", WithDriver(ebs), AsDefault()),
			wantErr:  `"legacy", "standard" already are`,
		},
		"re-applying an unchanged default class is admitted even beside another default": {
			existing: []any{standard, NewClass("fast", WithDriver(ebs), AsDefault())},
			obj:      NewClass("fast", WithDriver(ebs), AsDefault()),
			old:      NewClass("fast", WithDriver(ebs), AsDefault()),
		},
		"an update that newly sets the annotation is denied": {
			existing: []any{standard},
			obj:      NewClass("fast", WithDriver(ebs), AsDefault()),
			old:      NewClass("fast", WithDriver(ebs)),
			wantErr:  `cannot be the default for driver "ebs.csi.aws.com"`,
		},
		"an update that moves a default class to a driver that has one is denied": {
			existing: []any{standard},
			obj:      NewClass("fast", WithDriver(ebs), AsDefault()),
			old:      NewClass("fast", AsDefault()),
			wantErr:  `"standard" already is`,
		},
		"a default created a moment ago is seen through the fresh read": {
			// The cache is empty; the fresh list is what knows "standard".
			fresh:   []*snapv1.VolumeSnapshotClass{standard},
			obj:     NewClass("fast", WithDriver(ebs), AsDefault()),
			wantErr: `"standard" already is`,
		},
		"a failing fresh read falls back to the cache with a warning": {
			existing:    []any{standard},
			freshErr:    errors.New("connection refused"),
			obj:         NewClass("fast", WithDriver(ebs), AsDefault()),
			wantErr:     `"standard" already is`,
			wantWarning: "checked the default class against the cache",
		},
		"a failing cache and API server deny with a retry hint": {
			lookupErr:   errors.New("cache broken"),
			freshErr:    errors.New("connection refused"),
			obj:         NewClass("fast", AsDefault()),
			wantErr:     "retry shortly",
			wantWarning: "could not read VolumeSnapshotClasses from the API server",
		},
		"a default value other than true or false is a warning": {
			obj:         NewClass("fast", WithAnnotation(snapshot.AnnDefaultClass, "yes")),
			wantWarning: `"yes", which is not "true", so it is not a default class`,
		},
		"an unchanged odd default value is not warned again on update": {
			obj: NewClass("fast", WithAnnotation(snapshot.AnnDefaultClass, "yes"), WithLabel("a", "b")),
			old: NewClass("fast", WithAnnotation(snapshot.AnnDefaultClass, "yes")),
		},
		"a misspelt reserved parameter is denied with a suggestion": {
			obj:     NewClass("fast", WithParam("csi.storage.k8s.io/snapshoter-secret-name", "s")),
			wantErr: `did you mean "csi.storage.k8s.io/snapshotter-secret-name"?`,
		},
		"an unknown reserved parameter lists the known keys": {
			obj:     NewClass("fast", WithParam("csi.storage.k8s.io/fstype", "ext4")),
			wantErr: `use one of "csi.storage.k8s.io/snapshotter-secret-name"`,
		},
		"driver parameters are not checked": {
			obj: NewClass("fast", WithParam("type", "gp3"), WithParam("csi.example.com/tier", "x")),
		},
		"a secret name without its namespace is denied": {
			obj:     NewClass("fast", WithParam(snapshot.ParamSecretName, "creds")),
			wantErr: `sets parameter "csi.storage.k8s.io/snapshotter-secret-name" but not "csi.storage.k8s.io/snapshotter-secret-namespace"`,
		},
		"a secret namespace without its name is denied": {
			obj:     NewClass("fast", WithParam(snapshot.ParamListSecretNamespace, "kube-system")),
			wantErr: `add "csi.storage.k8s.io/snapshotter-list-secret-name"`,
		},
		"an empty secret namespace is denied": {
			obj:     NewClass("fast", WithParam(snapshot.ParamSecretName, "creds"), WithParam(snapshot.ParamSecretNamespace, "")),
			wantErr: `has an empty parameter "csi.storage.k8s.io/snapshotter-secret-namespace"`,
		},
		"known templates are admitted": {
			obj: NewClass("fast",
				WithParam(snapshot.ParamSecretName, "${volumesnapshot.name}-creds"),
				WithParam(snapshot.ParamSecretNamespace, "${volumesnapshot.namespace}"),
				WithParam(snapshot.ParamGroupSecretName, "${volumegroupsnapshotcontent.name}"),
				WithParam(snapshot.ParamGroupSecretNamespace, "${volumegroupsnapshot.namespace}")),
		},
		"an unknown template is denied": {
			obj: NewClass("fast",
				WithParam(snapshot.ParamSecretName, "${pvc.name}"),
				WithParam(snapshot.ParamSecretNamespace, "default")),
			wantErr: `uses template ${pvc.name}, which is not known for a secret name`,
		},
		"the snapshot name is not a template for a namespace": {
			obj: NewClass("fast",
				WithParam(snapshot.ParamSecretName, "creds"),
				WithParam(snapshot.ParamSecretNamespace, "${volumesnapshot.name}")),
			wantErr: `uses template ${volumesnapshot.name}, which is not known for a namespace`,
		},
		"group templates are not known for single snapshots": {
			obj: NewClass("fast",
				WithParam(snapshot.ParamSecretName, "${volumegroupsnapshot.name}"),
				WithParam(snapshot.ParamSecretNamespace, "default")),
			wantErr: `uses template ${volumegroupsnapshot.name}`,
		},
		"an unterminated template is denied": {
			obj: NewClass("fast",
				WithParam(snapshot.ParamSecretName, "${volumesnapshot.name"),
				WithParam(snapshot.ParamSecretNamespace, "default")),
			wantErr: `unterminated template "${volumesnapshot.name"; close it with "}"`,
		},
		"an invalid literal secret name is denied": {
			obj: NewClass("fast",
				WithParam(snapshot.ParamSecretName, "My_Creds"),
				WithParam(snapshot.ParamSecretNamespace, "default")),
			wantErr: `value "My_Creds" is not a valid secret name`,
		},
		"a namespace with a dot is denied": {
			obj: NewClass("fast",
				WithParam(snapshot.ParamSecretName, "creds"),
				WithParam(snapshot.ParamSecretNamespace, "kube.system")),
			wantErr: `value "kube.system" is not a valid namespace`,
		},
		"literal text around a template must still form a name": {
			obj: NewClass("fast",
				WithParam(snapshot.ParamSecretName, "${volumesnapshot.name}_Creds"),
				WithParam(snapshot.ParamSecretNamespace, "default")),
			wantErr: "once its templates are resolved",
		},
		"an invalid driver name is denied": {
			obj:     NewClass("fast", WithDriver("my driver!")),
			wantErr: `has an invalid driver "my driver!"`,
		},
		"an upper-case driver name is admitted as Kubernetes does": {
			obj: NewClass("fast", WithDriver("Disk.CSI.Example.com")),
		},
		"a driver name longer than 63 characters is denied": {
			obj:     NewClass("fast", WithDriver("a123456789a123456789a123456789a123456789a123456789a123456789.com")),
			wantErr: "at most 63 are allowed",
		},
		"a deletion policy outside the enum is denied": {
			obj:     NewClass("fast", WithPolicy("Keep")),
			wantErr: `has deletionPolicy "Keep": it must be "Delete" or "Retain"`,
		},
		"a legacy class with a bad parameter can still change its labels": {
			obj: NewClass("fast", WithParam("csi.storage.k8s.io/fstype", "ext4"), WithLabel("team", "a")),
			old: NewClass("fast", WithParam("csi.storage.k8s.io/fstype", "ext4")),
		},
		"a legacy class with a bad parameter can change another parameter": {
			obj: NewClass("fast", WithParam("csi.storage.k8s.io/fstype", "ext4"), WithParam("type", "gp3")),
			old: NewClass("fast", WithParam("csi.storage.k8s.io/fstype", "ext4")),
		},
		"an update that adds a bad parameter is denied": {
			obj:     NewClass("fast", WithParam("csi.storage.k8s.io/fstype", "ext4")),
			old:     NewClass("fast"),
			wantErr: `unknown parameter "csi.storage.k8s.io/fstype"`,
		},
		"a class being deleted is admitted whatever it changes": {
			existing: []any{standard},
			obj:      NewClass("fast", WithDriver(ebs), AsDefault(), Deleting()),
			old:      NewClass("fast", WithDriver(ebs), Deleting()),
		},
		"changing the driver of a class in use is a warning": {
			existing:    []any{NewContent("c1", WithClass("fast"))},
			obj:         NewClass("fast", WithDriver(ebs)),
			old:         NewClass("fast"),
			wantWarning: `is in use and changes driver from "hostpath.csi.k8s.io" to "ebs.csi.aws.com"`,
		},
		"changing the deletion policy of a class in use is a warning": {
			existing:    []any{NewContent("c1", WithClass("fast"))},
			obj:         NewClass("fast", WithPolicy(snapv1.VolumeSnapshotContentRetain)),
			old:         NewClass("fast"),
			wantWarning: "existing VolumeSnapshotContents keep Delete",
		},
		"changing the driver of an unused class is silent": {
			obj: NewClass("fast", WithDriver(ebs)),
			old: NewClass("fast"),
		},
	}
	runVerdicts(t, nil, Validator.Class, tests)
}
