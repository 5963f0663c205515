// Package selfcert keeps the admission webhook's serving certificate when no
// certificate manager is installed (the chart's certificates.mode=selfManaged,
// docs/chart.md). The chart renders no key material, so it renders the same bytes
// every time; instead every webhook replica runs a Manager that:
//
//   - keeps a CA and a serving certificate in one Secret. The replicas agree
//     through that Secret: it is created with Create (the loser of a race
//     gets AlreadyExists and reads the winner's) and changed with Update on
//     the resourceVersion it read (a conflict means re-read and decide again);
//   - writes tls.crt, tls.key and ca.crt from the Secret into a directory
//     that the webhook server watches and reloads;
//   - sets caBundle of every entry of its webhook configurations to the CAs
//     in the Secret: the ValidatingWebhookConfiguration (snapshot kinds) and
//     the MutatingWebhookConfiguration of the same name (claims, which the
//     API server would strip of a wrong data source before validating
//     admission); either may be absent;
//   - renews each certificate two thirds into its lifetime. A new CA is
//     first added to the bundle next to the old one, and the serving
//     certificate switches to it only once the webhook configuration has
//     trusted the new CA for PublishDelay, so the API server never meets a
//     certificate it does not trust. Old CAs stay in the bundle until they
//     expire.
//
// An operator forces a CA rotation with
//
//	kubectl annotate secret <name> snapkeeper.io/rotate-ca=now
package selfcert

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Keys of the Secret. tls.crt, tls.key and ca.crt are the names
// cert-manager and kubernetes.io/tls Secrets use, so the webhook reads the
// same files in every certificate mode.
const (
	KeyCert   = corev1.TLSCertKey       // serving certificate
	KeyKey    = corev1.TLSPrivateKeyKey // its key
	KeyCA     = "ca.crt"                // trusted CAs, the current one first
	KeyCAKey  = "ca.key"                // key of the current CA
	annoCADue = "snapkeeper.io/ca-created-at"
	// AnnotationRotateCA on the Secret asks for a new CA now; the Manager
	// removes it once the new CA is in place.
	AnnotationRotateCA = "snapkeeper.io/rotate-ca"
	// maxCAs bounds the bundle when CAs are rotated by hand in a loop.
	maxCAs = 4
)

// Config is what a Manager needs. Client, Namespace, SecretName and Hosts
// are required.
type Config struct {
	Client     kubernetes.Interface
	Namespace  string
	SecretName string
	// WebhookConfiguration names the ValidatingWebhookConfiguration and the
	// MutatingWebhookConfiguration whose caBundle the Manager keeps current
	// (either may be absent); empty: none.
	WebhookConfiguration string
	// ConversionCRDs name the CustomResourceDefinitions whose conversion
	// webhook is this webhook: their caBundle is kept current too while
	// their conversion strategy is Webhook. Needs Dynamic.
	ConversionCRDs []string
	Dynamic        dynamic.Interface
	// Hosts are the DNS names (and IP addresses) of the serving certificate;
	// the first one is its common name.
	Hosts []string
	// CertDir receives tls.crt, tls.key and ca.crt; empty: no files.
	CertDir string
	// CAValidity and CertValidity are the lifetimes of new certificates.
	CAValidity   time.Duration
	CertValidity time.Duration
	// PublishDelay is how long a new CA must have been in the webhook
	// configuration before the serving certificate is signed by it: the API
	// server reads webhook configurations through a cache.
	PublishDelay time.Duration
	// Resync bounds the time between two checks when nothing changes.
	Resync time.Duration
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultCAValidity   = 3 * 365 * 24 * time.Hour
	DefaultCertValidity = 365 * 24 * time.Hour
	DefaultPublishDelay = time.Minute
	DefaultResync       = 10 * time.Minute
)

