package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// CPU profiles of a phase (-profile DIR): while a create or delete phase
// runs, until its writes stopped, the benchmark takes back-to-back CPU
// profiles (profileChunk each) of kube-apiserver (its /debug/pprof, on by
// default in a cluster, read as the admin), etcd (--enable-pprof) and each
// of our processes (--enable-pprof). The chunks of one process and phase are files
// DIR/<run>-<phase>-<process>-<k>.pb.gz; `go tool pprof` merges them when
// given all at once, and the report prints the top functions of each.

var profileDir string

const profileChunk = 10 * time.Second

// profiler takes one phase's profiles.
type profiler struct {
	cancel   context.CancelFunc
	stopping chan struct{} // closed: start no further chunk
	once     sync.Once
	wg       sync.WaitGroup
	mu       sync.Mutex
	files    profileSet
	errs     []string
}

// profileTarget is one process whose /debug/pprof/profile can be read.
type profileTarget struct {
	name, url, token string
	client           *http.Client
}

func profileTargets(b *bed) []profileTarget {
	return append([]profileTarget{
		{name: "kube-apiserver", url: b.api.url, token: framework.AdminToken, client: b.api.client},
		{name: "etcd", url: b.env.EtcdURL(), client: http.DefaultClient},
	}, ourTargets(b)...)
}

// ourTargets are our running processes.
func ourTargets(b *bed) []profileTarget {
	var out []profileTarget
	if b.run != nil {
		for _, c := range b.run.ours {
			out = append(out, profileTarget{name: c.Name, url: "http://" + c.HTTPAddr, client: http.DefaultClient})
		}
	}
	return out
}

// startProfiles starts profiling for the phase run/phase; nil without
// -profile or when the run is not profiled (on).
func startProfiles(b *bed, on bool, run, phase string) *profiler {
	if profileDir == "" || !on {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &profiler{cancel: cancel, stopping: make(chan struct{}), files: profileSet{}}
	for _, t := range profileTargets(b) {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for k := 0; ; k++ {
				select {
				case <-p.stopping:
					return
				default:
				}
				f := filepath.Join(profileDir, fmt.Sprintf("%s-%s-%s-%03d.pb.gz", run, phase, t.name, k))
				if err := t.fetch(ctx, f); err != nil {
					if ctx.Err() == nil {
						p.mu.Lock()
						p.errs = append(p.errs, fmt.Sprintf("%s: %v", t.name, err))
						p.mu.Unlock()
					}
					return
				}
				p.mu.Lock()
				p.files[t.name] = append(p.files[t.name], f)
				p.mu.Unlock()
			}
		}()
	}
	return p
}

// fetch writes one profileChunk-long CPU profile to file.
func (t profileTarget) fetch(ctx context.Context, file string) error {
	return t.get(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(profileChunk/time.Second)), file)
}

// heapAtRest writes a heap profile (after a GC) of each of our processes
// to DIR/<run>-rest-<process>.pb.gz: what their memory holds with the N
// snapshots ready and nothing moving.
func heapAtRest(ctx context.Context, b *bed, res *scenarioResult) profileSet {
	if profileDir == "" || b.run == nil {
		return nil
	}
	out := profileSet{}
	for _, t := range ourTargets(b) {
		f := filepath.Join(profileDir, fmt.Sprintf("%s-rest-%s.pb.gz", res.Tag, t.name))
		if err := t.get(ctx, "/debug/pprof/heap?gc=1", f); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("heap profile of %s: %v", t.name, err))
			continue
		}
		out[t.name] = []string{f}
	}
	return out
}

// get writes the answer to path (a /debug/pprof URL) to file.
func (t profileTarget) get(ctx context.Context, path, file string) error {
	url := t.url + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	c := *t.client
	c.Timeout = profileChunk + 30*time.Second
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, body, 0o644)
}

// stop ends profiling once the chunk under way has finished (its tail runs
// past the phase by less than profileChunk) and returns the files per
// process and the errors.
func (p *profiler) stop() (profileSet, []string) {
	if p == nil {
		return nil, nil
	}
	p.once.Do(func() { close(p.stopping) })
	p.wg.Wait()
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.files, p.errs
}

// collect stops p and notes its errors on res.
func (p *profiler) collect(res *scenarioResult) profileSet {
	files, errs := p.stop()
	for _, e := range errs {
		res.Notes = append(res.Notes, "profile: "+e)
	}
	return files
}

var runSeq atomic.Int32

// runTag names the profiles of one scenario run: system, N and a sequence
// number (repeats of the same system and N differ).
func runTag(sys *system, o scenarioOptions) string {
	return fmt.Sprintf("%02d-%s-n%d", runSeq.Add(1), sys.ID, o.n)
}

// profileSet is the profiles of one phase: files per process.
type profileSet map[string][]string

// pprofTop runs `go tool pprof -top` over files (merged), with extra flags
// (a sample index), and returns the first n lines of functions, by
// cumulative value when cum, flat otherwise.
func pprofTop(files []string, n int, cum bool, extra ...string) (string, error) {
	if len(files) == 0 {
		return "", nil
	}
	args := append([]string{"tool", "pprof", "-top", fmt.Sprintf("-nodecount=%d", n)}, extra...)
	if cum {
		args = append(args, "-cum")
	}
	out, err := exec.Command("go", append(args, files...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go tool pprof: %v: %s", err, out)
	}
	return string(out), nil
}

// processes lists the processes of a set in a fixed order.
func (s profileSet) processes() []string {
	var out []string
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
