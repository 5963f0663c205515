package csiside

import (
	"fmt"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// forbiddenUser finds the user in the API server's Forbidden message:
// `User "system:serviceaccount:NS:NAME" cannot get resource ...`.
var forbiddenUser = regexp.MustCompile(`User "([^"]+)" cannot`)

var serviceAccountUser = regexp.MustCompile(`^system:serviceaccount:([^:]+):([^:]+)$`)

// secretReadError wraps the error of reading Secret namespace/name. When
// the API server said Forbidden, the message names the RBAC rule to grant,
// and to whom when the server said so.
func secretReadError(namespace, name string, err error) error {
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("reading secret %s/%s: %w", namespace, name, err)
	}
	return fmt.Errorf("reading secret %s/%s: %w; fix: %s", namespace, name, err, secretGrantHint(namespace, err.Error()))
}

// secretGrantHint says which Role rule is missing for whom.
func secretGrantHint(namespace, msg string) string {
	rule := fmt.Sprintf(`grant a Role in namespace %s (or a ClusterRole) with the rule {apiGroups: [""], resources: ["secrets"], verbs: ["get"]}`, namespace)
	m := forbiddenUser.FindStringSubmatch(msg)
	if m == nil {
		return rule + " to the CSI side's service account"
	}
	if sa := serviceAccountUser.FindStringSubmatch(m[1]); sa != nil {
		return fmt.Sprintf("%s and bind it to service account %s/%s (kubectl create role snapshot-secrets -n %s --verb=get --resource=secrets; "+
			"kubectl create rolebinding snapshot-secrets -n %s --role=snapshot-secrets --serviceaccount=%s:%s)",
			rule, sa[1], sa[2], namespace, namespace, sa[1], sa[2])
	}
	return fmt.Sprintf("%s and bind it to user %s", rule, m[1])
}
