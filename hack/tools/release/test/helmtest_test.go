package releasetest

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// testPodCommand is what the chart's `helm test` Pod runs
// (charts/snapkeeper/templates/tests/webhook-test.yaml).
var testPodCommand = []string{"/usr/local/bin/snapctl", "selftest", "webhook"}

// TestChartTestPodRunsTheReleasedImage renders the packaged chart's `helm
// test` Pod with the chart's own values and checks that it runs this
// release's image (IMAGE_REPOSITORY of release.mk, the image tag as
// appVersion; the index digest when image.digest pins it), and that the
// image holds the command the Pod runs.
func TestChartTestPodRunsTheReleasedImage(t *testing.T) {
	r := expected(t)
	tgz := packagedChart(t, r)
	idx, _ := imageIndex(t, r)
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	repo := envOr("SNAPKEEPER_IMAGE_REPOSITORY", "ghcr.io/snapkeeper/snapkeeper")
	for _, c := range []struct {
		set  []string
		want string
	}{
		{nil, repo + ":" + r.imageTag},
		{[]string{"--set", "image.digest=" + digest.String()}, repo + "@" + digest.String()},
	} {
		image, command := renderTestPod(t, r, tgz, c.set...)
		if image != c.want {
			t.Errorf("helm test Pod (%v) runs %s, want the released image %s", c.set, image, c.want)
		}
		if !slices.Equal(command, testPodCommand) {
			t.Errorf("helm test Pod (%v) runs %q, want %q", c.set, command, testPodCommand)
		}
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range im.Manifests {
		if m.Platform.Architecture != runtime.GOARCH {
			continue
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		extract(t, img, strings.TrimPrefix(testPodCommand[0], "/"))
	}
}

// renderTestPod is the image and command of the one container of the
// packaged chart's test Pod, rendered with helm template.
func renderTestPod(t *testing.T, r release, tgz string, set ...string) (string, []string) {
	t.Helper()
	home := t.TempDir()
	args := append([]string{"template", "sk", tgz, "--namespace", "sk", "--show-only", "templates/tests/webhook-test.yaml"}, set...)
	out := run(t, home, helmEnv(home), filepath.Join(r.root, "bin", "helm"), args...)
	dec := yaml.NewDecoder(bytes.NewReader([]byte(out)))
	for {
		var doc struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Containers []struct {
					Image   string   `yaml:"image"`
					Command []string `yaml:"command"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			t.Fatalf("no Pod in:\n%s", out)
		}
		if err != nil {
			t.Fatal(err)
		}
		if doc.Kind == "Pod" {
			if len(doc.Spec.Containers) != 1 {
				t.Fatalf("test Pod has %d containers", len(doc.Spec.Containers))
			}
			return doc.Spec.Containers[0].Image, doc.Spec.Containers[0].Command
		}
	}
}