// Manager keeps the certificate of one webhook. Use New.
type Manager struct {
	cfg Config

	mu sync.Mutex // one Reconcile at a time
	// trusted remembers when this Manager first saw the webhook
	// configuration carry a bundle (by SHA-256), for PublishDelay.
	trusted map[[32]byte]time.Time
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("selfcert: no Kubernetes client")
	case cfg.Namespace == "" || cfg.SecretName == "":
		return nil, errors.New("selfcert: the Secret's namespace and name are required")
	case len(cfg.Hosts) == 0:
		return nil, errors.New("selfcert: at least one DNS name is required")
	case len(cfg.ConversionCRDs) > 0 && cfg.Dynamic == nil:
		return nil, errors.New("selfcert: conversion CRDs need a dynamic client")
	}
	if cfg.CAValidity <= 0 {
		cfg.CAValidity = DefaultCAValidity
	}
	if cfg.CertValidity <= 0 {
		cfg.CertValidity = DefaultCertValidity
	}
	if cfg.CertValidity > cfg.CAValidity {
		return nil, fmt.Errorf("selfcert: certificate validity %s exceeds the CA's %s", cfg.CertValidity, cfg.CAValidity)
	}
	if cfg.PublishDelay < 0 {
		cfg.PublishDelay = 0
	} else if cfg.PublishDelay == 0 {
		cfg.PublishDelay = DefaultPublishDelay
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Manager{cfg: cfg, trusted: map[[32]byte]time.Time{}}, nil
}

// Result is the outcome of one Reconcile.
type Result struct {
	// CABundle is the PEM bundle the webhook configuration should trust.
	CABundle []byte
	// Next is when the Manager wants to look again (a renewal or a pending
	// switch to a new CA).
	Next time.Time
}

// Reconcile brings the Secret, the files and the webhook configuration up to
// date once. It retries conflicts with other replicas a few times.
func (m *Manager) Reconcile(ctx context.Context) (Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var res Result
		res, err = m.reconcile(ctx)
		if err == nil {
			return res, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return Result{}, err
		}
		klog.FromContext(ctx).V(2).Info("Another replica changed the certificate Secret first; reading it again", "err", err)
	}
	return Result{}, fmt.Errorf("selfcert: still conflicting after retries: %w", err)
}

func (m *Manager) reconcile(ctx context.Context) (Result, error) {
	now := m.cfg.Now()
	secret, st, err := m.load(ctx, now)
	if err != nil {
		return Result{}, err
	}
	if secret, err = m.rotateCA(ctx, secret, st, now); err != nil {
		return Result{}, err
	}
	bundle := st.bundle()
	trustedSince, err := m.publish(ctx, bundle)
	if err != nil {
		return Result{}, err
	}
	secret, next, err := m.ensureServing(ctx, secret, st, trustedSince, now)
	if err != nil {
		return Result{}, err
	}
	// The files the server loads come from the Secret as stored, so every
	// replica serves what the others serve.
	if m.cfg.CertDir != "" {
		if err := writeFiles(m.cfg.CertDir, secret.Data); err != nil {
			return Result{}, err
		}
	}
	return Result{CABundle: bundle, Next: next}, nil
}

// load reads the Secret, creating it when absent and replacing content
// that does not parse.
func (m *Manager) load(ctx context.Context, now time.Time) (*corev1.Secret, *state, error) {
	log := klog.FromContext(ctx)
	secrets := m.cfg.Client.CoreV1().Secrets(m.cfg.Namespace)
	secret, err := secrets.Get(ctx, m.cfg.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		st, err := m.fresh(now)
		if err != nil {
			return nil, nil, err
		}
		secret = st.toSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.cfg.Namespace, Name: m.cfg.SecretName}})
		m.setOwner(ctx, secret)
		// AlreadyExists: another replica was first; Reconcile reads its Secret.
		if secret, err = secrets.Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			return nil, nil, fmt.Errorf("create Secret %s/%s: %w", m.cfg.Namespace, m.cfg.SecretName, err)
		}
		log.Info("Created the webhook's CA and serving certificate", "secret", klog.KObj(secret), "caNotAfter", st.ca.Cert.NotAfter)
		return secret, st, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read Secret %s/%s: %w", m.cfg.Namespace, m.cfg.SecretName, err)
	}
	st, perr := parseState(secret)
	if perr == nil {
		return secret, st, nil
	}
	log.Info("The certificate Secret is unusable; replacing its content", "secret", klog.KObj(secret), "reason", perr.Error())
	if st, err = m.fresh(now); err != nil {
		return nil, nil, err
	}
	secret, err = m.update(ctx, secret, st)
	return secret, st, err
}

