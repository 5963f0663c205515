package snapscheduler

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// source is a snapscheduler SnapshotSchedule with spec as YAML.
func src(t *testing.T, name, spec string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte("apiVersion: snapscheduler.backube/v1\nkind: SnapshotSchedule\nmetadata:\n  name: "+name+"\n  namespace: shop\nspec:\n"+spec), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestConvert(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       string   // the converted spec as YAML; "" when refused
		notes      []string // a substring of each note, in order
		err        string
	}{
		{name: "maxCount", spec: "  schedule: \"0 * * * *\"\n  claimSelector: {matchLabels: {backup: hourly}}\n  retention: {maxCount: 24}\n",
			want:  "claimSelector:\n  matchLabels:\n    backup: hourly\nretention:\n  keepLast: 24\nschedule: 0 * * * *\n",
			notes: []string{"counts only ready snapshots"}},
		{name: "expires", spec: "  schedule: \"@daily\"\n  claimSelector: {}\n  retention: {expires: 168h}\n",
			want:  "claimSelector: {}\nretention:\n  maxAge: 168h\nschedule: '@daily'\n",
			notes: []string{"never deletes a claim's newest ready snapshot"}},
		{name: "both retention fields", spec: "  schedule: \"0 0 * * *\"\n  claimSelector: {}\n  retention: {maxCount: 7, expires: 720h}\n",
			want:  "claimSelector: {}\nretention:\n  keepLast: 7\n  maxAge: 720h\nschedule: 0 0 * * *\n",
			notes: []string{"keepLast 7", "maxAge 720h"}},
		{name: "CRON_TZ prefix", spec: "  schedule: \"CRON_TZ=Europe/Berlin 30 2 * * *\"\n  claimSelector: {}\n  retention: {maxCount: 3}\n",
			want:  "claimSelector: {}\nretention:\n  keepLast: 3\nschedule: 30 2 * * *\ntimeZone: Europe/Berlin\n",
			notes: []string{"CRON_TZ=Europe/Berlin prefix of the schedule is spec.timeZone", "keepLast 3"}},
		{name: "TZ prefix", spec: "  schedule: \"TZ=America/New_York @hourly\"\n  claimSelector: {}\n  retention: {maxCount: 3}\n",
			want:  "claimSelector: {}\nretention:\n  keepLast: 3\nschedule: '@hourly'\ntimeZone: America/New_York\n",
			notes: []string{"TZ=America/New_York", "keepLast 3"}},
		{name: "disabled, class and labels", spec: "  schedule: \"@hourly\"\n  disabled: true\n  claimSelector: {}\n  retention: {maxCount: 2}\n" +
			"  snapshotTemplate: {labels: {team: shop}, snapshotClassName: csi-fast}\n",
			want:  "claimSelector: {}\nretention:\n  keepLast: 2\nschedule: '@hourly'\nsnapshotTemplate:\n  labels:\n    team: shop\n  volumeSnapshotClassName: csi-fast\nsuspend: true\n",
			notes: []string{"suspend: true", "keepLast 2"}},
		{name: "unknown fields are named", spec: "  schedule: \"@hourly\"\n  claimSelector: {}\n  retention: {maxCount: 2, minCount: 1}\n  paused: x\n",
			want:  "claimSelector: {}\nretention:\n  keepLast: 2\nschedule: '@hourly'\n",
			notes: []string{"spec.paused is not converted", "spec.retention.minCount is not converted", "keepLast 2"}},
		{name: "no retention is refused", spec: "  schedule: \"@hourly\"\n  claimSelector: {}\n", err: "keeps every snapshot"},
		{name: "bad zone", spec: "  schedule: \"TZ=Mars/Olympus 0 * * * *\"\n  claimSelector: {}\n  retention: {maxCount: 2}\n", err: "not an IANA time zone"},
		{name: "@every", spec: "  schedule: \"@every 2h\"\n  claimSelector: {}\n  retention: {maxCount: 2}\n", err: "@every is not supported"},
		{name: "bad expires", spec: "  schedule: \"@hourly\"\n  claimSelector: {}\n  retention: {expires: soon}\n", err: "retention.expires"},
		{name: "zero maxCount", spec: "  schedule: \"@hourly\"\n  claimSelector: {}\n  retention: {maxCount: 0}\n", err: "at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Convert(src(t, "hourly", tc.spec))
			if tc.err != "" {
				if r.Err == nil || !strings.Contains(r.Err.Error(), tc.err) || r.Schedule != nil {
					t.Fatalf("err %v, want one with %q", r.Err, tc.err)
				}
				return
			}
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if s := r.Schedule; s.Name != "hourly" || s.Namespace != "shop" || s.APIVersion != "snapkeeper.io/v1alpha1" || s.Kind != "SnapshotSchedule" {
				t.Errorf("meta %+v %+v", s.TypeMeta, s.ObjectMeta)
			}
			doc, err := manifest(r)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := yaml.Unmarshal(doc, &m); err != nil {
				t.Fatal(err)
			}
			got, _ := yaml.Marshal(m["spec"])
			if string(got) != tc.want {
				t.Errorf("spec\n%s\nwant\n%s", got, tc.want)
			}
			if len(r.Notes) != len(tc.notes) {
				t.Fatalf("notes %q, want %d", r.Notes, len(tc.notes))
			}
			for i, n := range tc.notes {
				if !strings.Contains(r.Notes[i], n) {
					t.Errorf("note %d %q lacks %q", i, r.Notes[i], n)
				}
			}
		})
	}
}

