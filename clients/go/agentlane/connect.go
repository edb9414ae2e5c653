package agentlane

// The Connect protocol's JSON form over net/http (HTTP/1.1 on loopback):
// unary calls are a bare JSON body each way; a server stream is one
// enveloped request message and enveloped answers ending with an
// EndStreamResponse. https://connectrpc.com/docs/protocol

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

const servicePrefix = "/agentlane.bridge.v1."

// Envelope flags.
const (
	flagCompressed = 0x01
	flagEndStream  = 0x02
)

type transport struct {
	base, token string
	http        *http.Client
	// The largest answer message read (a bogus length must not allocate
	// gigabytes; a real 20 MB event passes).
	maxMessage int
}

func newTransport(base, token string, maxMessage int) *transport {
	return &transport{
		base:  base,
		token: token,
		http: &http.Client{Transport: &http.Transport{
			// Loopback only: never a proxy, never compression (the
			// bridge sends none either), and enough idle connections
			// for a stream per conversation plus their Approve calls.
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			DisableCompression:  true,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
		}},
		maxMessage: maxMessage,
	}
}

func (t *transport) post(ctx context.Context, method string, body []byte, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+servicePrefix+method, bytes.NewReader(body))
	if err != nil {
		return nil, &Error{Code: CodeInternal, Op: method, Message: err.Error(), Cause: err}
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Authorization", "Bearer "+t.token)
	if deadline, ok := ctx.Deadline(); ok {
		ms := time.Until(deadline).Milliseconds()
		if ms < 1 {
			ms = 1
		}
		req.Header.Set("Connect-Timeout-Ms", strconv.FormatInt(ms, 10))
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, method, err)
	}
	return resp, nil
}

// transportError keeps a context's end as canceled/deadline_exceeded; any
// other failure to reach the bridge is `unavailable`.
func transportError(ctx context.Context, method string, err error) error {
	code := CodeUnavailable
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		code = CodeDeadlineExceeded
	case ctx.Err() != nil:
		code = CodeCanceled
	}
	return &Error{Code: code, Op: method, Message: err.Error(), Cause: err}
}

// wireError is a Connect error body (unary answers and EndStreamResponse).
type wireError struct {
	Code    string        `json:"code"`
	Message string        `json:"message"`
	Details []ErrorDetail `json:"details"`
}

func (w *wireError) toError(method string) *Error {
	return &Error{Code: knownCode(w.Code), Op: method, Message: w.Message, Details: w.Details}
}

// unary calls a unary method and decodes its answer into out.
func (t *transport) unary(ctx context.Context, method string, in, out interface{}) error {
	body, err := json.Marshal(in)
	if err != nil {
		return &Error{Code: CodeInvalidArgument, Op: method, Message: err.Error(), Cause: err}
	}
	resp, err := t.post(ctx, method, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(t.maxMessage)+1))
	if err != nil {
		return transportError(ctx, method, err)
	}
	if resp.StatusCode != http.StatusOK {
		var w wireError
		if json.Unmarshal(data, &w) != nil || w.Code == "" {
			return &Error{Code: codeFromHTTP(resp.StatusCode), Op: method,
				Message: fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, data)}
		}
		return w.toError(method)
	}
	if len(data) > t.maxMessage {
		return &Error{Code: CodeResourceExhausted, Op: method, Message: fmt.Sprintf("answer over %d bytes", t.maxMessage)}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &Error{Code: CodeInternal, Op: method, Message: "undecodable answer: " + err.Error(), Cause: err}
	}
	return nil
}

// frames reads a server stream's enveloped messages.
type frames struct {
	method string
	ctx    context.Context
	body   io.ReadCloser
	reader *bufio.Reader
	max    int
}

// stream starts a server-streaming call.
func (t *transport) stream(ctx context.Context, method string, in interface{}) (*frames, error) {
	message, err := json.Marshal(in)
	if err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Op: method, Message: err.Error(), Cause: err}
	}
	envelope := make([]byte, 5, 5+len(message))
	binary.BigEndian.PutUint32(envelope[1:], uint32(len(message)))
	resp, err := t.post(ctx, method, append(envelope, message...), "application/connect+json")
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
		var w wireError
		if json.Unmarshal(data, &w) != nil || w.Code == "" {
			return nil, &Error{Code: codeFromHTTP(resp.StatusCode), Op: method,
				Message: fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, data)}
		}
		return nil, w.toError(method)
	}
	return &frames{method: method, ctx: ctx, body: resp.Body, reader: bufio.NewReaderSize(resp.Body, 64*1024), max: t.maxMessage}, nil
}

// next returns the next message; io.EOF after an OK end, the end's error
// otherwise (a stream cut before its end message is `unavailable`).
func (f *frames) next() ([]byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(f.reader, head[:]); err != nil {
		return nil, f.cut(err)
	}
	size := binary.BigEndian.Uint32(head[1:])
	if uint64(size) > uint64(f.max) {
		return nil, &Error{Code: CodeResourceExhausted, Op: f.method, Message: fmt.Sprintf("a stream message of %d bytes (limit %d)", size, f.max)}
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(f.reader, data); err != nil {
		return nil, f.cut(err)
	}
	if head[0]&flagCompressed != 0 {
		return nil, &Error{Code: CodeInternal, Op: f.method, Message: "a compressed stream message, though none was negotiated"}
	}
	if head[0]&flagEndStream == 0 {
		return data, nil
	}
	var end struct {
		Error *wireError `json:"error"`
	}
	if err := json.Unmarshal(data, &end); err != nil {
		return nil, &Error{Code: CodeInternal, Op: f.method, Message: "undecodable end of stream: " + err.Error(), Cause: err}
	}
	if end.Error != nil {
		return nil, end.Error.toError(f.method)
	}
	return nil, io.EOF
}

func (f *frames) cut(err error) error {
	if f.ctx.Err() != nil {
		return transportError(f.ctx, f.method, err)
	}
	return &Error{Code: CodeUnavailable, Op: f.method, Message: "the stream ended without its end message: " + err.Error(), Cause: err}
}

func (f *frames) close() { f.body.Close() }
