package validation

import (
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

// The manifest cases are shared with the end-to-end test, which applies
// them to a real API server through the webhook. Here the same files run
// through the rules directly, with the fixtures as the world.
var testdata = filepath.Join("..", "..", "test", "testdata")

const minManifestCases = 40

func TestManifestCases(t *testing.T) {
	fixtures := loadFixtures(t)
	invalid, err := validationtest.LoadCases(filepath.Join(testdata, "invalid"))
	if err != nil {
		t.Fatal(err)
	}
	valid, err := validationtest.LoadCases(filepath.Join(testdata, "valid"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(invalid) + len(valid); n < minManifestCases {
		t.Errorf("%d manifest cases, want at least %d", n, minManifestCases)
	}
	for _, c := range invalid {
		t.Run("invalid/"+c.Name, func(t *testing.T) {
			if len(c.Expect) == 0 {
				t.Fatal("an invalid case needs a '# expect:' line")
			}
			errs, warnings := runCase(t, fixtures, c)
			if len(errs) == 0 {
				t.Fatalf("admitted, want a denial (warnings %q)", warnings)
			}
			msg := Message(errs)
			for _, want := range c.Expect {
				if !strings.Contains(msg, want) {
					t.Errorf("denial\n%s\ndoes not contain %q", msg, want)
				}
			}
		})
	}
	for _, c := range valid {
		t.Run("valid/"+c.Name, func(t *testing.T) {
			if len(c.Expect) > 0 {
				t.Fatal("a valid case has an '# expect:' line")
			}
			errs, warnings := runCase(t, fixtures, c)
			if len(errs) > 0 {
				t.Fatalf("denied:\n%s", Message(errs))
			}
			checkWarnings(t, warnings, c.Warn)
		})
	}
}

// checkWarnings wants exactly the declared warnings: an undeclared one is
// noise a user would see on every apply.
func checkWarnings(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("warnings %q, want %d matching %q", got, len(want), want)
	}
	joined := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings %q do not contain %q", got, w)
		}
	}
}

func loadFixtures(t *testing.T) []metav1.Object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdata, "fixtures", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var objs []metav1.Object
	world := &StaticLookup{}
	for _, f := range files {
		c, err := validationtest.LoadCase(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range c.Docs {
			obj := decode(t, doc)
			// Fixtures are applied through the webhook too: they must pass.
			if errs, _ := validateIn(t, world, obj, nil); len(errs) > 0 {
				t.Fatalf("fixture %s denied:\n%s", f, Message(errs))
			}
			addTo(t, world, obj)
			objs = append(objs, obj)
		}
	}
	return objs
}

// runCase builds the world of one case (fixtures plus its prerequisites,
// each admitted in turn) and judges its last document.
func runCase(t *testing.T, fixtures []metav1.Object, c validationtest.Case) (field.ErrorList, []string) {
	t.Helper()
	world := &StaticLookup{}
	for _, f := range fixtures {
		addTo(t, world, f)
	}
	seen := map[string]metav1.Object{}
	judge := func(doc []byte) (field.ErrorList, []string) {
		obj := decode(t, doc)
		errs, warnings := validateIn(t, world, obj, seen[validationtest.KeyOf(obj)])
		seen[validationtest.KeyOf(obj)] = obj
		addTo(t, world, obj)
		return errs, warnings
	}
	for i, doc := range c.Prerequisites() {
		if errs, _ := judge(doc); len(errs) > 0 {
			t.Fatalf("prerequisite %d denied:\n%s", i+1, Message(errs))
		}
	}
	return judge(c.Object())
}

func validateIn(t *testing.T, world *StaticLookup, obj, old metav1.Object) (field.ErrorList, []string) {
	t.Helper()
	switch obj.(type) {
	case *corev1.Namespace, *corev1.PersistentVolume:
		return nil, nil // not sent to the webhook
	}
	op := Create
	if old != nil {
		op = Update
	}
	var prev any
	if old != nil {
		prev = old
	}
	errs, warnings, err := Validator{Lookup: world}.Validate(op, obj, prev)
	if err != nil {
		t.Fatal(err)
	}
	return errs, warnings
}

func decode(t *testing.T, doc []byte) metav1.Object {
	t.Helper()
	obj, err := validationtest.Decode(doc)
	if err != nil {
		t.Fatalf("decoding\n%s\n: %v", doc, err)
	}
	return obj
}

func addTo(t *testing.T, world *StaticLookup, obj metav1.Object) {
	t.Helper()
	if _, ok := obj.(*corev1.Namespace); ok {
		return
	}
	if err := world.Add(obj); err != nil {
		t.Fatal(err)
	}
}
