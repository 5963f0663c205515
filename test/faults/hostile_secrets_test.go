package faults

import (
	"context"
	"slices"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// secretCase is one class whose snapshotter secret templates a snapshot
// is taken with.
type secretCase struct {
	class, nameT, nsT string
	// snapshot is the VolumeSnapshot's name (the case's name by default).
	snapshot string
	// want are parts of the expected status error; none: the snapshot
	// becomes ready.
	want []string
}

// TestHostileSecretTemplates stores classes whose secret templates the
// webhook refuses, with no webhook registered (it may be absent or
// bypassed; the controller must hold on its own), and takes a snapshot with
// each. The rule (docs/contract.md, "VolumeSnapshotClass parameters"): the
// name may use ${volumesnapshotcontent.name}, ${volumesnapshot.namespace}
// and ${volumesnapshot.name}; the namespace only the first two, so no
// name a user chooses can steer the namespace; a literal namespace is the
// class author's choice; the results must be a valid name and namespace.
// Another tenant's Secret is read only through a class whose author named
// that namespace literally.
func TestHostileSecretTemplates(t *testing.T) {
	newRand(t)
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "hostile", NoClass: true})
	w := newWorld(s)
	env := s.Env
	ctx := context.Background()
	victim := env.Namespace(t) // another tenant's namespace
	for _, sec := range []struct{ ns, name, key string }{
		{victim, "creds", "victim-key"}, {victim, "shared-creds", "shared-key"}, {s.NS, "creds", "own-key"},
	} {
		if _, err := env.Kube.CoreV1().Secrets(sec.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sec.ns, Name: sec.name},
			Data: map[string][]byte{sec.key: []byte("x")}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []secretCase{
		{class: "own", nameT: "creds", nsT: "${volumesnapshot.namespace}"},
		{class: "literal", nameT: "shared-creds", nsT: victim},
		{class: "steer", nameT: "creds", nsT: "${volumesnapshot.name}", snapshot: victim,
			want: []string{"uses ${volumesnapshot.name}, which is not allowed in a namespace", "${volumesnapshot.namespace} or a literal namespace"}},
		{class: "dotdot", nameT: "creds", nsT: "../kube-system", want: []string{`secret namespace "../kube-system"`, "set it to a namespace name"}},
		{class: "slash", nameT: "a/b", nsT: "${volumesnapshot.namespace}", want: []string{`secret name "a/b"`, "set it to a Secret name"}},
		{class: "unknown", nameT: "${pvc.name}", nsT: "${volumesnapshot.namespace}", want: []string{"uses ${pvc.name}"}},
		{class: "group-token", nameT: "${volumegroupsnapshot.name}", nsT: "${volumesnapshot.namespace}", want: []string{"uses ${volumegroupsnapshot.name}"}},
		{class: "content-ns", nameT: "creds", nsT: "${volumesnapshotcontent.name}", want: []string{"reading secret snapcontent-", "not found"}},
	}
	s.PVC(t, "data")
	var watched []objRef
	for _, tc := range cases {
		snapName := tc.class
		if tc.snapshot != "" {
			snapName = tc.snapshot
		}
		class := createSecretClass(t, s, tc)
		vs := env.CreateSnapshot(t, framework.DynamicSnapshot(s.NS, snapName, "data", &class))
		w.created(snapName, vs.UID)
		if tc.want == nil {
			s.WaitReady(t, snapName, time.Minute)
			continue
		}
		msg := expectSnapshotError(t, env, s.NS, snapName, time.Minute, tc.want...)
		t.Logf("class %s (name %q, namespace %q): %q", tc.class, tc.nameT, tc.nsT, msg)
		watched = append(watched, objRef{s.NS, snapName})
	}
	expectWarning(t, env, s.NS, victim, snapshot.ReasonGetSnapshotClassFailed)
	writes := expectSettled(t, env, time.Minute, watched...)
	t.Logf("settled: %s", settledSummary(writes))

	keys := secretKeysByMethod(s.Drv.CallLog(t, 0))["CreateSnapshot"]
	if slices.Contains(keys, "victim-key") {
		t.Errorf("the driver received the other tenant's Secret (keys %v)", keys)
	}
	for _, k := range []string{"own-key", "shared-key"} {
		if !slices.Contains(keys, k) {
			t.Errorf("no CreateSnapshot carried %s (keys %v)", k, keys)
		}
	}
	for name := range w.uids {
		if err := w.remove(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	w.checkInvariants(t, time.Minute)
}

// createSecretClass stores the class of tc, named after the scenario, and
// deletes it when the test ends.
func createSecretClass(t *testing.T, s *framework.Scenario, tc secretCase) string {
	t.Helper()
	c := framework.SnapshotClass(tc.class+"-"+s.NS, s.Drv.Name, snapv1.VolumeSnapshotContentDelete, false)
	c.Parameters = map[string]string{snapshot.ParamSecretName: tc.nameT, snapshot.ParamSecretNamespace: tc.nsT}
	s.Env.CreateSnapshotClass(t, c)
	t.Cleanup(func() {
		_ = s.Env.Snap.SnapshotV1().VolumeSnapshotClasses().Delete(context.Background(), c.Name, metav1.DeleteOptions{})
	})
	return c.Name
}
