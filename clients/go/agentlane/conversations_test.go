package agentlane_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentlanejs/process-bridge-native/clients/go/agentlane"
)

// Several conversations at once in one bridge, each with its own approvals
// (its handler sees only its own requests) and its own answers; one closed
// mid-run ends only its own run; the limit refuses one too many; Close
// of the bridge leaves none of the backends. A bridge without the
// capability answers CreateConversation with unimplemented.
func TestConversationsDoNotCross(t *testing.T) {
	t.Parallel()
	const created = 3
	b := start(t, scenarioOptions())
	ctx := within(t, 120*time.Second)
	version, err := b.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !version.Has("conversations") {
		_, err := b.CreateConversation(ctx, agentlane.StartDefault)
		wantCode(t, err, agentlane.CodeUnimplemented)
		t.Log("this bridge has no conversations: only the refusal was checked")
		return
	}

	conversations := []*agentlane.Conversation{b.Default()}
	var mu sync.Mutex
	var creating sync.WaitGroup
	for i := 0; i < created; i++ {
		creating.Add(1)
		go func() {
			defer creating.Done()
			c, err := b.CreateConversation(ctx, agentlane.StartDefault)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			conversations = append(conversations, c)
			mu.Unlock()
		}()
	}
	creating.Wait()
	if t.Failed() {
		return
	}
	listed, err := b.ListConversations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pids := map[int]string{}
	for _, c := range listed {
		pids[c.BackendPID] = c.ID
	}
	if len(listed) != created+1 || len(pids) != created+1 || listed[0].ID != agentlane.DefaultConversationID {
		t.Fatalf("listed %+v", listed)
	}

	// Each conversation saves its own note: even ones allowed, odd ones
	// denied with a reason that names them.
	var runs sync.WaitGroup
	for i, c := range conversations {
		i, c := i, c
		runs.Add(1)
		go func() {
			defer runs.Done()
			file := fmt.Sprintf("conv-%d.txt", i)
			reason := fmt.Sprintf("not for conversation %d", i)
			var asked []agentlane.ApprovalRequest
			result, err := c.Run(ctx, "note "+file, func(_ context.Context, request agentlane.ApprovalRequest) agentlane.Decision {
				asked = append(asked, request)
				if i%2 == 0 {
					return agentlane.Allow()
				}
				return agentlane.Deny(reason)
			})
			if err != nil {
				t.Errorf("conversation %d: %v", i, err)
				return
			}
			if len(asked) != 1 || asked[0].ConversationID != c.ID() || !strings.HasSuffix(asked[0].Path, "/"+file) {
				t.Errorf("conversation %d's handler was asked %+v", i, asked)
			}
			text := result.FinalText()
			want := map[bool]string{true: "Saved", false: reason}[i%2 == 0]
			if !strings.Contains(text, want) || (i%2 == 0 && !strings.Contains(text, file)) {
				t.Errorf("conversation %d answered %q", i, text)
			}
			for j := range conversations {
				if j != i && strings.Contains(text, fmt.Sprintf("conv-%d.txt", j)) || j != i && strings.Contains(text, fmt.Sprintf("conversation %d", j)) {
					t.Errorf("conversation %d's answer names conversation %d: %q", i, j, text)
				}
			}
		}()
	}
	runs.Wait()

	// One conversation closed mid-run: its run ends cancelled, its
	// backend is gone, another conversation's run completes meanwhile.
	victim, other := conversations[1], conversations[2]
	run, err := victim.Stream(ctx, "slow 30", nil)
	if err != nil {
		t.Fatal(err)
	}
	otherDone := make(chan error, 1)
	go func() {
		result, err := other.Run(ctx, "chat still here", nil)
		if err == nil && !strings.Contains(result.FinalText(), "still here") {
			err = fmt.Errorf("the other conversation answered %q", result.FinalText())
		}
		otherDone <- err
	}()
	run.Next()
	if _, err := victim.Close(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for run.Next() {
	}
	// Its `shutdown` cancels the run: run_cancelled, then an end without
	// error (as documented for CloseConversation).
	if run.Err() != nil || run.Terminal() == nil || run.Terminal().Type != "run_cancelled" {
		t.Fatalf("the closed conversation's run ended with %v, terminal %+v", run.Err(), run.Terminal())
	}
	if err := <-otherDone; err != nil {
		t.Fatal(err)
	}
	goneWithin(t, 5*time.Second, victim.Info().BackendPID)
	_, err = victim.Stream(ctx, "chat", nil)
	wantCode(t, err, agentlane.CodeNotFound)

	var backends []int
	for pid := range pids {
		backends = append(backends, pid)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	goneWithin(t, 0, append(backends, b.PID())...)
}

// A bridge without the default conversation, at most one open: the second
// CreateConversation is refused, the first one serves.
func TestConversationLimit(t *testing.T) {
	t.Parallel()
	opts := scenarioOptions()
	opts.Stderr = &strings.Builder{}
	opts.NoDefaultConversation, opts.MaxConversations = true, 1
	ctx := within(t, 60*time.Second)
	b, err := agentlane.Start(ctx, opts)
	if e, ok := err.(*agentlane.Error); ok && strings.Contains(e.Stderr, "unexpected argument '--max-conversations'") {
		t.Log("this bridge has no conversations: --max-conversations was refused at start")
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Info().Backend != nil {
		t.Fatalf("a default backend: %+v", b.Info().Backend)
	}
	_, err = b.Default().Stream(ctx, "chat", nil)
	wantCode(t, err, agentlane.CodeNotFound)
	c, err := b.CreateConversation(ctx, agentlane.StartCold)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.CreateConversation(ctx, agentlane.StartCold)
	wantCode(t, err, agentlane.CodeResourceExhausted)
	if result, err := c.Run(ctx, "chat one", nil); err != nil || !strings.Contains(result.FinalText(), "You said: chat one") {
		t.Fatalf("%v %+v", err, result)
	}
	if _, err := c.Close(ctx, 0); err != nil {
		t.Fatal(err)
	}
	goneWithin(t, 5*time.Second, c.Info().BackendPID)
}
