package kubeclient

import (
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// OwnConnection returns copies of cfgs (same server and credentials, other
// content types allowed) and one HTTP client for all of them that reaches
// the API server over a connection of its own. client-go otherwise gives
// every configuration with the same credentials one cached transport, so
// one HTTP/2 connection carries every request and watch of a process.
// Build the clientsets with NewForConfigAndClient.
func OwnConnection(cfgs ...*rest.Config) ([]*rest.Config, *http.Client, error) {
	// A configuration with a dialer of its own is not served from
	// client-go's transport cache.
	dial := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	out := make([]*rest.Config, len(cfgs))
	for i, c := range cfgs {
		out[i] = rest.CopyConfig(c)
		out[i].Dial = dial
	}
	hc, err := rest.HTTPClientFor(out[0])
	if err != nil {
		return nil, nil, err
	}
	return out, hc, nil
}
