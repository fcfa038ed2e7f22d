package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/kilnworks/kiln/gen/deploy"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "deploy",
		summary: "generate hardened Kubernetes manifests or systemd units from a sealed binary's needs, or check which binary they came from",
		run:     runDeploy,
	})
}

func deployUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: kiln deploy k8s BIN -o DIR [--image REF] [--cilium]")
	fmt.Fprintln(w, "       kiln deploy systemd BIN -o DIR [--exec-path PATH]")
	fmt.Fprintln(w, "       kiln deploy check FILE-OR-DIR [BIN]")
	fmt.Fprintln(w, "Everything is derived from BIN's embedded manifest, needs and workflow (docs/deploy.md).")
}

func runDeploy(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		deployUsage(stderr)
		return cli.ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		deployUsage(stdout)
		return cli.ExitOK
	case "k8s":
		return runDeployK8s(args[1:], stdout, stderr)
	case "systemd":
		return runDeploySystemd(args[1:], stdout, stderr)
	case "check":
		return runDeployCheck(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "kiln deploy: unknown target %q (k8s, systemd or check)\n", args[0])
	deployUsage(stderr)
	return cli.ExitUsage
}

// readSpec reads BIN and derives its deployment spec.
func readSpec(prog, bin string, stderr io.Writer) (*deploy.Seal, *deploy.Spec, int) {
	seal, err := deploy.Read(bin)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return nil, nil, cli.ExitUsage
	}
	sp, err := deploy.Derive(seal)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s: %v\n", prog, bin, err)
		return nil, nil, cli.ExitFailed
	}
	return seal, sp, cli.ExitOK
}

func writeOut(prog, dir string, files []deploy.File, stdout, stderr io.Writer) int {
	wrote, err := deploy.WriteFiles(dir, files)
	for _, p := range wrote {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return cli.ExitFailed
	}
	return cli.ExitOK
}

func runDeployK8s(args []string, stdout, stderr io.Writer) int {
	const prog = "kiln deploy k8s"
	fl := flag.NewFlagSet(prog, flag.ContinueOnError)
	fl.SetOutput(stderr)
	out := fl.String("o", "", "output `directory`")
	image := fl.String("image", "", "image `reference`; without @digest it is pinned to the digest `kiln package` builds for BIN (default NAME)")
	cilium := fl.Bool("cilium", false, "also write a CiliumNetworkPolicy allowing egress to the needed host names (toFQDNs)")
	fl.Usage = func() { deployUsage(stderr); fl.PrintDefaults() }
	rest, code, ok := parseSupplyFlags(fl, args)
	if !ok {
		return code
	}
	if bad := requireArgs(rest, 1, "BIN", *out != "", "-o DIR"); bad != "" {
		return missing(prog, bad, fl, stderr)
	}
	seal, sp, code := readSpec(prog, rest[0], stderr)
	if code != cli.ExitOK {
		return code
	}
	ref := *image
	if ref == "" {
		ref = sp.Name
	}
	if !strings.Contains(ref, "@") {
		img, err := deploy.Image(seal, sp, deploy.ImageOptions{})
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
			return cli.ExitFailed
		}
		d, err := img.Digest()
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
			return cli.ExitFailed
		}
		ref += "@" + d.String()
	}
	files, err := deploy.K8s(sp, ref, *cilium)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return cli.ExitFailed
	}
	return writeOut(prog, *out, files, stdout, stderr)
}

func runDeploySystemd(args []string, stdout, stderr io.Writer) int {
	const prog = "kiln deploy systemd"
	fl := flag.NewFlagSet(prog, flag.ContinueOnError)
	fl.SetOutput(stderr)
	out := fl.String("o", "", "output `directory`")
	execPath := fl.String("exec-path", "", "absolute `path` the unit runs the binary from (default /usr/local/bin/NAME)")
	fl.Usage = func() { deployUsage(stderr); fl.PrintDefaults() }
	rest, code, ok := parseSupplyFlags(fl, args)
	if !ok {
		return code
	}
	if bad := requireArgs(rest, 1, "BIN", *out != "", "-o DIR"); bad != "" {
		return missing(prog, bad, fl, stderr)
	}
	_, sp, code := readSpec(prog, rest[0], stderr)
	if code != cli.ExitOK {
		return code
	}
	p := *execPath
	if p == "" {
		p = deploy.DefaultExecPath(sp)
	}
	files, err := deploy.Systemd(sp, p)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return cli.ExitUsage
	}
	return writeOut(prog, *out, files, stdout, stderr)
}

// runDeployCheck prints the manifest digest each generated file was made
// from; with BIN, every one must be BIN's (exit 5 otherwise).
func runDeployCheck(args []string, stdout, stderr io.Writer) int {
	const prog = "kiln deploy check"
	if len(args) < 1 || len(args) > 2 || strings.HasPrefix(args[0], "-") {
		deployUsage(stderr)
		return cli.ExitUsage
	}
	stamps, err := deploy.Stamps(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return cli.ExitUsage
	}
	want := stamps[0].Digest
	var from string
	if len(args) == 2 {
		seal, err := deploy.Read(args[1])
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
			return cli.ExitUsage
		}
		want, from = seal.ManifestDigest, fmt.Sprintf(" (workflow %s, %s)", seal.Manifest.Workflow.Name, args[1])
	}
	bad := 0
	for _, s := range stamps {
		verdict := "ok"
		if s.Digest != want {
			verdict, bad = "MISMATCH", bad+1
		}
		fmt.Fprintf(stdout, "%-8s %s %s\n", verdict, s.Digest, s.File)
	}
	if bad > 0 {
		fmt.Fprintf(stderr, "%s: %d of %d files were not generated from manifest %s%s\n", prog, bad, len(stamps), want, from)
		return cli.ExitFailed
	}
	fmt.Fprintf(stdout, "all %d generated from manifest %s%s\n", len(stamps), want, from)
	return cli.ExitOK
}
