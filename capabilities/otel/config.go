package otel

import (
	"fmt"
	"net/url"
	"os"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// Protocols of [logging.otel] protocol.
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
	ProtocolHTTPJSON     = "http/json"
)

// TracesPath is what an HTTP endpoint without a path gets appended.
const TracesPath = "/v1/traces"

// Config is a [logging.otel] block resolved for one process.
type Config struct {
	// Endpoint is the collector URL, for the HTTP protocols the full URL
	// spans are posted to ("" = the SDK's OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT
	// or its default).
	Endpoint string
	// Protocol is grpc, http/protobuf or http/json.
	Protocol string
	// ServiceName is service.name: service_name, else OTEL_SERVICE_NAME,
	// else the workflow's name (DefaultService).
	ServiceName    string
	DefaultService string
	ResourceAttrs  map[string]string
	// SampleRatio is the share of new traces kept (0..1); a run under a
	// caller's trace follows the caller's sampled flag.
	SampleRatio float64
	// OmitReasons keeps run reasons and error messages out of spans
	// ([logging.audit] include_reason = false).
	OmitReasons bool
}

// Environment variables kiln reads itself when [logging.otel] leaves the
// protocol out (the SDK reads the other OTEL_EXPORTER_OTLP_* variables).
const (
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
)

// NewConfig checks a [logging.otel] block and resolves its defaults:
// protocol from the standard environment variables, else http/protobuf;
// sample_ratio 1.0. For the HTTP protocols an endpoint without a path (or
// with "/") gets /v1/traces appended; any other path is used as given.
// Credentials do not belong in the URL (use OTEL_EXPORTER_OTLP_HEADERS):
// an endpoint with user info, a query or a fragment is refused.
func NewConfig(o *workflow.OTelLog, workflowName string) (Config, error) {
	if o == nil {
		return Config{}, fmt.Errorf("[logging.otel]: no block")
	}
	c := Config{
		Protocol:       o.Protocol,
		ServiceName:    o.ServiceName,
		DefaultService: workflowName,
		ResourceAttrs:  o.ResourceAttrs,
		SampleRatio:    sampleRatio(o),
	}
	if !(c.SampleRatio >= 0 && c.SampleRatio <= 1) {
		return Config{}, fmt.Errorf("[logging.otel]: sample_ratio must be within 0.0..1.0, got %v", c.SampleRatio)
	}
	if c.Protocol == "" {
		c.Protocol = ProtocolHTTPProtobuf
		for _, name := range []string{EnvTracesProtocol, EnvProtocol} {
			if v := os.Getenv(name); v != "" {
				c.Protocol = v
				break
			}
		}
	}
	switch c.Protocol {
	case ProtocolGRPC, ProtocolHTTPProtobuf, ProtocolHTTPJSON:
	default:
		return Config{}, fmt.Errorf("[logging.otel]: protocol %q must be grpc, http/protobuf or http/json", c.Protocol)
	}
	if o.Endpoint == "" {
		return c, nil
	}
	u, err := url.Parse(o.Endpoint)
	switch {
	case err != nil:
		return Config{}, fmt.Errorf("[logging.otel]: endpoint: %v", err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return Config{}, fmt.Errorf("[logging.otel]: endpoint %q must be an http(s) URL with a host", o.Endpoint)
	case u.User != nil:
		return Config{}, fmt.Errorf("[logging.otel]: endpoint must not carry credentials; set OTEL_EXPORTER_OTLP_HEADERS instead")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return Config{}, fmt.Errorf("[logging.otel]: endpoint %q must have no query or fragment", o.Endpoint)
	}
	if c.Protocol == ProtocolGRPC {
		if u.Path != "" && u.Path != "/" {
			return Config{}, fmt.Errorf("[logging.otel]: a grpc endpoint is scheme://host:port, without a path (got %q)", u.Path)
		}
		u.Path = ""
	} else if u.Path == "" || u.Path == "/" {
		u.Path = TracesPath
	}
	c.Endpoint = u.String()
	return c, nil
}

func sampleRatio(o *workflow.OTelLog) float64 {
	if o.SampleRatio == nil {
		return 1
	}
	return *o.SampleRatio
}
