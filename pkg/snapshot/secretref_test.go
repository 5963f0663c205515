package snapshot

import (
	"strings"
	"testing"
)

func TestResolveSecretPair(t *testing.T) {
	vars := TemplateVars{ContentName: "snapcontent-1", SnapshotNamespace: "tenant-a", SnapshotName: "tenant-b"}
	pair, _ := PairOf(ParamSecretName)
	group, _ := PairOf(ParamGroupSecretName)
	cases := map[string]struct {
		pair             SecretParamPair
		name, namespace  string
		wantName, wantNS string
		wantErr          string
	}{
		"the documented tokens resolve": {pair: pair, name: "${volumesnapshot.name}-${volumesnapshotcontent.name}", namespace: "${volumesnapshot.namespace}",
			wantName: "tenant-b-snapcontent-1", wantNS: "tenant-a"},
		"a literal namespace is the class author's choice": {pair: pair, name: "creds", namespace: "tenant-b", wantName: "creds", wantNS: "tenant-b"},
		"the snapshot's name cannot pick the namespace": {pair: pair, name: "creds", namespace: "${volumesnapshot.name}",
			wantErr: "parameter " + ParamSecretNamespace + ": the namespace template \"${volumesnapshot.name}\" uses ${volumesnapshot.name}, which is not allowed in a namespace"},
		"a group token is not a single snapshot token": {pair: pair, name: "${volumegroupsnapshot.name}", namespace: "ns",
			wantErr: "uses ${volumegroupsnapshot.name}, which is not allowed in a secret name"},
		"an unknown token is named": {pair: pair, name: "${volumesnapshot.uid}", namespace: "ns", wantErr: "uses ${volumesnapshot.uid}"},
		"an unterminated token is named": {pair: pair, name: "creds", namespace: "x-${volumesnapshot.namespace",
			wantErr: "has a \"${\" without its \"}\""},
		"the group pair takes group tokens": {pair: group, name: "${volumegroupsnapshot.name}", namespace: "${volumegroupsnapshot.namespace}",
			wantName: "tenant-b", wantNS: "tenant-a"},
		"the group pair refuses the group name in the namespace": {pair: group, name: "x", namespace: "${volumegroupsnapshot.name}",
			wantErr: "not allowed in a namespace"},
		"no secret is no error": {pair: pair},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			params := map[string]string{}
			if tc.name != "" || tc.namespace != "" {
				params[tc.pair.NameKey], params[tc.pair.NamespaceKey] = tc.name, tc.namespace
			}
			n, ns, err := ResolveSecretPair(tc.pair, params, vars)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), " a literal ") {
					t.Errorf("err %q does not say what to use instead", err)
				}
			case err != nil:
				t.Fatal(err)
			case n != tc.wantName || ns != tc.wantNS:
				t.Errorf("resolved to %q/%q, want %q/%q", ns, n, tc.wantNS, tc.wantName)
			}
		})
	}
}
