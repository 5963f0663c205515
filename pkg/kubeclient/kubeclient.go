// Package kubeclient holds the API client flags both binaries share
// (--kubeconfig, --kube-api-qps, --kube-api-burst, and the controller's
// --master) and builds the rest.Config they describe.
package kubeclient

import (
	"errors"
	"flag"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options are the API client flags of a binary. Each binary sets its own
// QPS and Burst defaults before AddFlags.
type Options struct {
	// Kubeconfig is the path of a kubeconfig (--kubeconfig); with neither
	// it nor Master the in-cluster configuration is used.
	Kubeconfig string
	// Master overrides the API server URL of the kubeconfig (--master,
	// registered by AddMasterFlag: only the controller has it).
	Master string
	// QPS and Burst are the client-side rate limits (--kube-api-qps,
	// --kube-api-burst).
	QPS   float64
	Burst int
}

// AddFlags registers --kubeconfig, --kube-api-qps and --kube-api-burst on
// fs, with the current values as defaults. limitsApply, when not empty,
// says in the help what the limits apply to (for example "per component").
func (o *Options) AddFlags(fs *flag.FlagSet, limitsApply string) {
	scope := "."
	if limitsApply != "" {
		scope = ", " + limitsApply + "."
	}
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig; in-cluster configuration when empty.")
	fs.Float64Var(&o.QPS, "kube-api-qps", o.QPS, "Client QPS towards the API server"+scope)
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Client burst towards the API server"+scope)
}

// AddMasterFlag registers --master on fs.
func (o *Options) AddMasterFlag(fs *flag.FlagSet) {
	fs.StringVar(&o.Master, "master", o.Master, "URL of the API server; overrides the kubeconfig's (in-cluster configuration when neither is given).")
}

// Validate reports a limit that is not positive.
func (o *Options) Validate() error {
	if o.QPS <= 0 || o.Burst <= 0 {
		return errors.New("--kube-api-qps and --kube-api-burst must be positive")
	}
	return nil
}

// RESTConfig returns the client configuration the options describe: the
// kubeconfig and/or master when either is given, else the in-cluster
// configuration; with the options' limits and userAgent.
func (o *Options) RESTConfig(userAgent string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.Kubeconfig != "" || o.Master != "" {
		cfg, err = clientcmd.BuildConfigFromFlags(o.Master, o.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	cfg.UserAgent = userAgent
	return cfg, nil
}
