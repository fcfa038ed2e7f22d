package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/capabilities/llm/provider"
	"github.com/kilnworks/kiln/capabilities/llm/transport"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/draft"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "draft",
		summary: "draft a workflow from a goal with an intelligence backend; writes it, with a review summary, only when it validates (nothing runs)",
		run: func(args []string, stdout, stderr io.Writer) int {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			return runDraft(ctx, args, stdout, stderr)
		},
	})
}

// envDraftBearer holds the bearer token for --intel-http, as for kiln run.
const envDraftBearer = "KILN_INTEL_HTTP_BEARER"

// runDraft drafts, validates and writes. Exit 0 with the draft and its
// review written; 2 on bad flags, an unreadable constraint file or a
// backend that is not configured; 5 when the backend fails or the draft
// never validates or is refused, with nothing written.
func runDraft(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const prog = "kiln draft"
	fl := flag.NewFlagSet(prog, flag.ContinueOnError)
	fl.SetOutput(stderr)
	goal := fl.String("goal", "", "what the workflow should do (required)")
	out := fl.String("o", "", "draft `path` to write (required); the review summary goes beside it as NAME.review.md")
	backend := fl.String("backend", "", "a named backend from --backends (its provider's API key is read from the environment variable its api_key_env names)")
	backendsFile := fl.String("backends", "", "TOML `file` with [[intelligence.backends]] (a workflow, or a file of just that table)")
	unixPath := fl.String("intel-unix", "", "Unix socket of an intelligence backend speaking kiln's JSON-RPC (kiln intel-mock)")
	httpURL := fl.String("intel-http", "", "URL of an intelligence backend speaking kiln's JSON-RPC over HTTP (bearer from env "+envDraftBearer+")")
	profile := fl.String("profile", "", "target profile `file`: the draft may use only the families it allows")
	ceilingFile := fl.String("policy-ceiling", "", "`file` with a [policy] table: the draft's policy may allow nothing beyond it")
	repairs := fl.Int("repairs", 2, fmt.Sprintf("rounds that feed the issues back to the backend after the first draft (0..%d)", draft.MaxRepairs))
	maxTokens := fl.Int("max-tokens", draft.DefaultMaxTokens, "completion cap per round")
	timeout := fl.Duration("timeout", 10*time.Minute, "the whole session's deadline")
	asJSON := fl.Bool("json", false, "print the review summary as JSON on stdout (on failure: ok, refused, rounds and the last findings)")
	needsFl := addNeedsFlag(fl)
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln draft --goal TEXT (--backend NAME --backends FILE | --intel-unix PATH | --intel-http URL)")
		fmt.Fprintln(stderr, "                  [--needs FILE]... [--profile FILE] [--policy-ceiling FILE] [--repairs N] -o WF.toml [--json]")
		fmt.Fprintln(stderr, "Asks the backend for a workflow reaching the goal, holds it to kiln's loader, validator, the profile")
		fmt.Fprintln(stderr, "and the ceiling, feeds the issues back up to --repairs times, and writes WF.toml and WF.review.md")
		fmt.Fprintln(stderr, "only when it passes. Nothing is run. See docs/goal-mode.md.")
		fmt.Fprintln(stderr, "Exit status: 0 written, 2 usage or configuration, 5 backend failure, never valid or refused (nothing written).")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	usage := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "%s: "+format+"\n", append([]any{prog}, args...)...)
		return cli.ExitUsage
	}
	switch {
	case fl.NArg() != 0:
		fl.Usage()
		return cli.ExitUsage
	case strings.TrimSpace(*goal) == "":
		return usage("--goal is required")
	case len(*goal) > draft.MaxGoalBytes:
		return usage("--goal is %d bytes; at most %d", len(*goal), draft.MaxGoalBytes)
	case *out == "":
		return usage("-o is required")
	case *repairs < 0 || *repairs > draft.MaxRepairs:
		return usage("--repairs must be 0..%d", draft.MaxRepairs)
	case *maxTokens < 1:
		return usage("--max-tokens must be 1 or more")
	case *timeout <= 0:
		return usage("--timeout must be positive")
	}
	reviewPath := reviewPathFor(*out)
	client, model, err := draftBackend(*backend, *backendsFile, *unixPath, *httpURL)
	if err != nil {
		return usage("%v", err)
	}
	opts := draft.Options{Goal: *goal, Client: client, Model: model, MaxTokens: *maxTokens, Repairs: *repairs, Name: *out, Log: stderr}
	if opts.Catalogs, err = needsFl.catalogs(); err != nil {
		return usage("%v", err)
	}
	if *profile != "" {
		if opts.Constraints.Profile, err = gen.LoadProfile(*profile); err != nil {
			return usage("%v", err)
		}
	}
	if *ceilingFile != "" {
		data, err := os.ReadFile(*ceilingFile)
		if err != nil {
			return usage("policy ceiling: %v", err)
		}
		if opts.Constraints.Ceiling, err = draft.DecodeCeiling(*ceilingFile, data); err != nil {
			return usage("policy ceiling: %v", err)
		}
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := draft.Draft(ctx, opts)
	if err != nil {
		var fail *draft.Failure
		var re *runtime.Error
		switch {
		case errors.As(err, &fail):
			fmt.Fprintf(stderr, "%s: %v; nothing written\n", prog, err)
			if *asJSON {
				b, _ := runtime.EncodeJSONIndent(struct {
					OK       bool            `json:"ok"`
					Refused  bool            `json:"refused"`
					Rounds   int             `json:"rounds"`
					Findings []draft.Finding `json:"findings"`
				}{false, fail.Refused, fail.Rounds, fail.Findings})
				fmt.Fprintln(stdout, string(b))
			}
			return cli.ExitFailed
		case errors.As(err, &re) && re.Class == runtime.ClassConfig:
			return usage("%v", err)
		}
		fmt.Fprintf(stderr, "%s: %v; nothing written\n", prog, err)
		return cli.ExitFailed
	}

	// The review first, so a draft never sits on disk without it; each
	// file appears whole or not at all.
	if err := runtime.WriteFileAtomic(reviewPath, res.Review.Markdown(), 0o644); err != nil {
		fmt.Fprintf(stderr, "%s: %v; nothing written\n", prog, err)
		return cli.ExitFailed
	}
	if err := runtime.WriteFileAtomic(*out, res.TOML, 0o644); err != nil {
		os.Remove(reviewPath)
		fmt.Fprintf(stderr, "%s: %v; nothing written\n", prog, err)
		return cli.ExitFailed
	}
	fmt.Fprintf(stderr, "%s: wrote %s and %s after %d round(s); review both, then `kiln check --strict %s` and `kiln build %s -o BIN`\n",
		prog, *out, reviewPath, res.Rounds, *out, *out)
	if *asJSON {
		b, err := runtime.EncodeJSONIndent(res.Review)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
			return cli.ExitFailed
		}
		fmt.Fprintln(stdout, string(b))
	}
	return cli.ExitOK
}

