package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Process is a child process started by the framework. It runs in its own
// process group and receives SIGKILL when the test binary dies (Pdeathsig),
// so no process outlives the tests even after a panic or a timeout.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	once    sync.Once
}

// StartProcess starts bin with args; stdout and stderr go to dir/name.log.
func StartProcess(dir, name, bin string, args []string, env ...string) (*Process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process group.
func (p *Process) Signal(sig syscall.Signal) { _ = syscall.Kill(-p.cmd.Process.Pid, sig) }

// Freeze stops every thread of the process (SIGSTOP to its group) and
// returns once the kernel shows them all stopped. kill(2) returns before
// the stop is done: the kernel wakes one thread, which stops the others
// when it next runs, so on a loaded machine another thread can serve a
// request for a few milliseconds after the signal was sent.
func (p *Process) Freeze(timeout time.Duration) error {
	p.Signal(syscall.SIGSTOP)
	deadline := time.Now().Add(timeout)
	for {
		running, err := p.threadsNotStopped()
		if err == nil && running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d threads still running %v after SIGSTOP (%v)", p.Name, running, timeout, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// threadsNotStopped counts the threads of the process whose state in
// /proc/<pid>/task/<tid>/stat is not T (stopped).
func (p *Process) threadsNotStopped() (int, error) {
	dir := fmt.Sprintf("/proc/%d/task", p.Pid())
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return -1, fmt.Errorf("list threads: %w", err)
	}
	running := 0
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // the thread ended
		}
		// The state follows the command name, which is in parentheses
		// and may itself hold spaces or parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			running++
		}
	}
	return running, nil
}

// Stop sends SIGTERM to the process group, waits up to grace, then SIGKILL.
func (p *Process) Stop(grace time.Duration) {
	p.once.Do(func() {
		if p.Exited() {
			return
		}
		p.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			p.Signal(syscall.SIGKILL)
			<-p.done
		}
	})
}

// Wait blocks until the process ends or ctx is done.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Tail returns the last n bytes of the process log, for failure messages.
func (p *Process) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// healthClient polls the health endpoints of loopback test servers. It
// trusts any certificate: what a server presents is checked where that is
// the point of a test.
var healthClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // health polls of loopback test servers
}}

// HTTPOK reports whether url (http or https) answers 200.
func HTTPOK(url string) error {
	resp, err := healthClient.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// WaitServing waits until url answers 200 (HTTPOK) while the process runs;
// the community binaries have no readiness endpoint, so their metrics stand
// in. The error carries the end of the process's log.
func (p *Process) WaitServing(url string, deadline time.Time) error {
	for {
		err := HTTPOK(url)
		if err == nil {
			return nil
		}
		if p.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("%s not serving %s (%v):\n%s", p.Name, url, err, p.Tail(3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitOK is WaitServing within timeout that fails the test.
func (p *Process) WaitOK(t T, url string, timeout time.Duration) {
	t.Helper()
	if err := p.WaitServing(url, time.Now().Add(timeout)); err != nil {
		t.Fatalf("%v", err)
	}
}
