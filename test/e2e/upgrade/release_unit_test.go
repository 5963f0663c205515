package upgrade

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestParseRelease(t *testing.T) {
	const commit = "0b5c65ecd0a383cd7a36a328677f51bd52fde215"
	for _, tc := range []struct {
		name, in string
		want     release
		err      string
	}{
		{name: "version and commit with comments and blank lines are read",
			in:   "# pointer\n\nversion=v0.1.0\ncommit=" + commit + "\n",
			want: release{Version: "v0.1.0", Commit: commit}},
		{name: "a prerelease tag is a version", in: "version=v1.0.0-rc.1\ncommit=" + commit,
			want: release{Version: "v1.0.0-rc.1", Commit: commit}},
		{name: "a missing commit is refused", in: "version=v0.1.0\n", err: "needs both"},
		{name: "a short commit is refused with how to get the full one", in: "version=v0.1.0\ncommit=0b5c65e\n", err: "git rev-parse"},
		{name: "a version without its v is refused", in: "version=0.1.0\ncommit=" + commit, err: "is not a release tag"},
		{name: "an unknown key is refused", in: "tag=v0.1.0\n", err: `unknown key "tag"`},
		{name: "a line without = is refused", in: "v0.1.0\n", err: "is not key=value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRelease([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// The pointer in the repository parses.
func TestPreviousReleaseFileParses(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), previousReleaseFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseRelease(b); err != nil {
		t.Fatal(err)
	}
}
