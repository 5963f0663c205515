package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/manifest"
	"github.com/snapkeeper/snapkeeper/pkg/validation"
)

type options = validation.Options

// object is one decoded document and where it came from.
type object struct {
	where string
	obj   metav1.Object
}

// load reads every document of the paths; documents of kinds the rules do
// not know (Deployments in a chart render, say) are counted and skipped.
func load(paths []string) (objs []object, skipped int, err error) {
	seen := map[string]bool{} // overlapping paths read a file once
	for _, root := range paths {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !isManifest(path, root) || seen[filepath.Clean(path)] {
				return nil
			}
			seen[filepath.Clean(path)] = true
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			docs, err := manifest.SplitDocuments(data)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			for i, doc := range docs {
				obj, err := manifest.Decode(doc)
				if err != nil {
					if errors.Is(err, manifest.ErrUnsupportedKind) {
						skipped++
						continue
					}
					return fmt.Errorf("%s, document %d: %w", path, i+1, err)
				}
				if obj.GetNamespace() == "" && namespaced(obj) {
					obj.SetNamespace("default")
				}
				objs = append(objs, object{where: fmt.Sprintf("%s#%d", path, i+1), obj: obj})
			}
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
	}
	return objs, skipped, nil
}

func isManifest(path, root string) bool {
	if path == root {
		return true // a file named on the command line, whatever its name
	}
	switch filepath.Ext(path) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

func namespaced(obj metav1.Object) bool {
	switch obj.(type) {
	case *snapv1.VolumeSnapshot, *corev1.PersistentVolumeClaim:
		return true
	}
	return false
}

func judged(objs []object) int {
	n := 0
	for _, o := range objs {
		if judgeable(o.obj) {
			n++
		}
	}
	return n
}

func judgeable(obj metav1.Object) bool {
	switch obj.(type) {
	case *snapv1.VolumeSnapshotClass, *snapv1.VolumeSnapshot, *snapv1.VolumeSnapshotContent, *corev1.PersistentVolumeClaim:
		return true
	}
	return false
}

// validateAll judges each object as a CREATE against all the others and
// prints denials and warnings; it returns the number denied.
func validateAll(objs []object, o options, out io.Writer) int {
	denied := 0
	for i, cur := range objs {
		if !judgeable(cur.obj) {
			continue
		}
		lookup := &validation.StaticLookup{}
		for j, other := range objs {
			if j != i {
				if err := lookup.Add(other.obj); err != nil {
					continue // a kind the lookup does not serve (Namespace)
				}
			}
		}
		v := validation.Validator{Lookup: lookup, Options: o}
		errs, warnings, err := v.Validate(validation.Create, cur.obj, nil)
		name := describe(cur.obj)
		switch {
		case err != nil:
			fmt.Fprintf(out, "%s: %s: error: %v\n", cur.where, name, err)
			denied++
		case len(errs) > 0:
			denied++
			for _, e := range errs {
				fmt.Fprintf(out, "%s: %s: DENIED: %s\n", cur.where, name, e.Error())
			}
		}
		for _, w := range warnings {
			fmt.Fprintf(out, "%s: %s: warning: %s\n", cur.where, name, w)
		}
	}
	return denied
}

func describe(obj metav1.Object) string {
	kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1.")
	if ns := obj.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", kind, ns, obj.GetName())
	}
	return fmt.Sprintf("%s %s", kind, obj.GetName())
}
