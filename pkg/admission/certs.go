package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// DefaultCertPollInterval is how often the certificate files are re-read.
const DefaultCertPollInterval = 10 * time.Second

// CertReloader serves the certificate in a pair of PEM files and picks up
// new files without a restart. It polls rather than watches: cert-manager
// and the kubelet replace files in ways (symlink swaps of a Secret volume,
// or tls.crt and tls.key written one after the other) that inotify reports
// unreliably, and a read of two small files every few seconds costs nothing.
// A pair that does not load (say tls.crt is new and tls.key still old) is
// not an error worth dropping the old certificate for: the old one keeps
// being served until the pair matches again.
type CertReloader struct {
	certFile, keyFile string
	interval          time.Duration
	metrics           *Metrics

	cert atomic.Pointer[tls.Certificate]

	mu                      sync.Mutex // guards the last-read bytes
	lastCert, lastKey       []byte
	lastErrCert, lastErrKey []byte
}

// NewCertReloader returns a reloader of certFile and keyFile. interval <= 0
// means DefaultCertPollInterval; metrics may be nil.
func NewCertReloader(certFile, keyFile string, interval time.Duration, metrics *Metrics) *CertReloader {
	if interval <= 0 {
		interval = DefaultCertPollInterval
	}
	return &CertReloader{certFile: certFile, keyFile: keyFile, interval: interval, metrics: metrics}
}

// Load reads the files now. It returns an error when they do not form a
// valid pair; the certificate in use, if any, stays.
func (c *CertReloader) Load() error {
	_, err := c.reload()
	return err
}

// reload loads the pair if the files changed since the last attempt, and
// reports whether a new certificate is now served.
func (c *CertReloader) reload() (bool, error) {
	certPEM, err := os.ReadFile(c.certFile)
	if err != nil {
		return false, fmt.Errorf("reading certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(c.keyFile)
	if err != nil {
		return false, fmt.Errorf("reading private key: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if bytes.Equal(certPEM, c.lastCert) && bytes.Equal(keyPEM, c.lastKey) && c.cert.Load() != nil {
		return false, nil
	}
	// A pair that already failed is not retried (nor counted) until one
	// of the files changes again.
	if bytes.Equal(certPEM, c.lastErrCert) && bytes.Equal(keyPEM, c.lastErrKey) {
		return false, errors.New("certificate and key unchanged since they last failed to load")
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err == nil {
		pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0])
	}
	if err != nil {
		c.lastErrCert, c.lastErrKey = certPEM, keyPEM
		c.metrics.certLoaded(err, time.Time{})
		return false, fmt.Errorf("loading %s and %s: %w", c.certFile, c.keyFile, err)
	}
	c.lastCert, c.lastKey = certPEM, keyPEM
	c.lastErrCert, c.lastErrKey = nil, nil
	c.cert.Store(&pair)
	c.metrics.certLoaded(nil, pair.Leaf.NotAfter)
	return true, nil
}

// Run polls the files until ctx ends.
func (c *CertReloader) Run(ctx context.Context) {
	log := klog.FromContext(ctx).WithValues("cert", c.certFile, "key", c.keyFile)
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := c.reload()
		switch {
		case err != nil:
			log.V(2).Info("Serving certificate not reloaded; keeping the one in use", "err", err)
		case changed:
			leaf := c.cert.Load().Leaf
			log.Info("Serving certificate reloaded", "serial", leaf.SerialNumber.String(), "notAfter", leaf.NotAfter)
		}
	}
}

// GetCertificate is the tls.Config hook: every handshake gets the newest
// certificate, so rotation needs no restart and no new listener.
func (c *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert := c.cert.Load()
	if cert == nil {
		return nil, errors.New("no serving certificate loaded yet")
	}
	return cert, nil
}

// Ready reports whether a certificate is loaded, for /readyz.
func (c *CertReloader) Ready() error {
	if c.cert.Load() == nil {
		return errors.New("no serving certificate loaded")
	}
	return nil
}
