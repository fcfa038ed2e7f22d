# kiln — make targets. `make demo` and `make test` are the two newcomer
# commands; everything a test needs is installed by these targets.

GO      ?= go
CACHE   := $(CURDIR)/.cache
BIN     := $(CACHE)/bin
KILN    := $(BIN)/kiln
export PATH := $(BIN):$(PATH)

.PHONY: all build test vet demo bench fuzz tools clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $(KILN) ./cmd/kiln

# tools: external programs that interop tests use (Go and npm tools into
# .cache, Debian packages system-wide).
tools: cosign mcp-everything mermaid-parser deb-tools postgres-tools modcache

# modcache: kiln's whole module graph in the module cache. The offline
# pipeline recipe test (gen TestPipelineRecipe) tidies and vendors with
# GOPROXY=off, which reads modules a build never downloads (test-only and
# build-tagged dependencies); on a fresh machine they are fetched here.
# It works on copies of go.mod and go.sum: go mod download would record
# every module's checksum in the checkout's go.sum.
.PHONY: modcache
modcache:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cp go.mod go.sum "$$tmp"/ && \
		$(GO) mod download -modfile="$$tmp/go.mod" all

# deb-tools: Debian packages that interop tests drive, as COMMAND=PACKAGE
# pairs; a package is installed only when its command is missing, with one
# `apt-get update` for all of them. Installing needs root (CI runs as root);
# without it the tests that need the command skip outside CI and fail
# under CI=true.
DEB_TOOLS := systemd-analyze=systemd skopeo=skopeo dot=graphviz chromium=chromium promtool=prometheus
.PHONY: deb-tools
deb-tools:
	@missing=""; for pair in $(DEB_TOOLS); do \
		command -v "$${pair%%=*}" >/dev/null 2>&1 || missing="$$missing $${pair#*=}"; \
	done; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian packages:$$missing (about a minute on a fresh machine)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else \
		echo "WARNING: missing Debian packages:$$missing (not root, cannot install): the tests that need them skip outside CI and fail with CI=true"; \
	fi

