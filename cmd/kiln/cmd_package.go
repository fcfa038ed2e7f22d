package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kilnworks/kiln/gen/deploy"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "package",
		summary: "build a reproducible OCI image (layout and docker-load tarball) of a sealed binary, optionally push it",
		run:     runPackage,
	})
}

func runPackage(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("kiln package", flag.ContinueOnError)
	fl.SetOutput(stderr)
	out := fl.String("o", "", "empty output `directory`: an OCI image layout, with DIR/image.tar for docker load")
	tag := fl.String("tag", "", "image name in the layout and the tarball (default NAME:latest)")
	push := fl.String("push", "", "also push the image to this registry `reference`")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln package BIN -o DIR [--tag NAME:TAG] [--push REF]")
		fmt.Fprintln(stderr, "Builds a scratch image holding only BIN (and CA certificates when it makes TLS")
		fmt.Fprintln(stderr, "connections), run as a non-root numeric user. The same BIN gives the same digest.")
		fl.PrintDefaults()
	}
	rest, code, ok := parseSupplyFlags(fl, args)
	if !ok {
		return code
	}
	if bad := requireArgs(rest, 1, "BIN", *out != "", "-o DIR"); bad != "" {
		return missing("kiln package", bad, fl, stderr)
	}
	seal, err := deploy.Read(rest[0])
	if err != nil {
		fmt.Fprintf(stderr, "kiln package: %v\n", err)
		return cli.ExitUsage
	}
	sp, err := deploy.Derive(seal)
	if err != nil {
		fmt.Fprintf(stderr, "kiln package: %s: %v\n", rest[0], err)
		return cli.ExitFailed
	}
	img, err := deploy.Image(seal, sp, deploy.ImageOptions{})
	if err != nil {
		fmt.Fprintf(stderr, "kiln package: %v\n", err)
		return cli.ExitFailed
	}
	ref := *tag
	if ref == "" {
		ref = sp.Name + ":latest"
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "kiln package: %v\n", err)
		return cli.ExitUsage
	}
	if err := deploy.WriteLayout(*out, img, ref); err != nil {
		fmt.Fprintf(stderr, "kiln package: %v\n", err)
		return cli.ExitFailed
	}
	d, err := img.Digest()
	if err != nil {
		fmt.Fprintf(stderr, "kiln package: %v\n", err)
		return cli.ExitFailed
	}
	fmt.Fprintf(stdout, "image %s %s (manifest %s)\n", ref, d, seal.ManifestDigest)
	if *push != "" {
		pushed, err := deploy.Push(*push, img)
		if err != nil {
			fmt.Fprintf(stderr, "kiln package: push %s: %v\n", *push, err)
			return cli.ExitFailed
		}
		fmt.Fprintf(stdout, "pushed %s\n", pushed)
	}
	return cli.ExitOK
}
