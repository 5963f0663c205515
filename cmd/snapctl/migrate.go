package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/snapkeeper/snapkeeper/pkg/crdcheck"
)

// migrateCRDs are the CRDs migrate-storage handles, in the order it walks
// them; a GroupResource's String() is the CRD's name.
var migrateCRDs = []schema.GroupResource{
	{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotclasses"},
	{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotcontents"},
	{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots"},
	{Group: "groupsnapshot.storage.k8s.io", Resource: "volumegroupsnapshotclasses"},
	{Group: "groupsnapshot.storage.k8s.io", Resource: "volumegroupsnapshotcontents"},
	{Group: "groupsnapshot.storage.k8s.io", Resource: "volumegroupsnapshots"},
}

// migrateFieldManager is the field manager and user agent of every write.
const migrateFieldManager = "snapctl-migrate-storage"

// maxShownFailures is how many failed objects of one CRD are named; the
// rest are only counted.
const maxShownFailures = 20

// The RESULT of one CRD.
const (
	resultTrimmed      = "trimmed"       // every object rewritten, storedVersions set to the storage version
	resultWouldTrim    = "would-trim"    // dry run: the same, but nothing was stored
	resultOK           = "ok"            // every object rewritten, storedVersions already the storage version alone
	resultFailed       = "failed"        // an object or the CRD failed: storedVersions left as they were
	resultNotInstalled = "not-installed" // no such CRD in the cluster: skipped
)

func migrateUsage(prog string) string {
	return "usage: " + prog + " migrate-storage [--dry-run] [--resources NAME,...] [--workers N] [--page-size N] [-o text|json] [--kubeconfig PATH]"
}

// migrateOptions are the flags of migrate-storage.
type migrateOptions struct {
	kubeconfig string
	output     string
	resources  []schema.GroupResource
	dryRun     bool
	workers    int
	pageSize   int64
}

func parseMigrateFlags(prog string, args []string, stderr io.Writer) (*migrateOptions, error) {
	o := &migrateOptions{}
	fs := flag.NewFlagSet(prog+" migrate-storage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.dryRun, "dry-run", false, "Send every write as a server-side dry run (dryRun=All): the API server converts, validates and admits each object but stores nothing; storedVersions are not changed.")
	resources := fs.String("resources", "", "Comma-separated CRDs to migrate, by plural (volumegroupsnapshots) or full name (volumegroupsnapshots.groupsnapshot.storage.k8s.io); default: all six snapshot CRDs.")
	fs.IntVar(&o.workers, "workers", 4, "Objects written in parallel.")
	fs.Int64Var(&o.pageSize, "page-size", 500, "Objects per list request.")
	fs.StringVar(&o.output, "o", "text", "Output: text (a table, one row per CRD) or json.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster; default: the Pod's ServiceAccount in a cluster, else $KUBECONFIG or ~/.kube/config.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%s migrate-storage: %w", prog, err)
	}
	switch {
	case fs.NArg() != 0:
		return nil, fmt.Errorf("%s migrate-storage: no arguments expected, got %v", prog, fs.Args())
	case o.output != "text" && o.output != "json":
		return nil, fmt.Errorf("%s migrate-storage: -o must be text or json, not %q", prog, o.output)
	case o.workers < 1:
		return nil, fmt.Errorf("%s migrate-storage: --workers must be at least 1, not %d", prog, o.workers)
	case o.pageSize < 1:
		return nil, fmt.Errorf("%s migrate-storage: --page-size must be at least 1, not %d", prog, o.pageSize)
	}
	var err error
	if o.resources, err = selectCRDs(*resources); err != nil {
		return nil, fmt.Errorf("%s migrate-storage: %w", prog, err)
	}
	return o, nil
}

// selectCRDs is the CRDs a --resources list names, in migrateCRDs' order;
// an empty list is all of them.
func selectCRDs(list string) ([]schema.GroupResource, error) {
	if strings.TrimSpace(list) == "" {
		return migrateCRDs, nil
	}
	want := map[schema.GroupResource]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		i := slices.IndexFunc(migrateCRDs, func(gr schema.GroupResource) bool { return name == gr.Resource || name == gr.String() })
		if i < 0 {
			names := make([]string, len(migrateCRDs))
			for j, gr := range migrateCRDs {
				names[j] = gr.Resource
			}
			return nil, fmt.Errorf("--resources: unknown resource %q; known: %s", name, strings.Join(names, ", "))
		}
		want[migrateCRDs[i]] = true
	}
	var out []schema.GroupResource
	for _, gr := range migrateCRDs {
		if want[gr] {
			out = append(out, gr)
		}
	}
	return out, nil
}

// runMigrate is `migrate-storage`: every object of each snapshot CRD is
// rewritten at the CRD's storage version, and once all of a CRD's objects
// are, its status.storedVersions is set to that version alone, so older
// versions can later be dropped from the CRD. Exit 0: every CRD migrated
// (or not installed); 1: an object or a CRD failed; 2: bad usage or no
// usable kubeconfig.
func runMigrate(prog string, args []string, stdout, stderr io.Writer) int {
	o, err := parseMigrateFlags(prog, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		fmt.Fprintln(stderr, migrateUsage(prog))
		return 2
	}
	// As selftest: --kubeconfig, else a Pod's ServiceAccount (a Job can
	// migrate), else $KUBECONFIG or ~/.kube/config.
	cfg, err := selftestConfig(o.kubeconfig)
	if err != nil {
		fmt.Fprintln(stderr, prog+" migrate-storage:", err)
		return 2
	}
	cfg.UserAgent = migrateFieldManager
	// The workers bound the requests in flight; the API server's priority
	// and fairness shares it with other clients. client-go's default of 5
	// requests a second would take over an hour for 20,000 objects.
	cfg.QPS, cfg.Burst = 100, 200
	cfg.Timeout = time.Minute // per request
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(stderr, prog+" migrate-storage: client:", err)
		return 2
	}
	return migrateStorage(context.Background(), client, o, prog, stdout, stderr)
}

// migrateStorage migrates o.resources one CRD after the other, prints a
// row per CRD (text: as each finishes) and a summary, and returns the
// exit status: 1 when any CRD failed.
func migrateStorage(ctx context.Context, client dynamic.Interface, o *migrateOptions, prog string, stdout, stderr io.Writer) int {
	m := &migrator{client: client, dryRun: o.dryRun, workers: o.workers, pageSize: o.pageSize,
		log: stderr, name: prog + " migrate-storage"}
	start := time.Now()
	if o.output == "text" {
		fmt.Fprintf(stdout, migrateRowFormat, "RESOURCE", "STORAGE", "LISTED", "REWRITTEN", "CONFLICT", "GONE", "FAILED", "STOREDVERSIONS", "TIME", "RESULT")
	}
	results := make([]crdMigration, 0, len(o.resources))
	for _, gr := range o.resources {
		r := m.migrate(ctx, gr)
		results = append(results, r)
		if o.output == "text" {
			printMigrationRow(stdout, r)
		}
	}
	total := time.Since(start)
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(migrationReport{DryRun: o.dryRun, CRDs: results, Seconds: total.Seconds()}); err != nil {
			fmt.Fprintln(stderr, m.name+": writing:", err)
			return 1
		}
	} else {
		fmt.Fprintln(stdout, migrationSummary(results, o.dryRun, total))
	}
	if slices.ContainsFunc(results, func(r crdMigration) bool { return r.Result == resultFailed }) {
		return 1
	}
	return 0
}

