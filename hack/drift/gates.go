package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
)

const (
	upstreamGatesFile = "pkg/features/features.go"
	ourGatesFile      = "cmd/controller/features.go"
)

// gateSpec is a feature gate's stage ("Alpha", "Beta", "GA", "Deprecated")
// and default.
type gateSpec struct {
	Stage   string
	Default bool
}

func (g gateSpec) String() string { return fmt.Sprintf("%s, default %t", g.Stage, g.Default) }

// compareGates compares the release's gates (a map of FeatureSpec, whose
// PreRelease is a featuregate constant) with our `gates` map (Stage a string).
// LockToDefault is not compared: no gate of ours can be set against its
// default anyway when the release locks it.
func compareGates(cfg config) ([]diff, int, error) {
	theirs, err := readGates(filepath.Join(cfg.Upstream, upstreamGatesFile), isFeatureSpecMap, "PreRelease")
	if err != nil {
		return nil, 0, err
	}
	ours, err := readGates(filepath.Join(cfg.Repo, ourGatesFile), isVar("gates"), "Stage")
	if err != nil {
		return nil, 0, err
	}
	var diffs []diff
	add := func(what, up, our string) {
		diffs = append(diffs, diff{What: what, Upstream: up, Ours: our, File: ourGatesFile})
	}
	for _, name := range sortedKeys(theirs) {
		t := theirs[name]
		o, ok := ours[name]
		switch {
		case !ok:
			add("feature gate "+name, t.String(), "absent")
		default:
			if t.Stage != o.Stage {
				add("feature gate "+name+" stage", t.Stage, o.Stage)
			}
			if t.Default != o.Default {
				add("feature gate "+name+" default", strconv.FormatBool(t.Default), strconv.FormatBool(o.Default))
			}
		}
	}
	for _, name := range sortedKeys(ours) {
		if _, ok := theirs[name]; !ok {
			add("feature gate "+name, "absent", ours[name].String())
		}
	}
	return diffs, len(theirs), nil
}

// readGates finds the map variable match accepts in file and reads its
// entries: the key is a string constant of the file, the value a composite
// literal with Default and the stage field.
func readGates(file string, match func(*ast.ValueSpec) bool, stageField string) (map[string]gateSpec, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		return nil, err
	}
	consts := stringConsts(f)
	out := map[string]gateSpec{}
	var lit *ast.CompositeLit
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Values) == 1 && match(vs) {
			lit, _ = vs.Values[0].(*ast.CompositeLit)
		}
		return lit == nil
	})
	if lit == nil {
		return nil, fmt.Errorf("%s: no feature gate map found", file)
	}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		id, _ := kv.Key.(*ast.Ident)
		if id == nil || consts[id.Name] == "" {
			return nil, fmt.Errorf("%s: gate key %s is not a string constant of the file", file, exprString(kv.Key))
		}
		spec, _ := kv.Value.(*ast.CompositeLit)
		if spec == nil {
			return nil, fmt.Errorf("%s: gate %s is not a composite literal", file, id.Name)
		}
		var g gateSpec
		for _, fe := range spec.Elts {
			fkv, ok := fe.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			switch field := exprString(fkv.Key); field {
			case "Default":
				g.Default = exprString(fkv.Value) == "true"
			case stageField:
				g.Stage = stageName(fkv.Value)
			}
		}
		out[consts[id.Name]] = g
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: the feature gate map is empty", file)
	}
	return out, nil
}

// stageName reads featuregate.GA (the release) or "GA" (ours) as "GA".
func stageName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.SelectorExpr:
		return x.Sel.Name
	case *ast.BasicLit:
		if s, err := strconv.Unquote(x.Value); err == nil {
			return s
		}
	}
	return exprString(e)
}

// isFeatureSpecMap matches `var x = map[featuregate.Feature]featuregate.FeatureSpec{...}`.
func isFeatureSpecMap(vs *ast.ValueSpec) bool {
	lit, ok := vs.Values[0].(*ast.CompositeLit)
	if !ok {
		return false
	}
	m, ok := lit.Type.(*ast.MapType)
	if !ok {
		return false
	}
	sel, ok := m.Value.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "FeatureSpec"
}

func isVar(name string) func(*ast.ValueSpec) bool {
	return func(vs *ast.ValueSpec) bool {
		return len(vs.Names) == 1 && vs.Names[0].Name == name
	}
}

// stringConsts maps the names of a file's string constants to their values.
func stringConsts(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					break
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						out[name.Name] = s
					}
				}
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
