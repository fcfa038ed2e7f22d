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

# tools: external programs that interop tests use (installed into .cache).
tools:

vet:
	@test -z "$$(gofmt -l cmd gen runtime capabilities examples testdata 2>/dev/null)" || { echo "gofmt needed:"; gofmt -l cmd gen runtime capabilities examples testdata; exit 1; }
	$(GO) vet ./...

test: tools vet
	$(GO) test -count=1 -timeout 30m ./...

demo: build

bench:

fuzz:

clean:
	rm -rf $(CACHE)
