package dropin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// communityRBAC applies one of the community RBAC manifests with its rules
// untouched: namespaced objects and ServiceAccount subjects move to ns, and
// cluster-scoped names (and the references to them) get ns as a suffix so
// tests do not share them. It returns the ServiceAccount's name and checks
// that the manifest brought a ClusterRole and a Lease Role.
func communityRBAC(t *testing.T, env *framework.Env, file, ns string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var sa string
	var clusterRoles, leaseRoles int
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		rbac := env.Kube.RbacV1()
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			o.Namespace, sa = ns, o.Name
			_, err = env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			o.Name += "-" + ns
			clusterRoles++
			_, err = rbac.ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			o.Name += "-" + ns
			o.RoleRef.Name += "-" + ns
			moveSubjects(o.Subjects, ns)
			_, err = rbac.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			o.Namespace = ns
			for _, rule := range o.Rules {
				for _, res := range rule.Resources {
					if res == "leases" {
						leaseRoles++
					}
				}
			}
			_, err = rbac.Roles(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			o.Namespace = ns
			if o.RoleRef.Kind == "ClusterRole" {
				o.RoleRef.Name += "-" + ns
			}
			moveSubjects(o.Subjects, ns)
			_, err = rbac.RoleBindings(ns).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("%s: unexpected %T", file, obj)
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if sa == "" || clusterRoles != 1 || leaseRoles != 1 {
		t.Fatalf("%s: ServiceAccount %q, %d ClusterRoles, %d Lease Roles: the manifest changed shape", file, sa, clusterRoles, leaseRoles)
	}
	return sa
}

func moveSubjects(subjects []rbacv1.Subject, ns string) {
	for i := range subjects {
		if subjects[i].Kind == rbacv1.ServiceAccountKind {
			subjects[i].Namespace = ns
		}
	}
}

// stripComments drops the comment lines of a YAML document.
func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(append(out, line...), '\n')
		}
	}
	return out
}

// Our binder and CSI side, each with the identity and the RBAC the
// community manifests give the snapshot-controller and the csi-snapshotter,
// take a snapshot through its whole life without a single refusal.
func TestRunsUnderTheCommunityRBAC(t *testing.T) {
	env := framework.Shared(t)
	mod := communityModuleDir(t)
	binderNS, csiNS, apps := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	binderSA := communityRBAC(t, env, filepath.Join(mod, "deploy/kubernetes/snapshot-controller/rbac-snapshot-controller.yaml"), binderNS)
	csiSA := communityRBAC(t, env, filepath.Join(mod, "deploy/kubernetes/csi-snapshotter/rbac-csi-snapshotter.yaml"), csiNS)

	drv := env.StartCSIDriver(t, framework.CSIDriverOptions{})
	binderAddr, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	csiAddr, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	// The arguments of the community Deployments (setup-*.yaml), plus what
	// a pod would get from its environment: the namespace of its Lease.
	binder := startOwn(t, env, "binder", []string{"--v=5", "--leader-election=true",
		"--leader-election-namespace=" + binderNS, "--http-endpoint=" + binderAddr,
		"--kubeconfig=" + saKubeconfig(t, env, binderNS, binderSA)})
	csi := startOwn(t, env, "csi-side", []string{"--v=5", "--csi-address=" + drv.Socket, "--leader-election=true",
		"--leader-election-namespace=" + csiNS, "--http-endpoint=" + csiAddr,
		"--kubeconfig=" + saKubeconfig(t, env, csiNS, csiSA)})
	for _, c := range []*framework.Component{{Name: "binder", HTTPAddr: binderAddr, Proc: binder}, {Name: "csi-side", HTTPAddr: csiAddr, Proc: csi}} {
		if err := c.WaitReady(time.Minute); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	class := env.CreateSnapshotClass(t, framework.SnapshotClass("community-rbac-"+apps, drv.Name, snapv1.VolumeSnapshotContentDelete, false))
	env.CreateBoundPVC(t, apps, "data", framework.PVCOptions{Driver: drv.Name})
	claimName := "data"
	vs := env.CreateSnapshot(t, framework.DynamicSnapshot(apps, "snap", claimName, &class.Name))
	ready := env.WaitSnapshotReady(t, apps, vs.Name, 90*time.Second)
	content := *ready.Status.BoundVolumeSnapshotContentName

	// The claim's finalizer came and went by update (the role grants no
	// patch on claims).
	framework.Eventually(t, 30*time.Second, "the claim released by the binder", func() (bool, error) {
		pvc, err := env.Kube.CoreV1().PersistentVolumeClaims(apps).Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return !snapshot.HasFinalizer(pvc, snapshot.FinalizerPVCAsSource), errors.New(strings.Join(pvc.Finalizers, ","))
	})
	framework.Eventually(t, 30*time.Second, "an event about the snapshot", func() (bool, error) {
		evs, err := env.Kube.CoreV1().Events(apps).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + vs.Name})
		if err != nil {
			return false, err
		}
		return len(evs.Items) > 0, nil
	})

	// Group snapshots with the community's command lines and no
	// --feature-gates: on by default since v8.7.0, under its RBAC.
	groupClass := framework.MustCreate(t, env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create,
		framework.GroupSnapshotClass("community-rbac-group-"+apps, drv.Name, snapv1.VolumeSnapshotContentDelete, false))
	for _, name := range []string{"db-0", "db-1"} {
		env.CreateBoundPVC(t, apps, name, framework.PVCOptions{Driver: drv.Name})
		env.LabelClaim(t, apps, name, map[string]string{"app": "db"})
	}
	group := framework.MustCreate(t, env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(apps).Create, &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: apps},
		Spec: groupv1.VolumeGroupSnapshotSpec{VolumeGroupSnapshotClassName: &groupClass.Name,
			Source: groupv1.VolumeGroupSnapshotSource{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
	})
	readyGroup := env.WaitGroupReady(t, apps, group.Name, 90*time.Second)
	groupContent := *readyGroup.Status.BoundVolumeGroupSnapshotContentName
	if err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(apps).Delete(ctx, group.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitGroupGone(t, apps, group.Name, 60*time.Second)
	env.WaitGroupContentGone(t, groupContent, 60*time.Second)

	if err := env.Snap.SnapshotV1().VolumeSnapshots(apps).Delete(ctx, vs.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitSnapshotGone(t, apps, vs.Name, 60*time.Second)
	env.WaitContentGone(t, content, 60*time.Second)
	env.WaitBackendMatchesContents(t, drv)

	for _, lease := range []struct{ ns, name string }{
		{binderNS, "snapshot-controller-leader"},
		{csiNS, "external-snapshotter-leader-" + strings.NewReplacer(".", "-").Replace(drv.Name)},
	} {
		l, err := env.Kube.CoordinationV1().Leases(lease.ns).Get(ctx, lease.name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || !strings.Contains(*l.Spec.HolderIdentity, "_snapkeeper_") {
			t.Errorf("Lease %s/%s not held by us: %v %s", lease.ns, lease.name, err, framework.JSON(l.Spec))
		}
	}
	for _, p := range []*framework.Process{binder, csi} {
		for _, line := range refusedLines(p) {
			t.Errorf("%s was refused something under the community RBAC: %s", p.Name, line)
		}
	}
}
