package validation

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Every denial's Detail is a whole sentence that names the object, the rule
// and the fix, so the message is useful on its own in kubectl output, an Argo
// CD sync error or an audit log. Message adds the field path.

// Message renders a denial for people: one line per error, each ending with
// the field path it is about.
func Message(errs field.ErrorList) string {
	lines := make([]string, 0, len(errs))
	for _, e := range errs {
		detail := e.Detail
		if e.Type == field.ErrorTypeInternal || detail == "" {
			detail = e.ErrorBody()
		}
		lines = append(lines, fmt.Sprintf("%s (field %s)", detail, e.Field))
	}
	return strings.Join(lines, "\n")
}

// clusterObj and nsObj name an object the way every message does.
func clusterObj(kind, name string) string { return fmt.Sprintf("%s %q", kind, name) }

func nsObj(kind, namespace, name string) string {
	return fmt.Sprintf("%s %q", kind, namespace+"/"+name)
}

func invalid(path *field.Path, value any, format string, args ...any) *field.Error {
	return field.Invalid(path, value, fmt.Sprintf(format, args...))
}

func forbidden(path *field.Path, format string, args ...any) *field.Error {
	return field.Forbidden(path, fmt.Sprintf(format, args...))
}

func required(path *field.Path, format string, args ...any) *field.Error {
	return field.Required(path, fmt.Sprintf(format, args...))
}

// lookupFailed reports a failed lookup. It denies the request: admitting
// unchecked would let exactly the mistakes this webhook exists for through
// whenever the cache hiccups, and the API server retries the user's request
// as soon as they re-apply.
func lookupFailed(path *field.Path, what string, err error) *field.Error {
	return field.InternalError(path, fmt.Errorf("could not read %s to check this rule: %w; retry shortly", what, err))
}

// ratchet drops the errors of the new object that the old object already had
// (same field, same kind of error): an UPDATE is judged by what it changes,
// so a legacy object stays editable (docs/webhook.md, "Updates are ratcheted").
func ratchet(newErrs, oldErrs field.ErrorList) field.ErrorList {
	type key struct {
		field string
		typ   field.ErrorType
	}
	seen := make(map[key]bool, len(oldErrs))
	for _, e := range oldErrs {
		seen[key{e.Field, e.Type}] = true
	}
	var out field.ErrorList
	for _, e := range newErrs {
		if !seen[key{e.Field, e.Type}] {
			out = append(out, e)
		}
	}
	return out
}

// beingDeleted reports whether either version carries a deletion timestamp.
// Such an object is always admitted: controllers (ours, external-provisioner,
// Velero) must be able to remove their finalizers, or it hangs in Terminating.
func beingDeleted(obj, old metav1.Object) bool {
	return obj.GetDeletionTimestamp() != nil || (old != nil && old.GetDeletionTimestamp() != nil)
}

// validCSIDriverName returns why name cannot be a CSI driver name, or "".
// The rule is the one Kubernetes applies to CSIDriver objects and to PV
// sources: at most 63 characters, a DNS-1123 subdomain ignoring case.
func validCSIDriverName(name string) string {
	if name == "" {
		return "it is empty"
	}
	if len(name) > 63 {
		return fmt.Sprintf("it has %d characters, at most 63 are allowed", len(name))
	}
	if msgs := utilvalidation.IsDNS1123Subdomain(strings.ToLower(name)); len(msgs) > 0 {
		return "it must consist of letters, digits, '-' and '.', and start and end with a letter or digit"
	}
	return ""
}

// closest returns the candidate nearest to s by edit distance, if it is near
// enough to be a likely typo.
func closest(s string, candidates []string) string {
	best, bestDist := "", len(s)/3+2
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
