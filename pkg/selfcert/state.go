package selfcert

import (
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// state is the content of the Secret, parsed.
type state struct {
	ca        *keyPair            // current CA with its key
	cas       []*x509.Certificate // trusted CAs, current first
	caCreated time.Time           // when the current CA entered the bundle
	serving   *keyPair            // nil when missing or unreadable
}

const reasonOldCA = "signed by a previous CA"

// parseState reads the Secret. An error means the CA is missing or broken
// and the content must be replaced; a broken serving certificate is only
// reissued.
func parseState(s *corev1.Secret) (*state, error) {
	cas, err := parseCerts(s.Data[KeyCA])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyCA, err)
	}
	ca, err := parseKeyPair(s.Data[KeyCA], s.Data[KeyCAKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyCAKey, err)
	}
	if !ca.Cert.IsCA {
		return nil, errors.New("the first certificate of ca.crt is not a CA")
	}
	st := &state{ca: ca, cas: cas}
	st.caCreated = ca.Cert.NotBefore.Add(clockSkew)
	if t, err := time.Parse(time.RFC3339, s.Annotations[annoCADue]); err == nil {
		st.caCreated = t
	}
	if serving, err := parseKeyPair(s.Data[KeyCert], s.Data[KeyKey]); err == nil {
		st.serving = serving
	}
	return st, nil
}

// toSecret writes the state into base (a copy of the stored Secret, or a
// new one).
func (st *state) toSecret(base *corev1.Secret) *corev1.Secret {
	if base.Type == "" {
		// The type is immutable: only a new Secret gets it.
		base.Type = corev1.SecretTypeTLS
	}
	if base.Labels == nil {
		base.Labels = map[string]string{}
	}
	base.Labels["app.kubernetes.io/part-of"] = "snapkeeper"
	base.Labels["app.kubernetes.io/component"] = "webhook-certificate"
	if base.Annotations == nil {
		base.Annotations = map[string]string{}
	}
	base.Annotations[annoCADue] = st.caCreated.UTC().Format(time.RFC3339)
	data := map[string][]byte{
		KeyCA:    st.bundle(),
		KeyCAKey: st.ca.KeyPEM,
	}
	if st.serving != nil {
		data[KeyCert] = st.serving.CertPEM
		data[KeyKey] = st.serving.KeyPEM
	}
	base.Data = data
	base.StringData = nil
	return base
}

func (st *state) bundle() []byte { return encodeCerts(st.cas) }

// pruneCAs drops expired CAs and bounds the bundle, but always keeps the
// current CA and the one that signed the serving certificate in use. It
// reports whether anything was dropped.
func (st *state) pruneCAs(now time.Time) bool {
	keep := st.cas[:0:0]
	for i, c := range st.cas {
		inUse := i == 0 || (st.serving != nil && signedBy(st.serving.Cert, c))
		if inUse || (now.Before(c.NotAfter) && len(keep) < maxCAs) {
			keep = append(keep, c)
		}
	}
	dropped := len(keep) != len(st.cas)
	st.cas = keep
	return dropped
}

// servingProblem says why the serving certificate must be reissued, or "".
func (st *state) servingProblem(hosts []string, now time.Time) string {
	switch {
	case st.serving == nil:
		return "missing or unreadable"
	case !signedBy(st.serving.Cert, st.ca.Cert):
		for _, c := range st.cas[1:] {
			if signedBy(st.serving.Cert, c) {
				return reasonOldCA
			}
		}
		return "not signed by a trusted CA"
	case !coversHosts(st.serving.Cert, hosts):
		return "DNS names changed"
	case !now.Before(renewAt(st.serving.Cert)):
		return "due for renewal"
	}
	return ""
}