// migrationReport is the -o json document.
type migrationReport struct {
	DryRun  bool           `json:"dryRun"`
	CRDs    []crdMigration `json:"crds"`
	Seconds float64        `json:"seconds"`
}

// crdMigration is what happened to one CRD and its objects.
type crdMigration struct {
	CRD            string `json:"crd"`
	StorageVersion string `json:"storageVersion"`
	// Listed objects, each of which ends in exactly one of the next four.
	Listed int `json:"listed"`
	// Rewritten: the update (in a dry run, the dry-run update) succeeded.
	Rewritten int `json:"rewritten"`
	// Conflicts: someone wrote the object since it was listed, which
	// stored it at the storage version: counted as migrated.
	Conflicts int `json:"conflicts"`
	// Gone: deleted since it was listed.
	Gone int `json:"gone"`
	// Failed: any other error; the CRD's storedVersions are kept.
	Failed               int      `json:"failed"`
	StoredVersionsBefore []string `json:"storedVersionsBefore"`
	StoredVersionsAfter  []string `json:"storedVersionsAfter"`
	Result               string   `json:"result"`
	// Errors name the failed objects (the first maxShownFailures) and
	// any error of the CRD itself.
	Errors  []string      `json:"errors"`
	Seconds float64       `json:"seconds"`
	elapsed time.Duration // Seconds, for the text row
}

