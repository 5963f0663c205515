// Command busybox is the node plane's stand-in for the busybox image the
// Kubernetes e2e storage suites run their pods with (`make node-images`
// packs it under that image's name): one static binary that is a POSIX
// shell (mvdan.cc/sh) and the few tools those pods call, chosen by the name
// it runs as (/bin/sh, /bin/cat are links to it) or by its first argument
// (`busybox cat f`). There is no registry here to pull the real one from,
// and it cannot be built from a Go module. cat, cp, ls, mkdir, rm and touch
// are u-root's (github.com/u-root/u-root/pkg/core); the rest are small
// here because u-root has them only as main packages, which become one
// binary only through its own source rewriter (makebb), not a Go build.
package main

import (
	"bufio"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	uroot "github.com/u-root/u-root/pkg/core"
	"github.com/u-root/u-root/pkg/core/cat"
	"github.com/u-root/u-root/pkg/core/cp"
	"github.com/u-root/u-root/pkg/core/ls"
	"github.com/u-root/u-root/pkg/core/mkdir"
	"github.com/u-root/u-root/pkg/core/rm"
	"github.com/u-root/u-root/pkg/core/touch"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// applet is one command: args without the command's name, and the
// standard streams it runs with. It returns the exit status.
type applet func(args []string, in io.Reader, out, errOut io.Writer) int

var applets map[string]applet

func init() {
	applets = map[string]applet{
		"sh": shell, "cat": core("cat", cat.New), "echo": echo, "sleep": sleep, "sync": syncFS,
		"ls": core("ls", ls.New), "mkdir": core("mkdir", mkdir.New), "rm": core("rm", rm.New), "touch": core("touch", touch.New), "grep": grep,
		"head": head, "wc": wc, "md5sum": sum(md5.New), "sha256sum": sum(sha256.New),
		"true":     func([]string, io.Reader, io.Writer, io.Writer) int { return 0 },
		"false":    func([]string, io.Reader, io.Writer, io.Writer) int { return 1 },
		"hostname": hostname, "id": id, "mount": mount, "env": env, "stat": stat,
		"dd": dd, "cp": core("cp", cp.New), "test": testApplet("test"), "[": testApplet("["),
	}
}

// Names lists the applets, for the image's links (`busybox --list`).
func names() []string {
	var ns []string
	for n := range applets {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "busybox" {
		if len(args) == 0 || args[0] == "--list" {
			fmt.Println(strings.Join(names(), "\n"))
			return
		}
		name, args = args[0], args[1:]
	}
	a, ok := applets[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "busybox: %s: applet not found\n", name)
		os.Exit(127)
	}
	os.Exit(a(args, os.Stdin, os.Stdout, os.Stderr))
}

// core is one of u-root's commands as an applet.
func core(name string, newCommand func() uroot.Command) applet {
	return func(args []string, in io.Reader, out, errOut io.Writer) int {
		c := newCommand()
		c.SetIO(in, out, errOut)
		if err := c.Run(args...); err != nil {
			return fail(errOut, name, err)
		}
		return 0
	}
}

func fail(errOut io.Writer, cmd string, err error) int {
	fmt.Fprintf(errOut, "%s: %v\n", cmd, err)
	return 1
}

// shell runs `sh -c SCRIPT [NAME ARGS...]`, `sh FILE` or a script on
// stdin. SIGTERM ends it at once (exit 143), as `trap exit TERM` does: the
// scripts pods run are loops of sleeps that expect that. Traps other than
// EXIT and ERR are accepted and ignored.
func shell(args []string, in io.Reader, out, errOut io.Writer) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sig
		os.Exit(128 + int(s.(syscall.Signal)))
	}()
	var src io.Reader = in
	name, params := "sh", []string(nil)
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-c" {
		args = args[1:] // -e, -x, ...: accepted, not honoured
	}
	switch {
	case len(args) >= 2 && args[0] == "-c":
		src = strings.NewReader(args[1])
		if len(args) > 2 {
			name, params = args[2], args[3:]
		}
	case len(args) == 1 && args[0] == "-c":
		fmt.Fprintln(errOut, "sh: -c requires an argument")
		return 2
	case len(args) >= 1:
		f, err := os.Open(args[0])
		if err != nil {
			return fail(errOut, "sh", err)
		}
		defer f.Close()
		src, name, params = f, args[0], args[1:]
	}
	prog, err := syntax.NewParser().Parse(src, name)
	if err != nil {
		fmt.Fprintf(errOut, "sh: %v\n", err)
		return 2
	}
	r, err := interp.New(
		interp.StdIO(in, out, errOut),
		interp.Env(expand.ListEnviron(os.Environ()...)),
		interp.Params(append([]string{"--"}, params...)...),
		interp.CallHandler(ignoreSignalTraps),
		interp.ExecHandlers(runApplets),
	)
	if err != nil {
		return fail(errOut, "sh", err)
	}
	err = r.Run(context.Background(), prog)
	var status interp.ExitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &status):
		return int(status)
	default:
		return fail(errOut, "sh", err)
	}
}

