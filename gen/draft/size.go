package draft

import (
	"fmt"
	"slices"
)

// SizeEstimate is a rough size of the sealed binary, before any build.
type SizeEstimate struct {
	Bytes int64 `json:"bytes"`
	// Unmeasured lists linked families with no measured size: they are
	// counted with a guess, so the estimate is less sure.
	Unmeasured []string `json:"unmeasured,omitempty"`
	Basis      string   `json:"basis"`
}

// The size model: the sealed program with only the control family, plus
// each linked family's own increment, plus one shared increment when any
// family that speaks HTTP is linked (net/http and crypto/tls dominate and
// are linked once; httpclient's own code is counted mostly in it). Measured
// on linux/amd64, go1.26, with `kiln build` of a one-node workflow per
// family (or the family's fixture), and checked against the examples/
// builds, which land within 3% of the sum (TestEstimateSizeAgainstMeasuredBuilds).
// Re-measure when a family gains a heavy import.
const (
	sizeControl = 3_182_718
	sizeNetHTTP = 3_900_000
	// sizeGuess counts a family that was not measured.
	sizeGuess = 200_000
)

// familySize is each family's own increment over the control-only
// program; for the HTTP families, over control plus sizeNetHTTP.
var familySize = map[string]int64{
	"control":    0,
	"data":       8_192,
	"env":        16_384,
	"fs":         45_056,
	"shell":      196_608,
	"compose":    16_384,
	"event":      45_056,
	"cron":       77_824,
	"interval":   294_912,
	"fswatch":    135_168,
	"sandbox":    98_304,
	"secrets":    155_648,
	"httpclient": 126_368,
	"llm":        150_944,
	"http":       556_448,
	// schema: santhosh-tekuri/jsonschema, which the llm and http families
	// linked themselves until it became a family (measured with llm; with
	// http it adds 339,968, regexp and the rest already linked).
	"schema": 389_120,
	"mcp":    1_936_800,
	"otel":   7_757_216,
	"rego":   16_436_640,
}

// netFamilies link net/http.
var netFamilies = []string{"http", "httpclient", "llm", "mcp", "oidc", "otel", "secrets", "rego"}

// EstimateSize applies the size model to the families a plan links.
func EstimateSize(families []string) SizeEstimate {
	est := SizeEstimate{Bytes: sizeControl}
	net := false
	for _, id := range families {
		n, ok := familySize[id]
		if !ok {
			n = sizeGuess
			est.Unmeasured = append(est.Unmeasured, id)
		}
		est.Bytes += n
		net = net || slices.Contains(netFamilies, id)
	}
	if net {
		est.Bytes += sizeNetHTTP
	}
	est.Basis = fmt.Sprintf("an estimate, not a build: %.1f MiB for the control family alone, plus each linked family's measured increment", float64(sizeControl)/(1<<20))
	if net {
		est.Basis += fmt.Sprintf(", plus %.1f MiB once for net/http and TLS", float64(sizeNetHTTP)/(1<<20))
	}
	est.Basis += " (linux/amd64; expect a few percent either way)"
	if len(est.Unmeasured) > 0 {
		est.Basis += fmt.Sprintf("; %v not measured, counted as %d KiB each", est.Unmeasured, sizeGuess>>10)
	}
	return est
}
