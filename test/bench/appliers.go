package main

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The requests through the API server in the admission rows come from
// appliers that are ServiceAccounts, as a user's tools and GitOps agents
// are: not system:masters, so API Priority and Fairness applies to them
// (the default FlowSchema "service-accounts" puts them at priority level
// workload-low, each account a flow of its own).

const (
	applierRole   = "bench-applier"
	applierPrefix = "applier-"
)

// newAppliers makes n ServiceAccounts in the bench namespace, allowed to
// create claims and VolumeSnapshots there and nothing else, and returns a
// client with a token of each.
func newAppliers(ctx context.Context, env *framework.Env, n int) ([]*clients, error) {
	rbac := env.Kube.RbacV1()
	if _, err := rbac.Roles(benchNamespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: applierRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"create"}},
			{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshots"}, Verbs: []string{"create"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("applier Role: %w", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: applierRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: applierRole},
	}
	out := make([]*clients, 0, n)
	expiry := int64(24 * 3600)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s%02d", applierPrefix, i)
		if _, err := env.Kube.CoreV1().ServiceAccounts(benchNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("applier ServiceAccount %s: %w", name, err)
		}
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: benchNamespace})
		tr, err := env.Kube.CoreV1().ServiceAccounts(benchNamespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("token of %s: %w", name, err)
		}
		cfg := rest.AnonymousClientConfig(env.Config)
		cfg.BearerToken = tr.Status.Token
		cl, err := newClientsFor(cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, cl)
	}
	if _, err := rbac.RoleBindings(benchNamespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("applier RoleBinding: %w", err)
	}
	return out, nil
}

// dispatched is apiserver_flowcontrol_dispatched_requests_total by
// priority level: where APF placed the requests.
func (a *apiServer) dispatched(ctx context.Context) (map[string]float64, error) {
	body, err := a.scrape(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	err = framework.EachSample(bytes.NewReader(body), "apiserver_flowcontrol_dispatched_requests_total", func(l map[string]string, v float64) {
		out[l["priority_level"]] += v
	})
	return out, err
}

// mainLevels names the priority levels that dispatched at least a tenth of
// n requests between two scrapes, with their counts.
func mainLevels(before, after map[string]float64, n int) string {
	var parts []string
	for level, v := range after {
		if d := v - before[level]; d >= float64(n)/10 {
			parts = append(parts, fmt.Sprintf("%s %.0f", level, d))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
