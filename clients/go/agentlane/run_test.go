package agentlane_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentlanejs/process-bridge-native/clients/go/agentlane"
)

// A whole demo conversation: the handler answers the agent's approval
// (allow, then deny), and the tool result and final answer reflect it.
func TestDemoConversationApprovedByTheHandler(t *testing.T) {
	t.Parallel()
	b := start(t, demoOptions())
	ctx := within(t, 60*time.Second)
	if err := b.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := b.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.API != "agentlane.bridge.v1" || !strings.HasPrefix(v.ProtocolVersion, "1.") || !strings.Contains(v.ReadyJSON, `"version":"0.22.0"`) || !v.Has("approvals") {
		t.Fatalf("GetVersion: %+v", v)
	}

	for _, allow := range []bool{true, false} {
		var asked []agentlane.ApprovalRequest
		var mu sync.Mutex
		handler := func(ctx context.Context, request agentlane.ApprovalRequest) agentlane.Decision {
			mu.Lock()
			asked = append(asked, request)
			mu.Unlock()
			if allow {
				return agentlane.Allow()
			}
			return agentlane.Deny("Denied by the Go library.")
		}
		run, err := b.Default().Stream(ctx, "Please save a note: remember milk.", handler)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		var toolResult string
		for run.Next() {
			e := run.Event()
			types = append(types, e.Type)
			var tool struct {
				Event struct {
					Type    string `json:"type"`
					Payload struct {
						Result string `json:"result"`
					} `json:"payload"`
				} `json:"event"`
			}
			if e.Type == "run_event" && e.Decode(&tool) == nil && tool.Event.Type == "tool_end" {
				toolResult = tool.Event.Payload.Result
			}
		}
		if run.Err() != nil {
			t.Fatalf("the stream failed: %v", run.Err())
		}
		if types[0] != "run_start" || run.Terminal() == nil || run.Terminal().Type != "run_complete" || types[len(types)-1] != "run_complete" {
			t.Fatalf("events %v, terminal %+v", types, run.Terminal())
		}
		if len(asked) != 1 || asked[0].ToolName != "save_note" || asked[0].ID == "" || asked[0].Path != "/notes/note.txt" {
			t.Fatalf("the handler was asked %+v", asked)
		}
		approvals := run.Approvals()
		want := map[bool]string{true: "allow", false: "deny"}[allow]
		if len(approvals) != 1 || approvals[0].Err != nil || approvals[0].Outcome != want || approvals[0].Request.ID != asked[0].ID {
			t.Fatalf("approvals %+v", approvals)
		}
		if usage := run.Usage(); v.Has("usage") {
			// Two model turns, each reporting usage.
			if usage == nil || usage.Responses != 2 || usage.TotalTokens == 0 || usage.TotalTokens != usage.PromptTokens+usage.CompletionTokens {
				t.Fatalf("usage %+v", usage)
			}
		} else if usage != nil {
			t.Fatalf("usage %+v from a bridge without the capability", usage)
		}
		var final struct {
			FinalOutput string `json:"final_output"`
		}
		if err := run.Terminal().Decode(&final); err != nil {
			t.Fatal(err)
		}
		wantResult := map[bool]string{true: "Saved note note.txt (34 characters).", false: "Note not saved: Denied by the Go library."}[allow]
		if toolResult != wantResult || final.FinalOutput != "All done. "+wantResult {
			t.Fatalf("tool result %q, final answer %q", toolResult, final.FinalOutput)
		}
	}
}

