package agentlane_test

import (
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

	second := start(t, hostToolsOptions("HOST_TOOLS_APP_STORE=1"))
	resumed := create(t, second, opts)
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