// migrator rewrites the objects of one CRD after the other.
type migrator struct {
	client   dynamic.Interface
	dryRun   bool
	workers  int
	pageSize int64
	log      io.Writer // a line per failure
	name     string    // "snapctl migrate-storage", for those lines

	mu sync.Mutex // the counters of the CRD being migrated, and log
}

// liveCRD is the part of a CustomResourceDefinition the migration reads.
type liveCRD struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Spec struct {
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
		Versions []crdcheck.Version `json:"versions"`
	} `json:"spec"`
	Status struct {
		StoredVersions []string `json:"storedVersions"`
	} `json:"status"`
}

func (m *migrator) readCRD(ctx context.Context, name string) (*liveCRD, error) {
	u, err := m.client.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var c liveCRD
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
		return nil, fmt.Errorf("reading CRD %s: %w", name, err)
	}
	return &c, nil
}

// storageVersion is the version with storage: true. Objects are read at it,
// so it must be served.
func (c *liveCRD) storageVersion() (string, error) {
	for _, v := range c.Spec.Versions {
		if v.Storage {
			if !v.Served {
				return "", fmt.Errorf("the storage version %s is not served, so its objects cannot be read at it", v.Name)
			}
			return v.Name, nil
		}
	}
	return "", errors.New("no version has storage: true")
}

// migrate rewrites every object of the CRD gr at its storage version and,
// when none failed and this is no dry run, trims its storedVersions.
func (m *migrator) migrate(ctx context.Context, gr schema.GroupResource) (r crdMigration) {
	start := time.Now()
	r = crdMigration{CRD: gr.String(), StoredVersionsBefore: []string{}, Errors: []string{}}
	defer func() {
		if r.StoredVersionsAfter == nil {
			r.StoredVersionsAfter = r.StoredVersionsBefore
		}
		r.elapsed = time.Since(start)
		r.Seconds = r.elapsed.Seconds()
	}()
	crd, err := m.readCRD(ctx, r.CRD)
	if apierrors.IsNotFound(err) {
		r.Result = resultNotInstalled
		return r
	}
	if err != nil {
		m.failCRD(&r, fmt.Errorf("reading the CRD: %w", err))
		return r
	}
	if crd.Status.StoredVersions != nil {
		r.StoredVersionsBefore = crd.Status.StoredVersions
	}
	storage, err := crd.storageVersion()
	if err != nil {
		m.failCRD(&r, err)
		return r
	}
	r.StorageVersion = storage
	err = m.walk(ctx, gr.WithVersion(storage), crd.Spec.Names.Kind, &r)
	if r.Failed > maxShownFailures {
		fmt.Fprintf(m.log, "%s: %s: %d more objects failed\n", m.name, r.CRD, r.Failed-maxShownFailures)
	}
	if err != nil {
		m.failCRD(&r, err)
		return r
	}
	if r.Failed > 0 {
		r.Result = resultFailed
		return r
	}
	trimmed := []string{storage}
	switch {
	case slices.Equal(r.StoredVersionsBefore, trimmed):
		r.Result = resultOK
	case m.dryRun:
		r.Result, r.StoredVersionsAfter = resultWouldTrim, trimmed
	default:
		if err := m.trim(ctx, r.CRD, storage); err != nil {
			m.failCRD(&r, err)
			return r
		}
		r.Result, r.StoredVersionsAfter = resultTrimmed, trimmed
	}
	return r
}

