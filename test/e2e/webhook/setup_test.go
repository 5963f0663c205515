package webhook

import (
	"context"
	"crypto/tls"
	"net/http"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// webhookServer is a snapkeeper-webhook process registered with the API
// server (framework.StartWebhook), with a client that trusts its CA.
type webhookServer struct {
	addr    string
	certDir string
	ca      *framework.CA
	proc    *framework.Process
	client  *http.Client
	fw      *framework.Webhook
}

// startWebhook starts and registers the webhook; t.Cleanup undoes it.
func startWebhook(t *testing.T, env *framework.Env, args ...string) *webhookServer {
	t.Helper()
	w := env.StartWebhook(t, args...)
	client := w.Client()
	client.Transport.(*http.Transport).DisableKeepAlives = true
	return &webhookServer{addr: w.Addr, certDir: w.CertDir, ca: w.CA, proc: w.Proc, client: client, fw: w}
}

// servedSerial returns the serial of the certificate the webhook serves now.
func (w *webhookServer) servedSerial() (string, error) {
	conn, err := tls.Dial("tcp", w.addr, w.client.Transport.(*http.Transport).TLSClientConfig)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// probe dry-runs a class with an invalid driver name: only the webhook
// rejects it (the CRD has no rule on drivers).
func (w *webhookServer) probe(ctx context.Context, env *framework.Env) error {
	_, err := env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(ctx, &snapv1.VolumeSnapshotClass{
		ObjectMeta:     metav1.ObjectMeta{Name: "e2e-probe"},
		Driver:         "not a driver!",
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}
