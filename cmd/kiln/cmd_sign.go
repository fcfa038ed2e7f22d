package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/supply"
)

func init() {
	addCommand(command{
		name:    "sign",
		summary: "sign a built binary and its manifest, SBOM and provenance (cosign-compatible)",
		run:     runSign,
	})
	addCommand(command{
		name:    "sign-workflow",
		summary: "write WORKFLOW.toml.sig, a detached Ed25519 signature over a workflow file",
		run:     runSignWorkflow,
	})
}

func runSign(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("kiln sign", flag.ContinueOnError)
	fl.SetOutput(stderr)
	key := fl.String("key", "", "private key: cosign's encrypted PEM (password from $COSIGN_PASSWORD) or a PKCS#8 PEM, ECDSA P-256")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln sign BIN --key cosign.key")
		fmt.Fprintln(stderr, "Writes BIN.sig and BIN.sigstore.json, and the same beside BIN.manifest.json, BIN.cdx.json and BIN.intoto.json when they exist.")
		fl.PrintDefaults()
	}
	rest, code, ok := parseSupplyFlags(fl, args)
	if !ok {
		return code
	}
	if len(rest) != 1 || *key == "" {
		fl.Usage()
		return exitUsage
	}
	pw, _ := supply.Password()
	s, err := supply.LoadSigner(*key, pw)
	if err != nil {
		fmt.Fprintf(stderr, "kiln sign: %v\n", err)
		return exitUsage
	}
	files, err := supply.SignArtifacts(s, rest[0])
	if err != nil {
		fmt.Fprintf(stderr, "kiln sign: %v\n", err)
		return exitFailed
	}
	for _, f := range files {
		fmt.Fprintf(stdout, "wrote %s\n", f)
	}
	return exitOK
}

func runSignWorkflow(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("kiln sign-workflow", flag.ContinueOnError)
	fl.SetOutput(stderr)
	key := fl.String("key", "", "Ed25519 private key (kiln keygen --ed25519, or a PKCS#8 PEM)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln sign-workflow WORKFLOW.toml... --key workflow.key")
		fmt.Fprintln(stderr, "Writes WORKFLOW.toml.sig (base64 Ed25519 signature over the file's exact bytes) for each file.")
		fl.PrintDefaults()
	}
	rest, code, ok := parseSupplyFlags(fl, args)
	if !ok {
		return code
	}
	if len(rest) == 0 || *key == "" {
		fl.Usage()
		return exitUsage
	}
	pw, _ := supply.Password()
	priv, err := supply.LoadEd25519PrivateKey(*key, pw)
	if err != nil {
		fmt.Fprintf(stderr, "kiln sign-workflow: %v\n", err)
		return exitUsage
	}
	for _, wf := range rest {
		out, err := gen.SignWorkflow(wf, priv)
		if err != nil {
			fmt.Fprintf(stderr, "kiln sign-workflow: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "wrote %s\n", out)
	}
	return exitOK
}

// parseSupplyFlags parses flags placed before or after the positional
// arguments (`kiln sign BIN --key K`), which package flag alone does not.
// ok is false when the command must exit with code (help or a bad flag).
func parseSupplyFlags(fl *flag.FlagSet, args []string) (rest []string, code int, ok bool) {
	for {
		if err := fl.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, false
			}
			return nil, exitUsage, false
		}
		args = fl.Args()
		if len(args) == 0 {
			return rest, 0, true
		}
		if args[0] == "--" {
			return append(rest, args[1:]...), 0, true
		}
		rest = append(rest, args[0])
		args = args[1:]
	}
}

// signingFlags are --signing-required and --signing-key, shared by every
// command that loads a workflow (check, gen, build, run).
type signingFlags struct {
	required bool
	key      string
}

func addSigningFlags(fl *flag.FlagSet) *signingFlags {
	f := &signingFlags{}
	fl.BoolVar(&f.required, "signing-required", false, "refuse a workflow (or child) without a valid WORKFLOW.toml.sig, even without [signing]")
	fl.StringVar(&f.key, "signing-key", "", "Ed25519 public key (PEM) that workflow signatures must verify with, overriding [signing]'s key")
	return f
}

// apply copies the flags into opts; an unreadable key is a usage error.
func (f *signingFlags) apply(opts *gen.LoadOptions) error {
	opts.SigningRequired = opts.SigningRequired || f.required
	if f.key != "" {
		data, err := os.ReadFile(f.key)
		if err != nil {
			return fmt.Errorf("--signing-key: %w", err)
		}
		opts.SigningKey = data
	}
	return nil
}
