package agentlane_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentlanejs/process-bridge-native/clients/go/agentlane"
)

// The host-tools backend (tests/e2e/backends/host_tools_app.py): a real
// agentlane agent with a scripted model whose factory adds the host's
// tools (`shims=[host.tools()]`); the prompt `calls [...]` makes the model
// call the listed tools at once and answer `Results: r1 | r2 | …`.
func hostToolsOptions(env ...string) agentlane.Options {
	return agentlane.Options{
		App:        "host_tools_app:create_backend",
		ProjectDir: filepath.Join(repoRoot, "tests/e2e/backends"),
		Python:     python,
		Env:        append(os.Environ(), append([]string{"PYTHONPATH=" + filepath.Join(repoRoot, "python/src")}, env...)...),
	}
}

var lookupSchema = `{"type":"object","properties":{"customer_id":{"type":"string"}},"required":["customer_id"]}`

func lookupTool(handler agentlane.ToolHandler) agentlane.Tool {
	return agentlane.Tool{Name: "lookup", Description: "Looks a customer up by id.", InputSchema: lookupSchema, Handler: handler}
}

func calls(t *testing.T, list ...[2]interface{}) string {
	t.Helper()
	var items []map[string]interface{}
	for _, c := range list {
		items = append(items, map[string]interface{}{"name": c[0], "arguments": c[1]})
	}
	data, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	return "calls " + string(data)
}

func customer(id string) [2]interface{} {
	return [2]interface{}{"lookup", map[string]string{"customer_id": id}}
}

func create(t *testing.T, b *agentlane.Bridge, opts agentlane.ConversationOptions) *agentlane.Conversation {
	t.Helper()
	c, err := b.CreateConversationWith(within(t, 60*time.Second), opts)
	if err != nil {
		t.Fatalf("CreateConversationWith: %v", err)
	}
	return c
}

// toolEnds are the run's tool_end payloads, in order.
func toolEnds(events []*agentlane.Event) []map[string]interface{} {
	var ends []map[string]interface{}
	for _, e := range events {
		var r struct {
			Event struct {
				Type    string                 `json:"type"`
				Payload map[string]interface{} `json:"payload"`
			} `json:"event"`
		}
		if e.Type == "run_event" && e.Decode(&r) == nil && r.Event.Type == "tool_end" {
			ends = append(ends, r.Event.Payload)
		}
	}
	return ends
}

