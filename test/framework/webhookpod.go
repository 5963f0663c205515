package framework

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
)

// LoopbackWebhook returns p, a chart's webhook container, with what runs
// it on 127.0.0.1:port with its serving certificate in certDir. In
// selfManaged mode (the container has --self-managed-dns-names) the
// webhook writes the certificate there itself, certDir is its writable
// volume and 127.0.0.1 joins the names it certifies; otherwise certDir
// holds tls.crt and tls.key, as the mounted Secret would, and is readable.
func (p PodProcess) LoopbackWebhook(ctx context.Context, e *Env, port int, certDir string) (PodProcess, error) {
	args, _, err := p.Args(ctx, e)
	if err != nil {
		return p, err
	}
	p.Rewrite = map[string]string{
		"--port=":                 "--port=" + strconv.Itoa(port),
		"--tls-cert-file=":        "--tls-cert-file=" + filepath.Join(certDir, "tls.crt"),
		"--tls-private-key-file=": "--tls-private-key-file=" + filepath.Join(certDir, "tls.key"),
	}
	p.Extra = append(p.Extra, "--bind-address=127.0.0.1")
	names, selfManaged := flagValue(args, "--self-managed-dns-names")
	if !selfManaged {
		p.Readable = append(p.Readable, certDir)
		return p, nil
	}
	p.Rewrite["--self-managed-cert-dir="] = "--self-managed-cert-dir=" + certDir
	p.Rewrite["--self-managed-dns-names="] = "--self-managed-dns-names=" + names + ",127.0.0.1"
	p.Writable = append(p.Writable, certDir)
	return p, nil
}

// flagValue is the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}
