// Package crdcheck compares the snapshot CRDs a cluster has with the ones
// an upgrade would apply, before the upgrade: the API server refuses a CRD
// whose spec.versions lacks a version still listed in the live CRD's
// status.storedVersions, and objects stored at an older version keep the
// fields of that version (the group CRDs convert with strategy None).
package crdcheck

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Version is one entry of spec.versions.
type Version struct {
	Name    string `json:"name"`
	Served  bool   `json:"served"`
	Storage bool   `json:"storage"`
}

// CRD is the part of a CustomResourceDefinition the check reads.
type CRD struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Versions []Version `json:"versions"`
	} `json:"spec"`
	Status struct {
		StoredVersions []string `json:"storedVersions"`
	} `json:"status"`
}

func (c CRD) storage() string {
	for _, v := range c.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func (c CRD) has(version string) bool {
	return slices.ContainsFunc(c.Spec.Versions, func(v Version) bool { return v.Name == version })
}

// Severity of a finding.
type Severity string

const (
	// Blocking: the upgrade of this CRD would be refused.
	Blocking Severity = "blocking"
	// Warning: the upgrade goes through, but objects may still be stored
	// in an older version.
	Warning Severity = "warning"
)

// Finding is one problem with its fix.
type Finding struct {
	CRD      string
	Severity Severity
	Message  string
}

func (f Finding) String() string {
	return fmt.Sprintf("%s: %s: %s", f.Severity, f.CRD, f.Message)
}

// Check compares the live CRDs with the shipped ones (by name). A shipped
// CRD that is not live yet is a fresh install: nothing to check.
func Check(live, shipped []CRD) []Finding {
	byName := map[string]CRD{}
	for _, c := range live {
		byName[c.Metadata.Name] = c
	}
	var out []Finding
	for _, next := range shipped {
		cur, ok := byName[next.Metadata.Name]
		if !ok {
			continue
		}
		out = append(out, checkOne(cur, next)...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CRD < out[j].CRD })
	return out
}

func checkOne(cur, next CRD) []Finding {
	name := cur.Metadata.Name
	storage := next.storage()
	var missing, older []string
	for _, v := range cur.Status.StoredVersions {
		switch {
		case !next.has(v):
			missing = append(missing, v)
		case v != storage:
			older = append(older, v)
		}
	}
	var out []Finding
	if len(missing) > 0 {
		out = append(out, Finding{CRD: name, Severity: Blocking, Message: fmt.Sprintf(
			"status.storedVersions lists %s, which the new CRD does not define, so the API server will refuse the upgrade; "+
				"first rewrite every object in the current storage version %s and remove %s from the list: "+
				"snapctl migrate-storage --resources %s (dry run first: --dry-run) does both; by hand, rewrite every object read at %s "+
				"and then kubectl patch crd %s --subresource=status --type=merge -p '{\"status\":{\"storedVersions\":[\"%s\"]}}'",
			strings.Join(missing, ", "), cur.storage(), strings.Join(missing, ", "), name, cur.storage(), name, cur.storage())})
	}
	if len(older) > 0 {
		out = append(out, Finding{CRD: name, Severity: Warning, Message: fmt.Sprintf(
			"status.storedVersions still lists %s besides the storage version %s: objects written at %s may keep fields of that version "+
				"(the CRD converts without a webhook); snapctl migrate-storage --resources %s rewrites them and drops %s from status.storedVersions",
			strings.Join(older, ", "), storage, strings.Join(older, ", "), name, strings.Join(older, ", "))})
	}
	return out
}
