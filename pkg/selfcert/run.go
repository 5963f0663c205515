package selfcert

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Run reconciles until ctx ends: at once, whenever the Secret or one of the
// webhook configurations changes (another replica rotated, `helm upgrade` or
// a GitOps tool reset caBundle, an operator asked for a rotation), when a
// renewal is due, and at least every Resync. Errors are retried with backoff up to a
// minute. Run returns nil when ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	log := klog.FromContext(ctx).WithName("selfcert")
	ctx = klog.NewContext(ctx, log)

	trigger := make(chan struct{}, 1)
	poke := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	// Watch just these objects (RBAC grants the webhook nothing more).
	byName := func(name string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
	}
	secrets := informers.NewSharedInformerFactoryWithOptions(m.cfg.Client, 0,
		informers.WithNamespace(m.cfg.Namespace), byName(m.cfg.SecretName))
	if _, err := secrets.Core().V1().Secrets().Informer().AddEventHandler(handler); err != nil {
		return err
	}
	secrets.Start(ctx.Done())
	defer secrets.Shutdown()
	if m.cfg.WebhookConfiguration != "" {
		// Both configurations of that name: validating (snapshot kinds) and
		// mutating (claims).
		configs := informers.NewSharedInformerFactoryWithOptions(m.cfg.Client, 0, byName(m.cfg.WebhookConfiguration))
		reg := configs.Admissionregistration().V1()
		for _, inf := range []cache.SharedIndexInformer{
			reg.ValidatingWebhookConfigurations().Informer(),
			reg.MutatingWebhookConfigurations().Informer(),
		} {
			if _, err := inf.AddEventHandler(handler); err != nil {
				return err
			}
		}
		configs.Start(ctx.Done())
		defer configs.Shutdown()
	}
	// The conversion CRDs, one informer each (RBAC names them).
	for _, name := range m.cfg.ConversionCRDs {
		crds := dynamicinformer.NewFilteredDynamicSharedInformerFactory(m.cfg.Dynamic, 0, "", func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
		if _, err := crds.ForResource(crdResource).Informer().AddEventHandler(handler); err != nil {
			return err
		}
		crds.Start(ctx.Done())
		defer crds.Shutdown()
	}

	backoff := time.Second
	for {
		wait := m.cfg.Resync
		res, err := m.Reconcile(ctx)
		if err != nil {
			log.Error(err, "Keeping the webhook certificate failed; retrying", "in", backoff)
			wait, backoff = backoff, min(2*backoff, time.Minute)
		} else {
			backoff = time.Second
			if d := res.Next.Sub(m.cfg.Now()); d < wait {
				wait = max(d, time.Second)
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-trigger:
			timer.Stop()
		case <-timer.C:
		}
	}
}
