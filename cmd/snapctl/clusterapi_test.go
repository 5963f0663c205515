package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// clusterAPI is an API server of fixed lists: a GET of a path it holds
// answers that list, filtered by the labelSelector and a metadata.name
// fieldSelector as the API server filters (other field selectors are not
// applied); a PATCH of an object below a
// list it holds is recorded and answered with the object patched. Every
// other path is NotFound, which is how an API server answers for a
// resource it does not serve.
type clusterAPI struct {
	lists map[string][]any // path -> items, each an object that marshals to JSON
	mu    sync.Mutex
	gets  []string // path?query of each GET
	// patches are "path body" of each PATCH.
	patches []string
}

func (f *clusterAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		f.mu.Lock()
		f.gets = append(f.gets, r.URL.Path+"?"+r.URL.RawQuery)
		f.mu.Unlock()
		items, ok := f.lists[r.URL.Path]
		if !ok {
			break
		}
		sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
		if err != nil {
			answerJSON(w, http.StatusBadRequest, apiStatus(http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error()))
			return
		}
		name := ""
		if n, ok := strings.CutPrefix(r.URL.Query().Get("fieldSelector"), "metadata.name="); ok {
			name = n
		}
		out := []any{}
		for _, it := range items {
			m := asMap(it)
			md, _ := m["metadata"].(map[string]any)
			ls := labels.Set{}
			if l, ok := md["labels"].(map[string]any); ok {
				for k, v := range l {
					ls[k], _ = v.(string)
				}
			}
			if sel.Matches(ls) && (name == "" || md["name"] == name) {
				out = append(out, m)
			}
		}
		list := map[string]any{"metadata": map[string]any{}, "items": out}
		if len(items) > 0 {
			// Items that name their kind make a list that names its own,
			// which the dynamic client needs; typed clients take either.
			if m := asMap(items[0]); m["kind"] != nil {
				list["apiVersion"], list["kind"] = m["apiVersion"], m["kind"].(string)+"List"
			}
		}
		answerJSON(w, http.StatusOK, list)
		return
	case http.MethodPatch:
		body := readBody(r, nil)
		f.mu.Lock()
		f.patches = append(f.patches, r.URL.Path+" "+string(body))
		f.mu.Unlock()
		if _, ok := f.lists[path.Dir(r.URL.Path)]; ok {
			answerJSON(w, http.StatusOK, map[string]any{"metadata": map[string]any{"name": path.Base(r.URL.Path)}})
			return
		}
	}
	answerJSON(w, http.StatusNotFound, apiStatus(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource"))
}

// asMap is obj as its JSON object.
func asMap(obj any) map[string]any {
	data, _ := json.Marshal(obj)
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	return m
}

// serve starts api and returns a kubeconfig of it whose context's
// namespace is ns; the server stops with the test.
func serve(t *testing.T, api http.Handler, ns string) string {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, kubeconfig, "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "+srv.URL+"}}]\n"+
		"users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u, namespace: "+ns+"}}]\ncurrent-context: x\n")
	return kubeconfig
}
