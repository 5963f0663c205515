// Package e2estorage builds the node plane's e2e.test: Kubernetes' own end
// to end suite (k8s.io/kubernetes/test/e2e, its RunE2ETests and setup) with
// only the external storage tests registered, the ones a CSI driver's
// vendor runs with `-storage.testdriver=driver.yaml`. The full e2e.test
// compiles every other SIG's tests too, which none of the snapshot focuses
// select; this one compiles in a fraction of the time and runs the same
// storage test code.
//
//	go test -c -o bin/e2e.test ./e2estorage   (make node-tools)
package e2estorage

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/component-base/version"
	"k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	imageutils "k8s.io/kubernetes/test/utils/image"

	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/e2e/storage/external"
)

func TestMain(m *testing.M) {
	showVersion := flag.CommandLine.Bool("version", false, "Displays version information.")
	listImages := flag.CommandLine.Bool("storage-images", false, "Print the names of the images the storage tests run (busybox, agnhost, pause), one \"short-name image\" per line, and exit: `make node-images` packs ours under them.")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Get())
		os.Exit(0)
	}
	if *listImages {
		for _, i := range []struct {
			name string
			id   imageutils.ImageID
		}{{"busybox", imageutils.BusyBox}, {"agnhost", imageutils.Agnhost}, {"pause", imageutils.Pause}} {
			fmt.Println(i.name, imageutils.GetE2EImage(i.id))
		}
		os.Exit(0)
	}
	if flag.CommandLine.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown arguments: %v\n", flag.CommandLine.Args())
		os.Exit(1)
	}
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	if framework.TestContext.RepoRoot != "" {
		testfiles.AddFileSource(testfiles.RootFileSource{Root: framework.TestContext.RepoRoot})
	}
	os.Exit(m.Run())
}

func TestE2E(t *testing.T) {
	e2e.RunE2ETests(t)
}