func TestHostToolsThroughTheBridge(t *testing.T) {
	b := start(t, hostToolsOptions())
	ctx := within(t, 120*time.Second)

	t.Run("one tool: its result reaches the final answer", func(t *testing.T) {
		var got agentlane.ToolCall
		c := create(t, b, agentlane.ConversationOptions{Tools: []agentlane.Tool{lookupTool(func(ctx context.Context, call agentlane.ToolCall) (interface{}, error) {
			got = call
			var args struct {
				CustomerID string `json:"customer_id"`
			}
			if err := call.Decode(&args); err != nil {
				return nil, err
			}
			return "Ada Lovelace (" + args.CustomerID + ")", nil
		})}})
		result, err := c.Run(ctx, calls(t, customer("c-42")), nil)
		if err != nil {
			t.Fatal(err)
		}
		if result.FinalText() != "Results: Ada Lovelace (c-42)" {
			t.Fatalf("final %q", result.FinalText())
		}
		if !strings.HasPrefix(got.ID, c.ID()+"/tool-call-") || got.ConversationID != c.ID() || got.Name != "lookup" || got.ToolCallID == "" || got.Timeout != 60*time.Second {
			t.Fatalf("the handler got %+v", got)
		}
		if len(result.ToolCalls) != 1 || result.ToolCalls[0].AnswerErr != nil || result.ToolCalls[0].Ended != "" {
			t.Fatalf("tool calls %+v", result.ToolCalls)
		}
		// Answered once: a second answer is refused.
		err = b.AnswerToolCall(ctx, got.ID, "again", nil)
		wantCode(t, err, agentlane.CodeNotFound)
	})

	t.Run("two calls at once, answered out of order", func(t *testing.T) {
		secondDone := make(chan struct{})
		c := create(t, b, agentlane.ConversationOptions{Tools: []agentlane.Tool{lookupTool(func(ctx context.Context, call agentlane.ToolCall) (interface{}, error) {
			var args struct {
				CustomerID string `json:"customer_id"`
			}
			_ = call.Decode(&args)
			if args.CustomerID == "first" {
				// Answered only once the second call was answered.
				select {
				case <-secondDone:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				time.Sleep(100 * time.Millisecond)
				return "one", nil
			}
			defer close(secondDone)
			return "two", nil
		})}})
		result, err := c.Run(ctx, calls(t, customer("first"), customer("second")), nil)
		if err != nil {
			t.Fatal(err)
		}
		if result.FinalText() != "Results: one | two" {
			t.Fatalf("final %q", result.FinalText())
		}
	})

	t.Run("a handler's error reaches the model and the run goes on", func(t *testing.T) {
		c := create(t, b, agentlane.ConversationOptions{Tools: []agentlane.Tool{lookupTool(func(context.Context, agentlane.ToolCall) (interface{}, error) {
			return nil, errors.New("customer database is down")
		})}})
		result, err := c.Run(ctx, calls(t, customer("c-1")), nil)
		if err != nil {
			t.Fatal(err)
		}
		if result.Terminal.Type != "run_complete" || !strings.Contains(result.FinalText(), "customer database is down") {
			t.Fatalf("terminal %s, final %q", result.Terminal.Type, result.FinalText())
		}
		ends := toolEnds(result.Events)
		if len(ends) != 1 || ends[0]["ok"] != false {
			t.Fatalf("tool_end %v", ends)
		}
	})

	t.Run("a call past its deadline: the handler's ctx ends, the run goes on", func(t *testing.T) {
		stopped := make(chan error, 1)
		tool := lookupTool(func(ctx context.Context, call agentlane.ToolCall) (interface{}, error) {
			<-ctx.Done()
			stopped <- ctx.Err()
			return nil, ctx.Err()
		})
		tool.Timeout = 300 * time.Millisecond
		c := create(t, b, agentlane.ConversationOptions{Tools: []agentlane.Tool{tool}})
		result, err := c.Run(ctx, calls(t, customer("slow")), nil)
		if err != nil {
			t.Fatal(err)
		}
		if result.Terminal.Type != "run_complete" || !strings.Contains(result.FinalText(), "did not answer in time") {
			t.Fatalf("terminal %s, final %q", result.Terminal.Type, result.FinalText())
		}
		if len(result.ToolCalls) != 1 || result.ToolCalls[0].Ended != "timeout" || result.ToolCalls[0].Call.Timeout != 300*time.Millisecond {
			t.Fatalf("tool calls %+v", result.ToolCalls)
		}
		if <-stopped == nil {
			t.Fatal("the handler's ctx did not end")
		}
	})

	t.Run("a cancel while a call is pending ends the run and the handler", func(t *testing.T) {
		started := make(chan struct{})
		c := create(t, b, agentlane.ConversationOptions{Tools: []agentlane.Tool{lookupTool(func(ctx context.Context, call agentlane.ToolCall) (interface{}, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		})}})
		go func() {
			<-started
			_, _ = c.Cancel(ctx)
		}()
		result, err := c.Run(ctx, calls(t, customer("c-9")), nil)
		if err != nil {
			t.Fatal(err)
		}
		if result.Terminal.Type != "run_cancelled" {
			t.Fatalf("terminal %s", result.Terminal.Type)
		}
		if len(result.ToolCalls) != 1 || result.ToolCalls[0].Ended != "cancelled" {
			t.Fatalf("tool calls %+v", result.ToolCalls)
		}
		// Nothing is left waiting: the next run works.
		next, err := c.Run(ctx, "hello", nil)
		if err != nil || next.FinalText() != "You said: hello" {
			t.Fatalf("next run: %v %+v", err, next)
		}
	})

	t.Run("an owner that drops its stream: its call ends host-unavailable", func(t *testing.T) {
		started := make(chan agentlane.ToolCall, 1)
		c := create(t, b, agentlane.ConversationOptions{Tools: []agentlane.Tool{lookupTool(func(ctx context.Context, call agentlane.ToolCall) (interface{}, error) {
			started <- call
			<-ctx.Done()
			return nil, ctx.Err()
		})}})
		watch, err := c.Subscribe(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		defer watch.Close()
		run, err := c.Stream(ctx, calls(t, customer("c-5")), nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for run.Next() {
			}
		}()
		call := <-started
		run.Close()
		var types []string
		for watch.Next() {
			types = append(types, watch.Event().Type)
			if watch.Event().Type == "run_cancelled" || watch.Event().Type == "run_complete" {
				break
			}
		}
		if types[len(types)-1] != "run_cancelled" {
			t.Fatalf("the run ended %v", types)
		}
		wantCode(t, b.AnswerToolCall(ctx, call.ID, "late", nil), agentlane.CodeNotFound)
		next, err := c.Run(ctx, "hello", nil)
		if err != nil || next.FinalText() != "You said: hello" {
			t.Fatalf("next run: %v %+v", err, next)
		}
	})

	t.Run("two conversations, one tool name, each its own handler", func(t *testing.T) {
		var wg sync.WaitGroup
		finals := make([]string, 2)
		for i, who := range []string{"Ada", "Grace"} {
			who := who
			c := create(t, b, agentlane.ConversationOptions{Tools: []agentlane.Tool{lookupTool(func(context.Context, agentlane.ToolCall) (interface{}, error) {
				return who, nil
			})}})
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				result, err := c.Run(ctx, calls(t, customer("x"), customer("y")), nil)
				if err == nil {
					finals[i] = result.FinalText()
				}
			}(i)
		}
		wg.Wait()
		if finals[0] != "Results: Ada | Ada" || finals[1] != "Results: Grace | Grace" {
			t.Fatalf("finals %q", finals)
		}
	})

	t.Run("a 20 MB result reaches the backend", func(t *testing.T) {
		big := strings.Repeat("0123456789abcdef", 20_000_000/16)
		c := create(t, b, agentlane.ConversationOptions{ToolTimeout: 10 * time.Second, Tools: []agentlane.Tool{lookupTool(func(context.Context, agentlane.ToolCall) (interface{}, error) {
			return big, nil
		})}})
		result, err := c.Run(ctx, calls(t, customer("c-2")), nil)
		if err != nil {
			t.Fatal(err)
		}
		// The scripted model summarises a long result: its length and hash.
		if !strings.HasPrefix(result.FinalText(), "Results: 20000000 chars sha256:") {
			t.Fatalf("final %q, calls %+v", result.FinalText(), result.ToolCalls[0].AnswerErr)
		}
		if len(result.ToolCalls) != 1 || result.ToolCalls[0].AnswerErr != nil {
			t.Fatalf("tool calls %+v", result.ToolCalls)
		}
	})

	t.Run("arguments that fail the schema never reach the handler", func(t *testing.T) {
		called := false
		c := create(t, b, agentlane.ConversationOptions{Tools: []agentlane.Tool{lookupTool(func(context.Context, agentlane.ToolCall) (interface{}, error) {
			called = true
			return "x", nil
		})}})
		result, err := c.Run(ctx, calls(t, [2]interface{}{"lookup", map[string]int{"customer_id": 42}}), nil)
		if err != nil {
			t.Fatal(err)
		}
		if called || !strings.Contains(result.FinalText(), "/customer_id") {
			t.Fatalf("called %v, final %q", called, result.FinalText())
		}
	})

	t.Run("a tool the bridge cannot serve is refused before anything starts", func(t *testing.T) {
		bad := lookupTool(func(context.Context, agentlane.ToolCall) (interface{}, error) { return nil, nil })
		bad.InputSchema = `{"type": 12}`
		_, err := b.CreateConversationWith(ctx, agentlane.ConversationOptions{Tools: []agentlane.Tool{bad}})
		wantCode(t, err, agentlane.CodeInvalidArgument)
	})
}

func TestHostToolBesideAnApproval(t *testing.T) {
	t.Parallel()
	b := start(t, hostToolsOptions("HOST_TOOLS_APP_APPROVALS=1"))
	ctx := within(t, 60*time.Second)
	c := create(t, b, agentlane.ConversationOptions{Tools: []agentlane.Tool{lookupTool(func(context.Context, agentlane.ToolCall) (interface{}, error) {
		return "Ada", nil
	})}})
	result, err := c.Run(ctx, calls(t, customer("c-7"), [2]interface{}{"write_note", map[string]string{"path": "a.txt", "content": "hi"}}),
		func(context.Context, agentlane.ApprovalRequest) agentlane.Decision { return agentlane.Allow() })
	if err != nil {
		t.Fatal(err)
	}
	if len(result.Approvals) != 1 || result.Approvals[0].Outcome != "allow" || len(result.ToolCalls) != 1 {
		t.Fatalf("approvals %+v, tool calls %+v", result.Approvals, result.ToolCalls)
	}
	if !strings.HasPrefix(result.FinalText(), "Results: Ada | Saved 2 characters") {
		t.Fatalf("final %q", result.FinalText())
	}
}

func TestAFactoryWithoutTheModuleIsRefused(t *testing.T) {
	t.Parallel()
	b := start(t, hostToolsOptions("HOST_TOOLS_APP_WITHOUT_MODULE=1"))
	_, err := b.CreateConversationWith(within(t, 60*time.Second), agentlane.ConversationOptions{Tools: []agentlane.Tool{lookupTool(func(context.Context, agentlane.ToolCall) (interface{}, error) {
		return nil, nil
	})}})
	e := wantCode(t, err, agentlane.CodeFailedPrecondition)
	if !strings.Contains(e.Message, "host.tools()") {
		t.Fatalf("message %q", e.Message)
	}
}

// The default conversation's tools, from `--tools FILE`.
func TestDefaultConversationToolsFromAFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tools.json")
	declared := `[{"name":"lookup","description":"Looks a customer up by id.","input_schema":` + lookupSchema + `,"timeout_ms":5000}]`
	if err := os.WriteFile(file, []byte(declared), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := hostToolsOptions()
	opts.ExtraArgs = []string{"--tools", file}
	b := start(t, opts)
	ctx := within(t, 60*time.Second)
	conv := b.Default().WithTools(lookupTool(func(_ context.Context, call agentlane.ToolCall) (interface{}, error) {
		return "from the file's tool (" + call.Timeout.String() + ")", nil
	}))
	result, err := conv.Run(ctx, calls(t, customer("c-1")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if result.FinalText() != "Results: from the file's tool (5s)" {
		t.Fatalf("final %q", result.FinalText())
	}
}
