package main

import (
	"flag"
	"testing"
	"time"
)

func TestNoCSISideAfterFlagAndHeartbeat(t *testing.T) {
	o := NewOptions()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.AddFlags(fs)
	if o.NoCSISideAfter != time.Minute {
		t.Errorf("default --no-csi-side-after = %v, want 1m", o.NoCSISideAfter)
	}
	if err := fs.Parse([]string{"--no-csi-side-after=2s", "--leader-election-namespace=csi"}); err != nil {
		t.Fatal(err)
	}
	if o.NoCSISideAfter != 2*time.Second {
		t.Errorf("--no-csi-side-after = %v", o.NoCSISideAfter)
	}
	o.NodeName = "node-1"
	h := o.heartbeat(&clients{}, "ebs.csi.aws.com")
	if h.Name() != "snapkeeper-csi-ebs-csi-aws-com-node-1" || h.Namespace != "csi" || h.Duration != 15*time.Second || !isOurHolder(h.Identity) {
		t.Errorf("heartbeat = %s %+v", h.Name(), h)
	}
}
