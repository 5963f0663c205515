package framework

import (
	"bytes"
	"context"
	"io"
	"os/exec"
)

// Kubectl runs bin/kubectl against the control plane as admin and returns
// its stdout and stderr.
func (e *Env) Kubectl(ctx context.Context, stdin io.Reader, args ...string) (stdout, stderr string, err error) {
	bin, err := Tool("kubectl")
	if err != nil {
		return "", "", err
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig=" + e.Kubeconfig}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}
