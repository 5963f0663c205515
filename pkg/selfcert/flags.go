package selfcert

import (
	"errors"
	"flag"
	"strings"
	"time"
)

// Flags are the command-line options of the webhook for this mode; the
// chart (certificates.mode=selfManaged) passes exactly these.
type Flags struct {
	Enabled              bool
	CertDir              string
	SecretName           string
	Namespace            string
	WebhookConfiguration string
	ConversionCRDs       string
	DNSNames             string
	CAValidity           time.Duration
	CertValidity         time.Duration
}

// AddFlags registers the flags on fs (a pflag.FlagSet takes them through
// AddGoFlagSet).
func (f *Flags) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&f.Enabled, "self-managed-certs", false, "Create and rotate the serving certificate in a Secret and keep caBundle of the webhook configurations current (no cert-manager needed).")
	fs.StringVar(&f.CertDir, "self-managed-cert-dir", "", "Directory to write tls.crt, tls.key and ca.crt into; --tls-cert-file and --tls-private-key-file should point there.")
	fs.StringVar(&f.SecretName, "self-managed-secret", "", "Secret that holds the CA and the serving certificate, shared by all replicas.")
	fs.StringVar(&f.Namespace, "self-managed-namespace", "", "Namespace of that Secret (default: $POD_NAMESPACE).")
	fs.StringVar(&f.WebhookConfiguration, "self-managed-webhook-configuration", "", "Name of the ValidatingWebhookConfiguration and MutatingWebhookConfiguration whose caBundle to keep current (either may be absent).")
	fs.StringVar(&f.ConversionCRDs, "self-managed-conversion-crds", "", "Comma-separated CustomResourceDefinitions whose conversion webhook (strategy Webhook) is this webhook: their caBundle is kept current too.")
	fs.StringVar(&f.DNSNames, "self-managed-dns-names", "", "Comma-separated DNS names (or IP addresses) of the serving certificate, the webhook Service's first.")
	fs.DurationVar(&f.CAValidity, "self-managed-ca-validity", DefaultCAValidity, "Lifetime of a new CA; it is replaced after two thirds of it.")
	fs.DurationVar(&f.CertValidity, "self-managed-cert-validity", DefaultCertValidity, "Lifetime of a new serving certificate; it is replaced after two thirds of it.")
}

// Validate checks the flags when the mode is enabled.
func (f *Flags) Validate() error {
	if !f.Enabled {
		return nil
	}
	var errs []error
	if f.CertDir == "" {
		errs = append(errs, errors.New("--self-managed-cert-dir is required with --self-managed-certs"))
	}
	if f.SecretName == "" {
		errs = append(errs, errors.New("--self-managed-secret is required with --self-managed-certs"))
	}
	if len(f.Hosts()) == 0 {
		errs = append(errs, errors.New("--self-managed-dns-names is required with --self-managed-certs"))
	}
	if f.CAValidity <= 0 || f.CertValidity <= 0 || f.CertValidity > f.CAValidity {
		errs = append(errs, errors.New("--self-managed-cert-validity must be positive and at most --self-managed-ca-validity"))
	}
	return errors.Join(errs...)
}

// Hosts splits DNSNames.
func (f *Flags) Hosts() []string { return splitList(f.DNSNames) }

func splitList(s string) []string {
	var out []string
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// Config turns the flags into a Config; namespace is used when
// --self-managed-namespace is empty.
func (f *Flags) Config(namespace string) Config {
	if f.Namespace != "" {
		namespace = f.Namespace
	}
	return Config{
		Namespace:            namespace,
		SecretName:           f.SecretName,
		WebhookConfiguration: f.WebhookConfiguration,
		ConversionCRDs:       splitList(f.ConversionCRDs),
		Hosts:                f.Hosts(),
		CertDir:              f.CertDir,
		CAValidity:           f.CAValidity,
		CertValidity:         f.CertValidity,
	}
}
