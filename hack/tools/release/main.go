// Command snapkeeper-release is the release tooling behind `make image`,
// `make sbom`, `make licenses`, `make chart` and `make krew`
// (docs/releases.md): it
// assembles the OCI image layout from the release binaries without a
// container daemon, writes the image SBOMs from the binaries' SBOMs,
// renders docs/licenses.md, makes the packaged chart reproducible, and
// packs snapctl as the kubectl plugin with its krew manifest; `pack`
// writes the single-platform image tarballs the node plane imports.
// Every output depends only on its inputs and on the commit time passed
// in, so a second run from the same commit gives the same bytes.
package main

import (
	"fmt"
	"os"
)

const usage = `usage: snapkeeper-release image -bin DIR -out DIR -version V -revision SHA -epoch SECONDS [flags]
       snapkeeper-release image-sbom -layout DIR -sbom DIR -out DIR -version V
       snapkeeper-release licenses -out FILE SBOM...
       snapkeeper-release normalize-tgz -epoch SECONDS FILE
       snapkeeper-release pack -name REF -out TAR -file SRC:DST... [-link DST:TARGET...] [-entrypoint PATH] [-user U]
       snapkeeper-release krew -bin DIR -out DIR -manifest FILE -license FILE -version V -uri-base URL -epoch SECONDS [-platforms LIST]`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "image":
		err = runImage(os.Args[2:])
	case "image-sbom":
		err = runImageSBOM(os.Args[2:])
	case "licenses":
		err = runLicenses(os.Args[2:])
	case "normalize-tgz":
		err = runNormalizeTgz(os.Args[2:])
	case "krew":
		err = runKrew(os.Args[2:])
	case "pack":
		err = runPack(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "snapkeeper-release:", err)
		os.Exit(1)
	}
}