// rotateCA adds a new CA in front of the bundle when the current one is due
// or an operator asked for one, and drops expired CAs.
func (m *Manager) rotateCA(ctx context.Context, secret *corev1.Secret, st *state, now time.Time) (*corev1.Secret, error) {
	_, asked := secret.Annotations[AnnotationRotateCA]
	if !asked && now.Before(renewAt(st.ca.Cert)) {
		if st.pruneCAs(now) {
			return m.update(ctx, secret, st)
		}
		return secret, nil
	}
	ca, err := newCA(m.cfg.SecretName, now, m.cfg.CAValidity)
	if err != nil {
		return nil, err
	}
	st.cas = append([]*x509.Certificate{ca.Cert}, st.cas...)
	st.ca, st.caCreated = ca, now
	st.pruneCAs(now)
	delete(secret.Annotations, AnnotationRotateCA)
	if secret, err = m.update(ctx, secret, st); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).Info("Rotated the webhook CA; the old one stays trusted until it expires", "secret", klog.KObj(secret), "requested", asked)
	return secret, nil
}

// ensureServing reissues the serving certificate when it is missing, due,
// for other names, or signed by a previous CA; the switch to a new CA waits
// until the webhook configuration has trusted it for PublishDelay. It
// returns when to look again.
func (m *Manager) ensureServing(ctx context.Context, secret *corev1.Secret, st *state, trustedSince, now time.Time) (*corev1.Secret, time.Time, error) {
	next := renewAt(st.ca.Cert)
	for _, c := range st.cas[1:] {
		next = earliest(next, c.NotAfter) // to drop it from the bundle
	}
	switchAt := st.caCreated
	if trustedSince.After(switchAt) {
		switchAt = trustedSince
	}
	switchAt = switchAt.Add(m.cfg.PublishDelay)

	reason := st.servingProblem(m.cfg.Hosts, now)
	if reason == "" {
		return secret, earliest(next, renewAt(st.serving.Cert)), nil
	}
	usable := st.serving != nil && now.Before(st.serving.Cert.NotAfter) && coversHosts(st.serving.Cert, m.cfg.Hosts)
	if reason == reasonOldCA && usable && now.Before(switchAt) {
		// Keep serving the old certificate until then.
		return secret, earliest(next, switchAt), nil
	}
	serving, err := newServing(st.ca, m.cfg.Hosts, now, m.cfg.CertValidity)
	if err != nil {
		return nil, time.Time{}, err
	}
	st.serving = serving
	if secret, err = m.update(ctx, secret, st); err != nil {
		return nil, time.Time{}, err
	}
	klog.FromContext(ctx).Info("Issued a new serving certificate", "secret", klog.KObj(secret), "reason", reason, "notAfter", serving.Cert.NotAfter)
	return secret, earliest(next, renewAt(serving.Cert)), nil
}

// fresh makes a new CA and a serving certificate.
func (m *Manager) fresh(now time.Time) (*state, error) {
	ca, err := newCA(m.cfg.SecretName, now, m.cfg.CAValidity)
	if err != nil {
		return nil, err
	}
	serving, err := newServing(ca, m.cfg.Hosts, now, m.cfg.CertValidity)
	if err != nil {
		return nil, err
	}
	return &state{ca: ca, cas: []*x509.Certificate{ca.Cert}, caCreated: now, serving: serving}, nil
}

// update writes st into secret with the resourceVersion that was read.
func (m *Manager) update(ctx context.Context, secret *corev1.Secret, st *state) (*corev1.Secret, error) {
	next := st.toSecret(secret.DeepCopy())
	m.setOwner(ctx, next)
	out, err := m.cfg.Client.CoreV1().Secrets(next.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update Secret %s/%s: %w", next.Namespace, next.Name, err)
	}
	return out, nil
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