func (m *migrator) failCRD(r *crdMigration, err error) {
	r.Result = resultFailed
	r.Errors = append(r.Errors, err.Error())
	fmt.Fprintf(m.log, "%s: %s: %v\n", m.name, r.CRD, err)
}

// walk lists the objects of gvr page by page and has m.workers goroutines
// rewrite them, counting each in r. It returns the error that stopped the
// listing; the objects' own errors are counted and logged.
func (m *migrator) walk(ctx context.Context, gvr schema.GroupVersionResource, kind string, r *crdMigration) error {
	objects := make(chan *unstructured.Unstructured)
	var wg sync.WaitGroup
	for range m.workers {
		wg.Go(func() {
			for obj := range objects {
				err := m.rewrite(ctx, gvr, kind, obj)
				m.count(r, obj, err)
			}
		})
	}
	err := m.list(ctx, gvr, func(obj *unstructured.Unstructured) {
		m.mu.Lock()
		r.Listed++
		m.mu.Unlock()
		objects <- obj
	})
	close(objects)
	wg.Wait()
	return err
}

// list calls each for every object of gvr in all namespaces, page by page.
func (m *migrator) list(ctx context.Context, gvr schema.GroupVersionResource, each func(*unstructured.Unstructured)) error {
	opts := metav1.ListOptions{Limit: m.pageSize}
	for {
		page, err := m.client.Resource(gvr).List(ctx, opts)
		if err != nil {
			// A continue token outlives etcd's compaction only so long.
			// The API server then offers one that lists the rest as it is
			// now: objects written since the first page may show up or not,
			// but those were written at the storage version anyway, and no
			// object that existed throughout is left out.
			var status apierrors.APIStatus
			if opts.Continue != "" && apierrors.IsResourceExpired(err) && errors.As(err, &status) && status.Status().Continue != "" {
				opts.Continue = status.Status().Continue
				continue
			}
			return fmt.Errorf("listing %s at %s: %w", gvr.GroupResource(), gvr.Version, err)
		}
		for i := range page.Items {
			each(&page.Items[i])
		}
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}

// errConflict and errGone are the outcomes of rewrite that count as done.
var (
	errConflict = errors.New("written by someone else since listed")
	errGone     = errors.New("deleted since listed")
)

// rewrite writes obj back unchanged at gvr's version, with the
// resourceVersion it was listed with. The API server stores what it is
// given at the CRD's storage version; an object already stored there
// comes out byte for byte the same and is not written again.
func (m *migrator) rewrite(ctx context.Context, gvr schema.GroupVersionResource, kind string, obj *unstructured.Unstructured) error {
	if obj.GetAPIVersion() == "" {
		obj.SetAPIVersion(gvr.GroupVersion().String())
	}
	if obj.GetKind() == "" {
		obj.SetKind(kind)
	}
	opts := metav1.UpdateOptions{FieldManager: migrateFieldManager}
	if m.dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err := m.client.Resource(gvr).Namespace(obj.GetNamespace()).Update(ctx, obj, opts)
	switch {
	case apierrors.IsConflict(err):
		return errConflict
	case apierrors.IsNotFound(err):
		return errGone
	}
	return err
}

func (m *migrator) count(r *crdMigration, obj *unstructured.Unstructured, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch err {
	case nil:
		r.Rewritten++
	case errConflict:
		r.Conflicts++
	case errGone:
		r.Gone++
	default:
		r.Failed++
		if r.Failed <= maxShownFailures {
			name := obj.GetName()
			if ns := obj.GetNamespace(); ns != "" {
				name = ns + "/" + name
			}
			r.Errors = append(r.Errors, name+": "+err.Error())
			fmt.Fprintf(m.log, "%s: %s %s: %v\n", m.name, r.CRD, name, err)
		}
	}
}

// trim sets the status.storedVersions of the CRD name to [storage]: a
// merge patch of the status subresource, conditional on the
// resourceVersion of the CRD read just before, whose storage version
// must still be the one every object was rewritten at.
func (m *migrator) trim(ctx context.Context, name, storage string) error {
	for attempt := 1; ; attempt++ {
		crd, err := m.readCRD(ctx, name)
		if err != nil {
			return fmt.Errorf("reading the CRD before trimming storedVersions: %w", err)
		}
		now, err := crd.storageVersion()
		if err != nil {
			return err
		}
		if now != storage {
			return fmt.Errorf("the storage version changed from %s to %s during the migration; storedVersions kept, migrate again", storage, now)
		}
		if slices.Equal(crd.Status.StoredVersions, []string{storage}) {
			return nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": crd.Metadata.ResourceVersion},
			"status":   map[string]any{"storedVersions": []string{storage}},
		})
		if err != nil {
			return err
		}
		_, err = m.client.Resource(crdResource).Patch(ctx, name, types.MergePatchType, patch,
			metav1.PatchOptions{FieldManager: migrateFieldManager}, "status")
		if apierrors.IsConflict(err) && attempt < 3 {
			continue // the CRD changed since read: check it again
		}
		if err != nil {
			return fmt.Errorf("setting status.storedVersions: %w", err)
		}
		return nil
	}
}

