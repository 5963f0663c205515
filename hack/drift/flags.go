package main

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The release's binaries and the files that declare their flags. Only flags
// written in these files are seen: the ones the binaries get from libraries
// (klog's -v and --vmodule, --logging-format, and csi-lib-utils' common
// flags such as --csi-address, --kubeconfig or --leader-election of the
// csi-snapshotter) are not in the release's source.
// test/e2e/dropin/flags_test.go covers those by running both generations'
// binaries and comparing their -h.
var upstreamBinaries = []struct{ name, file string }{
	{"snapshot-controller", "cmd/snapshot-controller/main.go"},
	{"csi-snapshotter", "cmd/csi-snapshotter/main.go"},
}

// Our flags: Options.AddFlags in cmd/controller (package main, so it is read,
// not imported), the defaults NewOptions gives its fields, and the AddFlags
// methods of the option structs of other packages it calls (pkg/kubeclient,
// pkg/logging).
const (
	ourFlagsDir  = "cmd/controller"
	ourFlagsFunc = "Options.AddFlags"
	ourDefaults  = "NewOptions"
	ourFlagsFile = "cmd/controller/options.go"
)

// flagDef is one flag: its type ("String", "Bool", "Int", "Duration", ...,
// or "Var" for a flag.Value, whose default is not compared) and its default,
// normalised (15*time.Minute and time.Minute*15 are both "15m0s"); a default
// that is not a constant is its source text.
type flagDef struct {
	Type, Default string
	File          string // where ours gets the default, relative to the repository
}

// flagFunc describes a registration function of the standard flag package:
// the flag type and the argument positions of name and default (-1: none).
type flagFunc struct {
	typ             string
	nameArg, defArg int
}

var flagFuncs = func() map[string]flagFunc {
	m := map[string]flagFunc{
		"Var": {"Var", 1, -1}, "TextVar": {"Var", 1, -1},
		"Func": {"Var", 0, -1}, "BoolFunc": {"Var", 0, -1},
	}
	for _, t := range []string{"String", "Bool", "Int", "Int64", "Uint", "Uint64", "Float64", "Duration"} {
		m[t] = flagFunc{t, 0, 1}
		m[t+"Var"] = flagFunc{t, 1, 2}
	}
	return m
}()

// compareFlags: every flag the release's binaries declare must be ours too,
// with the same type and default.
func compareFlags(cfg config) ([]diff, int, error) {
	l := &loader{repo: cfg.Repo, fset: token.NewFileSet(), pkgs: map[string]*goPkg{}}
	ours, err := l.ourFlags()
	if err != nil {
		return nil, 0, err
	}
	var diffs []diff
	n := 0
	for _, bin := range upstreamBinaries {
		theirs, err := l.upstreamFlags(filepath.Join(cfg.Upstream, bin.file))
		if err != nil {
			return nil, 0, err
		}
		n += len(theirs)
		for _, name := range sortedKeys(theirs) {
			t := theirs[name]
			what := fmt.Sprintf("flag --%s of %s", name, bin.name)
			o, ok := ours[name]
			switch {
			case !ok:
				diffs = append(diffs, diff{What: what, Upstream: t.Type + " " + t.Default, Ours: "absent", File: ourFlagsFile})
			case t.Type == "Var" || o.Type == "Var":
				// A flag.Value: its text form is its own business.
			case t.Type != o.Type:
				diffs = append(diffs, diff{What: what + " type", Upstream: t.Type, Ours: o.Type, File: o.File})
			case t.Default != o.Default:
				diffs = append(diffs, diff{What: what + " default", Upstream: t.Default, Ours: o.Default, File: o.File})
			}
		}
	}
	return diffs, n, nil
}

// goPkg is the parsed source of one directory: enough to evaluate constant
// expressions and to follow functions and methods by name.
type goPkg struct {
	consts  map[string]ast.Expr
	funcs   map[string]*ast.FuncDecl // "Name" or "Recv.Name"
	structs map[string]*ast.StructType
	imports map[string]string // local name -> import path
	files   []*ast.File
}

