package agentlane_test

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentlanejs/process-bridge-native/clients/go/agentlane"
)

// The adapter keeps the snapshots (a Store of its own); the bridge is
// SIGKILLed after three turns and a new bridge resumes the conversation
// from the adapter's snapshot: the fourth turn sees turns 1–3.
func TestABridgeRestartLosesNoCommittedTurn(t *testing.T) {
	t.Parallel()
	ctx := within(t, 120*time.Second)
	store := &agentlane.MemoryStore{}
	opts := agentlane.ConversationOptions{Store: store, StoreKey: "chat-1"}

	first := start(t, hostToolsOptions("HOST_TOOLS_APP_STORE=1"))
	c := create(t, first, opts)
	var revisions []uint64
	for _, prompt := range []string{"turn one", "turn two", "turn three"} {
		result, err := c.Run(ctx, prompt, nil)
		if err != nil || result.FinalText() != "You said: "+prompt {
			t.Fatalf("%s: %v %+v", prompt, err, result)
		}
		if result.Snapshot == nil {
			t.Fatalf("%s: no snapshot item", prompt)
		}
		revisions = append(revisions, result.Snapshot.Revision)
	}
	if !(revisions[0] < revisions[1] && revisions[1] < revisions[2]) {
		t.Fatalf("revisions %v", revisions)
	}
	held, err := c.Snapshot(ctx)
	if err != nil || held == nil || held.Revision != revisions[2] || string(held.JSON) != string(c.LastSnapshot().JSON) {
		t.Fatalf("GetSnapshot: %v %+v", err, held)
	}
	var document struct {
		SchemaVersion int `json:"schema_version"`
		AgentID       struct {
			Type string `json:"type"`
		} `json:"agent_id"`
	}
	if err := json.Unmarshal(held.JSON, &document); err != nil || document.SchemaVersion != 1 || document.AgentID.Type == "" {
		t.Fatalf("the snapshot is not an AgentSnapshot: %v %s", err, held.JSON)
	}

	if err := syscall.Kill(first.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.Done()

	// The new bridge serves warm: the resume reaches a fork as it does a
	// cold start (the store is read through the fork's host channel).
	warm := hostToolsOptions("HOST_TOOLS_APP_STORE=1")
	warm.Warm, warm.WarmFallback = true, "error"
	second := start(t, warm)
	warmOpts := opts
	warmOpts.StartMode = agentlane.StartWarm
	resumed := create(t, second, warmOpts)
	if resumed.Info().StartMode != agentlane.StartWarm {
		t.Fatalf("started %q", resumed.Info().StartMode)
	}
	result, err := resumed.Run(ctx, "history", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "Seen 4 user messages: turn one | turn two | turn three | history"
	if result.FinalText() != want {
		t.Fatalf("final %q, want %q", result.FinalText(), want)
	}
	if result.Snapshot == nil || result.Snapshot.Revision <= revisions[2] {
		t.Fatalf("the resumed run's snapshot %+v", result.Snapshot)
	}
	saved, _ := store.Load(ctx, "chat-1")
	if saved == nil || saved.Revision != result.Snapshot.Revision {
		t.Fatalf("the Store holds %+v", saved)
	}
	// Reset deletes the conversation's state in the bridge.
	if _, err := resumed.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if after, err := resumed.Snapshot(ctx); err != nil || after != nil {
		t.Fatalf("after Reset: %v %+v", err, after)
	}
}

func TestSnapshotsRefusedAndRequired(t *testing.T) {
	t.Parallel()
	ctx := within(t, 60*time.Second)
	b := start(t, hostToolsOptions())
	for name, doc := range map[string]string{
		"corrupted":       `{"schema_version":1,"agent_id":{"type":"x","key":"y"}}`,
		"unknown version": `{"schema_version":7}`,
		"not JSON":        `{`,
	} {
		_, err := b.CreateConversationWith(ctx, agentlane.ConversationOptions{Resume: &agentlane.Snapshot{JSON: []byte(doc)}})
		e := wantCode(t, err, agentlane.CodeInvalidArgument)
		if !strings.Contains(e.Message, "snapshot") {
			t.Fatalf("%s: %q", name, e.Message)
		}
	}
	// This factory keeps no state in the host: asking for snapshots is
	// refused at ready rather than losing history silently.
	_, err := b.CreateConversationWith(ctx, agentlane.ConversationOptions{KeepSnapshots: true})
	e := wantCode(t, err, agentlane.CodeFailedPrecondition)
	if !strings.Contains(e.Message, "host.state_store()") {
		t.Fatalf("message %q", e.Message)
	}
}

// A cancelled run commits nothing; two conversations resumed from one
// snapshot go their own ways.
func TestSnapshotsThroughCancelAndDivergingResumes(t *testing.T) {
	t.Parallel()
	ctx := within(t, 90*time.Second)
	b := start(t, hostToolsOptions("HOST_TOOLS_APP_STORE=1"))
	started := make(chan struct{}, 1)
	tool := lookupTool(func(ctx context.Context, call agentlane.ToolCall) (interface{}, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	c := create(t, b, agentlane.ConversationOptions{KeepSnapshots: true, Tools: []agentlane.Tool{tool}})
	if _, err := c.Run(ctx, "base", nil); err != nil {
		t.Fatal(err)
	}
	base, err := c.Snapshot(ctx)
	if err != nil || base == nil {
		t.Fatalf("Snapshot: %v %+v", err, base)
	}
	go func() {
		<-started
		_, _ = c.Cancel(ctx)
	}()
	cancelled, err := c.Run(ctx, calls(t, customer("c-1")), nil)
	if err != nil || cancelled.Terminal.Type != "run_cancelled" || cancelled.Snapshot != nil {
		t.Fatalf("the cancelled run: %v %+v", err, cancelled)
	}
	if after, err := c.Snapshot(ctx); err != nil || after == nil || after.Revision != base.Revision {
		t.Fatalf("after the cancelled run: %v %+v (was %d)", err, after, base.Revision)
	}

	var finals []string
	for _, word := range []string{"left", "right"} {
		branch := create(t, b, agentlane.ConversationOptions{Resume: base})
		if _, err := branch.Run(ctx, word, nil); err != nil {
			t.Fatal(err)
		}
		result, err := branch.Run(ctx, "history", nil)
		if err != nil {
			t.Fatal(err)
		}
		finals = append(finals, result.FinalText())
	}
	if finals[0] != "Seen 3 user messages: base | left | history" || finals[1] != "Seen 3 user messages: base | right | history" {
		t.Fatalf("finals %q", finals)
	}
}
