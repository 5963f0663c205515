// Package schedclient is the typed client and informer of snapkeeper's own
// API (SnapshotSchedule, pkg/apis/snapkeeper/v1alpha1): client-go's generic
// typed client over a REST client of that group, so no generated clientset
// is kept in the tree.
package schedclient

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// Scheme knows the kinds of snapkeeper.io and the meta kinds its lists and
// watches carry.
var Scheme = runtime.NewScheme()

func init() {
	if err := v1alpha1.AddToScheme(Scheme); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(Scheme, metav1.SchemeGroupVersion)
}

// Interface reads and writes the SnapshotSchedules of one namespace ("" for
// every namespace, for lists and watches).
type Interface = *gentype.ClientWithList[*v1alpha1.SnapshotSchedule, *v1alpha1.SnapshotScheduleList]

// Client makes namespaced clients of one REST client.
type Client struct{ rest rest.Interface }

// NewForConfig returns a Client over cfg (JSON: custom resources speak
// nothing else).
func NewForConfig(cfg *rest.Config) (*Client, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(Scheme).WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &Client{rest: rc}, nil
}

// Schedules is the client of one namespace's schedules.
func (c *Client) Schedules(namespace string) Interface {
	return gentype.NewClientWithList[*v1alpha1.SnapshotSchedule, *v1alpha1.SnapshotScheduleList](
		"snapshotschedules", c.rest, runtime.NewParameterCodec(Scheme), namespace,
		func() *v1alpha1.SnapshotSchedule { return &v1alpha1.SnapshotSchedule{} },
		func() *v1alpha1.SnapshotScheduleList { return &v1alpha1.SnapshotScheduleList{} })
}

// NewInformer is a shared informer of every namespace's schedules.
func NewInformer(c *Client, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	all := c.Schedules(metav1.NamespaceAll)
	return cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return all.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return all.Watch(ctx, o)
		},
	}, &v1alpha1.SnapshotSchedule{}, resync, indexers)
}