type loader struct {
	repo, module string
	fset         *token.FileSet
	pkgs         map[string]*goPkg // by directory
}

// val is an expression and the package it is written in.
type val struct {
	e ast.Expr
	p *goPkg
}

func (l *loader) parse(files ...string) (*goPkg, error) {
	p := &goPkg{consts: map[string]ast.Expr{}, funcs: map[string]*ast.FuncDecl{},
		structs: map[string]*ast.StructType{}, imports: map[string]string{}}
	for _, file := range files {
		f, err := parser.ParseFile(l.fset, file, nil, 0)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			p.imports[name] = path
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				key := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					key = typeName(d.Recv.List[0].Type) + "." + key
				}
				p.funcs[key] = d
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						for i, name := range s.Names {
							if d.Tok == token.CONST && i < len(s.Values) {
								p.consts[name.Name] = s.Values[i]
							}
						}
					case *ast.TypeSpec:
						if st, ok := s.Type.(*ast.StructType); ok {
							p.structs[s.Name.Name] = st
						}
					}
				}
			}
		}
	}
	return p, nil
}

// pkg parses the non-test Go files of one of our directories.
func (l *loader) pkg(dir string) (*goPkg, error) {
	if p, ok := l.pkgs[dir]; ok {
		return p, nil
	}
	files, err := filepath.Glob(filepath.Join(l.repo, dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var src []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			src = append(src, f)
		}
	}
	p, err := l.parse(src...)
	if err != nil {
		return nil, err
	}
	l.pkgs[dir] = p
	return p, nil
}

// imported returns the package that p imports as name, when it is ours.
func (l *loader) imported(p *goPkg, name string) *goPkg {
	path, ok := p.imports[name]
	if !ok || l.module == "" || !strings.HasPrefix(path, l.module+"/") {
		return nil
	}
	q, err := l.pkg(strings.TrimPrefix(path, l.module+"/"))
	if err != nil {
		return nil
	}
	return q
}

func (l *loader) upstreamFlags(file string) (map[string]flagDef, error) {
	p, err := l.parse(file)
	if err != nil {
		return nil, err
	}
	flagPkg := "flag"
	for name, path := range p.imports {
		if path == "flag" {
			flagPkg = name
		}
	}
	out := map[string]flagDef{}
	ast.Inspect(p.files[0], func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && exprString(sel.X) == flagPkg {
			if name, def, ok := l.registration(p, call, nil); ok {
				out[name] = def
			}
		}
		return true
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no flag.* calls found", file)
	}
	return out, nil
}

func (l *loader) ourFlags() (map[string]flagDef, error) {
	mod, err := requiredModule(filepath.Join(l.repo, "go.mod"))
	if err != nil {
		return nil, err
	}
	l.module = mod
	p, err := l.pkg(ourFlagsDir)
	if err != nil {
		return nil, err
	}
	fn, ok := p.funcs[ourFlagsFunc]
	if !ok {
		return nil, fmt.Errorf("%s: no %s", ourFlagsDir, ourFlagsFunc)
	}
	defaults := l.composite(val{&ast.CallExpr{Fun: ast.NewIdent(ourDefaults)}, p})
	out := map[string]flagDef{}
	l.flagsOf(p, fn, defaults, out)
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %s registers no flags", ourFlagsDir, ourFlagsFunc)
	}
	return out, nil
}

// flagsOf collects the flags fn registers on its *FlagSet parameter, and
// follows calls of methods of the receiver's fields that take the FlagSet
// (o.Client.AddFlags(fs, ...)). recv is the receiver's value (a composite
// literal, or nothing when all fields are zero), so a default written as
// o.Workers reads the constructor's value.
func (l *loader) flagsOf(p *goPkg, fn *ast.FuncDecl, recv val, out map[string]flagDef) {
	fs := flagSetParam(fn)
	if fs == "" || fn.Body == nil {
		return
	}
	var recvName, recvType string
	if fn.Recv != nil && len(fn.Recv.List[0].Names) == 1 {
		recvName, recvType = fn.Recv.List[0].Names[0].Name, typeName(fn.Recv.List[0].Type)
	}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if exprString(sel.X) == fs {
			if name, def, ok := l.registration(p, call, &receiver{recvName, recv}); ok {
				out[name] = def
			}
			return true
		}
		// o.Field.Method(fs, ...) with Field of a struct type of ours.
		field, ok := sel.X.(*ast.SelectorExpr)
		if !ok || recvName == "" || exprString(field.X) != recvName {
			return true
		}
		q, typ := l.fieldType(p, recvType, field.Sel.Name)
		if q == nil {
			return true
		}
		if m, ok := q.funcs[typ+"."+sel.Sel.Name]; ok {
			l.flagsOf(q, m, l.composite(l.field(recv, field.Sel.Name)), out)
		}
		return true
	})
}

