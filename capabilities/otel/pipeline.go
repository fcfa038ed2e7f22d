package otel

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/manifest"
)

// InstrumentationName names kiln's tracer (the OTLP instrumentation scope).
const InstrumentationName = "github.com/kilnworks/kiln"

// batchOptions tune the span batcher; nil keeps the SDK defaults and its
// OTEL_BSP_* variables (tests shorten the schedule).
var batchOptions []sdktrace.BatchSpanProcessorOption

// Pipeline is one started export pipeline: a tracer provider batching
// spans to one OTLP exporter.
type Pipeline struct {
	cfg Config
	tp  *sdktrace.TracerProvider
	obs *observer
}

// Start builds the exporter, resource and sampler of cfg and returns the
// running pipeline. It dials nothing: an unreachable collector shows up as
// export failures on the audit log, never as a failed start or run. The
// OpenTelemetry global error handler and logger are pointed at audit.
func Start(ctx context.Context, cfg Config, audit *slog.Logger) (*Pipeline, error) {
	if audit == nil {
		audit = slog.New(slog.DiscardHandler)
	}
	redactEnvHeaders()
	otel.SetErrorHandler(newReporter(audit))
	otel.SetLogger(logr.FromSlogHandler(audit.Handler()))
	exp, err := newExporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	res, err := newResource(ctx, cfg)
	if err != nil {
		if res == nil {
			return nil, fmt.Errorf("[logging.otel]: resource: %v", err)
		}
		// A malformed OTEL_RESOURCE_ATTRIBUTES keeps what did parse.
		audit.Warn("otel.resource_partial", "error", runtime.Redact(err.Error()))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, batchOptions...),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	)
	tracer := tp.Tracer(InstrumentationName, trace.WithInstrumentationVersion(manifest.KilnVersion()))
	return &Pipeline{cfg: cfg, tp: tp, obs: &observer{tracer: tracer, omitReasons: cfg.OmitReasons}}, nil
}

// Observer is the engine hook that records the pipeline's spans.
func (p *Pipeline) Observer() runtime.Observer { return p.obs }

// Shutdown exports the spans still queued and stops the exporter; ctx
// bounds the wait.
func (p *Pipeline) Shutdown(ctx context.Context) error {
	if err := p.tp.Shutdown(ctx); err != nil {
		where := p.cfg.Endpoint
		if where == "" {
			where = "the OTLP endpoint of the environment"
		}
		return fmt.Errorf("flushing spans to %s: %v", where, err)
	}
	return nil
}

// newExporter builds the OTLP exporter of cfg.Protocol. Options given here
// win over the SDK's OTEL_EXPORTER_OTLP_* variables; everything left out
// (headers, certificates, timeout, compression) comes from them. Both
// exporters dial through the SSRF guard (dial.go).
func newExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	var exp sdktrace.SpanExporter
	var err error
	switch cfg.Protocol {
	case ProtocolGRPC:
		var opts []otlptracegrpc.Option
		if cfg.Endpoint != "" {
			// http:// is plaintext, https:// TLS against the system roots
			// (or OTEL_EXPORTER_OTLP_CERTIFICATE).
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		}
		opts = append(opts, otlptracegrpc.WithDialOption(grpcDialOption(cfg)))
		exp, err = otlptracegrpc.New(ctx, opts...)
	case ProtocolHTTPProtobuf, ProtocolHTTPJSON:
		var opts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(cfg.Endpoint))
		}
		// The SDK writes OTLP/JSON itself (trace and span ids as hex, as
		// the OTLP spec wants, not protojson's base64).
		enc := otlptracehttp.EncodingProtobuf
		if cfg.Protocol == ProtocolHTTPJSON {
			enc = otlptracehttp.EncodingJSON
		}
		opts = append(opts, otlptracehttp.WithEncoding(enc), otlptracehttp.WithHTTPClient(httpClient()))
		exp, err = otlptracehttp.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("[logging.otel]: protocol %q must be grpc, http/protobuf or http/json", cfg.Protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("[logging.otel]: %s exporter: %v", cfg.Protocol, err)
	}
	return exp, nil
}

// newResource is what every span is attributed to: the SDK's own
// attributes, service.name (the workflow's name, overridden by
// OTEL_SERVICE_NAME, overridden by service_name), OTEL_RESOURCE_ATTRIBUTES,
// resource_attrs and kiln.version. Later sources win.
func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	var own []attribute.KeyValue
	for _, k := range runtime.SortedKeys(cfg.ResourceAttrs) {
		own = append(own, attribute.String(k, cfg.ResourceAttrs[k]))
	}
	if cfg.ServiceName != "" {
		own = append(own, attribute.String("service.name", cfg.ServiceName))
	}
	own = append(own, attribute.String("kiln.version", manifest.KilnVersion()))
	return resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", cfg.DefaultService)),
		resource.WithFromEnv(),
		resource.WithAttributes(own...),
	)
}

// credentialHeader matches header names that carry credentials.
var credentialHeader = regexp.MustCompile(`(?i)auth|key|token|secret|passw|signature|cookie|team`)

// redactEnvHeaders registers the values of the OTLP header variables (API
// keys, bearer tokens) for redaction before anything can log them: every
// value of a credential-like header, and any other value of 8 bytes or
// more (a shorter one, such as "1", would mangle every log line instead).
func redactEnvHeaders() {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for _, pair := range strings.Split(os.Getenv(name), ",") {
			k, v, ok := strings.Cut(pair, "=")
			if !ok {
				continue
			}
			cred := credentialHeader.MatchString(k)
			for _, form := range []string{strings.TrimSpace(v), unescape(strings.TrimSpace(v))} {
				if cred || len(form) >= 8 {
					runtime.RedactValue(form)
				}
			}
		}
	}
}

func unescape(v string) string {
	if dec, err := url.PathUnescape(v); err == nil {
		return dec
	}
	return v
}
