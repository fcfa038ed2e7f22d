package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/supply"
	"github.com/kilnworks/kiln/runtime/cli"
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
		fmt.Fprintln(stderr, "Writes BIN.manifest.json, BIN.cdx.json and BIN.intoto.json when they are missing (a go build of generated code),")
		fmt.Fprintln(stderr, "from the manifest BIN embeds and the modules it links; then BIN.sig and BIN.sigstore.json, and the same beside each of them.")
		fl.PrintDefaults()
	}
	rest, code, ok := parseSupplyFlags(fl, args)
	if !ok {
		return code
	}
	if bad := requireArgs(rest, 1, "BIN", *key != "", "--key KEY"); bad != "" {
		return missing("kiln sign", bad, fl, stderr)
	}
	pw, _ := supply.Password()
	s, err := supply.LoadSigner(*key, pw)
	if err != nil {
		fmt.Fprintf(stderr, "kiln sign: %v\n", err)
		return cli.ExitUsage
	}
	// A binary from go build has no sidecars yet: write them from what it
	// embeds and links, then sign everything.
	written, err := supply.CompleteArtifacts(rest[0])
	for _, f := range written {
		fmt.Fprintf(stdout, "wrote %s\n", f)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kiln sign: %v\n", err)
		return cli.ExitFailed
	}
	files, err := supply.SignArtifacts(s, rest[0])
	if err != nil {
		fmt.Fprintf(stderr, "kiln sign: %v\n", err)
		return cli.ExitFailed
	}
	for _, f := range files {
		fmt.Fprintf(stdout, "wrote %s\n", f)
	}
	return cli.ExitOK
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
	if bad := requireArgs(rest, -1, "WORKFLOW.toml", *key != "", "--key KEY"); bad != "" {
		return missing("kiln sign-workflow", bad, fl, stderr)
	}
	pw, _ := supply.Password()
	priv, err := supply.LoadEd25519PrivateKey(*key, pw)
	if err != nil {
		fmt.Fprintf(stderr, "kiln sign-workflow: %v\n", err)
		return cli.ExitUsage
	}
	for _, wf := range rest {
		out, err := gen.SignWorkflow(wf, priv)
		if err != nil {
			fmt.Fprintf(stderr, "kiln sign-workflow: %v\n", err)
			return cli.ExitFailed
		}
		fmt.Fprintf(stdout, "wrote %s\n", out)
	}
	return cli.ExitOK
}

// parseSupplyFlags parses flags placed before or after the positional
// arguments (`kiln sign BIN --key K`), which package flag alone does not.
// ok is false when the command must exit with code (help or a bad flag).
func parseSupplyFlags(fl *flag.FlagSet, args []string) (rest []string, code int, ok bool) {
	for {
		if err := fl.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, cli.ExitOK, false
			}
			return nil, cli.ExitUsage, false
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
// command that loads a workflow (check, gen, build, run). KILN_SIGNING_REQUIRED
// and KILN_SIGNING_KEY set them from the environment (a flag wins).
type signingFlags struct {
	required bool
	key      string
}

func addSigningFlags(fl *flag.FlagSet) *signingFlags {
	f := &signingFlags{}
	fl.BoolVar(&f.required, "signing-required", false, "refuse a workflow (or child) without a valid WORKFLOW.toml.sig, even without [signing] ($KILN_SIGNING_REQUIRED)")
	fl.StringVar(&f.key, "signing-key", "", "Ed25519 public key `file` (PEM) that workflow signatures must verify with, overriding [signing]'s key ($KILN_SIGNING_KEY)")
	return f
}

// splitSigningArgs takes the signing flags out of args for commands whose
// other flags are parsed elsewhere (kiln run hands them to the run CLI).
func splitSigningArgs(args []string) (rest []string, f *signingFlags, err error) {
	f = &signingFlags{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(rest, args[i:]...), f, nil
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			name = ""
		}
		switch name {
		case "signing-required":
			f.required = true
			if hasValue {
				if f.required, err = strconv.ParseBool(value); err != nil {
					return nil, nil, fmt.Errorf("--signing-required=%s: want true or false", value)
				}
			}
		case "signing-key":
			if !hasValue {
				if i+1 >= len(args) {
					return nil, nil, fmt.Errorf("--signing-key needs a public key file")
				}
				i++
				value = args[i]
			}
			f.key = value
		default:
			rest = append(rest, a)
		}
	}
	return rest, f, nil
}

// apply copies the flags (or their environment variables) into opts; an
// unreadable key is a usage error.
func (f *signingFlags) apply(opts *gen.LoadOptions) error {
	required := f.required
	if v := os.Getenv("KILN_SIGNING_REQUIRED"); v != "" && !required {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("KILN_SIGNING_REQUIRED=%s: want true or false", v)
		}
		required = b
	}
	opts.SigningRequired = opts.SigningRequired || required
	key := f.key
	if key == "" {
		key = os.Getenv("KILN_SIGNING_KEY")
	}
	if key != "" {
		data, err := os.ReadFile(key)
		if err != nil {
			return fmt.Errorf("--signing-key: %w", err)
		}
		opts.SigningKey = data
	}
	return nil
}

// signKeyFlag is kiln build's --sign-key.
type signKeyFlag struct{ path string }

func addSignKeyFlag(fl *flag.FlagSet) *signKeyFlag {
	f := &signKeyFlag{}
	fl.StringVar(&f.path, "sign-key", "", "sign the binary, manifest, SBOM and provenance with this key (as kiln sign; password from $COSIGN_PASSWORD)")
	return f
}

// apply loads the key into opts before anything is built, so a wrong key
// or password fails at once.
func (f *signKeyFlag) apply(opts *gen.BuildOptions) error {
	if f.path == "" {
		return nil
	}
	pw, _ := supply.Password()
	s, err := supply.LoadSigner(f.path, pw)
	if err != nil {
		return err
	}
	opts.Sign = s
	return nil
}