// ignoreSignalTraps keeps `trap CMD SIGNAL` from failing: only EXIT and
// ERR traps reach the interpreter.
func ignoreSignalTraps(_ context.Context, args []string) ([]string, error) {
	if len(args) < 3 || args[0] != "trap" {
		return args, nil
	}
	keep := args[:2]
	for _, s := range args[2:] {
		if s == "EXIT" || s == "ERR" || s == "0" {
			keep = append(keep, s)
		}
	}
	if len(keep) == 2 {
		return []string{"true"}, nil
	}
	return keep, nil
}

// runApplets runs an applet in the shell's process, with the shell's
// streams; anything else is executed from PATH.
func runApplets(next interp.ExecHandlerFunc) interp.ExecHandlerFunc {
	return func(ctx context.Context, args []string) error {
		a, ok := applets[args[0]]
		if !ok || args[0] == "sh" {
			return next(ctx, args)
		}
		hc := interp.HandlerCtx(ctx)
		// Applets resolve relative paths against the process's directory:
		// make it the shell's (after a `cd`).
		if hc.Dir != "" {
			if err := os.Chdir(hc.Dir); err != nil {
				return err
			}
		}
		if code := a(args[1:], hc.Stdin, hc.Stdout, hc.Stderr); code != 0 {
			return interp.ExitStatus(code)
		}
		return nil
	}
}

func echo(args []string, _ io.Reader, out, _ io.Writer) int {
	nl := true
	if len(args) > 0 && args[0] == "-n" {
		nl, args = false, args[1:]
	}
	fmt.Fprint(out, strings.Join(args, " "))
	if nl {
		fmt.Fprintln(out)
	}
	return 0
}

func sleep(args []string, _ io.Reader, _, errOut io.Writer) int {
	var total time.Duration
	for _, a := range args {
		if a == "infinity" {
			select {}
		}
		d, err := time.ParseDuration(a)
		if err != nil {
			f, ferr := strconv.ParseFloat(a, 64)
			if ferr != nil {
				return fail(errOut, "sleep", fmt.Errorf("invalid time interval %q", a))
			}
			d = time.Duration(f * float64(time.Second))
		}
		total += d
	}
	time.Sleep(total)
	return 0
}

func syncFS([]string, io.Reader, io.Writer, io.Writer) int {
	syscall.Sync()
	return 0
}

// grep matches fixed strings (-F is the only mode), with -q, -v, -c.
func grep(args []string, in io.Reader, out, errOut io.Writer) int {
	quiet, invert, count := false, false, false
	var rest []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") && len(a) > 1 && len(rest) == 0 {
			quiet = quiet || strings.Contains(a, "q")
			invert = invert || strings.Contains(a, "v")
			count = count || strings.Contains(a, "c")
			continue
		}
		rest = append(rest, a)
	}
	if len(rest) == 0 {
		fmt.Fprintln(errOut, "grep: no pattern")
		return 2
	}
	pattern, files := rest[0], rest[1:]
	readers := []io.Reader{in}
	if len(files) > 0 {
		readers = readers[:0]
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				fail(errOut, "grep", err)
				return 2
			}
			readers = append(readers, strings.NewReader(string(b)))
		}
	}
	n := 0
	for _, r := range readers {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
		for sc.Scan() {
			if strings.Contains(sc.Text(), pattern) != invert {
				n++
				if !quiet && !count {
					fmt.Fprintln(out, sc.Text())
				}
			}
		}
	}
	if count && !quiet {
		fmt.Fprintln(out, n)
	}
	if n == 0 {
		return 1
	}
	return 0
}

// head prints the first -n N (default 10) lines, or -c N bytes.
func head(args []string, in io.Reader, out, errOut io.Writer) int {
	lines, bytes := 10, -1
	var files []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case (a == "-n" || a == "-c") && i+1 < len(args):
			v, err := strconv.Atoi(args[i+1])
			if err != nil {
				return fail(errOut, "head", err)
			}
			if a == "-n" {
				lines = v
			} else {
				bytes = v
			}
			i++
		default:
			files = append(files, a)
		}
	}
	r := in
	if len(files) > 0 {
		f, err := os.Open(files[0])
		if err != nil {
			return fail(errOut, "head", err)
		}
		defer f.Close()
		r = f
	}
	if bytes >= 0 {
		_, _ = io.CopyN(out, r, int64(bytes))
		return 0
	}
	br := bufio.NewReader(r)
	for i := 0; i < lines; i++ {
		l, err := br.ReadString('\n')
		fmt.Fprint(out, l)
		if err != nil {
			break
		}
	}
	return 0
}

