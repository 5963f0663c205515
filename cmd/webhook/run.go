package main

import (
	"context"
	"fmt"
	"net"

	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/admission"
	"github.com/snapkeeper/snapkeeper/pkg/admission/clusterlookup"
	"github.com/snapkeeper/snapkeeper/pkg/cachetrim"
	"github.com/snapkeeper/snapkeeper/pkg/selfcert"
	"github.com/snapkeeper/snapkeeper/pkg/version"
)

// run wires the webhook together and serves until ctx ends.
func run(ctx context.Context, o *Options) error {
	log := klog.FromContext(ctx)
	log.Info("Starting snapkeeper-webhook", "version", version.Version, "revision", version.GetRevision(), "address", o.Address(),
		"strictPopulators", o.StrictPopulators, "allowCrossNamespaceDataSource", o.AllowCrossNamespaceDataSource)

	cfg, err := restConfig(o)
	if err != nil {
		return err
	}
	snapClient, err := snapclientset.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("snapshot client: %w", err)
	}
	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	dynClient, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}

	// No resync: the webhook only reads the caches, it never reconciles.
	snapFactory := snapinformers.NewSharedInformerFactoryWithOptions(snapClient, 0, snapinformers.WithTransform(cachetrim.DropManagedFields))
	coreFactory := informers.NewSharedInformerFactoryWithOptions(kubeClient, 0, informers.WithTransform(cachetrim.DropManagedFields))
	// Claims a group selector matches are read live (ReadClaimsLive).
	lookup := clusterlookup.New(snapFactory, coreFactory, snapClient, clusterlookup.NewPopulatorCache(dynClient, 0)).
		ReadClaimsLive(kubeClient)
	// /convert fills what a v1beta1 group content lacks from its members.
	members, err := clusterlookup.NewContentMembers(snapFactory)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(version.NewCollector())
	metrics := admission.NewMetrics(reg)

	if o.SelfCert.Enabled {
		if err := startSelfCert(ctx, o, kubeClient, dynClient); err != nil {
			return err
		}
	}

	certs := admission.NewCertReloader(o.TLSCertFile, o.TLSKeyFile, o.CertPollInterval, metrics)
	if err := certs.Load(); err != nil {
		// cert-manager may not have issued the certificate yet: keep
		// polling, and stay unready until it appears.
		log.Error(err, "Serving certificate not loaded yet; /readyz fails until it is")
	}
	go certs.Run(ctx)

	snapFactory.Start(ctx.Done())
	coreFactory.Start(ctx.Done())
	defer snapFactory.Shutdown()
	defer coreFactory.Shutdown()
	// The group snapshot CRDs are optional: their informer starts when
	// (and if) the API server serves them.
	lookup.WatchGroupClasses(ctx, clusterlookup.DefaultGroupDiscoveryInterval)

	handler := admission.NewHandler(lookup.ForRequest, o.ValidationOptions(), o.MaxRequestBytes, metrics)
	router := admission.NewRouter(handler, reg, map[string]admission.ReadyCheck{
		"certificate": certs.Ready,
		"informers":   lookup.Synced,
	})
	router.Handle("/convert", admission.NewConverter(members, o.MaxConversionBytes, metrics))
	ln, err := net.Listen("tcp", o.Address())
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.Address(), err)
	}
	srv := admission.NewServer(router, certs)
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	log.Info("Serving", "address", ln.Addr().String())
	return admission.Serve(ctx, srv, ln)
}

// startSelfCert runs the selfManaged certificate Manager: one Reconcile now,
// so that the certificate files exist before the server first loads them,
// then Run in the background until ctx ends. A failed first Reconcile (the
// API server not reachable yet, another replica racing) is not fatal: Run
// retries with backoff, and /readyz fails until a certificate is loaded.
func startSelfCert(ctx context.Context, o *Options, client kubernetes.Interface, dyn dynamic.Interface) error {
	log := klog.FromContext(ctx)
	cfg := o.SelfCertConfig()
	cfg.Client, cfg.Dynamic = client, dyn
	m, err := selfcert.New(cfg)
	if err != nil {
		return err
	}
	log.Info("Managing the serving certificate", "secret", klog.KRef(cfg.Namespace, cfg.SecretName),
		"webhookConfiguration", cfg.WebhookConfiguration, "conversionCRDs", cfg.ConversionCRDs, "dir", cfg.CertDir, "dnsNames", cfg.Hosts)
	if _, err := m.Reconcile(ctx); err != nil {
		log.Error(err, "First reconcile of the serving certificate failed; retrying in the background")
	}
	go func() {
		if err := m.Run(ctx); err != nil {
			log.Error(err, "The certificate manager stopped; the certificate is no longer renewed")
		}
	}()
	return nil
}

// restConfig is the webhook's client configuration (pkg/kubeclient).
func restConfig(o *Options) (*rest.Config, error) {
	cfg, err := o.Client.RESTConfig("snapkeeper-webhook/" + version.Version)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %q: %w", o.Client.Kubeconfig, err)
	}
	return cfg, nil
}
