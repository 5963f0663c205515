package testkit

import (
	"encoding/json"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
)

// fakeClientset is what both fake clientsets offer.
type fakeClientset interface {
	Tracker() k8stesting.ObjectTracker
	PrependReactor(verb, resource string, reaction k8stesting.ReactionFunc)
}

// server holds the reactors of one clientset, over its tracker.
type server struct {
	api     *API
	tracker k8stesting.ObjectTracker
}

func (a *API) serve(c fakeClientset) {
	s := server{api: a, tracker: c.Tracker()}
	c.PrependReactor("create", "*", s.create)
	c.PrependReactor("update", "*", s.update)
	c.PrependReactor("patch", "*", s.patch)
	c.PrependReactor("delete", "*", s.delete)
	// Prepended last, so the faults come first.
	c.PrependReactor("*", "*", a.injected)
}

func (s server) create(action k8stesting.Action) (bool, runtime.Object, error) {
	if action.GetSubresource() != "" {
		return false, nil, nil
	}
	obj := action.(k8stesting.CreateAction).GetObject().DeepCopyObject()
	m, err := s.stamp(obj)
	if err != nil {
		return true, nil, err
	}
	if m.GetUID() == "" {
		// As the API server: a created object has a uid (a group's
		// members are bound by theirs).
		m.SetUID(types.UID("uid-" + m.GetName()))
	}
	if err := s.tracker.Create(action.GetResource(), obj, action.GetNamespace()); err != nil {
		return true, nil, err
	}
	stored, err := s.tracker.Get(action.GetResource(), action.GetNamespace(), m.GetName())
	return true, stored, err
}

func (s server) update(action k8stesting.Action) (bool, runtime.Object, error) {
	if !splitsStatus(action) {
		return false, nil, nil
	}
	obj := action.(k8stesting.UpdateAction).GetObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, nil, err
	}
	cur, err := s.current(action, m.GetName())
	if err != nil {
		return true, nil, err
	}
	if err := checkVersion(action, cur, m.GetResourceVersion()); err != nil {
		return true, nil, err
	}
	next, err := toMap(obj)
	if err != nil {
		return true, nil, err
	}
	return s.write(action, cur, next)
}

func (s server) patch(action k8stesting.Action) (bool, runtime.Object, error) {
	if !splitsStatus(action) {
		return false, nil, nil
	}
	pa := action.(k8stesting.PatchAction)
	if pa.GetPatchType() != types.MergePatchType {
		return true, nil, apierrors.NewBadRequest(fmt.Sprintf("the fake API server takes merge patches only, not %s", pa.GetPatchType()))
	}
	cur, err := s.current(action, pa.GetName())
	if err != nil {
		return true, nil, err
	}
	var patch map[string]any
	if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if md, ok := patch["metadata"].(map[string]any); ok {
		if rv, ok := md["resourceVersion"].(string); ok {
			if err := checkVersion(action, cur, rv); err != nil {
				return true, nil, err
			}
		}
		delete(md, "resourceVersion")
	}
	doc, err := toMap(cur)
	if err != nil {
		return true, nil, err
	}
	return s.write(action, cur, mergePatch(doc, patch).(map[string]any))
}

func (s server) delete(action k8stesting.Action) (bool, runtime.Object, error) {
	da := action.(k8stesting.DeleteAction)
	cur, err := s.current(action, da.GetName())
	if err != nil {
		return true, nil, err
	}
	m, err := meta.Accessor(cur)
	if err != nil {
		return true, nil, err
	}
	if p := da.GetDeleteOptions().Preconditions; p != nil {
		if p.UID != nil && *p.UID != m.GetUID() {
			return true, nil, conflict(action, m, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, m.GetUID()))
		}
		if p.ResourceVersion != nil {
			if err := checkVersion(action, cur, *p.ResourceVersion); err != nil {
				return true, nil, err
			}
		}
	}
	switch {
	case len(m.GetFinalizers()) == 0:
		return true, nil, s.tracker.Delete(action.GetResource(), action.GetNamespace(), m.GetName())
	case m.GetDeletionTimestamp() == nil:
		now := metav1.NewTime(Time)
		m.SetDeletionTimestamp(&now)
		m.SetResourceVersion(s.api.nextRV())
		return true, nil, s.tracker.Update(action.GetResource(), cur, action.GetNamespace())
	}
	return true, nil, nil
}

// splitsStatus: writes of the object and of its status subresource are
// served here; others (scale, ...) by the tracker.
func splitsStatus(action k8stesting.Action) bool {
	sub := action.GetSubresource()
	return sub == "" || sub == "status"
}

// stamp gives obj a fresh resourceVersion.
func (s server) stamp(obj runtime.Object) (metav1.Object, error) {
	m, err := meta.Accessor(obj)
	if err == nil {
		m.SetResourceVersion(s.api.nextRV())
	}
	return m, err
}

func (s server) current(action k8stesting.Action, name string) (runtime.Object, error) {
	return s.tracker.Get(action.GetResource(), action.GetNamespace(), name)
}

func checkVersion(action k8stesting.Action, cur runtime.Object, rv string) error {
	m, err := meta.Accessor(cur)
	if err != nil {
		return err
	}
	if rv == "" || rv == m.GetResourceVersion() {
		return nil
	}
	return conflict(action, m, fmt.Errorf("the object has been modified (resourceVersion %s, request %s)", m.GetResourceVersion(), rv))
}

func conflict(action k8stesting.Action, m metav1.Object, err error) error {
	return apierrors.NewConflict(action.GetResource().GroupResource(), m.GetName(), err)
}

// write stores next, the object a write of action asks for, over cur: a
// status write keeps all of cur but its status, any other write keeps
// cur's status and deletionTimestamp.
func (s server) write(action k8stesting.Action, cur runtime.Object, next map[string]any) (bool, runtime.Object, error) {
	doc, err := toMap(cur)
	if err != nil {
		return true, nil, err
	}
	if action.GetSubresource() == "status" {
		setOrDelete(doc, "status", next["status"])
		next = doc
	} else {
		setOrDelete(next, "status", doc["status"])
		md, _ := next["metadata"].(map[string]any)
		curMD, _ := doc["metadata"].(map[string]any)
		if md != nil {
			setOrDelete(md, "deletionTimestamp", curMD["deletionTimestamp"])
		}
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return true, nil, err
	}
	obj := reflect.New(reflect.TypeOf(cur).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(raw, obj); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	m, err := s.stamp(obj)
	if err != nil {
		return true, nil, err
	}
	if m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 {
		return true, obj, s.tracker.Delete(action.GetResource(), action.GetNamespace(), m.GetName())
	}
	return true, obj, s.tracker.Update(action.GetResource(), obj, action.GetNamespace())
}

func toMap(obj runtime.Object) (map[string]any, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	return doc, json.Unmarshal(raw, &doc)
}

func setOrDelete(m map[string]any, key string, v any) {
	if v == nil {
		delete(m, key)
		return
	}
	m[key] = v
}

// mergePatch applies an RFC 7386 merge patch to doc, which it changes.
func mergePatch(doc, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]any)
	if !ok {
		d = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(d, k)
			continue
		}
		d[k] = mergePatch(d[k], v)
	}
	return d
}
