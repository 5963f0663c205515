// Command promql-series parses PromQL expressions with Prometheus' own
// parser and names the series each one selects, so a test can check that
// every series an alert or a dashboard panel reads is really exposed.
//
// Input on stdin: a JSON list of strings, or one expression per line
// (empty lines and lines starting with # are skipped). Output: per
// expression, the metric names of its vector selectors (sorted, each once)
// and the expression, tab-separated; or "error: <parse error>" and the
// expression. With -json the output is one JSON list of
// {"expr", "series", "error"} objects instead. The exit status is 1 when
// an expression does not parse, 2 on bad input.
//
// A selector without a metric name and without an equality matcher on
// __name__ is reported as its matchers in braces, e.g. {__name__=~"a.*"},
// so that a caller looking names up finds nothing under it.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

type result struct {
	Expr   string   `json:"expr"`
	Series []string `json:"series"`
	Error  string   `json:"error,omitempty"`
}

func main() {
	asJSON := flag.Bool("json", false, "print one JSON list of {expr, series, error}")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: promql-series [-json] < expressions (a JSON list of strings, or one per line)")
		flag.PrintDefaults()
	}
	flag.Parse()
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promql-series:", err)
		os.Exit(2)
	}
	exprs, err := split(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promql-series:", err)
		os.Exit(2)
	}
	p := parser.NewParser(parser.Options{})
	results := make([]result, 0, len(exprs))
	failed := false
	for _, e := range exprs {
		r := inspect(p, e)
		failed = failed || r.Error != ""
		results = append(results, r)
	}
	out := bufio.NewWriter(os.Stdout)
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		enc.Encode(results)
	} else {
		for _, r := range results {
			if r.Error != "" {
				fmt.Fprintf(out, "error: %s\t%s\n", oneLine(r.Error), oneLine(r.Expr))
			} else {
				fmt.Fprintf(out, "%s\t%s\n", strings.Join(r.Series, " "), oneLine(r.Expr))
			}
		}
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "promql-series:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// split reads a JSON list of strings, or else one expression per line.
func split(in []byte) ([]string, error) {
	if t := bytes.TrimSpace(in); len(t) > 0 && t[0] == '[' {
		var list []string
		if err := json.Unmarshal(t, &list); err != nil {
			return nil, fmt.Errorf("input starts with [ but is no JSON list of strings: %w", err)
		}
		return list, nil
	}
	var list []string
	for line := range strings.SplitSeq(string(in), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		list = append(list, line)
	}
	return list, nil
}

func inspect(p parser.Parser, expr string) result {
	r := result{Expr: expr, Series: []string{}}
	ast, err := p.ParseExpr(expr)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			r.Series = append(r.Series, selectorName(vs))
		}
		return nil
	})
	slices.Sort(r.Series)
	r.Series = slices.Compact(r.Series)
	return r
}

func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	ms := make([]string, 0, len(vs.LabelMatchers))
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
		ms = append(ms, m.String())
	}
	return "{" + strings.Join(ms, ", ") + "}"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