func TestLongNameIsRefused(t *testing.T) {
	r := Convert(src(t, strings.Repeat("a", 64), "  schedule: \"@hourly\"\n  claimSelector: {}\n  retention: {maxCount: 2}\n"))
	if r.Err == nil || !strings.Contains(r.Err.Error(), "at most 63") {
		t.Fatalf("err %v", r.Err)
	}
}

func TestReadAndWriteYAML(t *testing.T) {
	in := `# a list, as kubectl get -o yaml writes it
apiVersion: v1
kind: List
items:
- apiVersion: snapscheduler.backube/v1
  kind: SnapshotSchedule
  metadata: {name: hourly, namespace: shop, uid: x, resourceVersion: "5", creationTimestamp: "2025-01-01T00:00:00Z"}
  spec:
    schedule: "CRON_TZ=Europe/Berlin 0 * * * *"
    claimSelector: {matchLabels: {backup: hourly}}
    retention: {maxCount: 24}
  status: {nextSnapshotTime: "2026-01-01T00:00:00Z"}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: other}
---
---
apiVersion: snapscheduler.backube/v1
kind: SnapshotSchedule
metadata: {name: forever, namespace: shop}
spec: {schedule: "@daily", claimSelector: {}}
`
	objs, ignored, err := Read(strings.NewReader(in))
	if err != nil || len(objs) != 2 || ignored != 1 {
		t.Fatalf("read %d objects, %d ignored, %v", len(objs), ignored, err)
	}
	results := []Result{Convert(objs[0]), Convert(objs[1])}
	var b bytes.Buffer
	if err := WriteYAML(&b, results); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	want := `---
# From snapscheduler SnapshotSchedule shop/hourly.
# - the CRON_TZ=Europe/Berlin prefix of the schedule is spec.timeZone: Europe/Berlin
# - retention.maxCount 24 is keepLast 24: it counts only ready snapshots (snapscheduler counted
#   every one), keeps those not ready yet that are newer than the newest ready one, and deletes a
#   failed one once a newer one is ready
apiVersion: snapkeeper.io/v1alpha1
kind: SnapshotSchedule
metadata:
  name: hourly
  namespace: shop
spec:
  claimSelector:
    matchLabels:
      backup: hourly
  retention:
    keepLast: 24
  schedule: 0 * * * *
  timeZone: Europe/Berlin
---
# NOT converted: snapscheduler SnapshotSchedule shop/forever: it has no retention (neither
# retention.maxCount nor retention.expires), so snapscheduler keeps every snapshot; a snapkeeper
# schedule needs a retention: add one of them to the source (a large maxCount keeps nearly
# everything), or write spec.retention of the converted schedule yourself
`
	if _, body, ok := strings.Cut(out, "\n---\n"); !ok || "---\n"+body != want {
		t.Errorf("output\n%s\nwant after the header\n%s", out, want)
	}
	if !strings.HasPrefix(out, "# SnapshotSchedules converted from snapscheduler.backube/v1") || !strings.Contains(out, "--adopt") {
		t.Errorf("header\n%s", out)
	}
	// What is printed reads back as the schedule (kubectl apply's view).
	var back map[string]any
	docs := strings.Split(out, "\n---\n")
	if err := yaml.Unmarshal([]byte(docs[1]), &back); err != nil || back["kind"] != "SnapshotSchedule" {
		t.Errorf("document 2 does not read back: %v %v", back, err)
	}
}

func TestSplitTimeZone(t *testing.T) {
	for line, want := range map[string][2]string{
		"0 * * * *":                       {"0 * * * *", ""},
		"  TZ=UTC 0 * * * *":              {"0 * * * *", "UTC"},
		"CRON_TZ=Asia/Kolkata  @daily":    {"@daily", "Asia/Kolkata"},
		"CRON_TZ=Europe/Berlin 0 3 * * 1": {"0 3 * * 1", "Europe/Berlin"},
	} {
		rest, tz, _ := SplitTimeZone(line)
		if rest != want[0] || tz != want[1] {
			t.Errorf("SplitTimeZone(%q) = %q, %q; want %q, %q", line, rest, tz, want[0], want[1])
		}
	}
}
