package agentlane

// A misbehaving server (hostile or broken bytes on the wire) gives typed
// errors, never a panic or a huge allocation. The real bridge is tested in
// the other files; these answers are ones it never gives.

import (
	"context"
	"encoding/base64"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func serve(t *testing.T, answer func(w http.ResponseWriter)) *Conversation {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { answer(w) }))
	t.Cleanup(server.Close)
	b := &Bridge{rpc: newTransport(server.URL, "token", 1024)}
	b.def = &Conversation{bridge: b}
	return b.def
}

func codeOf(t *testing.T, err error) Code {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	return CodeOf(err)
}

func TestHostileWire(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cases := []struct {
		name   string
		answer func(w http.ResponseWriter)
		want   Code
	}{
		{"a frame longer than the limit", func(w http.ResponseWriter) { w.Write([]byte{0, 0x7f, 0xff, 0xff, 0xff}) }, CodeResourceExhausted},
		{"a stream cut before its end", func(w http.ResponseWriter) { w.Write([]byte{0, 0, 0, 0, 9, '{'}) }, CodeUnavailable},
		{"a compressed frame", func(w http.ResponseWriter) { w.Write([]byte{1, 0, 0, 0, 2, '{', '}'}) }, CodeInternal},
		{"an end that is not JSON", func(w http.ResponseWriter) { w.Write([]byte{2, 0, 0, 0, 1, '['}) }, CodeInternal},
		{"an item that is not JSON", func(w http.ResponseWriter) { w.Write([]byte{0, 0, 0, 0, 1, '['}) }, CodeInternal},
		{"an error end with an invented code", func(w http.ResponseWriter) {
			body := `{"error":{"code":"made_up","message":"x"}}`
			w.Write(append([]byte{2, 0, 0, 0, byte(len(body))}, body...))
		}, CodeUnknown},
		{"503 without a body", func(w http.ResponseWriter) { w.WriteHeader(503) }, CodeUnavailable},
		{"an OK end with no event", func(w http.ResponseWriter) { w.Write([]byte{2, 0, 0, 0, 2, '{', '}'}) }, CodeInternal},
	}
	for _, c := range cases {
		_, err := serve(t, c.answer).Prompt(ctx, "x", nil)
		if got := codeOf(t, err); got != c.want {
			t.Errorf("%s: %s (%v), want %s", c.name, got, err, c.want)
		}
	}
	_, err := serve(t, func(w http.ResponseWriter) { w.Write([]byte("not json")) }).Reset(ctx)
	if got := codeOf(t, err); got != CodeInternal {
		t.Errorf("a unary answer that is not JSON: %s", got)
	}
}

func TestConfigureFailureOfGarbage(t *testing.T) {
	valid := []byte{0x0a, 0x02, 'h', 'i', 0x12, 0x05, 0x08, 0x07, 0x12, 0x01, 'c'}
	decoded, ok := ConfigureFailureOf(&Error{Details: []ErrorDetail{{Type: "agentlane.bridge.v1.ConfigureFailure", Value: base64.RawStdEncoding.EncodeToString(valid)}}})
	if !ok || decoded.Code != "hi" || decoded.Event.Seq != 7 || decoded.Event.Type != "c" {
		t.Fatalf("%v %+v", ok, decoded)
	}
	random := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		data := append([]byte(nil), valid[:random.Intn(len(valid)+1)]...)
		for j := random.Intn(8); j > 0; j-- {
			data = append(data, byte(random.Intn(256)))
		}
		// Must not panic; the answer may be anything.
		ConfigureFailureOf(&Error{Details: []ErrorDetail{{Type: "agentlane.bridge.v1.ConfigureFailure", Value: base64.RawStdEncoding.EncodeToString(data)}}})
	}
}
