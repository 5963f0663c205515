package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// lookupOf builds a StaticLookup from test objects.
func lookupOf(t *testing.T, objs ...any) *StaticLookup {
	t.Helper()
	l := &StaticLookup{}
	if err := l.Add(objs...); err != nil {
		t.Fatal(err)
	}
	return l
}

// expect checks a verdict: wantErr "" means admitted, otherwise the denial
// message must contain it; wantWarning "" means no warning is expected.
func expect(t *testing.T, errs field.ErrorList, warnings []string, wantErr, wantWarning string) {
	t.Helper()
	msg := Message(errs)
	switch {
	case wantErr == "" && len(errs) > 0:
		t.Errorf("denied, want admitted:\n%s", msg)
	case wantErr != "" && len(errs) == 0:
		t.Errorf("admitted, want denial containing %q (warnings: %q)", wantErr, warnings)
	case wantErr != "" && !strings.Contains(msg, wantErr):
		t.Errorf("denial\n%s\ndoes not contain %q", msg, wantErr)
	}
	joined := strings.Join(warnings, "\n")
	switch {
	case wantWarning == "" && len(warnings) > 0:
		t.Errorf("unexpected warnings: %q", warnings)
	case wantWarning != "" && !strings.Contains(joined, wantWarning):
		t.Errorf("warnings %q do not contain %q", warnings, wantWarning)
	}
}
