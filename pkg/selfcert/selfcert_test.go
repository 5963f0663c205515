package selfcert

import (
	"bytes"
	"context"
	"crypto/x509"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const (
	ns      = "snapkeeper"
	secName = "webhook-tls"
	vwcName = "snapkeeper-webhook"
	host    = "snapkeeper-webhook.snapkeeper.svc"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newVWC and newMWC are the two configurations the chart renders under one
// name: the snapshot kinds are validated, claims are judged at the mutating
// stage.
func newVWC() *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: vwcName, UID: "vwc-uid"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "volumesnapshots.validation.snapkeeper.io"},
			{Name: "volumesnapshotclasses.validation.snapkeeper.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte("stale")}},
		},
	}
}

func newMWC() *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: vwcName, UID: "mwc-uid"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			{Name: "persistentvolumeclaims.validation.snapkeeper.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte("stale")}},
		},
	}
}

type fixture struct {
	client *fake.Clientset
	clock  *clock
}

func newFixture(objs ...runtime.Object) *fixture {
	return &fixture{
		client: fake.NewClientset(objs...),
		clock:  &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
}

func (f *fixture) manager(t *testing.T, opts ...func(*Config)) *Manager {
	t.Helper()
	cfg := Config{
		Client: f.client, Namespace: ns, SecretName: secName, WebhookConfiguration: vwcName,
		Hosts: []string{host, "127.0.0.1"}, CertDir: t.TempDir(),
		CAValidity: 300 * 24 * time.Hour, CertValidity: 30 * 24 * time.Hour,
		PublishDelay: time.Minute, Now: f.clock.Now,
	}
	for _, o := range opts {
		o(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fixture) reconcile(t *testing.T, m *Manager) Result {
	t.Helper()
	res, err := m.Reconcile(context.Background())
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return res
}

// reconcileCurrent reconciles an hour later a state m left current: that
// must only read, so a steady webhook costs the API server no writes.
func (f *fixture) reconcileCurrent(t *testing.T, m *Manager) {
	t.Helper()
	f.client.ClearActions()
	f.clock.Add(time.Hour)
	f.reconcile(t, m)
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("unexpected %s %s on a current state", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// loseSecretRace makes the first verb on a Secret lose a race to another
// replica: winner's write lands first, then the call fails with lost, as
// the API server would answer. raced reports whether that happened.
func (f *fixture) loseSecretRace(t *testing.T, verb string, winner func(k8stesting.ObjectTracker) error, lost error) (raced func() bool) {
	happened := false
	f.client.PrependReactor(verb, "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if happened {
			return false, nil, nil
		}
		happened = true
		if err := winner(f.client.Tracker()); err != nil {
			t.Error(err)
		}
		return true, nil, lost
	})
	return func() bool { return happened }
}

func (f *fixture) secret(t *testing.T) *corev1.Secret {
	t.Helper()
	s, err := f.client.CoreV1().Secrets(ns).Get(context.Background(), secName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bundles returns the caBundle of every entry of both webhook
// configurations that exist, by entry name.
func (f *fixture) bundles(t *testing.T) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	reg := f.client.AdmissionregistrationV1()
	out := map[string][]byte{}
	if v, err := reg.ValidatingWebhookConfigurations().Get(ctx, vwcName, metav1.GetOptions{}); found(t, err) {
		for _, wh := range v.Webhooks {
			out["validating/"+wh.Name] = wh.ClientConfig.CABundle
		}
	}
	if mw, err := reg.MutatingWebhookConfigurations().Get(ctx, vwcName, metav1.GetOptions{}); found(t, err) {
		for _, wh := range mw.Webhooks {
			out["mutating/"+wh.Name] = wh.ClientConfig.CABundle
		}
	}
	return out
}

// found reports whether a Get found its object; any error but NotFound
// fails the test.
func found(t *testing.T, err error) bool {
	t.Helper()
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// trusted fails the test unless the serving certificate verifies for host
// against every caBundle of the webhook configurations, as the API server
// would check it.
func (f *fixture) trusted(t *testing.T, servingPEM []byte) {
	t.Helper()
	certs, err := parseCerts(servingPEM)
	if err != nil {
		t.Fatal(err)
	}
	bundles := f.bundles(t)
	if len(bundles) == 0 {
		t.Fatal("no webhook configuration to check")
	}
	for name, bundle := range bundles {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(bundle) {
			t.Fatalf("webhook %s: caBundle holds no certificate", name)
		}
		if _, err := certs[0].Verify(x509.VerifyOptions{DNSName: host, Roots: pool, CurrentTime: f.clock.Now()}); err != nil {
			t.Fatalf("webhook %s does not trust the serving certificate: %v", name, err)
		}
	}
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, n := range []string{KeyCert, KeyKey, KeyCA} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

func caCount(t *testing.T, s *corev1.Secret) int {
	t.Helper()
	cas, err := parseCerts(s.Data[KeyCA])
	if err != nil {
		t.Fatal(err)
	}
	return len(cas)
}

func TestFirstReconcileCreatesTheSecretFilesAndBundle(t *testing.T) {
	f := newFixture(newVWC(), newMWC())
	m := f.manager(t)
	res := f.reconcile(t, m)

	s := f.secret(t)
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type %q, want %q", s.Type, corev1.SecretTypeTLS)
	}
	for _, k := range []string{KeyCert, KeyKey, KeyCA, KeyCAKey} {
		if len(s.Data[k]) == 0 {
			t.Errorf("Secret lacks %s", k)
		}
	}
	owners := map[string]string{}
	for _, r := range s.OwnerReferences {
		owners[r.Kind] = string(r.UID)
	}
	if len(s.OwnerReferences) != 2 || owners["ValidatingWebhookConfiguration"] != "vwc-uid" || owners["MutatingWebhookConfiguration"] != "mwc-uid" {
		t.Errorf("owner references %+v, want both webhook configurations", s.OwnerReferences)
	}
	if !bytes.Equal(res.CABundle, s.Data[KeyCA]) {
		t.Error("Result.CABundle differs from ca.crt of the Secret")
	}
	bundles := f.bundles(t)
	if len(bundles) != 3 {
		t.Errorf("%d webhook entries, want 2 validating and 1 mutating", len(bundles))
	}
	for name, bundle := range bundles {
		if !bytes.Equal(bundle, s.Data[KeyCA]) {
			t.Errorf("webhook %s: caBundle not set to the Secret's CA", name)
		}
	}
	files := readDir(t, m.cfg.CertDir)
	for _, k := range []string{KeyCert, KeyKey, KeyCA} {
		if !bytes.Equal(files[k], s.Data[k]) {
			t.Errorf("file %s differs from the Secret", k)
		}
	}
	f.trusted(t, files[KeyCert])
	leaf, _ := parseCerts(files[KeyCert])
	if len(leaf[0].IPAddresses) != 1 || !leaf[0].IPAddresses[0].Equal([]byte{127, 0, 0, 1}) {
		t.Errorf("IP SANs %v, want 127.0.0.1", leaf[0].IPAddresses)
	}
	if want := renewAt(leaf[0]); !res.Next.Equal(want) {
		t.Errorf("Next = %v, want the serving certificate's renewal time %v", res.Next, want)
	}
}

func TestReconcileIsANoOpWhenEverythingIsCurrent(t *testing.T) {
	f := newFixture(newVWC(), newMWC())
	m := f.manager(t)
	f.reconcile(t, m)
	f.reconcileCurrent(t, m)
}

func TestASecondReplicaServesTheFirstOnesCertificate(t *testing.T) {
	f := newFixture(newVWC())
	m1, m2 := f.manager(t), f.manager(t)
	f.reconcile(t, m1)
	rv := f.secret(t).ResourceVersion
	f.reconcile(t, m2)
	if got := f.secret(t).ResourceVersion; got != rv {
		t.Errorf("second replica rewrote the Secret (resourceVersion %s -> %s)", rv, got)
	}
	a, b := readDir(t, m1.cfg.CertDir), readDir(t, m2.cfg.CertDir)
	for k := range a {
		if !bytes.Equal(a[k], b[k]) {
			t.Errorf("replicas disagree on %s", k)
		}
	}
}

// Reactors run under the fake client's lock, so the other replica's writes
// are made through the tracker, from objects prepared beforehand.
var secretsGVR = corev1.SchemeGroupVersion.WithResource("secrets")

func TestLosingTheCreateRaceAdoptsTheWinnersSecret(t *testing.T) {
	// The winner's Secret, made in a world of its own.
	elsewhere := newFixture(newVWC())
	elsewhere.reconcile(t, elsewhere.manager(t))
	winners := elsewhere.secret(t).DeepCopy()
	winners.ResourceVersion = ""

	f := newFixture(newVWC())
	loser := f.manager(t)
	// The winner creates its Secret between the loser's Get and Create.
	raced := f.loseSecretRace(t, "create",
		func(tr k8stesting.ObjectTracker) error { return tr.Create(secretsGVR, winners, ns) },
		apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, secName))
	f.reconcile(t, loser)
	if !raced() {
		t.Fatal("the create race was not exercised")
	}
	if got := readDir(t, loser.cfg.CertDir)[KeyCert]; !bytes.Equal(got, winners.Data[KeyCert]) {
		t.Error("the loser serves its own certificate instead of the winner's")
	}
}

func TestAConflictingUpdateIsDecidedAgainOnTheNewSecret(t *testing.T) {
	f := newFixture(newVWC())
	m := f.manager(t)
	f.reconcile(t, m)
	f.clock.Add(250 * 24 * time.Hour) // past 2/3 of the CA's 300 days

	// Another replica rotates the CA while m is between its read and its write.
	other := f.secret(t).DeepCopy()
	st, err := parseState(other)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := newCA(secName, f.clock.Now(), 300*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	st.ca, st.cas, st.caCreated = ca, append([]*x509.Certificate{ca.Cert}, st.cas...), f.clock.Now()
	other = st.toSecret(other)
	other.ResourceVersion = "other-replica"

	conflicted := f.loseSecretRace(t, "update",
		func(tr k8stesting.ObjectTracker) error { return tr.Update(secretsGVR, other, ns) },
		apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, secName, nil))
	f.reconcile(t, m)
	if !conflicted() {
		t.Fatal("the conflict was not exercised")
	}
	s := f.secret(t)
	if n := caCount(t, s); n != 2 {
		t.Fatalf("bundle holds %d CAs after one rotation by two replicas, want 2", n)
	}
	if !bytes.Equal(s.Data[KeyCAKey], other.Data[KeyCAKey]) {
		t.Error("the other replica's CA was replaced instead of adopted")
	}
}

func TestCARotationSwitchesTheServingCertificateOnlyAfterPublication(t *testing.T) {
	f := newFixture(newVWC(), newMWC())
	m := f.manager(t)
	f.reconcile(t, m)
	// Live through the CA's life in steps of ten days (the serving
	// certificate is renewed on the way) until the CA is rotated.
	var before, s *corev1.Secret
	var res Result
	for day := 0; ; day += 10 {
		if day > 300 {
			t.Fatal("the CA was never rotated")
		}
		before = f.secret(t)
		f.clock.Add(10 * 24 * time.Hour)
		res = f.reconcile(t, m)
		if s = f.secret(t); caCount(t, s) == 2 {
			break
		}
	}
	if !bytes.Equal(s.Data[KeyCert], before.Data[KeyCert]) {
		t.Fatal("the serving certificate switched to the new CA before the API server could trust it")
	}
	f.trusted(t, s.Data[KeyCert])
	if want := f.clock.Now().Add(time.Minute); !res.Next.Equal(want) {
		t.Errorf("Next = %v, want the end of the publish delay %v", res.Next, want)
	}

	f.clock.Add(30 * time.Second)
	f.reconcile(t, m)
	if !bytes.Equal(f.secret(t).Data[KeyCert], before.Data[KeyCert]) {
		t.Fatal("the serving certificate switched within the publish delay")
	}

	f.clock.Add(31 * time.Second)
	f.reconcile(t, m)
	s = f.secret(t)
	if bytes.Equal(s.Data[KeyCert], before.Data[KeyCert]) {
		t.Fatal("the serving certificate did not switch after the publish delay")
	}
	st, err := parseState(s)
	if err != nil {
		t.Fatal(err)
	}
	if !signedBy(st.serving.Cert, st.ca.Cert) {
		t.Error("the new serving certificate is not signed by the new CA")
	}
	if caCount(t, s) != 2 {
		t.Error("the old CA left the bundle while it is still valid")
	}
	f.trusted(t, s.Data[KeyCert])
	f.trusted(t, before.Data[KeyCert]) // a replica still serving the old one is trusted too
}

// Claims are registered in a MutatingWebhookConfiguration; with only that
// one (every snapshot entry disabled) or only the validating one, the
// Manager keeps whichever exists.
func TestEitherConfigurationAloneIsKept(t *testing.T) {
	for kind, obj := range map[string]runtime.Object{"MutatingWebhookConfiguration": newMWC(), "ValidatingWebhookConfiguration": newVWC()} {
		t.Run(kind+" only", func(t *testing.T) {
			f := newFixture(obj)
			m := f.manager(t)
			f.reconcile(t, m)
			s := f.secret(t)
			bundles := f.bundles(t)
			if len(bundles) == 0 {
				t.Fatal("the configuration vanished")
			}
			for entry, bundle := range bundles {
				if !bytes.Equal(bundle, s.Data[KeyCA]) {
					t.Errorf("webhook %s: caBundle not set to the Secret's CA", entry)
				}
			}
			f.trusted(t, s.Data[KeyCert])
			if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != kind || s.OwnerReferences[0].Name != vwcName {
				t.Errorf("owner references %+v, want the one configuration", s.OwnerReferences)
			}
			f.reconcileCurrent(t, m)
		})
	}
}

// A configuration that appears while a new CA waits for publication (a
// `helm upgrade` that adds the claims entry) restarts the wait: the serving
// certificate moves to the new CA only once every configuration has carried
// it for PublishDelay.
func TestAConfigurationAppearingDuringARotationRestartsThePublishDelay(t *testing.T) {
	f := newFixture(newVWC())
	m := f.manager(t)
	f.reconcile(t, m)
	before := f.secret(t)
	before.Annotations[AnnotationRotateCA] = "now"
	if _, err := f.client.CoreV1().Secrets(ns).Update(context.Background(), before, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t, m) // new CA, in the validating configuration only
	if n := caCount(t, f.secret(t)); n != 2 {
		t.Fatalf("bundle holds %d CAs after a forced rotation, want 2", n)
	}

	f.clock.Add(40 * time.Second)
	if _, err := f.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), newMWC(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	res := f.reconcile(t, m)
	if want := f.clock.Now().Add(time.Minute); !res.Next.Equal(want) {
		t.Errorf("Next = %v, want a full publish delay from the new configuration's patch (%v)", res.Next, want)
	}
	f.trusted(t, before.Data[KeyCert])

	f.clock.Add(30 * time.Second) // 70 s after the validating one, 30 s after the mutating one
	f.reconcile(t, m)
	if s := f.secret(t); !bytes.Equal(s.Data[KeyCert], before.Data[KeyCert]) {
		t.Fatal("the serving certificate switched before the mutating configuration carried the new CA for the publish delay")
	}

	f.clock.Add(31 * time.Second)
	f.reconcile(t, m)
	s := f.secret(t)
	if bytes.Equal(s.Data[KeyCert], before.Data[KeyCert]) {
		t.Fatal("the serving certificate did not switch after the publish delay")
	}
	f.trusted(t, s.Data[KeyCert])
	f.trusted(t, before.Data[KeyCert]) // the old CA stays in both bundles
	if n := len(f.secret(t).OwnerReferences); n != 2 {
		t.Errorf("%d owner references after the mutating configuration appeared, want 2", n)
	}
}

// A GitOps tool that resets caBundle of the mutating configuration only is
// repaired, and the validating one is left alone.
func TestAResetBundleInOneConfigurationIsRepaired(t *testing.T) {
	f := newFixture(newVWC(), newMWC())
	m := f.manager(t)
	f.reconcile(t, m)
	mwc := newMWC()
	mwc.Webhooks[0].ClientConfig.CABundle = nil
	if _, err := f.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(context.Background(), mwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	f.reconcile(t, m)
	var patched []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "patch" {
			patched = append(patched, a.GetResource().Resource)
		}
	}
	if len(patched) != 1 || patched[0] != "mutatingwebhookconfigurations" {
		t.Errorf("patched %v, want the mutating configuration only", patched)
	}
	f.trusted(t, f.secret(t).Data[KeyCert])
}

func TestServingCertificateIsRenewedAtTwoThirdsWithTheSameCA(t *testing.T) {
	f := newFixture(newVWC())
	m := f.manager(t)
	f.reconcile(t, m)
	before := f.secret(t)
	f.clock.Add(21 * 24 * time.Hour) // past 2/3 of 30 days
	f.reconcile(t, m)
	after := f.secret(t)
	if bytes.Equal(after.Data[KeyCert], before.Data[KeyCert]) {
		t.Fatal("serving certificate not renewed")
	}
	if !bytes.Equal(after.Data[KeyCA], before.Data[KeyCA]) {
		t.Error("the CA changed although it was not due")
	}
	f.trusted(t, after.Data[KeyCert])
}

func TestRotateAnnotationForcesANewCAAndIsRemoved(t *testing.T) {
	f := newFixture(newVWC(), newMWC())
	m := f.manager(t, func(c *Config) { c.PublishDelay = -1 }) // no delay
	f.reconcile(t, m)
	s := f.secret(t)
	s.Annotations[AnnotationRotateCA] = "now"
	if _, err := f.client.CoreV1().Secrets(ns).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t, m) // new CA, published
	f.reconcile(t, m) // switch the serving certificate
	s = f.secret(t)
	if _, ok := s.Annotations[AnnotationRotateCA]; ok {
		t.Error("the rotation request is still there")
	}
	if n := caCount(t, s); n != 2 {
		t.Errorf("bundle holds %d CAs, want 2", n)
	}
	st, _ := parseState(s)
	if !signedBy(st.serving.Cert, st.ca.Cert) {
		t.Error("serving certificate not moved to the new CA")
	}
}

func TestExpiredCAsLeaveTheBundle(t *testing.T) {
	f := newFixture(newVWC(), newMWC())
	m := f.manager(t, func(c *Config) { c.PublishDelay = -1 })
	f.reconcile(t, m)
	f.clock.Add(201 * 24 * time.Hour)
	f.reconcile(t, m)
	f.reconcile(t, m)
	if n := caCount(t, f.secret(t)); n != 2 {
		t.Fatalf("want 2 CAs during the rotation, got %d", n)
	}
	f.clock.Add(100 * 24 * time.Hour) // the first CA (300 days) has expired
	f.reconcile(t, m)
	if n := caCount(t, f.secret(t)); n != 1 {
		t.Fatalf("want the expired CA gone, got %d CAs", n)
	}
	f.trusted(t, f.secret(t).Data[KeyCert])
}

func TestAnUnusableSecretIsReplaced(t *testing.T) {
	junk := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secName},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"ca.crt": []byte("not a certificate")},
	}
	f := newFixture(newVWC(), junk)
	m := f.manager(t)
	f.reconcile(t, m)
	s := f.secret(t)
	if s.Type != corev1.SecretTypeOpaque {
		t.Errorf("type changed to %q (it is immutable)", s.Type)
	}
	f.trusted(t, s.Data[KeyCert])
}

