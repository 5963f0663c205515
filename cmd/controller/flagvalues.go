package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Labels is a repeatable flag of comma-separated labels, each key=value or
// key:value (the form of the community sidecars' --leader-election-labels).
type Labels struct{ m map[string]string }

// Set adds the labels of one flag occurrence.
func (l *Labels) Set(s string) error {
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			k, v, ok = strings.Cut(item, ":")
		}
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("malformed label %q: want key=value or key:value", item)
		}
		if l.m == nil {
			l.m = map[string]string{}
		}
		l.m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return nil
}

func (l *Labels) String() string {
	if l == nil {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l.m)) {
		parts = append(parts, k+"="+l.m[k])
	}
	return strings.Join(parts, ",")
}

// Map returns the labels (nil when none).
func (l *Labels) Map() map[string]string { return maps.Clone(l.m) }

// OptionalBool is a boolean flag that, like the community's
// --automaxprocs, also takes an empty value as true.
type OptionalBool bool

// Set parses a boolean; "" is true.
func (b *OptionalBool) Set(s string) error {
	if s == "" {
		*b = true
		return nil
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b = OptionalBool(v)
	return nil
}

func (b *OptionalBool) String() string {
	if b == nil {
		return "false"
	}
	return strconv.FormatBool(bool(*b))
}

// IsBoolFlag lets the flag stand alone (--automaxprocs).
func (b *OptionalBool) IsBoolFlag() bool { return true }