// migrateRowFormat is the header and each row of the text table: ten
// columns without spaces in any cell, so a script can split on spaces.
const migrateRowFormat = "%-56s  %-8s %7v %9v %8v %5v %6v  %-26s %8s  %s\n"

func printMigrationRow(w io.Writer, r crdMigration) {
	storage, versions := r.StorageVersion, "-"
	if storage == "" {
		storage = "-"
	}
	if len(r.StoredVersionsBefore) > 0 {
		versions = strings.Join(r.StoredVersionsBefore, ",") + "->" + strings.Join(r.StoredVersionsAfter, ",")
	}
	fmt.Fprintf(w, migrateRowFormat, r.CRD, storage, r.Listed, r.Rewritten, r.Conflicts, r.Gone, r.Failed,
		versions, r.elapsed.Round(time.Millisecond), r.Result)
}

// migrationSummary is the last line of the text output.
func migrationSummary(results []crdMigration, dryRun bool, total time.Duration) string {
	byResult := map[string]int{}
	var listed, rewritten, conflicts, gone, failed int
	for _, r := range results {
		byResult[r.Result]++
		listed += r.Listed
		rewritten += r.Rewritten
		conflicts += r.Conflicts
		gone += r.Gone
		failed += r.Failed
	}
	order := []string{resultTrimmed, resultOK, resultFailed, resultNotInstalled}
	prefix := "summary:"
	if dryRun {
		order[0] = resultWouldTrim
		prefix = "summary (dry run, nothing stored):"
	}
	parts := make([]string, len(order))
	for i, res := range order {
		parts[i] = fmt.Sprintf("%d %s", byResult[res], res)
	}
	return fmt.Sprintf("%s %d CRDs (%s), %d objects listed, %d rewritten, %d conflicts, %d gone, %d failed, %s",
		prefix, len(results), strings.Join(parts, ", "), listed, rewritten, conflicts, gone, failed, total.Round(time.Millisecond))
}