func wc(args []string, in io.Reader, out, errOut io.Writer) int {
	r := in
	var files []string
	flags := ""
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			flags += a
		} else {
			files = append(files, a)
		}
	}
	if len(files) > 0 {
		f, err := os.Open(files[0])
		if err != nil {
			return fail(errOut, "wc", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return fail(errOut, "wc", err)
	}
	l, w, c := strings.Count(string(b), "\n"), len(strings.Fields(string(b))), len(b)
	switch {
	case strings.Contains(flags, "l"):
		fmt.Fprintln(out, l)
	case strings.Contains(flags, "c"):
		fmt.Fprintln(out, c)
	case strings.Contains(flags, "w"):
		fmt.Fprintln(out, w)
	default:
		fmt.Fprintf(out, "%7d %7d %7d\n", l, w, c)
	}
	return 0
}

func sum(newHash func() hash.Hash) applet {
	return func(args []string, in io.Reader, out, errOut io.Writer) int {
		if len(args) == 0 {
			args = []string{"-"}
		}
		code := 0
		for _, a := range args {
			h := newHash()
			r := in
			if a != "-" {
				f, err := os.Open(a)
				if err != nil {
					code = fail(errOut, "sum", err)
					continue
				}
				r = f
				defer f.Close()
			}
			if _, err := io.Copy(h, r); err != nil {
				code = fail(errOut, "sum", err)
				continue
			}
			fmt.Fprintf(out, "%x  %s\n", h.Sum(nil), a)
		}
		return code
	}
}

func hostname(_ []string, _ io.Reader, out, errOut io.Writer) int {
	h, err := os.Hostname()
	if err != nil {
		return fail(errOut, "hostname", err)
	}
	fmt.Fprintln(out, h)
	return 0
}

func id(args []string, _ io.Reader, out, _ io.Writer) int {
	switch {
	case len(args) > 0 && args[0] == "-u":
		fmt.Fprintln(out, os.Getuid())
	case len(args) > 0 && args[0] == "-g":
		fmt.Fprintln(out, os.Getgid())
	default:
		groups, _ := os.Getgroups()
		gs := make([]string, len(groups))
		for i, g := range groups {
			gs[i] = strconv.Itoa(g)
		}
		fmt.Fprintf(out, "uid=%d gid=%d groups=%s\n", os.Getuid(), os.Getgid(), strings.Join(gs, ","))
	}
	return 0
}

// mount only lists the mounts (/proc/mounts); mounting needs more
// privilege than the suites' pods ask for.
func mount(args []string, in io.Reader, out, errOut io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(errOut, "mount: only listing is supported")
		return 1
	}
	return core("cat", cat.New)([]string{"/proc/mounts"}, in, out, errOut)
}

func env(_ []string, _ io.Reader, out, _ io.Writer) int {
	for _, e := range os.Environ() {
		fmt.Fprintln(out, e)
	}
	return 0
}

// stat prints size and mode, or the -c format's %s, %a, %u, %g, %n.
func stat(args []string, _ io.Reader, out, errOut io.Writer) int {
	format := ""
	var files []string
	for i := 0; i < len(args); i++ {
		if args[i] == "-c" && i+1 < len(args) {
			format, i = args[i+1], i+1
			continue
		}
		files = append(files, args[i])
	}
	code := 0
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			code = fail(errOut, "stat", err)
			continue
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		var uid, gid uint32
		if st != nil {
			uid, gid = st.Uid, st.Gid
		}
		if format == "" {
			fmt.Fprintf(out, "  File: %s\n  Size: %d\nAccess: (%04o) Uid: %d Gid: %d\n", f, fi.Size(), fi.Mode().Perm(), uid, gid)
			continue
		}
		fmt.Fprintln(out, strings.NewReplacer("%s", strconv.FormatInt(fi.Size(), 10), "%a", strconv.FormatUint(uint64(fi.Mode().Perm()), 8),
			"%u", strconv.Itoa(int(uid)), "%g", strconv.Itoa(int(gid)), "%n", f).Replace(format))
	}
	return code
}

// dd copies if= to of= (stdin, stdout by default) in bs= blocks, count=
// of them.
func dd(args []string, in io.Reader, out, errOut io.Writer) int {
	bs, count := int64(512), int64(-1)
	var r io.Reader = in
	var w io.Writer = out
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "if":
			f, err := os.Open(v)
			if err != nil {
				return fail(errOut, "dd", err)
			}
			defer f.Close()
			r = f
		case "of":
			f, err := os.Create(v)
			if err != nil {
				return fail(errOut, "dd", err)
			}
			defer f.Close()
			w = f
		case "bs":
			n, err := parseSize(v)
			if err != nil {
				return fail(errOut, "dd", err)
			}
			bs = n
		case "count":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fail(errOut, "dd", err)
			}
			count = n
		}
	}
	if count >= 0 {
		r = io.LimitReader(r, bs*count)
	}
	n, err := io.CopyBuffer(w, r, make([]byte, bs))
	if err != nil {
		return fail(errOut, "dd", err)
	}
	fmt.Fprintf(errOut, "%d bytes copied\n", n)
	return 0
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K") || strings.HasSuffix(s, "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err
}

// testApplet runs the shell's own test (or [) builtin.
func testApplet(name string) applet {
	return func(args []string, in io.Reader, out, errOut io.Writer) int {
		return shell(append([]string{"-c", name + ` "$@"`, name}, args...), in, out, errOut)
	}
}