type receiver struct {
	name string
	v    val
}

// registration reads one flag registration call: its name and definition.
func (l *loader) registration(p *goPkg, call *ast.CallExpr, recv *receiver) (string, flagDef, bool) {
	spec, ok := flagFuncs[call.Fun.(*ast.SelectorExpr).Sel.Name]
	if !ok || len(call.Args) <= spec.nameArg {
		return "", flagDef{}, false
	}
	nameV := eval(l, val{call.Args[spec.nameArg], p})
	if nameV == nil || nameV.Kind() != constant.String {
		return "", flagDef{}, false // a computed name (a loop over variants)
	}
	def := flagDef{Type: spec.typ, File: l.rel(call.Pos())}
	if spec.defArg >= 0 && spec.defArg < len(call.Args) {
		v := val{call.Args[spec.defArg], p}
		if sel, ok := v.e.(*ast.SelectorExpr); ok && recv != nil && exprString(sel.X) == recv.name {
			v = l.field(recv.v, sel.Sel.Name)
		}
		if v.e != nil {
			def.File = l.rel(v.e.Pos())
		}
		def.Default = format(l, v, spec.typ)
	}
	return constant.StringVal(nameV), def, true
}

// field returns the value of a field in a composite literal, or nothing
// (the zero value).
func (l *loader) field(v val, name string) val {
	lit, ok := v.e.(*ast.CompositeLit)
	if !ok {
		return val{}
	}
	for _, el := range lit.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok && exprString(kv.Key) == name {
			return val{kv.Value, v.p}
		}
	}
	return val{}
}

// composite resolves v to a composite literal: &T{...}, T{...}, or a call of
// a constructor of ours that returns one.
func (l *loader) composite(v val) val {
	for range 8 { // constructors calling constructors, within reason
		switch e := v.e.(type) {
		case *ast.CompositeLit:
			return v
		case *ast.UnaryExpr:
			v.e = e.X
		case *ast.ParenExpr:
			v.e = e.X
		case *ast.CallExpr:
			p, name := v.p, ""
			switch f := e.Fun.(type) {
			case *ast.Ident:
				name = f.Name
			case *ast.SelectorExpr:
				p, name = l.imported(v.p, exprString(f.X)), f.Sel.Name
			}
			fn, ok := p.funcsOrNil()[name]
			if !ok || fn.Body == nil {
				return val{}
			}
			v = val{returned(fn), p}
		default:
			return val{}
		}
	}
	return val{}
}

func (p *goPkg) funcsOrNil() map[string]*ast.FuncDecl {
	if p == nil {
		return nil
	}
	return p.funcs
}

// returned is the single result of fn's last return statement.
func returned(fn *ast.FuncDecl) ast.Expr {
	var e ast.Expr
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if r, ok := n.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
			e = r.Results[0]
		}
		return true
	})
	return e
}

// fieldType finds the package and type name of a struct field whose type is
// a named type of ours (kubeclient.Options, or Labels in the same package).
func (l *loader) fieldType(p *goPkg, structName, field string) (*goPkg, string) {
	st, ok := p.structs[structName]
	if !ok {
		return nil, ""
	}
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			if n.Name != field {
				continue
			}
			switch t := f.Type.(type) {
			case *ast.Ident:
				return p, t.Name
			case *ast.SelectorExpr:
				return l.imported(p, exprString(t.X)), t.Sel.Name
			}
		}
	}
	return nil, ""
}

