package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/admission"
	"github.com/snapkeeper/snapkeeper/pkg/kubeclient"
	"github.com/snapkeeper/snapkeeper/pkg/logging"
	"github.com/snapkeeper/snapkeeper/pkg/selfcert"
	"github.com/snapkeeper/snapkeeper/pkg/validation"
)

// Options is everything the command line sets. Flags fill it, Validate
// checks it before anything starts, and run reads only from it.
type Options struct {
	// Client is --kubeconfig, --kube-api-qps and --kube-api-burst.
	Client kubeclient.Options

	TLSCertFile      string
	TLSKeyFile       string
	CertPollInterval time.Duration
	BindAddress      string
	Port             int
	MaxRequestBytes  int64
	// MaxConversionBytes caps a ConversionReview on /convert.
	MaxConversionBytes int64

	StrictPopulators              bool
	AllowCrossNamespaceDataSource bool

	// SelfCert is the selfManaged certificate mode (--self-managed-*): the
	// webhook keeps its own CA and serving certificate in a Secret and the
	// caBundle of its webhook configurations current.
	SelfCert selfcert.Flags
	// PodNamespace is $POD_NAMESPACE, the Secret's namespace when
	// --self-managed-namespace is not given.
	PodNamespace string

	// Logging is --logging-format; with it come -v and the other logging
	// flags of pkg/logging.
	Logging     logging.Options
	ShowVersion bool
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Client:             kubeclient.Options{QPS: 20, Burst: 40},
		CertPollInterval:   admission.DefaultCertPollInterval,
		BindAddress:        "0.0.0.0",
		Port:               9443,
		MaxRequestBytes:    admission.DefaultMaxRequestBytes,
		MaxConversionBytes: admission.DefaultMaxConversionBytes,
		PodNamespace:       os.Getenv("POD_NAMESPACE"),
		Logging:            logging.NewOptions(),
	}
}

// AddFlags binds the options to fs, the logging flags included.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	o.Client.AddFlags(fs, "for informer lists and fresh reads of classes")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "PEM serving certificate (with intermediates). Re-read when it changes.")
	fs.StringVar(&o.TLSKeyFile, "tls-private-key-file", o.TLSKeyFile, "PEM private key of --tls-cert-file. Re-read when it changes.")
	fs.DurationVar(&o.CertPollInterval, "tls-reload-interval", o.CertPollInterval, "How often the certificate files are checked for changes.")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "Address to serve HTTPS on.")
	fs.IntVar(&o.Port, "port", o.Port, "Port to serve HTTPS on: the validating endpoints, /healthz, /readyz and /metrics.")
	fs.Int64Var(&o.MaxRequestBytes, "max-request-bytes", o.MaxRequestBytes, "Largest AdmissionReview body accepted; larger ones get 413.")
	fs.Int64Var(&o.MaxConversionBytes, "max-conversion-bytes", o.MaxConversionBytes, "Largest ConversionReview body accepted on /convert (the API server sends a whole LIST read at another version in one review); larger ones get 413.")
	fs.BoolVar(&o.StrictPopulators, "strict-populators", o.StrictPopulators,
		"Deny claims whose data source kind no VolumePopulator registers (default: warn, since registration is optional).")
	fs.BoolVar(&o.AllowCrossNamespaceDataSource, "allow-cross-namespace-data-source", o.AllowCrossNamespaceDataSource,
		"Admit claims whose dataSourceRef names another namespace (needs the CrossNamespaceVolumeDataSource feature and a ReferenceGrant).")
	o.SelfCert.AddFlags(fs)
	o.Logging.AddFlags(fs)
	fs.BoolVar(&o.ShowVersion, "version", o.ShowVersion, "Print the version and exit.")
}

// Validate reports every problem of the options at once.
func (o *Options) Validate() error {
	var errs []error
	if o.ShowVersion {
		return nil
	}
	if o.TLSCertFile == "" || o.TLSKeyFile == "" {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file are required: the API server only calls webhooks over TLS"))
	}
	if o.Port < 1 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port %d is not a TCP port", o.Port))
	}
	if o.BindAddress != "" && net.ParseIP(o.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("--bind-address %q is not an IP address", o.BindAddress))
	}
	if err := o.Client.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.CertPollInterval <= 0 {
		errs = append(errs, errors.New("--tls-reload-interval must be positive"))
	}
	if o.MaxConversionBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("--max-conversion-bytes %d is below 1 MiB: reads of group snapshots at another version would fail", o.MaxConversionBytes))
	}
	if o.MaxRequestBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("--max-request-bytes %d is below 1 MiB: ordinary reviews would be refused", o.MaxRequestBytes))
	}
	if err := o.Logging.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := o.SelfCert.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.SelfCert.Enabled {
		if o.SelfCert.Namespace == "" && o.PodNamespace == "" {
			errs = append(errs, errors.New("--self-managed-namespace is required with --self-managed-certs when $POD_NAMESPACE is not set"))
		}
		// The server must load what the Manager writes, or it never gets ready.
		if dir := o.SelfCert.CertDir; dir != "" && o.TLSCertFile != "" && o.TLSKeyFile != "" {
			wantCert, wantKey := filepath.Join(dir, selfcert.KeyCert), filepath.Join(dir, selfcert.KeyKey)
			if filepath.Clean(o.TLSCertFile) != wantCert || filepath.Clean(o.TLSKeyFile) != wantKey {
				errs = append(errs, fmt.Errorf("with --self-managed-certs the webhook writes its certificate into --self-managed-cert-dir: set --tls-cert-file=%s and --tls-private-key-file=%s", wantCert, wantKey))
			}
		}
	}
	return errors.Join(errs...)
}

// SelfCertConfig is the configuration of the selfManaged certificate
// Manager, without its client.
func (o *Options) SelfCertConfig() selfcert.Config {
	return o.SelfCert.Config(o.PodNamespace)
}

// ValidationOptions are the policy switches for pkg/validation.
func (o *Options) ValidationOptions() validation.Options {
	return validation.Options{
		StrictPopulators:              o.StrictPopulators,
		AllowCrossNamespaceDataSource: o.AllowCrossNamespaceDataSource,
	}
}

// Address is where to listen.
func (o *Options) Address() string {
	return net.JoinHostPort(o.BindAddress, fmt.Sprint(o.Port))
}