// reviewPathFor is the review beside a draft: WF.review.md for WF.toml
// (and NAME.review.md for a NAME without the .toml extension).
func reviewPathFor(out string) string {
	base := strings.TrimSuffix(out, ".toml")
	return base + ".review.md"
}

// draftBackend builds the one backend the flags name: a named provider
// backend from a file, or kiln's JSON-RPC transport on a socket or URL.
// The model field is the backend's name ("default" for the transport).
func draftBackend(name, file, unixPath, httpURL string) (intel.Client, string, error) {
	given := 0
	for _, s := range []string{name, unixPath, httpURL} {
		if s != "" {
			given++
		}
	}
	switch {
	case given != 1:
		return nil, "", errors.New("give one backend: --backend NAME (with --backends FILE), --intel-unix PATH or --intel-http URL")
	case name != "" && file == "":
		return nil, "", errors.New("--backend needs --backends FILE declaring it in [[intelligence.backends]]")
	case name == "" && file != "":
		return nil, "", errors.New("--backends needs --backend NAME")
	}
	if unixPath != "" {
		return &transport.Unix{Path: unixPath}, "default", nil
	}
	if httpURL != "" {
		u, err := url.Parse(httpURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, "", fmt.Errorf("--intel-http %q is not an absolute http(s) URL", httpURL)
		}
		if u.User != nil {
			return nil, "", fmt.Errorf("--intel-http must not carry credentials in the URL; set %s", envDraftBearer)
		}
		bearer := os.Getenv(envDraftBearer)
		if bearer != "" {
			runtime.RedactValue(bearer)
		}
		return &transport.HTTP{URL: httpURL, Bearer: bearer}, "default", nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, "", fmt.Errorf("--backends: %v", err)
	}
	wf, err := gen.Decode(file, data)
	if err != nil {
		return nil, "", fmt.Errorf("--backends: %v", err)
	}
	if wf.Intelligence != nil {
		for _, b := range wf.Intelligence.Backends {
			if b.Name == name {
				// The key is read from the environment at request time
				// (api_key_env), registered for redaction, never printed.
				c, err := provider.New(b, nil)
				return c, name, err
			}
		}
	}
	return nil, "", fmt.Errorf("--backends %s declares no backend %q in [[intelligence.backends]]", file, name)
}