# postgres-tools: initdb and pg_ctl for the pgstate tests, which run a
# throwaway PostgreSQL cluster (capabilities/pgstate/pgtest). Debian keeps
# them in /usr/lib/postgresql/NN/bin, off PATH, so both places are looked
# at before Debian's postgresql is installed (as root).
.PHONY: postgres-tools
postgres-tools:
	@if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then :; \
	elif ls /usr/lib/postgresql/*/bin/initdb /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's postgresql (initdb, pg_ctl) for the pgstate tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql; \
	else \
		echo "WARNING: initdb/pg_ctl missing (not root, cannot install postgresql): the pgstate tests skip outside CI and fail with CI=true"; \
	fi

# cosign: pinned v3 release for the supply-chain interop tests (gen/supply,
# cmd/kiln). Skipped when .cache/bin/cosign already is that version.
COSIGN_VERSION := v3.1.3
.PHONY: cosign
cosign:
	@mkdir -p $(BIN)
	@if $(GO) version -m $(BIN)/cosign 2>/dev/null | grep -Eq '^[[:space:]]+mod[[:space:]]+github.com/sigstore/cosign/v3[[:space:]]+$(COSIGN_VERSION)([[:space:]]|$$)'; then :; else \
		echo "installing cosign $(COSIGN_VERSION) into $(BIN)"; \
		GOBIN=$(BIN) $(GO) install github.com/sigstore/cosign/v3/cmd/cosign@$(COSIGN_VERSION); \
	fi

# mutate: mutation testing (gremlins) over the security-critical packages,
# one package at a time: each mutant reruns that package's tests, so this
# takes long on 2 cores and is not part of `make test`. Only the package's
# own folder is mutated (gremlins would walk its subfolders too), and
# PKG=FILES mutates only those files (comma-separated) of a big package.
# Packages that do not exist yet are listed and passed over. Prints each
# package's efficacy (killed / (killed + lived)) and fails when one is
# under MUTATE_MIN.
# Surviving mutants that are equivalent are listed in docs/testing.md.
# Packages in MUTATE_HOOKED are tested with the kiln_testhooks tag, as
# make test does (the sandbox's checks-off tests need it). -count=1: a
# coverage run served from the test cache takes a second, and the
# timeout of every mutant (10 times it) would then be shorter than a build.
GREMLINS_VERSION := v0.6.0
MUTATE_MIN ?= 90
MUTATE_PKGS ?= runtime/policy capabilities/internal/beneath runtime=redact.go,secret.go,audit.go \
	runtime/sealed gen/supply capabilities/http=auth.go,idempotency.go capabilities/httpclient \
	capabilities/internal/netguard runtime/needs runtime/cli=preflight.go capabilities/secrets \
	capabilities/sandbox capabilities/rego capabilities/rego/compile
MUTATE_HOOKED ?= capabilities/sandbox
.PHONY: gremlins mutate
gremlins:
	@mkdir -p $(BIN)
	@if $(GO) version -m $(BIN)/gremlins 2>/dev/null | grep -Eq '^[[:space:]]+mod[[:space:]]+github.com/go-gremlins/gremlins[[:space:]]+$(GREMLINS_VERSION)([[:space:]]|$$)'; then :; else \
		echo "installing gremlins $(GREMLINS_VERSION) into $(BIN)"; \
		GOBIN=$(BIN) $(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION); \
	fi
mutate: gremlins
	@log=$$(mktemp -d); trap 'rm -rf "$$log"' EXIT; trap 'exit 130' INT TERM; fail=0; table=""; \
	for spec in $(MUTATE_PKGS); do \
		pkg=$${spec%%=*}; keep=""; [ "$$pkg" = "$$spec" ] || keep=",$${spec#*=},"; \
		if ! ls $$pkg/*.go >/dev/null 2>&1; then table="$$table$$(printf '%-44s %s' $$pkg 'not in this tree')\n"; continue; fi; \
		excl="-E /"; if [ -n "$$keep" ]; then for f in $$pkg/*.go; do \
			b=$${f##*/}; case "$$keep" in *",$$b,"*) ;; *) excl="$$excl -E ^$$b\$$";; esac; done; fi; \
		tags=""; case " $(MUTATE_HOOKED) " in *" $$pkg "*) tags="--tags kiln_testhooks";; esac; \
		echo "== $$spec"; \
		GOFLAGS="$$GOFLAGS -count=1" $(BIN)/gremlins unleash --workers 1 --timeout-coefficient 10 $$tags $$excl ./$$pkg 2>&1 | tee $$log/out | grep -Ev '^ +KILLED '; \
		eff=$$(sed -n 's/^Test efficacy: \([0-9.]*\)%.*/\1/p' $$log/out); \
		counts=$$(sed -n 's/^Killed: \([0-9]*\), Lived: \([0-9]*\), Not covered: \([0-9]*\).*/\1 \2 \3/p' $$log/out); \
		tout=$$(sed -n 's/^Timed out: \([0-9]*\),.*/\1/p' $$log/out); \
		if [ -z "$$eff" ]; then eff="no result"; fail=1; \
		elif awk "BEGIN{exit !($$eff < $(MUTATE_MIN))}"; then fail=1; fi; \
		set -- $$counts - - -; \
		table="$$table$$(printf '%-44s %6s %5s %9s %11s  %s' $$spec $$1 $$2 "$${tout:--}" $$3 "$$eff")\n"; \
	done; \
	printf '\n%-44s %6s %5s %9s %11s  %s\n' package killed lived 'timed out' 'not covered' efficacy%; printf "$$table"; \
	[ $$fail = 0 ] || { echo "mutate: a package is under $(MUTATE_MIN)% efficacy (or gave no result)"; exit 1; }

# lint: staticcheck's correctness, simplification and unused-code checks
# (pinned, installed into .cache/bin, not in go.mod; v0.8.2 is the first
# line that reads Go 1.26). Not part of `make test`; docs/testing.md lists
# the findings kept on purpose.
STATICCHECK_VERSION := v0.8.2
.PHONY: staticcheck lint
staticcheck:
	@mkdir -p $(BIN)
	@if $(GO) version -m $(BIN)/staticcheck 2>/dev/null | grep -Eq '^[[:space:]]+mod[[:space:]]+honnef.co/go/tools[[:space:]]+$(STATICCHECK_VERSION)([[:space:]]|$$)'; then :; else \
		echo "installing staticcheck $(STATICCHECK_VERSION) into $(BIN)"; \
		GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	fi
