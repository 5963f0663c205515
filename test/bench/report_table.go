package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// printer writes one line of the report.
type printer func(format string, args ...any)

// printTo is the printer of the report being built in b.
func printTo(b *strings.Builder) printer {
	return func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
}

// tableHead writes the heading of a table with a column per x; first
// heads the column of row names and may be empty.
func tableHead[T any](p printer, first string, xs []T, label func(T) string) {
	if first == "" {
		p("| | %s |", joinCols(xs, label))
	} else {
		p("| %s | %s |", first, joinCols(xs, label))
	}
	p("|---|%s", strings.Repeat("---|", len(xs)))
}

// resultTable writes the heading of a table with a column per result and
// returns the writer of its rows: a row is named and reads each result's
// cell, but the cell of a result that failed (nil: none fails) says so.
func resultTable[T any](p printer, xs []T, label func(T) string, failed func(T) bool) func(name string, cell func(T) string) {
	tableHead(p, "", xs, label)
	return func(name string, cell func(T) string) {
		p("| %s | %s |", name, joinCols(xs, func(x T) string {
			if failed != nil && failed(x) {
				return "FAILED"
			}
			return cell(x)
		}))
	}
}

func joinCols[T any](xs []T, f func(T) string) string {
	cols := make([]string, len(xs))
	for i, x := range xs {
		cols[i] = f(x)
	}
	return strings.Join(cols, " | ")
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// listing renders the entries of m sorted by key, each as item(k, v) and
// left out when that is empty, joined by sep; "none" when nothing is left.
func listing[V any](m map[string]V, sep string, item func(k string, v V) string) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		if s := item(k, m[k]); s != "" {
			parts = append(parts, s)
		}
	}
	return joinOrNone(parts, sep)
}

// joinOrNone joins parts with sep, or says "none" when there is none.
func joinOrNone(parts []string, sep string) string {
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, sep)
}
