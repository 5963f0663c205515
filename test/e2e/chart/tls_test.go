package chart

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// handshake is one client the webhook's port must accept or refuse.
type handshake struct {
	name     string
	min, max uint16
	suites   []uint16 // nil: Go's client defaults
	accept   bool
}

// The threat: a network attacker who downgrades the API server's (or a
// scraper's) connection to the webhook to a protocol or cipher suite it can
// break. The webhook serves admission, /healthz, /readyz and /metrics on
// one TLS port; it sets MinVersion TLS 1.2 and leaves the suites to Go's
// defaults (pkg/admission/server.go), which since Go 1.22 and 1.23 leave
// out RSA key exchange and 3DES, and never had RC4 or the SHA-256 CBC
// suites. The test holds both: the webhook binary, with an ECDSA
// certificate (what selfManaged and the chart's cert-manager issuer make)
// and then, rotated in place, an RSA one (an existingSecret may hold one),
// refuses TLS 1.0 and 1.1 and those suites, and accepts TLS 1.2 with
// forward-secret AEAD suites and TLS 1.3.
func TestWebhookPortRefusesOldTLSAndWeakCipherSuites(t *testing.T) {
	env := framework.Shared(t)
	bin := ownBinary(t, "cmd/webhook")
	dir := env.TempDir(t, "tls")
	ca, err := framework.NewCA("snapkeeper-tls-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Serving(dir, "snapkeeper-webhook"); err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	proc, err := framework.StartProcess(dir, "webhook", bin, []string{"--kubeconfig=" + env.Kubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--port=%d", port), "--tls-reload-interval=100ms",
		"--tls-cert-file=" + filepath.Join(dir, "tls.crt"), "--tls-private-key-file=" + filepath.Join(dir, "tls.key")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Stop(5 * time.Second) })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	proc.WaitOK(t, "https://"+addr+"/readyz", time.Minute)

	versions := []handshake{
		{name: "TLS 1.0", min: tls.VersionTLS10, max: tls.VersionTLS10},
		{name: "TLS 1.1", min: tls.VersionTLS11, max: tls.VersionTLS11},
		{name: "TLS 1.2 with Go's client suites", min: tls.VersionTLS12, max: tls.VersionTLS12, accept: true},
		{name: "TLS 1.3", min: tls.VersionTLS13, max: tls.VersionTLS13, accept: true},
	}
	t.Run("ECDSA certificate", func(t *testing.T) {
		checkHandshakes(t, addr, x509.ECDSA, versions)
		checkSuites(t, addr, "ECDSA")
	})

	// Rotated in place, key first: the reloader serves the old pair until
	// both files match.
	if err := ca.ServingRSA(dir, "snapkeeper-webhook"); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the webhook to serve the RSA certificate", func() (bool, error) {
		alg, err := servedKeyAlgorithm(addr)
		return alg == x509.RSA, err
	})
	t.Run("RSA certificate", func(t *testing.T) {
		checkHandshakes(t, addr, x509.RSA, append(versions,
			// Secure by Go's list, but without forward secrecy: off by
			// default since Go 1.22 and must stay off.
			handshake{name: "TLS 1.2 RSA key exchange", min: tls.VersionTLS12, max: tls.VersionTLS12,
				suites: []uint16{tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_AES_256_GCM_SHA384,
					tls.TLS_RSA_WITH_AES_128_CBC_SHA, tls.TLS_RSA_WITH_AES_256_CBC_SHA}},
		))
		checkSuites(t, addr, "RSA")
	})
}

// checkSuites offers each TLS 1.2 suite Go knows for the certificate's key
// type alone: every suite Go calls insecure (RC4, 3DES, CBC with SHA-256,
// RSA key exchange with them) must be refused, ECDHE with AES-GCM and
// ChaCha20-Poly1305 accepted; the accepted list is logged (docs/security.md).
func checkSuites(t *testing.T, addr, keyType string) {
	t.Helper()
	var accepted []string
	probe := func(s *tls.CipherSuite) bool {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{s.ID}, InsecureSkipVerify: true} //nolint:gosec // the probe judges the server, not its certificate
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			if !strings.Contains(err.Error(), "remote error") {
				t.Errorf("%s: %v, want the server to answer or refuse (a remote alert), not the client", s.Name, err)
			}
			return false
		}
		conn.Close()
		return true
	}
	for _, s := range tls.InsecureCipherSuites() {
		if forKey(s, keyType) && slices.Contains(s.SupportedVersions, tls.VersionTLS12) && probe(s) {
			t.Errorf("%s certificate: the insecure suite %s was accepted", keyType, s.Name)
		}
	}
	for _, s := range tls.CipherSuites() {
		if !forKey(s, keyType) || !slices.Contains(s.SupportedVersions, tls.VersionTLS12) {
			continue
		}
		ok := probe(s)
		if ok {
			accepted = append(accepted, s.Name)
		}
		aead := strings.Contains(s.Name, "_GCM_") || strings.Contains(s.Name, "CHACHA20")
		if strings.HasPrefix(s.Name, "TLS_ECDHE_") && aead && !ok {
			t.Errorf("%s certificate: %s refused", keyType, s.Name)
		}
	}
	t.Logf("%s certificate, TLS 1.2 suites accepted: %s", keyType, strings.Join(accepted, " "))
}

// forKey: the suite authenticates with keyType ("ECDSA" or "RSA"); RSA key
// exchange suites (TLS_RSA_...) count as RSA.
func forKey(s *tls.CipherSuite, keyType string) bool {
	if keyType == "ECDSA" {
		return strings.HasPrefix(s.Name, "TLS_ECDHE_ECDSA_")
	}
	return strings.HasPrefix(s.Name, "TLS_ECDHE_RSA_") || strings.HasPrefix(s.Name, "TLS_RSA_")
}

func checkHandshakes(t *testing.T, addr string, alg x509.PublicKeyAlgorithm, cases []handshake) {
	t.Helper()
	secure := map[uint16]bool{}
	for _, s := range tls.CipherSuites() {
		secure[s.ID] = true
	}
	for _, c := range cases {
		cfg := &tls.Config{MinVersion: c.min, MaxVersion: c.max, CipherSuites: c.suites, InsecureSkipVerify: true} //nolint:gosec // the probe judges the server, not its certificate
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if !c.accept {
			if err == nil {
				st := conn.ConnectionState()
				conn.Close()
				t.Errorf("%s: accepted (version %s, suite %s)", c.name, tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite))
			} else if !strings.Contains(err.Error(), "remote error") {
				t.Errorf("%s: %v, want the server to refuse (a remote alert), not the client", c.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
			continue
		}
		st := conn.ConnectionState()
		conn.Close()
		if st.Version < tls.VersionTLS12 || !secure[st.CipherSuite] || st.PeerCertificates[0].PublicKeyAlgorithm != alg {
			t.Errorf("%s: negotiated %s %s with a %s certificate", c.name, tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite), st.PeerCertificates[0].PublicKeyAlgorithm)
		}
		t.Logf("%s: %s %s", c.name, tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite))
	}
}

func servedKeyAlgorithm(addr string) (x509.PublicKeyAlgorithm, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate only
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].PublicKeyAlgorithm, nil
}
