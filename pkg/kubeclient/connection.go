package kubeclient

import (
	"net"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// OwnConnection returns a clientset of built-in kinds for kubeCfg and one of
// snapshot kinds for snapCfg (same server and credentials; their content
// types may differ) that share one connection to the API server of their
// own. client-go otherwise gives every configuration with the same
// credentials one cached transport, so one HTTP/2 connection carries every
// request and watch of a process: informers given these clients get their
// watch events apart from the writers' requests.
func OwnConnection(kubeCfg, snapCfg *rest.Config) (kubernetes.Interface, snapclient.Interface, error) {
	// A configuration with a dialer of its own is not served from
	// client-go's transport cache.
	dial := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	kc, sc := rest.CopyConfig(kubeCfg), rest.CopyConfig(snapCfg)
	kc.Dial, sc.Dial = dial, dial
	hc, err := rest.HTTPClientFor(sc)
	if err != nil {
		return nil, nil, err
	}
	kube, err := kubernetes.NewForConfigAndClient(kc, hc)
	if err != nil {
		return nil, nil, err
	}
	snap, err := snapclient.NewForConfigAndClient(sc, hc)
	if err != nil {
		return nil, nil, err
	}
	return kube, snap, nil
}
