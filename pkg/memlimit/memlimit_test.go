package memlimit

import (
	"context"
	"io/fs"
	"runtime/debug"
	"strings"
	"testing"
)

func env(vars map[string]string, files map[string]string) Env {
	return Env{
		Getenv: func(k string) string { return vars[k] },
		ReadFile: func(name string) ([]byte, error) {
			if v, ok := files[name]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		},
	}
}

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		vars       map[string]string
		files      map[string]string
		want       int64
		wantSource string
		wantErr    string
	}{
		{name: "downward API bytes", vars: map[string]string{EnvVar: "268435456"}, want: 256 << 20, wantSource: EnvVar},
		{name: "quantity", vars: map[string]string{EnvVar: "256Mi"}, want: 256 << 20, wantSource: EnvVar},
		{name: "env before cgroup", vars: map[string]string{EnvVar: "1Gi"}, files: map[string]string{cgroupFiles[0]: "1048576\n"}, want: 1 << 30, wantSource: EnvVar},
		{name: "cgroup v2", files: map[string]string{cgroupFiles[0]: "536870912\n"}, want: 512 << 20, wantSource: cgroupFiles[0]},
		{name: "cgroup v2 unlimited", files: map[string]string{cgroupFiles[0]: "max\n"}, wantSource: cgroupFiles[0]},
		{name: "cgroup v1", files: map[string]string{cgroupFiles[1]: "134217728\n"}, want: 128 << 20, wantSource: cgroupFiles[1]},
		{name: "cgroup v1 unlimited", files: map[string]string{cgroupFiles[1]: "9223372036854771712\n"}, wantSource: cgroupFiles[1]},
		{name: "nothing"},
		{name: "bad env", vars: map[string]string{EnvVar: "lots"}, wantErr: `SNAPKEEPER_MEMORY_LIMIT="lots" is not a memory quantity`},
		{name: "negative env", vars: map[string]string{EnvVar: "-1"}, wantErr: "must be positive"},
		{name: "bad cgroup", files: map[string]string{cgroupFiles[0]: "many"}, wantErr: `holds "many", not a number of bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, source, err := env(tc.vars, tc.files).Limit()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || source != tc.wantSource {
				t.Errorf("Limit() = %d from %q, want %d from %q", got, source, tc.want, tc.wantSource)
			}
		})
	}
}

func TestApply(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	Apply(context.Background(), env(map[string]string{EnvVar: "256Mi"}, nil))
	if got, want := debug.SetMemoryLimit(-1), Soft(256<<20); got != want {
		t.Errorf("soft limit %d, want %d", got, want)
	}

	// GOMEMLIMIT wins: Apply changes nothing.
	debug.SetMemoryLimit(before)
	Apply(context.Background(), env(map[string]string{"GOMEMLIMIT": "100MiB", EnvVar: "256Mi"}, nil))
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("soft limit %d with GOMEMLIMIT set, want it untouched (%d)", got, before)
	}

	// A limit that cannot be read changes nothing either.
	Apply(context.Background(), env(map[string]string{EnvVar: "lots"}, nil))
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("soft limit %d after an unreadable limit, want it untouched (%d)", got, before)
	}
}
