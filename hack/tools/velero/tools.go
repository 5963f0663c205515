//go:build tools

// Package tools pins the commands `make test-backup` builds from this module.
package tools

import (
	_ "github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws"
	_ "github.com/vmware-tanzu/velero/cmd/velero"
)
