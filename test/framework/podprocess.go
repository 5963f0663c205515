package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodProcess runs one container of a Deployment stored on the API server
// as a local process, the way the kubelet would: the container's arguments
// with $(VAR) references expanded from its env, and the ServiceAccount's
// token (from the TokenRequest API) as its identity. Rewrite replaces what
// differs on this machine (ports, paths of mounted volumes). No kubelet
// runs here: this is how the suites check that the arguments and RBAC a
// chart renders are the ones our binaries work with.
type PodProcess struct {
	Namespace, Deployment, Container string
	// Pod is the pod's name (fieldRef metadata.name); default
	// "<deployment>-0". Two replicas of one Deployment need two names.
	Pod     string
	Rewrite map[string]string // argument prefix -> replacement argument
	Extra   []string          // appended after the rendered arguments
	// Confine runs the process under the container's securityContext
	// (confine.go) where this machine allows it. Readable and Writable are
	// the local stand-ins of the pod's read-only and writable volumes
	// (an emptyDir), which the process's user gets.
	Confine            bool
	Readable, Writable []string
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// PodCommand is what the kubelet would run for a container.
type PodCommand struct {
	Args []string // the container's arguments, Rewrite and Extra applied
	Env  []string // KEY=value, sorted (PodProcess.environment's sources)
	// Container and Pod are the container and the pod spec they came from.
	Container *corev1.Container
	Pod       *corev1.PodSpec
}

// Command reads the Deployment and returns what the kubelet would run.
func (p PodProcess) Command(ctx context.Context, e *Env) (*PodCommand, error) {
	dep, err := e.Kube.AppsV1().Deployments(p.Namespace).Get(ctx, p.Deployment, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s: %w", p.Namespace, p.Deployment, err)
	}
	spec := &dep.Spec.Template.Spec
	var c *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name == p.Container {
			c = &spec.Containers[i]
		}
	}
	if c == nil {
		return nil, fmt.Errorf("deployment %s/%s has no container %s", p.Namespace, p.Deployment, p.Container)
	}
	cmd := &PodCommand{Container: c, Pod: spec}
	vars := p.environment(c)
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	slices.Sort(cmd.Env)
	for _, a := range c.Args {
		a = envRef.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := vars[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
		for prefix, repl := range p.Rewrite {
			if strings.HasPrefix(a, prefix) {
				a = repl
			}
		}
		cmd.Args = append(cmd.Args, a)
	}
	cmd.Args = append(cmd.Args, p.Extra...)
	return cmd, nil
}

// Args are the container's arguments as the kubelet would pass them, with
// Rewrite applied, and the ServiceAccount the pod runs as.
func (p PodProcess) Args(ctx context.Context, e *Env) (args []string, serviceAccount string, err error) {
	cmd, err := p.Command(ctx, e)
	if err != nil {
		return nil, "", err
	}
	return cmd.Args, cmd.Pod.ServiceAccountName, nil
}

// environment is the container's env as the kubelet would set it, for the
// sources the chart uses: values, the pod's namespace and name, and the
// container's memory limit in bytes (resourceFieldRef limits.memory,
// divisor 1; left out when the container has no limit, where the kubelet
// would give the node's allocatable memory).
func (p PodProcess) environment(c *corev1.Container) map[string]string {
	vars := map[string]string{}
	for _, ev := range c.Env {
		switch {
		case ev.ValueFrom == nil:
			vars[ev.Name] = ev.Value
		case ev.ValueFrom.FieldRef != nil && ev.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			vars[ev.Name] = p.Namespace
		case ev.ValueFrom.FieldRef != nil && ev.ValueFrom.FieldRef.FieldPath == "metadata.name":
			vars[ev.Name] = p.pod()
		case ev.ValueFrom.ResourceFieldRef != nil && ev.ValueFrom.ResourceFieldRef.Resource == "limits.memory":
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
				vars[ev.Name] = strconv.FormatInt(q.Value(), 10)
			}
		}
	}
	return vars
}

func (p PodProcess) pod() string {
	if p.Pod != "" {
		return p.Pod
	}
	return p.Deployment + "-0"
}

// Start runs bin with the container's arguments and environment and a kubeconfig of the
// pod's ServiceAccount, logs in a directory of the control plane's, confined
// when p.Confine is set (and then checked from /proc to be).
// t.Cleanup stops it (SIGTERM, 10 s, SIGKILL) and prints its log when the
// test failed.
func (p PodProcess) Start(t T, e *Env, bin string) *Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, err := p.Command(ctx, e)
	if err != nil {
		t.Fatalf("%v", err)
	}
	args, sa, env := cmd.Args, cmd.Pod.ServiceAccountName, cmd.Env
	dir := e.TempDir(t, p.pod()+"-"+p.Container)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := e.ServiceAccountKubeconfig(ctx, p.Namespace, sa, kubeconfig, 3600); err != nil {
		t.Fatalf("%v", err)
	}
	args = append(args, "--kubeconfig="+kubeconfig)
	run, runArgs, confined := bin, args, false
	conf := confinementOf(*cmd.Pod, *cmd.Container, p.Writable)
	if p.Confine {
		run, runArgs, confined = conf.wrap(t, bin, args, append(p.Readable, dir)...)
	}
	proc, err := StartProcess(dir, p.pod()+"-"+p.Container, run, runArgs, env...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	how := ""
	if confined {
		how = ", confined: " + conf.String()
	}
	t.Logf("%s (%s/%s) runs %s as %s with %v and %v%s", p.pod(), p.Deployment, p.Container, filepath.Base(bin), sa, args, env, how)
	t.Cleanup(func() {
		proc.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("log of %s:\n%s", proc.Name, proc.Tail(4000))
		}
	})
	if confined {
		conf.verify(t, proc.Pid(), bin)
	}
	return proc
}
