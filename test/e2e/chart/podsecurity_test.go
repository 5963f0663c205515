package chart

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestPodsFollowTheRestrictedProfileAndSpreadOut(t *testing.T) {
	r := parseManifest(t, framework.NewHelm(t, "").Template(t, kubeNew, "--set", "controller.priorityClassName=system-cluster-critical"))
	for _, name := range []string{"snapkeeper-controller", "snapkeeper-webhook"} {
		var dep appsv1.Deployment
		r.into(t, "Deployment", name, &dep)
		pod := dep.Spec.Template.Spec
		if *dep.Spec.Replicas != 2 {
			t.Errorf("%s: %d replicas", name, *dep.Spec.Replicas)
		}
		psc := pod.SecurityContext
		if psc == nil || !*psc.RunAsNonRoot || *psc.RunAsUser != 65532 || psc.RunAsGroup == nil || *psc.RunAsGroup != 65532 ||
			psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod securityContext %+v", name, psc)
		}
		if pod.HostPID || pod.HostIPC || pod.HostNetwork {
			t.Errorf("%s: shares a host namespace", name)
		}
		emptyDirs := map[string]bool{}
		for _, v := range pod.Volumes {
			emptyDirs[v.Name] = v.EmptyDir != nil
			if v.HostPath != nil {
				t.Errorf("%s: mounts the host's %s", name, v.HostPath.Path)
			}
		}
		for _, c := range pod.Containers {
			if !restrictedContainer(c.SecurityContext, true) {
				t.Errorf("%s/%s: securityContext %+v", name, c.Name, c.SecurityContext)
			}
			// The root filesystem is read-only; the one writable path is an
			// emptyDir (selfManaged certificates): logs go to stderr.
			for _, m := range c.VolumeMounts {
				if !m.ReadOnly && !emptyDirs[m.Name] {
					t.Errorf("%s/%s: %s is writable and not an emptyDir", name, c.Name, m.MountPath)
				}
			}
			if c.LivenessProbe == nil || c.ReadinessProbe == nil {
				t.Errorf("%s/%s: probes missing", name, c.Name)
			}
			if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s/%s: no memory request and limit", name, c.Name)
			}
		}
		if len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].LabelSelector == nil {
			t.Errorf("%s: topology spread %+v", name, pod.TopologySpreadConstraints)
		}
		var pdb policyv1.PodDisruptionBudget
		r.into(t, "PodDisruptionBudget", name, &pdb)
		if cmp.Diff(pdb.Spec.Selector.MatchLabels, dep.Spec.Selector.MatchLabels) != "" {
			t.Errorf("%s: PDB selects %v, Deployment %v", name, pdb.Spec.Selector.MatchLabels, dep.Spec.Selector.MatchLabels)
		}
	}
	var ctrl appsv1.Deployment
	r.into(t, "Deployment", "snapkeeper-controller", &ctrl)
	if ctrl.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
		t.Error("priorityClassName not applied")
	}
	args := ctrl.Spec.Template.Spec.Containers[0].Args
	for _, a := range []string{"--leader-election=true", "--leader-election-namespace=snapkeeper", "--components=binder,schedules"} {
		if !slices.Contains(args, a) {
			t.Errorf("controller args %v lack %s", args, a)
		}
	}
}

// restrictedContainer: a read-only root filesystem, no privilege
// escalation, no capabilities, RuntimeDefault seccomp, not privileged, and
// runAsNonRoot where nonRoot.
func restrictedContainer(sc *corev1.SecurityContext, nonRoot bool) bool {
	return sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation &&
		sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem && (sc.Privileged == nil || !*sc.Privileged) &&
		sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0 &&
		sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault &&
		(!nonRoot || (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot))
}
