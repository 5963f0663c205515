package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"

	"k8s.io/client-go/dynamic"
)

// InstallCertManagerCRDs installs cert-manager's own CRDs, from the module
// pinned in hack/tools/certmanager, so the Issuers and Certificates the
// chart renders are validated by their real schemas.
func InstallCertManagerCRDs(ctx context.Context, dyn dynamic.Interface) error {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "github.com/cert-manager/cert-manager")
	cmd.Dir = filepath.Join(RepoRoot(), "hack", "tools", "certmanager")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("locate the cert-manager module: %w", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return fmt.Errorf("go mod download printed no directory: %v\n%s", err, out)
	}
	return InstallCRDs(ctx, dyn, filepath.Join(mod.Dir, "deploy", "crds"))
}

// StartCertManager runs cert-manager's controllers and CA injector
// (`make bin/cert-manager`, hack/tools/certmanager/cert-manager) against
// the environment's cluster as a process; its log is dir/cert-manager.log.
func (e *Env) StartCertManager(dir string) (*Process, error) {
	bin, err := Tool("cert-manager")
	if err != nil {
		return nil, err
	}
	return StartProcess(dir, "cert-manager", bin, []string{"--kubeconfig=" + e.Kubeconfig, "-v=2"})
}
