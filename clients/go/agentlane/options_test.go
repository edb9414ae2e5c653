package agentlane_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentlanejs/process-bridge-native/clients/go/agentlane"
)

// Options.ReadyTimeout is the bridge's --ready-timeout-ms: a backend that
// never gets ready fails the start with stage "timeout" naming it, long
// before the bridge's 30 s default.
func TestReadyTimeoutOption(t *testing.T) {
	t.Parallel()
	ctx := within(t, 20*time.Second)
	opts := agentlane.Options{
		App:          "never:ready",
		Launcher:     []string{"python3", "-c", "import time; time.sleep(60)", "--"},
		ReadyTimeout: 700 * time.Millisecond,
		Stderr:       &strings.Builder{},
	}
	_, err := agentlane.Start(ctx, opts)
	e := wantCode(t, err, agentlane.CodeStartFailed)
	if e.Stage != "timeout" || !strings.Contains(e.Message, "within 700 ms") {
		t.Fatalf("the bridge's failed line: %#v", e)
	}
}

// One handler for every conversation (Options.OnApproval): two
// conversations whose backends both ask "tool-approval-1" at once are told
// apart by ConversationID and ApprovalID; an ApprovalID answered through
// the other conversation is refused; Bridge.Approve answers by ApprovalID
// alone (and the first answer wins).
func TestSharedHandlerTellsConversationsApart(t *testing.T) {
	t.Parallel()
	ctx := within(t, 120*time.Second)
	opts := scenarioOptions()
	opts.NoDefaultConversation = true
	var b *agentlane.Bridge
	var a, c *agentlane.Conversation
	var mu sync.Mutex
	asked := map[string]agentlane.ApprovalRequest{}
	both := make(chan struct{})
	crossed := make(chan error, 1)
	opts.OnApproval = func(ctx context.Context, request agentlane.ApprovalRequest) agentlane.Decision {
		mu.Lock()
		asked[request.ConversationID] = request
		if len(asked) == 2 {
			close(both)
		}
		mu.Unlock()
		<-both // both pending at once
		if request.ConversationID == a.ID() {
			// Answered by its bridge-wide id alone; the library's own answer comes second.
			if _, err := b.Approve(ctx, request.ApprovalID, agentlane.Deny("by Bridge.Approve")); err != nil {
				t.Errorf("Bridge.Approve: %v", err)
			}
			return agentlane.Deny("too late")
		}
		_, err := a.Approve(ctx, request.ApprovalID, agentlane.Allow())
		crossed <- err
		return agentlane.Deny("no, " + request.ConversationID)
	}
	b = start(t, opts)
	var err error
	if a, err = b.CreateConversation(ctx, agentlane.StartDefault); err != nil {
		t.Fatal(err)
	}
	if c, err = b.CreateConversation(ctx, agentlane.StartDefault); err != nil {
		t.Fatal(err)
	}
	results := make([]*agentlane.Result, 2)
	var runs sync.WaitGroup
	for i, conv := range []*agentlane.Conversation{a, c} {
		i, conv := i, conv
		runs.Add(1)
		go func() {
			defer runs.Done()
			result, err := conv.Run(ctx, "note shared.txt", nil)
			if err != nil {
				t.Error(err)
			}
			results[i] = result
		}()
	}
	runs.Wait()
	if t.Failed() {
		return
	}
	wantCode(t, <-crossed, agentlane.CodeInvalidArgument)
	ra, rc := asked[a.ID()], asked[c.ID()]
	if ra.ID != rc.ID || ra.ApprovalID != a.ID()+"/"+ra.ID || rc.ApprovalID != c.ID()+"/"+rc.ID {
		t.Fatalf("the two requests: %+v and %+v", ra, rc)
	}
	toolResult := func(r *agentlane.Result) string {
		for _, e := range r.Events {
			var record struct {
				Event struct {
					Type    string `json:"type"`
					Payload struct {
						Result string `json:"result"`
					} `json:"payload"`
				} `json:"event"`
			}
			if e.Decode(&record) == nil && record.Event.Type == "tool_end" {
				return record.Event.Payload.Result
			}
		}
		return ""
	}
	if got := toolResult(results[0]); got != "by Bridge.Approve" {
		t.Fatalf("conversation a's tool result %q", got)
	}
	if got := toolResult(results[1]); got != "no, "+c.ID() {
		t.Fatalf("conversation c's tool result %q", got)
	}
	// The library's own answer to a's request came second and was refused.
	if code := agentlane.CodeOf(results[0].Approvals[0].Err); code != agentlane.CodeAlreadyExists && code != agentlane.CodeNotFound {
		t.Fatalf("the second answer: %v", results[0].Approvals[0].Err)
	}
}