lint: staticcheck
	$(BIN)/staticcheck -checks 'SA*,S1*,U1000' ./...

# mcp-everything: the official MCP reference server for the MCP interop
# tests (capabilities/mcp), pinned with its whole dependency tree by
# testdata/mcp/npm/package-lock.json and installed with npm into
# .cache/npm (install scripts off). Skipped when that tree is already
# installed; without npm the interop tests skip and say why, and with
# CI=true this target and those tests fail.
MCP_EVERYTHING_VERSION := 2026.8.31
NPM_DIR := $(CACHE)/npm
.PHONY: mcp-everything
mcp-everything:
	@grep -q '"@modelcontextprotocol/server-everything": "$(MCP_EVERYTHING_VERSION)"' testdata/mcp/npm/package.json || \
		{ echo "testdata/mcp/npm/package.json does not pin server-everything $(MCP_EVERYTHING_VERSION)"; exit 1; }
	@if ! command -v npm >/dev/null 2>&1; then \
		if [ "$$CI" = true ]; then echo "npm not found: CI=true needs it for the MCP interop tests"; exit 1; fi; \
		echo "npm not found: MCP interop tests will skip (and fail with CI=true)"; \
	elif cmp -s testdata/mcp/npm/package-lock.json $(NPM_DIR)/package-lock.json && \
		test -f $(NPM_DIR)/node_modules/@modelcontextprotocol/server-everything/package.json; then :; else \
		echo "installing @modelcontextprotocol/server-everything $(MCP_EVERYTHING_VERSION) into $(NPM_DIR)"; \
		mkdir -p $(NPM_DIR) && cp testdata/mcp/npm/package.json testdata/mcp/npm/package-lock.json $(NPM_DIR)/ && \
		npm ci --prefix $(NPM_DIR) --no-audit --no-fund --ignore-scripts; \
	fi

# mermaid-parser: Mermaid's own parser (and jsdom, which it needs outside
# a browser) for gen/graph's TestMermaidParses, pinned by
# gen/graph/testdata/mermaid/package-lock.json and installed with npm into
# .cache/mermaid (install scripts off), like mcp-everything.
MERMAID_DIR := $(CACHE)/mermaid
.PHONY: mermaid-parser
mermaid-parser:
	@if ! command -v npm >/dev/null 2>&1; then \
		if [ "$$CI" = true ]; then echo "npm not found: CI=true needs it for the Mermaid parser test"; exit 1; fi; \
		echo "npm not found: the Mermaid parser test will skip (and fail with CI=true)"; \
	elif cmp -s gen/graph/testdata/mermaid/package-lock.json $(MERMAID_DIR)/package-lock.json && \
		test -f $(MERMAID_DIR)/node_modules/mermaid/package.json; then :; else \
		echo "installing Mermaid's parser into $(MERMAID_DIR)"; \
		mkdir -p $(MERMAID_DIR) && cp gen/graph/testdata/mermaid/package.json gen/graph/testdata/mermaid/package-lock.json $(MERMAID_DIR)/ && \
		npm ci --prefix $(MERMAID_DIR) --no-audit --no-fund --ignore-scripts; \
	fi

vet:
	@test -z "$$(gofmt -l cmd gen runtime capabilities examples testdata 2>/dev/null)" || { echo "gofmt needed:"; gofmt -l cmd gen runtime capabilities examples testdata; exit 1; }
	$(GO) vet ./...

# test-intro: say, before anything is installed, what make test installs
# and roughly how long it takes.
.PHONY: test-intro
test-intro:
	@echo "make test: installs what interop tests drive, once: cosign $(COSIGN_VERSION) into $(BIN) (go install, about 2 minutes),"
	@echo "  MCP server-everything $(MCP_EVERYTHING_VERSION) and Mermaid's parser into .cache (npm ci), PostgreSQL and Debian packages for: $(DEB_TOOLS) (apt-get, as root);"
	@echo "  kiln's whole module graph into the module cache (go mod download all, for the offline pipeline recipe test);"
	@echo "  then go vet and go test ./...: about 3 minutes on 2 cores with warm caches, 10-20 minutes on a first run (it compiles every dependency)."

