// Package otlptest is an in-process OTLP trace receiver for tests, on
// loopback: a gRPC server implementing the collector TraceService, and an
// HTTP handler decoding OTLP/HTTP protobuf and JSON bodies. Received spans
// are flattened into Span values for assertions. Tests only; no binary
// links it.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Span is one received span.
type Span struct {
	TraceID, SpanID, ParentSpanID string // lower-case hex; ParentSpanID "" for a root
	Name                          string
	Kind                          string
	Attrs                         map[string]string // values as text
	Status                        string            // UNSET, OK or ERROR
	StatusMessage                 string
	Resource                      map[string]string
	Scope                         string
}

// Request is one export request as received.
type Request struct {
	Protocol string              // grpc, http/protobuf or http/json
	Path     string              // the HTTP request path ("" for grpc)
	Header   map[string][]string // HTTP headers or gRPC metadata (lower-case keys)
	Body     []byte              // the raw HTTP body (nil for grpc)
	Spans    []Span
}

// Receiver records what exporters send it.
type Receiver struct {
	mu     sync.Mutex
	reqs   []Request
	errs   []string
	fail   bool
	signal chan struct{}
}

func newReceiver() *Receiver { return &Receiver{signal: make(chan struct{}, 1)} }

// Fail makes every later export request fail with a non-retryable error
// (HTTP 400, gRPC InvalidArgument) after it is recorded.
func (r *Receiver) Fail(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = on
}

// Requests returns the export requests received so far.
func (r *Receiver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// Spans returns every span received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	var out []Span
	for _, req := range r.Requests() {
		out = append(out, req.Spans...)
	}
	return out
}

// Errors lists requests the receiver could not decode (a malformed body
// is a test failure: the exporter sent something a collector rejects).
func (r *Receiver) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// WaitSpans waits until at least n spans arrived and returns them.
func (r *Receiver) WaitSpans(t testing.TB, n int, timeout time.Duration) []Span {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if spans := r.Spans(); len(spans) >= n {
			return spans
		}
		select {
		case <-r.signal:
		case <-deadline:
			t.Fatalf("waited %v for %d spans, got %d: %+v (decode errors: %v)", timeout, n, len(r.Spans()), r.Spans(), r.Errors())
		}
	}
}

func (r *Receiver) record(req Request) bool {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	fail := r.fail
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
	return fail
}

