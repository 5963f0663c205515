package validation

import (
	"errors"
	"fmt"
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

const ebs = "ebs.csi.aws.com"

// classKind is one of the two class kinds as the class table sees it. The
// class rules are written once (class.go) for both kinds, so their cases
// are too: each case runs against both, with the kind's own names,
// annotation and lookups, so a case also shows the kinds never mix.
type classKind[T comparable] struct {
	kind string // VolumeSnapshotClass or VolumeGroupSnapshotClass
	// prefix starts the kind's class names, so a message that names a
	// class of the wrong kind fails the case.
	prefix     string
	newClass   func(string, ...Opt) T
	asDefault  func() Opt
	annotation string
	// otherAnnotation is the is-default-class annotation of the other
	// kind, and otherDefault a default of the other kind for ebs: neither
	// makes a default of this kind.
	otherAnnotation func() Opt
	otherDefault    any
	// tracksUse tells whether the kind warns when a class in use changes;
	// group classes are never looked up, their CRD refuses such changes.
	tracksUse bool
	validate  func(Validator, Operation, T, T) (field.ErrorList, []string)
}

var singleClassKind = classKind[*snapv1.VolumeSnapshotClass]{
	kind: "VolumeSnapshotClass", newClass: NewClass, asDefault: AsDefault,
	annotation:      snapshot.AnnDefaultClass,
	otherAnnotation: AsGroupDefault,
	otherDefault:    NewGroupClass("group-standard", WithDriver(ebs), AsGroupDefault()),
	tracksUse:       true,
	validate:        Validator.Class,
}

var groupClassKind = classKind[*groupv1.VolumeGroupSnapshotClass]{
	kind: "VolumeGroupSnapshotClass", prefix: "group-", newClass: NewGroupClass, asDefault: AsGroupDefault,
	annotation:      snapshot.AnnGroupDefaultClass,
	otherAnnotation: AsDefault,
	otherDefault:    NewClass("standard", WithDriver(ebs), AsDefault()),
	validate:        Validator.GroupClass,
}

func TestClass(t *testing.T) {
	t.Run(singleClassKind.kind, func(t *testing.T) { runClassCases(t, singleClassKind) })
	t.Run(groupClassKind.kind, func(t *testing.T) { runClassCases(t, groupClassKind) })
}

func runClassCases[T comparable](t *testing.T, k classKind[T]) {
	t.Helper()
	cases := defaultClassCases(k)
	for _, more := range []map[string]verdictCase[T]{paramClassCases(k), specClassCases(k)} {
		for name, tc := range more {
			if _, dup := cases[name]; dup {
				t.Fatalf("two class cases are named %q", name)
			}
			cases[name] = tc
		}
	}
	runVerdicts(t, nil, k.validate, cases)
}

// defaultClassCases are the rules of the is-default-class annotation: one
// default per driver, read fresh from the API server.
func defaultClassCases[T comparable](k classKind[T]) map[string]verdictCase[T] {
	name := func(n string) string { return k.prefix + n }
	class := func(n string, opts ...Opt) T { return k.newClass(name(n), opts...) }
	fast := func(opts ...Opt) T { return class("fast", opts...) }
	standard := class("standard", WithDriver(ebs), k.asDefault())
	alreadyIs := fmt.Sprintf("%q already is", name("standard"))
	return map[string]verdictCase[T]{
		"a plain class is admitted": {
			obj: fast(),
		},
		"a second default for the same driver is denied naming field, rule and fix": {
			existing: []any{standard},
			obj:      fast(WithDriver(ebs), k.asDefault()),
			wantErr: fmt.Sprintf(`%s %q cannot be the default for driver "ebs.csi.aws.com": %q already is; remove the annotation from %q first (field metadata.annotations[%s])`,
				k.kind, name("fast"), name("standard"), name("standard"), k.annotation),
		},
		"a default for another driver is admitted": {
			existing: []any{standard},
			obj:      fast(k.asDefault()),
		},
		"a default of the other kind for the driver does not count": {
			existing: []any{k.otherDefault},
			obj:      fast(WithDriver(ebs), k.asDefault()),
		},
		"the other kind's annotation does not make a class default": {
			existing: []any{class("standard", WithDriver(ebs), k.otherAnnotation())},
			obj:      fast(WithDriver(ebs), k.asDefault()),
		},
		"a default that is being deleted does not count": {
			existing: []any{class("standard", WithDriver(ebs), k.asDefault(), Deleting())},
			obj:      fast(WithDriver(ebs), k.asDefault()),
		},
		"two existing defaults are both named": {
			existing: []any{standard, class("legacy", WithDriver(ebs), k.asDefault())},
			obj:      fast(WithDriver(ebs), k.asDefault()),
			wantErr:  fmt.Sprintf(`%q, %q already are`, name("legacy"), name("standard")),
		},
		"re-applying an unchanged default class is admitted even beside another default": {
			existing: []any{standard, fast(WithDriver(ebs), k.asDefault())},
			obj:      fast(WithDriver(ebs), k.asDefault()),
			old:      fast(WithDriver(ebs), k.asDefault()),
		},
		"an update that newly sets the annotation is denied": {
			existing: []any{standard},
			obj:      fast(WithDriver(ebs), k.asDefault()),
			old:      fast(WithDriver(ebs)),
			wantErr:  `cannot be the default for driver "ebs.csi.aws.com": ` + alreadyIs,
		},
		"an update that moves a default class to a driver that has one is denied": {
			existing: []any{standard},
			obj:      fast(WithDriver(ebs), k.asDefault()),
			old:      fast(k.asDefault()),
			wantErr:  alreadyIs,
		},
		"a default created a moment ago is seen through the fresh read": {
			// The cache is empty; the fresh list is what knows "standard".
			fresh:   []T{standard},
			obj:     fast(WithDriver(ebs), k.asDefault()),
			wantErr: alreadyIs,
		},
		"a failing fresh read falls back to the cache with a warning": {
			existing:    []any{standard},
			freshErr:    errors.New("connection refused"),
			obj:         fast(WithDriver(ebs), k.asDefault()),
			wantErr:     alreadyIs,
			wantWarning: fmt.Sprintf("could not read %ses from the API server (connection refused); checked the default class against the cache", k.kind),
		},
		"a failing cache and API server deny with a retry hint": {
			lookupErr:   errors.New("cache broken"),
			freshErr:    errors.New("connection refused"),
			obj:         fast(k.asDefault()),
			wantErr:     fmt.Sprintf("could not read %ses to check this rule: cache broken; retry shortly", k.kind),
			wantWarning: fmt.Sprintf("could not read %ses from the API server (connection refused); checked the default class against the cache", k.kind),
		},
		"a default value other than true or false is a warning naming the kind's annotation": {
			obj:         fast(WithAnnotation(k.annotation, "yes")),
			wantWarning: fmt.Sprintf(`%s %q has %s: "yes", which is not "true", so it is not a default class`, k.kind, name("fast"), k.annotation),
		},
		"an unchanged odd default value is not warned again on update": {
			obj: fast(WithAnnotation(k.annotation, "yes"), WithLabel("a", "b")),
			old: fast(WithAnnotation(k.annotation, "yes")),
		},
		"a class being deleted is admitted whatever it changes": {
			existing: []any{standard},
			obj:      fast(WithDriver(ebs), k.asDefault(), Deleting()),
			old:      fast(WithDriver(ebs), Deleting()),
		},
	}
}

// paramClassCases are the rules of the reserved parameters and their
// secret templates; driver parameters are the driver's business.
func paramClassCases[T comparable](k classKind[T]) map[string]verdictCase[T] {
	fast := func(opts ...Opt) T { return k.newClass(k.prefix+"fast", opts...) }
	return map[string]verdictCase[T]{
		"a misspelt reserved parameter is denied with a suggestion": {
			obj:     fast(WithParam("csi.storage.k8s.io/snapshoter-secret-name", "s")),
			wantErr: `did you mean "csi.storage.k8s.io/snapshotter-secret-name"?`,
		},
		"a misspelt group reserved parameter is denied with a suggestion": {
			obj:     fast(WithParam("csi.storage.k8s.io/group-snapshoter-secret-name", "s")),
			wantErr: `did you mean "csi.storage.k8s.io/group-snapshotter-secret-name"?`,
		},
		"an unknown reserved parameter lists the known keys": {
			obj:     fast(WithParam("csi.storage.k8s.io/fstype", "ext4")),
			wantErr: `use one of "csi.storage.k8s.io/snapshotter-secret-name"`,
		},
		"driver parameters are not checked": {
			obj: fast(WithParam("type", "gp3"), WithParam("csi.example.com/tier", "x")),
		},
		"a secret name without its namespace is denied": {
			obj:     fast(WithParam(snapshot.ParamSecretName, "creds")),
			wantErr: `sets parameter "csi.storage.k8s.io/snapshotter-secret-name" but not "csi.storage.k8s.io/snapshotter-secret-namespace"`,
		},
		"a secret namespace without its name is denied": {
			obj:     fast(WithParam(snapshot.ParamListSecretNamespace, "kube-system")),
			wantErr: `add "csi.storage.k8s.io/snapshotter-list-secret-name"`,
		},
		"an empty secret namespace is denied": {
			obj:     fast(WithParam(snapshot.ParamSecretName, "creds"), WithParam(snapshot.ParamSecretNamespace, "")),
			wantErr: `has an empty parameter "csi.storage.k8s.io/snapshotter-secret-namespace"`,
		},
		"known templates are admitted": {
			obj: fast(
				WithParam(snapshot.ParamSecretName, "${volumesnapshot.name}-creds"),
				WithParam(snapshot.ParamSecretNamespace, "${volumesnapshot.namespace}"),
				WithParam(snapshot.ParamGroupSecretName, "${volumegroupsnapshotcontent.name}"),
				WithParam(snapshot.ParamGroupSecretNamespace, "${volumegroupsnapshot.namespace}")),
		},
		"group secret templates are admitted": {
			obj: fast(
				WithParam(snapshot.ParamGroupSecretName, "${volumegroupsnapshot.name}-creds"),
				WithParam(snapshot.ParamGroupSecretNamespace, "${volumegroupsnapshot.namespace}")),
		},
		"an unknown template is denied": {
			obj:     fast(WithParam(snapshot.ParamSecretName, "${pvc.name}"), WithParam(snapshot.ParamSecretNamespace, "default")),
			wantErr: `uses template ${pvc.name}, which is not known for a secret name`,
		},
		"the snapshot name is not a template for a namespace": {
			obj:     fast(WithParam(snapshot.ParamSecretName, "creds"), WithParam(snapshot.ParamSecretNamespace, "${volumesnapshot.name}")),
			wantErr: `uses template ${volumesnapshot.name}, which is not known for a namespace`,
		},
		"group templates are not known for single snapshots": {
			obj:     fast(WithParam(snapshot.ParamSecretName, "${volumegroupsnapshot.name}"), WithParam(snapshot.ParamSecretNamespace, "default")),
			wantErr: `uses template ${volumegroupsnapshot.name}`,
		},
		"an unterminated template is denied": {
			obj:     fast(WithParam(snapshot.ParamSecretName, "${volumesnapshot.name"), WithParam(snapshot.ParamSecretNamespace, "default")),
			wantErr: `unterminated template "${volumesnapshot.name"; close it with "}"`,
		},
		"an invalid literal secret name is denied": {
			obj:     fast(WithParam(snapshot.ParamSecretName, "My_Creds"), WithParam(snapshot.ParamSecretNamespace, "default")),
			wantErr: `value "My_Creds" is not a valid secret name`,
		},
		"a namespace with a dot is denied": {
			obj:     fast(WithParam(snapshot.ParamSecretName, "creds"), WithParam(snapshot.ParamSecretNamespace, "kube.system")),
			wantErr: `value "kube.system" is not a valid namespace`,
		},
		"literal text around a template must still form a name": {
			obj:     fast(WithParam(snapshot.ParamSecretName, "${volumesnapshot.name}_Creds"), WithParam(snapshot.ParamSecretNamespace, "default")),
			wantErr: "once its templates are resolved",
		},
		"a legacy class with a bad parameter can still change its labels": {
			obj: fast(WithParam("csi.storage.k8s.io/fstype", "ext4"), WithLabel("team", "a")),
			old: fast(WithParam("csi.storage.k8s.io/fstype", "ext4")),
		},
		"a legacy class with a bad parameter can change another parameter": {
			obj: fast(WithParam("csi.storage.k8s.io/fstype", "ext4"), WithParam("type", "gp3")),
			old: fast(WithParam("csi.storage.k8s.io/fstype", "ext4")),
		},
		"an update that adds a bad parameter is denied": {
			obj:     fast(WithParam("csi.storage.k8s.io/fstype", "ext4")),
			old:     fast(),
			wantErr: `unknown parameter "csi.storage.k8s.io/fstype"`,
		},
	}
}

// specClassCases are the rules of the driver and deletion policy, and the
// warnings when a class in use changes them.
func specClassCases[T comparable](k classKind[T]) map[string]verdictCase[T] {
	fastName := k.prefix + "fast"
	fast := func(opts ...Opt) T { return k.newClass(fastName, opts...) }
	ifTracked := func(warning string) string {
		if k.tracksUse {
			return warning
		}
		return ""
	}
	return map[string]verdictCase[T]{
		"an invalid driver name is denied": {
			obj:     fast(WithDriver("my driver!")),
			wantErr: fmt.Sprintf(`%s %q has an invalid driver "my driver!"`, k.kind, fastName),
		},
		"an upper-case driver name is admitted as Kubernetes does": {
			obj: fast(WithDriver("Disk.CSI.Example.com")),
		},
		"a driver name longer than 63 characters is denied": {
			obj:     fast(WithDriver("a123456789a123456789a123456789a123456789a123456789a123456789.com")),
			wantErr: "at most 63 are allowed",
		},
		"a deletion policy outside the enum is denied": {
			obj:     fast(WithPolicy("Keep")),
			wantErr: `has deletionPolicy "Keep": it must be "Delete" or "Retain"; set one of them (field deletionPolicy)`,
		},
		"changing the driver of a class in use is a warning where use is tracked": {
			existing:    []any{NewContent("c1", WithClass(fastName))},
			obj:         fast(WithDriver(ebs)),
			old:         fast(),
			wantWarning: ifTracked(`is in use and changes driver from "hostpath.csi.k8s.io" to "ebs.csi.aws.com"`),
		},
		"changing the deletion policy of a class in use is a warning where use is tracked": {
			existing:    []any{NewContent("c1", WithClass(fastName))},
			obj:         fast(WithPolicy(snapv1.VolumeSnapshotContentRetain)),
			old:         fast(),
			wantWarning: ifTracked("existing VolumeSnapshotContents keep Delete"),
		},
		"changing the driver of an unused class is silent": {
			obj: fast(WithDriver(ebs)),
			old: fast(),
		},
	}
}

// A VolumeSnapshotClass never conflicts with a default group class.
func TestClassIgnoresGroupClasses(t *testing.T) {
	l := lookupOf(t, NewGroupClass("group-standard", WithDriver(ebs), AsGroupDefault(), AsDefault()))
	errs, warnings := Validator{Lookup: l}.Class(Create, NewClass("fast", WithDriver(ebs), AsDefault()), nil)
	expect(t, errs, warnings, "", "")
}
