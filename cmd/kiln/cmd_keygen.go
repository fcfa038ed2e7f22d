package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/kilnworks/kiln/gen/supply"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "keygen",
		summary: "write a cosign-compatible signing key pair (or an Ed25519 pair for workflow files)",
		run:     runKeygen,
	})
}

func runKeygen(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("kiln keygen", flag.ContinueOnError)
	fl.SetOutput(stderr)
	prefix := fl.String("output-key-prefix", "", `write PREFIX.key and PREFIX.pub (default "cosign", or "workflow" with --ed25519)`)
	ed := fl.Bool("ed25519", false, "an Ed25519 pair for signing workflow files (kiln sign-workflow) instead of an ECDSA P-256 pair for binaries")
	force := fl.Bool("force", false, "overwrite existing key files")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln keygen [--output-key-prefix cosign] [--ed25519] [--force]")
		fmt.Fprintf(stderr, "The private key is encrypted with $%s (empty allowed), as cosign does.\n", supply.PasswordEnv)
		fl.PrintDefaults()
	}
	rest, code, ok := parseSupplyFlags(fl, args)
	if !ok {
		return code
	}
	if len(rest) != 0 {
		fl.Usage()
		return cli.ExitUsage
	}
	if *prefix == "" {
		*prefix = "cosign"
		if *ed {
			*prefix = "workflow"
		}
	}
	keyPath, pubPath := *prefix+".key", *prefix+".pub"
	if !*force {
		for _, p := range []string{keyPath, pubPath} {
			if _, err := os.Stat(p); err == nil {
				fmt.Fprintf(stderr, "kiln keygen: %s exists; pass --force to overwrite\n", p)
				return cli.ExitUsage
			} else if !errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(stderr, "kiln keygen: %v\n", err)
				return cli.ExitUsage
			}
		}
	}
	pw, set := supply.Password()
	if !set {
		fmt.Fprintf(stderr, "kiln keygen: %s is not set; the private key is encrypted with an empty password\n", supply.PasswordEnv)
	}
	gen := supply.GenerateKeyPair
	if *ed {
		gen = supply.GenerateEd25519KeyPair
	}
	priv, pub, err := gen(pw)
	if err != nil {
		fmt.Fprintf(stderr, "kiln keygen: %v\n", err)
		return cli.ExitFailed
	}
	if err := runtime.WriteFileAtomic(keyPath, priv, 0o600); err != nil {
		fmt.Fprintf(stderr, "kiln keygen: %v\n", err)
		return cli.ExitFailed
	}
	if err := runtime.WriteFileAtomic(pubPath, pub, 0o644); err != nil {
		fmt.Fprintf(stderr, "kiln keygen: %v\n", err)
		return cli.ExitFailed
	}
	fmt.Fprintf(stdout, "Private key written to %s\nPublic key written to %s\n", keyPath, pubPath)
	return cli.ExitOK
}
