package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kilnworks/kiln/gen/supply"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "verify",
		summary: "verify a built binary offline: signatures, manifest digest, build info",
		run:     runVerify,
	})
}

func runVerify(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("kiln verify", flag.ContinueOnError)
	fl.SetOutput(stderr)
	key := fl.String("key", "", "public key (PEM, ECDSA P-256), e.g. cosign.pub")
	quiet := fl.Bool("quiet", false, "print only failures")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln verify BIN --key cosign.pub")
		fmt.Fprintln(stderr, "Checks, without network: the signatures of BIN and BIN.manifest.json (and of BIN.cdx.json and")
		fmt.Fprintln(stderr, "BIN.intoto.json when present), that the manifest's binary digest is BIN's, and that the build")
		fmt.Fprintln(stderr, "info inside BIN (Go version, build tags, modules) and the manifest embedded in BIN match it.")
		fmt.Fprintln(stderr, "Exit 0 when every check passes, 5 when one fails (the reason on stderr), 2 on usage errors.")
		fl.PrintDefaults()
	}
	rest, code, ok := parseSupplyFlags(fl, args)
	if !ok {
		return code
	}
	if bad := requireArgs(rest, 1, "BIN", *key != "", "--key cosign.pub"); bad != "" {
		return missing("kiln verify", bad, fl, stderr)
	}
	bin := rest[0]
	if st, err := os.Stat(bin); err != nil || !st.Mode().IsRegular() {
		fmt.Fprintf(stderr, "kiln verify: %s: not a readable file\n", bin)
		return cli.ExitUsage
	}
	v, err := supply.LoadVerifier(*key)
	if err != nil {
		fmt.Fprintf(stderr, "kiln verify: %v\n", err)
		return cli.ExitUsage
	}
	r := supply.Verify(bin, v)
	if !*quiet {
		r.Write(stdout)
	}
	if err := r.Err(); err != nil {
		fmt.Fprintf(stderr, "kiln verify: %s: REFUSED: %v\n", bin, err)
		return cli.ExitFailed
	}
	fmt.Fprintf(stdout, "%s: verified\n", bin)
	return cli.ExitOK
}
