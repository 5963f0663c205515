package snapscheduler

import (
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/snapkeeper/snapkeeper/pkg/schedule"
)

// header is the comment above the converted schedules: what holds for
// every one of them.
var header = []string{
	"SnapshotSchedules converted from snapscheduler.backube/v1 to snapkeeper.io/v1alpha1, same names.",
	"Suspend or delete the snapscheduler schedules when these are applied, or both cut snapshots.",
	"New snapshots are named <schedule>-<claim>-<YYYYMMDDHHMM> and labelled " + schedule.LabelSchedule + ".",
	"The snapshots snapscheduler cut are neither counted nor deleted by these schedules until they",
	"carry that label too: convert-snapscheduler --adopt labels them.",
}

// WriteYAML prints the converted schedules as a multi-document YAML stream
// that kubectl apply takes: each after a comment naming its source and what
// changed in meaning. A source that cannot be converted is a comment only,
// with the reason.
func WriteYAML(w io.Writer, results []Result) error {
	var b strings.Builder
	comment(&b, header...)
	for _, r := range results {
		b.WriteString("---\n")
		if r.Err != nil {
			comment(&b, "NOT converted: snapscheduler SnapshotSchedule "+r.Source()+": "+r.Err.Error())
			continue
		}
		lines := []string{"From snapscheduler SnapshotSchedule " + r.Source() + "."}
		for _, n := range r.Notes {
			lines = append(lines, "- "+n)
		}
		comment(&b, lines...)
		doc, err := manifest(r)
		if err != nil {
			return fmt.Errorf("%s: %w", r.Source(), err)
		}
		b.Write(doc)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// manifest is the schedule's YAML without the fields a new object leaves
// empty (creationTimestamp, status, an empty template).
func manifest(r Result) ([]byte, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r.Schedule)
	if err != nil {
		return nil, err
	}
	delete(u, "status")
	if md, ok := u["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	if spec, ok := u["spec"].(map[string]any); ok {
		if t, ok := spec["snapshotTemplate"].(map[string]any); ok && len(t) == 0 {
			delete(spec, "snapshotTemplate")
		}
	}
	return yaml.Marshal(u)
}

// comment writes lines as YAML comments, each wrapped at about 100
// characters.
func comment(b *strings.Builder, lines ...string) {
	const width = 100
	for _, l := range lines {
		indent := ""
		if strings.HasPrefix(l, "- ") {
			indent = "  "
		}
		b.WriteString("#")
		col := 1 // characters on the line so far
		for i, word := range strings.Fields(l) {
			if i > 0 && col+1+len(word) > width {
				b.WriteString("\n# " + indent)
				col = 2 + len(indent)
			} else {
				b.WriteString(" ")
				col++
			}
			b.WriteString(word)
			col += len(word)
		}
		b.WriteString("\n")
	}
}