func (r *Receiver) reject(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// NewHTTP starts an OTLP/HTTP receiver on loopback (TLS when tlsCfg is
// set) accepting POSTs on any path, and returns it with its base URL.
func NewHTTP(t testing.TB, tlsCfg *tls.Config) (*Receiver, string) {
	t.Helper()
	r := newReceiver()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(r.serveHTTP))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake failures are what some tests provoke
	if tlsCfg != nil {
		srv.TLS = tlsCfg
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 16<<20))
	if err != nil {
		r.reject("read body: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	raw := body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err == nil {
			raw, err = io.ReadAll(zr)
		}
		if err != nil {
			r.reject("gzip: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	rec := Request{Path: req.URL.Path, Header: lowerKeys(req.Header), Body: raw}
	var respBody []byte
	switch ct := req.Header.Get("Content-Type"); ct {
	case "application/x-protobuf":
		rec.Protocol = "http/protobuf"
		var msg collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &msg); err != nil {
			r.reject("protobuf body: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rec.Spans = fromProto(&msg)
		respBody, _ = proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	case "application/json":
		rec.Protocol = "http/json"
		spans, err := fromJSON(raw)
		if err != nil {
			r.reject("json body: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rec.Spans = spans
		respBody = []byte("{}")
	default:
		r.reject("content type %q", ct)
		http.Error(w, "unsupported content type", http.StatusUnsupportedMediaType)
		return
	}
	if r.record(rec) {
		http.Error(w, "receiver told to fail", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", req.Header.Get("Content-Type"))
	w.Write(respBody)
}

// NewGRPC starts an OTLP/gRPC receiver on loopback (TLS when tlsCfg is
// set) and returns it with its host:port.
func NewGRPC(t testing.TB, tlsCfg *tls.Config) (*Receiver, string) {
	t.Helper()
	r := newReceiver()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	srv := grpc.NewServer(opts...)
	collectortrace.RegisterTraceServiceServer(srv, &traceService{r: r})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return r, lis.Addr().String()
}

type traceService struct {
	collectortrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (s *traceService) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if s.r.record(Request{Protocol: "grpc", Header: md, Spans: fromProto(req)}) {
		return nil, status.Error(codes.InvalidArgument, "receiver told to fail")
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func lowerKeys(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		out[strings.ToLower(k)] = v
	}
	return out
}

func fromProto(req *collectortrace.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range req.GetResourceSpans() {
		res := protoAttrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				out = append(out, Span{
					TraceID:       hex.EncodeToString(sp.GetTraceId()),
					SpanID:        hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID:  hex.EncodeToString(sp.GetParentSpanId()),
					Name:          sp.GetName(),
					Kind:          strings.TrimPrefix(sp.GetKind().String(), "SPAN_KIND_"),
					Attrs:         protoAttrs(sp.GetAttributes()),
					Status:        strings.TrimPrefix(sp.GetStatus().GetCode().String(), "STATUS_CODE_"),
					StatusMessage: sp.GetStatus().GetMessage(),
					Resource:      res,
					Scope:         ss.GetScope().GetName(),
				})
			}
		}
	}
	return out
}

func protoAttrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = strconv.FormatInt(v.GetIntValue(), 10)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = strconv.FormatBool(v.GetBoolValue())
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = strconv.FormatFloat(v.GetDoubleValue(), 'g', -1, 64)
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}

// The OTLP/JSON shape (OTLP spec: lowerCamelCase fields, trace and span
// ids as hex strings, enums as integers, 64-bit integers as strings).
type jsonRequest struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []jsonKV `json:"attributes"`
		} `json:"resource"`
		ScopeSpans []struct {
			Scope struct {
				Name string `json:"name"`
			} `json:"scope"`
			Spans []struct {
				TraceID      string   `json:"traceId"`
				SpanID       string   `json:"spanId"`
				ParentSpanID string   `json:"parentSpanId"`
				Name         string   `json:"name"`
				Kind         int      `json:"kind"`
				Attributes   []jsonKV `json:"attributes"`
				Status       struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"status"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type jsonKV struct {
	Key   string `json:"key"`
	Value struct {
		StringValue *string          `json:"stringValue"`
		IntValue    *json.RawMessage `json:"intValue"`
		BoolValue   *bool            `json:"boolValue"`
		DoubleValue *float64         `json:"doubleValue"`
	} `json:"value"`
}

func fromJSON(data []byte) ([]Span, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var req jsonRequest
	if err := dec.Decode(&req); err != nil {
		return nil, err
	}
	var out []Span
	for _, rs := range req.ResourceSpans {
		res, err := jsonAttrs(rs.Resource.Attributes)
		if err != nil {
			return nil, err
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				if err := hexID(sp.TraceID, 16, false); err != nil {
					return nil, fmt.Errorf("traceId: %v", err)
				}
				if err := hexID(sp.SpanID, 8, false); err != nil {
					return nil, fmt.Errorf("spanId: %v", err)
				}
				if err := hexID(sp.ParentSpanID, 8, true); err != nil {
					return nil, fmt.Errorf("parentSpanId: %v", err)
				}
				attrs, err := jsonAttrs(sp.Attributes)
				if err != nil {
					return nil, err
				}
				out = append(out, Span{
					TraceID:       strings.ToLower(sp.TraceID),
					SpanID:        strings.ToLower(sp.SpanID),
					ParentSpanID:  strings.ToLower(sp.ParentSpanID),
					Name:          sp.Name,
					Kind:          strings.TrimPrefix(tracepb.Span_SpanKind(sp.Kind).String(), "SPAN_KIND_"),
					Attrs:         attrs,
					Status:        strings.TrimPrefix(tracepb.Status_StatusCode(sp.Status.Code).String(), "STATUS_CODE_"),
					StatusMessage: sp.Status.Message,
					Resource:      res,
					Scope:         ss.Scope.Name,
				})
			}
		}
	}
	return out, nil
}

// hexID checks an OTLP/JSON id: n bytes as hex ("" allowed when optional).
func hexID(s string, n int, optional bool) error {
	if s == "" && optional {
		return nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != n {
		return fmt.Errorf("%q is not %d bytes of hex", s, n)
	}
	return nil
}

func jsonAttrs(kvs []jsonKV) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		v := kv.Value
		switch {
		case v.StringValue != nil:
			out[kv.Key] = *v.StringValue
		case v.IntValue != nil:
			// An int64 is a JSON string in OTLP/JSON; accept a number too.
			var s string
			if err := json.Unmarshal(*v.IntValue, &s); err != nil {
				s = string(*v.IntValue)
			}
			if _, err := strconv.ParseInt(s, 10, 64); err != nil {
				return nil, fmt.Errorf("attribute %s: intValue %s", kv.Key, *v.IntValue)
			}
			out[kv.Key] = s
		case v.BoolValue != nil:
			out[kv.Key] = strconv.FormatBool(*v.BoolValue)
		case v.DoubleValue != nil:
			out[kv.Key] = strconv.FormatFloat(*v.DoubleValue, 'g', -1, 64)
		default:
			return nil, fmt.Errorf("attribute %s: no value of a known type", kv.Key)
		}
	}
	return out, nil
}
