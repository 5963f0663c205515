package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	vt "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

func TestOverlayTheSetWins(t *testing.T) {
	base := &StaticLookup{}
	mustAdd(t, base, vt.NewClass("shared", vt.WithDriver("old.example.com")), vt.NewClass("live-only"),
		vt.NewPVC("ns", "relabelled", vt.WithLabel("app", "db")), vt.NewPVC("ns", "live", vt.WithLabel("app", "db")))
	set := &StaticLookup{}
	self := vt.NewClass("self")
	mustAdd(t, set, vt.NewClass("shared", vt.WithDriver("new.example.com")), self,
		vt.NewPVC("ns", "relabelled", vt.WithLabel("app", "web")))
	o := Overlay{Set: set, Base: base, Hide: self}

	if c, _ := o.GetClass("shared"); c == nil || c.Driver != "new.example.com" {
		t.Errorf("GetClass(shared) = %v, want the set's", c)
	}
	if c, _ := o.GetClass("self"); c != nil {
		t.Errorf("the hidden object is visible: %v", c)
	}
	if c, _ := o.GetClass("live-only"); c == nil {
		t.Error("the base's class is not visible")
	}
	classes, _ := o.ListClassesFresh()
	if len(classes) != 2 {
		t.Errorf("ListClassesFresh = %d classes, want shared (the set's) and live-only", len(classes))
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "db"})
	claims, _ := o.ListPVCs("ns", sel)
	if len(claims) != 1 || claims[0].Name != "live" {
		t.Errorf("ListPVCs = %v, want only the live claim (the set relabels the other)", claims)
	}
	if c, _ := (Overlay{Set: set}).GetPVC("ns", "live"); c != nil {
		t.Error("a nil base must be empty")
	}
}

func mustAdd(t *testing.T, l *StaticLookup, objs ...any) {
	t.Helper()
	if err := l.Add(objs...); err != nil {
		t.Fatal(err)
	}
}
