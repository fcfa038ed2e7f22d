// Package opstest reads a /metrics exposition in tests with the official
// Prometheus text parser, so a malformed line fails the test the way it
// would fail a scrape. Only tests import it: sealed binaries never link
// the parser.
package opstest

import (
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Parse parses text and returns every sample under
// `name{label="value",...}` with the labels sorted by name (histograms as
// name_bucket{...,le="..."}, name_sum and name_count), and each family's
// type by name.
func Parse(t testing.TB, text string) (samples map[string]float64, types map[string]string) {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, text)
	}
	samples, types = map[string]float64{}, map[string]string{}
	for name, f := range fams {
		if f.GetHelp() == "" {
			t.Errorf("%s has no HELP text", name)
		}
		types[name] = strings.ToLower(f.GetType().String())
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				samples[key(name, m.GetLabel(), "")] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				samples[key(name, m.GetLabel(), "")] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					samples[key(name+"_bucket", m.GetLabel(), strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))] = float64(b.GetCumulativeCount())
				}
				samples[key(name+"_bucket", m.GetLabel(), "+Inf")] = float64(h.GetSampleCount())
				samples[key(name+"_sum", m.GetLabel(), "")] = h.GetSampleSum()
				samples[key(name+"_count", m.GetLabel(), "")] = float64(h.GetSampleCount())
			default:
				t.Errorf("%s: unexpected type %v", name, f.GetType())
			}
		}
	}
	return samples, types
}

func key(name string, labels []*dto.LabelPair, le string) string {
	parts := make([]string, 0, len(labels)+1)
	for _, l := range labels {
		parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
	}
	if le != "" {
		parts = append(parts, `le="`+le+`"`)
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}