# kiln_testhooks compiles the test-only hooks (the sandbox tests switch
# kiln's own path checks off to prove Landlock alone holds); no binary
# kiln builds carries them.
test: test-intro tools vet
	$(GO) test -count=1 -tags kiln_testhooks -timeout 30m ./...

# demo: build kiln, seal examples/hello (read_env -> template_render ->
# write_file -> terminate) into a pruned binary, run it, show its outcome,
# what it links and its size.
DEMO := $(CACHE)/demo/hello
demo: build
	@mkdir -p $(dir $(DEMO))
	$(KILN) build examples/hello/workflow.toml -o $(DEMO) -v
	USER=$${USER:-$$(id -un)} $(DEMO) --input examples/hello/input.json --quiet
	@echo "wrote /tmp/kiln-hello/hello.txt: $$(cat /tmp/kiln-hello/hello.txt)"
	@$(KILN) inspect $(DEMO) | grep -E '^(tags|families|ok|PROBLEM)'
	@echo "sealed binary $(DEMO): $$(wc -c < $(DEMO)) bytes"

# bench-size: sealed hello size (target <= 3.25 MiB), the all-capabilities
# build over hello (target >= 4x), and regenerate + rebuild of an unchanged
# workflow with a warm cache (target <= 1 s/op).
.PHONY: bench-size
bench-size:
	$(GO) test ./gen -run '^$$' -bench 'SealedSize|RebuildUnchanged' -benchtime 3x

# bench: honest ratios on this machine (not part of make test; about 4
# minutes on 2 cores). Engine throughput (runtime benchmarks); HTTP serve
# mode, a one-node route with the default audit log to a file against a
# bare net/http handler that decodes the same JSON, driven by the
# in-process Go generator and by wrk in alternating rounds (median
# kiln/bare ratio with min and max; target >= 0.9); then cold start of the
# sealed hello against a Go hello-world built the same way (target <=
# 1.5x) and idle RSS of a sealed serve binary against a bare server
# (target <= 1.3x), medians of alternating rounds. docs/operations.md has
# the last figures. Only wrk is installed (Debian's, as root); without it
# the wrk rounds are skipped, and with CI=true the bench fails.
bench:
	@command -v wrk >/dev/null 2>&1 || $(MAKE) --no-print-directory deb-tools DEB_TOOLS=wrk=wrk
	$(GO) test -run '^$$' -bench . ./runtime/...
	$(GO) run ./capabilities/http/internal/bench -rounds 5 -requests 10000 -concurrency 64
	$(GO) test ./gen -run '^$$' -bench '^Benchmark(ColdStart|IdleRSS)$$' -benchtime 1x -v

# fuzz: FUZZTIME (60 s) of each fuzz target: the loader + validator
# (seeded from every workflow in testdata and examples), and the TOML and
# JSON nesting checks, which must agree with their decoders on depth, and
# parse_json's decoder, which must agree with runtime.DecodeJSON, and the
# header name and {{secret:NAME}} matchers, which must agree with the
# regular expressions they replace, and the audit's formatting shortcut,
# which must write slog's text bytes, and the value encoder's shortcut,
# which must write encoding/json's bytes; FUZZTIME=10m for a longer run.
FUZZTIME ?= 60s
fuzz:
	$(GO) test ./gen -run '^$$' -fuzz '^FuzzLoadValidate$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/nesting -run '^$$' -fuzz '^FuzzTOMLNesting$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/nesting -run '^$$' -fuzz '^FuzzJSONDepth$$' -fuzztime $(FUZZTIME)
	$(GO) test ./capabilities/data/parsejson -run '^$$' -fuzz '^FuzzDecodeMatchesRuntime$$' -fuzztime $(FUZZTIME)
	$(GO) test ./capabilities/spec/rules -run '^$$' -fuzz '^FuzzHeaderMatchers$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime -run '^$$' -fuzz '^FuzzAppendTextLine$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime -run '^$$' -fuzz '^FuzzAppendValueMatchesEncoder$$' -fuzztime $(FUZZTIME)

clean:
	rm -rf $(CACHE)