// eval computes a constant expression: literals, constants of the package or
// of packages of ours, time units, arithmetic and conversions. nil when the
// expression is not constant.
func eval(l *loader, v val) constant.Value {
	switch e := v.e.(type) {
	case *ast.BasicLit:
		c := constant.MakeFromLiteral(e.Value, e.Kind, 0)
		if c.Kind() == constant.Unknown {
			return nil
		}
		return c
	case *ast.Ident:
		switch e.Name {
		case "true", "false":
			return constant.MakeBool(e.Name == "true")
		}
		if c, ok := v.p.consts[e.Name]; ok {
			return eval(l, val{c, v.p})
		}
	case *ast.SelectorExpr:
		pkg := exprString(e.X)
		if v.p.imports[pkg] == "time" {
			if d, ok := timeUnits[e.Sel.Name]; ok {
				return constant.MakeInt64(int64(d))
			}
			return nil
		}
		if q := l.imported(v.p, pkg); q != nil {
			if c, ok := q.consts[e.Sel.Name]; ok {
				return eval(l, val{c, q})
			}
		}
	case *ast.ParenExpr:
		return eval(l, val{e.X, v.p})
	case *ast.UnaryExpr:
		if x := eval(l, val{e.X, v.p}); x != nil {
			return constant.UnaryOp(e.Op, x, 0)
		}
	case *ast.BinaryExpr:
		x, y := eval(l, val{e.X, v.p}), eval(l, val{e.Y, v.p})
		if x == nil || y == nil {
			return nil
		}
		op := e.Op
		if op == token.QUO && x.Kind() == constant.Int && y.Kind() == constant.Int {
			op = token.QUO_ASSIGN // integer division
		}
		return constant.BinaryOp(x, op, y)
	case *ast.CallExpr:
		// A conversion: time.Duration(x), float64(x).
		if len(e.Args) == 1 {
			switch exprString(e.Fun) {
			case "time.Duration", "int", "int64", "uint", "uint64", "float64", "string":
				return eval(l, val{e.Args[0], v.p})
			}
		}
	}
	return nil
}

var timeUnits = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}

// format writes a default in the flag package's own text form; the zero
// value when v is nothing, the source text when it is not constant.
func format(l *loader, v val, typ string) string {
	var c constant.Value
	if v.e == nil {
		c = map[string]constant.Value{"String": constant.MakeString(""), "Bool": constant.MakeBool(false)}[typ]
		if c == nil {
			c = constant.MakeInt64(0)
		}
	} else if c = eval(l, v); c == nil {
		return "`" + exprString(v.e) + "`"
	}
	switch typ {
	case "Duration":
		if n, ok := constant.Int64Val(constant.ToInt(c)); ok {
			return time.Duration(n).String()
		}
	case "Float64":
		if f, ok := constant.Float64Val(constant.ToFloat(c)); ok {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	case "Int", "Int64", "Uint", "Uint64":
		return constant.ToInt(c).ExactString()
	case "String":
		if c.Kind() == constant.String {
			return strconv.Quote(constant.StringVal(c))
		}
	}
	return c.ExactString()
}

func (l *loader) rel(pos token.Pos) string {
	file := l.fset.Position(pos).Filename
	if r, err := filepath.Rel(l.repo, file); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return file
}

// flagSetParam is the name of fn's *flag.FlagSet (or *pflag.FlagSet)
// parameter, or "".
func flagSetParam(fn *ast.FuncDecl) string {
	for _, f := range fn.Type.Params.List {
		if star, ok := f.Type.(*ast.StarExpr); ok && strings.HasSuffix(exprString(star.X), ".FlagSet") && len(f.Names) == 1 {
			return f.Names[0].Name
		}
	}
	return ""
}

// typeName is T for T, *T and T[...].
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return exprString(e)
}

func exprString(e ast.Expr) string { return types.ExprString(e) }

// requiredModule reads the module path of a go.mod.
func requiredModule(goMod string) (string, error) {
	b, err := os.ReadFile(goMod)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s: no module line", goMod)
}
