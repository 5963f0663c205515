package framework

import (
	"context"
	"fmt"
	manifests "github.com/snapkeeper/snapkeeper/pkg/manifest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// RenderChart renders charts/snapkeeper with bin/helm as release
// "snapkeeper" in namespace "snapkeeper", with extra helm arguments
// (--set ...): Helm.Template for callers without a T. Helm runs with
// throw-away config and cache directories.
func RenderChart(ctx context.Context, args ...string) ([]byte, error) {
	h, err := newHelm("")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(h.Home)
	out, err := h.Run(ctx, templateArgs("", args)...)
	if err != nil {
		return nil, err
	}
	return []byte(out), nil
}

// CommunityModuleDir is the external-snapshotter v8 module that the
// community peers are built from (hack/tools/peers), in the module cache;
// its deploy/kubernetes holds the community's RBAC manifests.
func CommunityModuleDir() (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubernetes-csi/external-snapshotter/v8")
	cmd.Dir = filepath.Join(RepoRoot(), "hack", "tools", "peers")
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		return "", fmt.Errorf("the community module is not in the module cache (run `make tools`): %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "deploy", "kubernetes")); err != nil {
		return "", fmt.Errorf("community module at %s: %w", dir, err)
	}
	return dir, nil
}

// ApplyRBAC creates the ServiceAccounts, ClusterRoles, ClusterRoleBindings,
// Roles and RoleBindings of a multi-document manifest with their rules
// untouched, and skips every other kind (a rendered chart's Deployments,
// CRDs, Services). With ns set, namespaced objects and ServiceAccount
// subjects move to ns. Namespaces are created as needed and objects that
// exist already are left as they are. It returns "namespace/name" of every
// ServiceAccount in the manifest.
func (e *Env) ApplyRBAC(ctx context.Context, manifest []byte, ns string) ([]string, error) {
	docs, err := manifests.SplitDocuments(manifest)
	if err != nil {
		return nil, err
	}
	var accounts []string
	for _, doc := range docs {
		if !rbacDoc(doc) {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, err
		}
		rbac := e.Kube.RbacV1()
		place := func(m *metav1.ObjectMeta) error {
			if ns != "" {
				m.Namespace = ns
			}
			if m.Namespace == "" {
				m.Namespace = "default"
			}
			return e.EnsureNamespace(ctx, m.Namespace)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			if err = place(&o.ObjectMeta); err == nil {
				accounts = append(accounts, o.Namespace+"/"+o.Name)
				_, err = e.Kube.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			}
		case *rbacv1.ClusterRole:
			_, err = rbac.ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			moveSubjectsTo(o.Subjects, ns)
			_, err = rbac.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			if err = place(&o.ObjectMeta); err == nil {
				_, err = rbac.Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			}
		case *rbacv1.RoleBinding:
			moveSubjectsTo(o.Subjects, ns)
			if err = place(&o.ObjectMeta); err == nil {
				_, err = rbac.RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			}
		default:
			continue
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("apply %T: %w", obj, err)
		}
	}
	return accounts, nil
}

// rbacDoc tells whether a YAML document is one of the kinds ApplyRBAC
// applies, without decoding kinds the client's scheme may not know.
func rbacDoc(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if k, ok := strings.CutPrefix(line, "kind:"); ok {
			switch strings.TrimSpace(k) {
			case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
				return true
			}
			return false
		}
	}
	return false
}

func moveSubjectsTo(subjects []rbacv1.Subject, ns string) {
	for i := range subjects {
		if subjects[i].Kind == rbacv1.ServiceAccountKind && ns != "" {
			subjects[i].Namespace = ns
		}
	}
}

// EnsureNamespace creates namespace ns unless it exists.
func (e *Env) EnsureNamespace(ctx context.Context, ns string) error {
	_, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// ServiceAccountToken is a token of ServiceAccount ns/sa from the
// TokenRequest API, valid for expirySeconds: the identity a pod of that
// account would have.
func (e *Env) ServiceAccountToken(ctx context.Context, ns, sa string, expirySeconds int64) (string, error) {
	tr, err := e.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expirySeconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s/%s: %w", ns, sa, err)
	}
	return tr.Status.Token, nil
}

// ServiceAccountKubeconfig writes to path a kubeconfig with a
// ServiceAccountToken of ns/sa.
func (e *Env) ServiceAccountKubeconfig(ctx context.Context, ns, sa, path string, expirySeconds int64) error {
	token, err := e.ServiceAccountToken(ctx, ns, sa, expirySeconds)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return WriteKubeconfig(path, e.URL, token)
}

// ServiceAccountConfig is a client configuration with a
// ServiceAccountToken of ns/sa valid for an hour, and client-go's default
// rate limits, as a pod of that account would have.
func (e *Env) ServiceAccountConfig(ctx context.Context, ns, sa string) (*rest.Config, error) {
	token, err := e.ServiceAccountToken(ctx, ns, sa, 3600)
	if err != nil {
		return nil, err
	}
	return &rest.Config{Host: e.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, nil
}
