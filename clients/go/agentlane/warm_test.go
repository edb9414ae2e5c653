package agentlane_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentlanejs/process-bridge-native/clients/go/agentlane"
)

// A warm conversation end to end (a bridge started with Options.Warm, the
// demo backend): created warm, forked from the prefork server rather than
// importing the app itself; a prompt whose approval the handler allows;
// closed, its backend exits cleanly and is gone, and it answers not_found
// from then on.
func TestWarmConversationWithAnApproval(t *testing.T) {
	t.Parallel()
	opts := demoOptions()
	opts.Warm, opts.NoDefaultConversation = true, true
	opts.Stderr = &strings.Builder{}
	b := start(t, opts)
	ctx := within(t, 60*time.Second)
	version, err := b.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !version.Has("warm") || !version.Has("conversations") {
		t.Fatalf("a bridge started with --warm lacks a capability: %v", version.Capabilities)
	}
	c, err := b.CreateConversation(ctx, agentlane.StartWarm)
	if err != nil {
		t.Fatal(err)
	}
	info := c.Info()
	if info.StartMode != agentlane.StartWarm || info.BackendPID == 0 || !strings.Contains(info.ReadyJSON, `"type":"ready"`) {
		t.Fatalf("created %+v", info)
	}
	// A fork's backend: its parent is the fork's supervisor, not the bridge.
	if parent := parentOf(info.BackendPID); parent == b.PID() || parent == 0 {
		t.Fatalf("the warm backend %d has parent %d (the bridge is %d)", info.BackendPID, parent, b.PID())
	}

	var asked []agentlane.ApprovalRequest
	result, err := c.Run(ctx, "Please save a note: warm milk.", func(_ context.Context, request agentlane.ApprovalRequest) agentlane.Decision {
		asked = append(asked, request)
		return agentlane.Allow()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0].ConversationID != c.ID() || asked[0].ToolName != "save_note" || asked[0].Path != "/notes/note.txt" {
		t.Fatalf("the handler was asked %+v", asked)
	}
	if len(result.Approvals) != 1 || result.Approvals[0].Err != nil || result.Approvals[0].Outcome != "allow" {
		t.Fatalf("approvals %+v", result.Approvals)
	}
	if want := "All done. Saved note note.txt (30 characters)."; result.FinalText() != want {
		t.Fatalf("final answer %q, want %q", result.FinalText(), want)
	}

	report, err := c.Close(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if report.ExitCode != 0 || report.Killed {
		t.Fatalf("closed with %+v", report)
	}
	goneWithin(t, 5*time.Second, info.BackendPID)
	_, err = c.Run(ctx, "again", nil)
	wantCode(t, err, agentlane.CodeNotFound)
	if listed, err := b.ListConversations(ctx); err != nil || len(listed) != 0 {
		t.Fatalf("listed %+v after the close (%v)", listed, err)
	}
}

// parentOf is a process's parent pid from /proc (0 when it is gone).
func parentOf(pid int) int {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 2 {
		return 0
	}
	parent, _ := strconv.Atoi(fields[1])
	return parent
}