// Two approvals outstanding at once: each handler waits until the other
// was called too, so handlers answered one after another would never
// finish (the barrier gives up after 20 s and the test fails).
func TestConcurrentApprovals(t *testing.T) {
	t.Parallel()
	b := start(t, scenarioOptions())
	ctx := within(t, 60*time.Second)
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	result, err := b.Default().Run(ctx, "parallel", func(ctx context.Context, request agentlane.ApprovalRequest) agentlane.Decision {
		arrived.Done()
		select {
		case <-both:
		case <-time.After(20 * time.Second):
			return agentlane.Deny("the other approval never came")
		}
		if strings.HasSuffix(request.Path, "b.txt") {
			return agentlane.Deny("not b")
		}
		return agentlane.Allow()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(result.Approvals) != 2 {
		t.Fatalf("approvals %+v", result.Approvals)
	}
	outcomes := map[string]string{}
	for _, a := range result.Approvals {
		if a.Err != nil {
			t.Fatalf("approval %s: %v", a.Request.ID, a.Err)
		}
		outcomes[a.Request.Path[strings.LastIndexByte(a.Request.Path, '/')+1:]] = a.Outcome
	}
	if outcomes["a.txt"] != "allow" || outcomes["b.txt"] != "deny" {
		t.Fatalf("outcomes %v", outcomes)
	}
	text := result.FinalText()
	if !strings.HasPrefix(text, "Results: ") || !strings.Contains(text, "Saved") || !strings.Contains(text, "not b") {
		t.Fatalf("final answer %q", text)
	}
}

// Cancel, Reset, Configure, Subscribe and the refusals, with their codes.
func TestControlCallsAndRefusals(t *testing.T) {
	t.Parallel()
	b := start(t, scenarioOptions())
	conv := b.Default()
	ctx := within(t, 60*time.Second)

	if _, err := conv.Stream(ctx, "   ", nil); err != nil {
		wantCode(t, err, agentlane.CodeInvalidArgument)
	} else {
		t.Fatal("a blank prompt was accepted")
	}

	watch, err := conv.Subscribe(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	run, err := conv.Stream(ctx, "slow 30", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conv.Stream(ctx, "chat", nil); err == nil {
		t.Fatal("a second run was accepted")
	} else {
		wantCode(t, err, agentlane.CodeFailedPrecondition)
	}
	cancelled := make(chan *agentlane.Event, 1)
	for run.Next() {
		if run.Event().Type == "run_event" && strings.Contains(run.Event().JSON, "tick 1") {
			go func() {
				e, err := conv.Cancel(ctx)
				if err != nil {
					t.Error(err)
				}
				cancelled <- e
			}()
		}
	}
	if run.Err() != nil || run.Terminal() == nil || run.Terminal().Type != "run_cancelled" {
		t.Fatalf("the slow run ended with %v, terminal %+v", run.Err(), run.Terminal())
	}
	if e := <-cancelled; e == nil || e.Seq != run.Terminal().Seq {
		t.Fatalf("Cancel answered %+v, the terminal was %+v", e, run.Terminal())
	}
	// The observer saw the same run, in order, up to its terminal event.
	var seen []uint64
	for watch.Next() {
		seen = append(seen, watch.Event().Seq)
		if watch.Event().Seq == run.Terminal().Seq {
			break
		}
	}
	watch.Close()
	for i := 1; i < len(seen); i++ {
		if seen[i] != seen[i-1]+1 {
			t.Fatalf("Subscribe's seqs are not consecutive: %v", seen)
		}
	}
	if len(seen) < 3 || seen[len(seen)-1] != run.Terminal().Seq {
		t.Fatalf("Subscribe saw %v", seen)
	}

	config, err := conv.Configure(ctx, map[string]string{"model": "scripted-2"})
	if err != nil || config == nil || config.Type != "config" || !strings.Contains(config.JSON, `"scripted-2"`) {
		t.Fatalf("Configure: %v %+v", err, config)
	}
	_, err = conv.Configure(ctx, `{"nope": 1}`)
	wantCode(t, err, agentlane.CodeInvalidArgument)
	failure, ok := agentlane.ConfigureFailureOf(err)
	if !ok || failure.Code != "rejected" || failure.Event == nil || failure.Event.Type != "config" || failure.Event.Seq <= config.Seq ||
		!strings.Contains(failure.Event.JSON, `"ok":false`) || !strings.Contains(failure.Event.JSON, `"model":"scripted-2"`) {
		t.Fatalf("a rejected patch's detail: %v %+v", ok, failure)
	}
	_, err = conv.Configure(ctx, "[1]")
	wantCode(t, err, agentlane.CodeInvalidArgument)

	if _, err := conv.Approve(ctx, "tool-approval-999", agentlane.Allow()); err == nil {
		t.Fatal("an unknown approval was accepted")
	} else {
		wantCode(t, err, agentlane.CodeNotFound)
	}

	_, _ = conv.Run(ctx, "count", nil)
	if result, err := conv.Run(ctx, "count", nil); err != nil || !strings.Contains(result.FinalText(), "2 user message") {
		t.Fatalf("before reset: %v %q", err, result.FinalText())
	}
	reset, err := conv.Reset(ctx)
	if err != nil || reset.Type != "reset" {
		t.Fatalf("Reset: %v %+v", err, reset)
	}
	if result, err := conv.Run(ctx, "count", nil); err != nil || !strings.Contains(result.FinalText(), "1 user message") {
		t.Fatalf("after reset: %v %q", err, result.FinalText())
	}
	// No handler anywhere: denied with a reason, never left waiting.
	result, err := conv.Run(ctx, "note x.txt", nil)
	if err != nil || len(result.Approvals) != 1 || result.Approvals[0].Outcome != "deny" || !strings.Contains(result.FinalText(), "No approval handler") {
		t.Fatalf("no handler: %v %+v", err, result)
	}
}
