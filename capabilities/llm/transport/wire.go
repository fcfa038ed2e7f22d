// Package transport is the client side of the `default` intelligence
// backend (docs/intelligence.md): JSON-RPC 2.0 `complete` over a Unix socket
// (one connection per call, frames of a 4-byte little-endian length then
// UTF-8 JSON, at most 16 MiB) or over HTTP (the same envelope POSTed,
// unframed, optional bearer token). The framing and envelope types are
// exported for the scripted server in package mock.
package transport

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/runtime"
)

// MaxFrame is the largest frame (and HTTP body) either side may send.
const MaxFrame = 16 << 20

// Method is the only JSON-RPC method of the wire.
const Method = "complete"

// DefaultMaxTokens is sent when neither the node nor the backend sets one.
const DefaultMaxTokens = 1024

// Request is the JSON-RPC request envelope. ID is raw so a server can echo
// whatever the client sent.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  *intel.Request  `json:"params"`
}

// Response is the JSON-RPC response envelope: exactly one of Result and
// Error is set.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  *intel.Response `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// RPCError is a JSON-RPC error object. As an error it is the server's
// answer, not a transport fault.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("intelligence server error %d: %s", e.Code, e.Message)
}

// WriteFrame writes one length-prefixed frame.
func WriteFrame(w io.Writer, payload []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("frame of %d bytes exceeds the %d-byte cap", len(payload), MaxFrame)
	}
	buf := make([]byte, 4+len(payload))
	binary.LittleEndian.PutUint32(buf, uint32(len(payload)))
	copy(buf[4:], payload)
	_, err := w.Write(buf)
	return err
}

// ErrNoFrame is returned by ReadFrame when the peer closed the connection
// before sending any byte of a frame.
var ErrNoFrame = errors.New("connection closed before a frame")

// ReadFrame reads one length-prefixed frame, refusing frames over MaxFrame
// before reading their body.
func ReadFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if n, err := io.ReadFull(r, hdr[:]); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return nil, ErrNoFrame
		}
		return nil, fmt.Errorf("truncated frame header (%d of 4 bytes): %w", n, err)
	}
	size := binary.LittleEndian.Uint32(hdr[:])
	if size > MaxFrame {
		return nil, fmt.Errorf("frame of %d bytes exceeds the %d-byte cap", size, MaxFrame)
	}
	payload := make([]byte, size)
	if n, err := io.ReadFull(r, payload); err != nil {
		return nil, fmt.Errorf("truncated frame (%d of %d bytes): %w", n, size, err)
	}
	return payload, nil
}

var lastID atomic.Int64

// encode builds the request envelope with a fresh id and fills defaults.
func encode(req *intel.Request) (id string, body []byte, err error) {
	params := *req
	if params.Model == "" {
		params.Model = "default"
	}
	if params.MaxTokens <= 0 {
		params.MaxTokens = DefaultMaxTokens
	}
	if params.Messages == nil {
		params.Messages = []intel.Message{}
	}
	id = strconv.FormatInt(lastID.Add(1), 10)
	body, err = runtime.EncodeJSON(&Request{JSONRPC: "2.0", ID: json.RawMessage(id), Method: Method, Params: &params})
	return id, body, err
}

// decode checks a response envelope against the request id. Anything
// malformed is a transport fault; a JSON-RPC error object is an *RPCError.
func decode(id string, body []byte) (*intel.Response, error) {
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("transport fault: response is not a JSON-RPC object: %v", err)
	}
	if env.JSONRPC != "2.0" {
		return nil, fmt.Errorf("transport fault: response jsonrpc is %q, want \"2.0\"", env.JSONRPC)
	}
	if !bytes.Equal(bytes.TrimSpace(env.ID), []byte(id)) {
		return nil, fmt.Errorf("transport fault: response id %s does not match request id %s", env.ID, id)
	}
	hasResult := len(env.Result) > 0 && !bytes.Equal(env.Result, []byte("null"))
	switch {
	case env.Error != nil && hasResult:
		return nil, errors.New("transport fault: response has both result and error")
	case env.Error != nil:
		return nil, env.Error
	case !hasResult:
		return nil, errors.New("transport fault: response has neither result nor error")
	}
	var res struct {
		Content *string     `json:"content"`
		Usage   intel.Usage `json:"usage"`
	}
	if err := json.Unmarshal(env.Result, &res); err != nil {
		return nil, fmt.Errorf("transport fault: malformed result: %v", err)
	}
	if res.Content == nil {
		return nil, errors.New("transport fault: result has no content string")
	}
	if res.Usage.PromptTokens < 0 || res.Usage.CompletionTokens < 0 {
		return nil, errors.New("transport fault: result has negative token usage")
	}
	return &intel.Response{Content: *res.Content, Usage: res.Usage}, nil
}
