package faults

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// findSecret lists the forms in which value appears in b: raw; base64
// encoded at any of the three byte alignments (a Secret's data in a JSON
// body); inside the hex dumps client-go writes for binary (protobuf)
// bodies, where the value is split over lines of 16 bytes.
func findSecret(b []byte, value string) []string {
	var found []string
	if bytes.Contains(b, []byte(value)) {
		found = append(found, "raw")
	}
	for _, f := range base64Forms(value) {
		if bytes.Contains(b, []byte(f)) {
			found = append(found, "base64 "+f)
		}
	}
	if bytes.Contains(hexDumpBytes(b), []byte(value)) {
		found = append(found, "in a hex dump")
	}
	return found
}

// base64Forms are the parts of value's base64 encoding that do not depend
// on the bytes around it, one for each alignment.
func base64Forms(value string) []string {
	var out []string
	for pad := 0; pad < 3; pad++ {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", pad) + value))
		start := 0
		if pad > 0 {
			start = 4 // the first group mixes the padding in
		}
		end := len(enc) - 4 // the last group mixes what follows in
		if end-start >= 12 {
			out = append(out, enc[start:end])
		}
	}
	return out
}

// hexDumpLine is one line of encoding/hex.Dump: offset, up to 16 bytes.
var hexDumpLine = regexp.MustCompile(`(?m)^\s*[0-9a-f]{8}\s{2}((?:[0-9a-f]{2}\s{1,2}){1,16})`)

// hexDumpBytes concatenates the bytes of every hex dump line in b.
func hexDumpBytes(b []byte) []byte {
	var out []byte
	for _, m := range hexDumpLine.FindAllSubmatch(b, -1) {
		raw, err := hex.DecodeString(strings.Join(strings.Fields(string(m[1])), ""))
		if err == nil {
			out = append(out, raw...)
		}
	}
	return out
}

// apiObjects renders, as JSON, every object on the API server a leak could
// land in: events of every namespace, every snapshot object and class,
// claims, volumes, Leases and namespaces. Secrets are left out: they are
// where the value belongs.
func apiObjects(t *testing.T, env *framework.Env) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	all := metav1.ListOptions{}
	snap, core := env.Snap.SnapshotV1(), env.Kube.CoreV1()
	lists := map[string]func() (any, error){
		"events":                  func() (any, error) { return core.Events("").List(ctx, all) },
		"volumesnapshots":         func() (any, error) { return snap.VolumeSnapshots("").List(ctx, all) },
		"volumesnapshotcontents":  func() (any, error) { return snap.VolumeSnapshotContents().List(ctx, all) },
		"volumesnapshotclasses":   func() (any, error) { return snap.VolumeSnapshotClasses().List(ctx, all) },
		"persistentvolumeclaims":  func() (any, error) { return core.PersistentVolumeClaims("").List(ctx, all) },
		"persistentvolumes":       func() (any, error) { return core.PersistentVolumes().List(ctx, all) },
		"namespaces":              func() (any, error) { return core.Namespaces().List(ctx, all) },
		"leases":                  func() (any, error) { return env.Kube.CoordinationV1().Leases("").List(ctx, all) },
		"events (events.k8s.io)":  func() (any, error) { return env.Kube.EventsV1().Events("").List(ctx, all) },
		"volumegroupsnapshots":    func() (any, error) { return env.Snap.GroupsnapshotV1().VolumeGroupSnapshots("").List(ctx, all) },
		"volumegroupsnapshotcont": func() (any, error) { return env.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().List(ctx, all) },
	}
	out := map[string][]byte{}
	for name, list := range lists {
		obj, err := list()
		if err != nil {
			t.Fatalf("list %s: %v", name, err)
		}
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("API objects: %s", name)] = b
	}
	return out
}

func TestFindSecretSeesEveryForm(t *testing.T) {
	const v = "planted-S3cr3t-0badc0de"
	cases := map[string]struct {
		text string
		want bool
	}{
		"the raw value":                   {`msg="` + v + `"`, true},
		"base64 in a JSON body, aligned":  {`"data":{"k":"` + base64.StdEncoding.EncodeToString([]byte(v)) + `"}`, true},
		"base64 after one byte":           {base64.StdEncoding.EncodeToString([]byte("a" + v + "b")), true},
		"base64 after two bytes":          {base64.StdEncoding.EncodeToString([]byte("ab" + v)), true},
		"a protobuf body in a hex dump":   {"I0101 body=<\n" + hex.Dump([]byte("\x0a\x05hello\x12\x17"+v+"\x1a")) + " >", true},
		"a value without the planted one": {"planted-S3cr3t-other", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := findSecret([]byte(tc.text), v); (len(got) > 0) != tc.want {
				t.Errorf("findSecret = %v, want found: %v", got, tc.want)
			}
		})
	}
}
