package admission

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testCA signs serving certificates for 127.0.0.1.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "snapkeeper test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue returns the PEM certificate and key of a serving pair.
func (ca *testCA) issue(t testing.TB, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "snapkeeper-webhook"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// servingPaths returns where a test's serving certificate and key live: a
// fresh directory, nothing written yet.
func servingPaths(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	return filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
}

// loadedReloader writes a serving pair issued by ca with serial and returns
// a reloader of it, loaded and polling every interval once run, and the
// paths a test rotates.
func loadedReloader(t testing.TB, ca *testCA, serial int64, interval time.Duration) (certs *CertReloader, certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = servingPaths(t)
	cert, key := ca.issue(t, serial)
	writeFile(t, certFile, cert)
	writeFile(t, keyFile, key)
	certs = NewCertReloader(certFile, keyFile, interval, nil)
	if err := certs.Load(); err != nil {
		t.Fatal(err)
	}
	return certs, certFile, keyFile
}

func TestCertReloader(t *testing.T) {
	ca := newTestCA(t)
	certFile, keyFile := servingPaths(t)
	c := NewCertReloader(certFile, keyFile, time.Hour, nil)

	if err := c.Load(); err == nil {
		t.Fatal("Load of missing files succeeded")
	}
	if c.Ready() == nil {
		t.Fatal("ready without a certificate")
	}
	if _, err := c.GetCertificate(nil); err == nil {
		t.Fatal("GetCertificate without a certificate succeeded")
	}

	cert1, key1 := ca.issue(t, 100)
	writeFile(t, certFile, cert1)
	writeFile(t, keyFile, key1)
	if err := c.Load(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(); err != nil {
		t.Fatal(err)
	}
	serial := func() int64 {
		got, err := c.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return got.Leaf.SerialNumber.Int64()
	}

	// Half a rotation: the new certificate with the old key. The old pair
	// keeps being served.
	cert2, key2 := ca.issue(t, 200)
	writeFile(t, certFile, cert2)
	if err := c.Load(); err == nil {
		t.Fatal("a mismatched pair loaded")
	}
	if s := serial(); s != 100 {
		t.Fatalf("serial %d after a failed load, want the old 100", s)
	}
	writeFile(t, keyFile, key2)
	if err := c.Load(); err != nil {
		t.Fatal(err)
	}
	if s := serial(); s != 200 {
		t.Fatalf("serial %d, want 200", s)
	}
}

// Rotation under load: a client loops requests over fresh TLS connections
// while the files are replaced (certificate first, key second, as a
// non-atomic writer would). Every request must succeed and the served
// certificate must change.
func TestCertRotationUnderLoad(t *testing.T) {
	ca := newTestCA(t)
	certs, certFile, keyFile := loadedReloader(t, ca, 1001, 20*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go certs.Run(ctx)
	addr := startTestServer(t, ctx, certs, newTestHandler(t, testOptions))

	client := tlsClient(ca.pool)
	type result struct {
		serial int64
		err    error
	}
	results := make(chan result, 1)
	stop := make(chan struct{})
	go func() {
		defer close(results)
		// Bounded: at most 2000 requests or until told to stop.
		for i := 0; i < 2000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			serial, err := postClass(client, addr)
			results <- result{serial, err}
		}
	}()

	seen := map[int64]int{}
	rotated := false
	deadline := time.After(20 * time.Second)
	for !rotated || seen[2002] < 5 {
		select {
		case r, ok := <-results:
			if !ok {
				t.Fatalf("client stopped before rotation finished; served serials %v", seen)
			}
			if r.err != nil {
				t.Fatalf("request failed during rotation: %v", r.err)
			}
			seen[r.serial]++
			if !rotated && seen[1001] >= 5 {
				// Rotate beside the client, which keeps calling while the
				// reloader sees a mismatched pair for a few polls.
				cert2, key2 := ca.issue(t, 2002)
				go func() {
					_ = os.WriteFile(certFile, cert2, 0o600)
					time.Sleep(100 * time.Millisecond)
					_ = os.WriteFile(keyFile, key2, 0o600)
				}()
				rotated = true
			}
		case <-deadline:
			t.Fatalf("served certificate did not change; served serials %v", seen)
		}
	}
	close(stop)
	for r := range results {
		if r.err != nil {
			t.Fatalf("request failed after rotation: %v", r.err)
		}
	}
	t.Logf("served serials: %v", seen)
}