func TestChangedDNSNamesReissueTheServingCertificate(t *testing.T) {
	f := newFixture(newVWC())
	f.reconcile(t, f.manager(t))
	m := f.manager(t, func(c *Config) { c.Hosts = []string{host, "other.example"} })
	f.reconcile(t, m)
	leaf, _ := parseCerts(f.secret(t).Data[KeyCert])
	if !coversHosts(leaf[0], []string{host, "other.example"}) {
		t.Errorf("DNS names %v", leaf[0].DNSNames)
	}
}

func TestRunPublishesToAWebhookConfigurationCreatedLater(t *testing.T) {
	f := newFixture()
	f.clock.t = time.Now()
	m := f.manager(t, func(c *Config) { c.Now = time.Now; c.Resync = time.Hour })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	waitFor(t, "the Secret", func() bool {
		_, err := f.client.CoreV1().Secrets(ns).Get(ctx, secName, metav1.GetOptions{})
		return err == nil
	})
	current := func() bool {
		s := f.secret(t)
		for _, bundle := range f.bundles(t) {
			if !bytes.Equal(bundle, s.Data[KeyCA]) {
				return false
			}
		}
		return true
	}
	if _, err := f.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, newVWC(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "caBundle in the new validating configuration", current)
	if _, err := f.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, newMWC(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "caBundle in the new mutating configuration", current)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	c := fake.NewClientset()
	tests := map[string]Config{
		"without a client":     {Namespace: ns, SecretName: secName, Hosts: []string{host}},
		"without a secret":     {Client: c, Namespace: ns, Hosts: []string{host}},
		"without DNS names":    {Client: c, Namespace: ns, SecretName: secName},
		"cert outlives its CA": {Client: c, Namespace: ns, SecretName: secName, Hosts: []string{host}, CAValidity: time.Hour, CertValidity: 2 * time.Hour},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := New(cfg); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}

func TestFlags(t *testing.T) {
	var f Flags
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	f.AddFlags(fs)
	err := fs.Parse([]string{
		"--self-managed-certs", "--self-managed-cert-dir=/tls", "--self-managed-secret=s",
		"--self-managed-webhook-configuration=v", "--self-managed-dns-names=a.ns.svc, a.ns",
		"--self-managed-ca-validity=100h", "--self-managed-cert-validity=10h",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg := f.Config("from-pod")
	if cfg.Namespace != "from-pod" || cfg.SecretName != "s" || cfg.WebhookConfiguration != "v" ||
		len(cfg.Hosts) != 2 || cfg.Hosts[1] != "a.ns" || cfg.CAValidity != 100*time.Hour {
		t.Errorf("Config = %+v", cfg)
	}
	bad := Flags{Enabled: true}
	if err := bad.Validate(); err == nil {
		t.Error("Validate accepted enabled flags without a Secret, directory or names")
	}
}
