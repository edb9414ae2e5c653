package agentlane

import (
	"context"
	"encoding/json"
	"sync"
)

// Conversation is one conversation of a bridge: one backend, one run at a
// time. Its methods are safe for concurrent use.
type Conversation struct {
	bridge *Bridge
	// "" addresses the default conversation (no conversation_id sent,
	// which every bridge understands).
	id   string
	info ConversationInfo
	// Its tools' handlers by name (CreateConversationWith).
	tools map[string]Tool
	// Where its snapshots go (CreateConversationWith), and the last one.
	store    Store
	storeKey string
	mu       sync.Mutex
	last     *Snapshot
}

func (c *Conversation) tool(name string) (Tool, bool) {
	tool, ok := c.tools[name]
	return tool, ok
}

// ID is the conversation's id ("" for the default conversation).
func (c *Conversation) ID() string { return c.id }

// Bridge is the bridge that hosts the conversation.
func (c *Conversation) Bridge() *Bridge { return c.bridge }

type promptRequest struct {
	Text           string `json:"text"`
	ConversationID string `json:"conversationId,omitempty"`
}

// RunStream is one run as it happens (the bridge's Prompt stream):
// run_start, every run_event and the terminal event (run_complete,
// run_cancelled or a run-scoped error). Its approval requests are answered
// meanwhile by the handler, each on its own goroutine and connection. Read
// it with Next until it returns false, or let go of it with Close: a run
// whose stream is let go of before its terminal event is cancelled by the
// bridge. Conversation.Run reads one to its end for you.
type RunStream struct {
	events
	conv      *Conversation
	handler   ApprovalHandler
	stop      context.CancelFunc // ends the stream and the handlers' ctx
	ctx       context.Context    // the stream's and the handlers'
	parent    context.Context    // the Approve calls' (not ended by the run's end: an answer in flight lands)
	finishing sync.Once
	answering sync.WaitGroup
	mu        sync.Mutex
	results   []ApprovalResult
	tools     []ToolResult
	calls     map[string]callState
	storeErr  error
	snapshot  *Snapshot
	terminal  *Event
	finished  bool
	first     bool
}

// Run is the name RunStream had.
//
// Deprecated: use RunStream (Conversation.Run returns a *Result, the whole
// run; a *RunStream is a run read as it happens).
type Run = RunStream

// Stream starts a run and returns it as it happens, once the bridge
// accepted it (refusals are errors here: invalid_argument for a blank
// prompt, failed_precondition while another run is active, unavailable for
// a backend gone). onApproval answers its approval requests; nil: the
// bridge's Options.OnApproval (or a denial, when neither is set). Run does
// the same and reads the stream to its end.
func (c *Conversation) Stream(ctx context.Context, text string, onApproval ApprovalHandler) (*RunStream, error) {
	if onApproval == nil {
		onApproval = c.bridge.onApproval
	}
	if onApproval == nil {
		onApproval = noHandler
	}
	parent := ctx
	ctx, stop := context.WithCancel(ctx)
	f, err := c.bridge.rpc.stream(ctx, "AgentService/Prompt", promptRequest{Text: text, ConversationID: c.id})
	if err != nil {
		stop()
		return nil, err
	}
	r := &RunStream{events: events{frames: f}, conv: c, handler: onApproval, stop: stop, ctx: ctx, parent: parent}
	r.events.onSide = r.onSide
	// The first item is read here, so that a refusal (sent as the end of
	// an otherwise empty stream) is Stream's error.
	if !r.events.next() {
		r.finish()
		if r.err == nil {
			r.err = &Error{Code: CodeInternal, Op: "AgentService/Prompt", Message: "the stream ended OK without a single event"}
		}
		return nil, r.err
	}
	r.first = true
	r.observe(r.current)
	return r, nil
}

// Prompt is the name Stream had (after the bridge's RPC).
//
// Deprecated: use Stream, or Run for the whole run at once.
func (c *Conversation) Prompt(ctx context.Context, text string, onApproval ApprovalHandler) (*RunStream, error) {
	return c.Stream(ctx, text, onApproval)
}

// Next advances to the next event; false once the stream ended (Err says
// how). The approval handlers' goroutines have finished when it returns
// false.
func (r *RunStream) Next() bool {
	if r.first {
		r.first = false
		return true
	}
	if r.finished {
		return false
	}
	if !r.events.next() {
		r.finish()
		return false
	}
	r.observe(r.current)
	return true
}

// Event is the current event.
func (r *RunStream) Event() *Event { return r.current }

// Err is the stream's failed end: unavailable when the backend died or
// the bridge stopped, resource_exhausted for a reader too far behind. A
// failed run is not an error: see Terminal.
func (r *RunStream) Err() error { return r.err }

// Terminal is the run's terminal event once it came (run_complete,
// run_cancelled or error).
func (r *RunStream) Terminal() *Event { return r.terminal }

// Usage is the run's token usage once the terminal item came, when the
// bridge reports it (capability "usage"); nil otherwise.
func (r *RunStream) Usage() *Usage { return r.usage }

// Approvals is how each approval request went, in the order the requests
// came; complete once Next returned false (or Close returned).
func (r *RunStream) Approvals() []ApprovalResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ApprovalResult(nil), r.results...)
}

// Close lets go of the stream (cancelling the run if it has not ended)
// and waits for the approval handlers. Safe after the end; call it from
// the goroutine that reads the run (to stop a run from elsewhere, cancel
// Stream's ctx or call Conversation.Cancel).
func (r *RunStream) Close() {
	r.ended = true
	r.finish()
}

// finish ends the stream and the handlers' ctx, then waits for the
// handlers (which should return once their ctx ends) and their Approve
// calls (which are not cut short: an answer in flight still lands).
func (r *RunStream) finish() {
	r.finishing.Do(func() {
		r.finished = true
		r.endOpenCalls()
		r.stop()
		r.close()
		r.answering.Wait()
	})
}

// onSide takes the stream's items that are not events.
func (r *RunStream) onSide(item *wireItem) {
	switch {
	case item.ToolCall != nil:
		r.onToolCall(item.ToolCall)
	case item.ToolCallEnded != nil:
		r.onToolCallEnded(item.ToolCallEnded)
	case item.Snapshot != nil:
		r.onSnapshot(item.Snapshot)
	}
}

func (r *RunStream) observe(e *Event) {
	switch e.Type {
	case "run_complete", "run_cancelled", "error":
		r.terminal = e
		return
	}
	request, ok := pendingApproval(e, r.conv.id)
	if !ok {
		return
	}
	r.mu.Lock()
	index := len(r.results)
	r.results = append(r.results, ApprovalResult{Request: request})
	r.mu.Unlock()
	r.answering.Add(1)
	go func() {
		defer r.answering.Done()
		decision := r.handler(r.ctx, request)
		resolved, err := r.conv.Approve(r.parent, request.ID, decision)
		r.mu.Lock()
		defer r.mu.Unlock()
		result := &r.results[index]
		result.Decision, result.Err = decision, err
		if resolved != nil {
			result.Resolved, result.Outcome = resolved, outcomeOf(resolved)
		}
	}()
}

// Result is a whole run, as Conversation.Run collects it.
type Result struct {
	Events    []*Event
	Terminal  *Event
	Approvals []ApprovalResult
	// How each call of the conversation's own tools went.
	ToolCalls []ToolResult
	// The snapshot of the run, when it committed one (capability "snapshots").
	Snapshot *Snapshot
	Usage    *Usage
	// run_complete's final_output, as JSON (null for other terminals).
	FinalOutput json.RawMessage
}

// Run prompts and reads the whole run: Stream, then Next to the end.
func (c *Conversation) Run(ctx context.Context, text string, onApproval ApprovalHandler) (*Result, error) {
	run, err := c.Stream(ctx, text, onApproval)
	if err != nil {
		return nil, err
	}
	defer run.Close()
	result := &Result{}
	for run.Next() {
		result.Events = append(result.Events, run.Event())
	}
	result.Terminal, result.Approvals, result.Usage = run.Terminal(), run.Approvals(), run.Usage()
	result.ToolCalls = run.ToolCalls()
	run.mu.Lock()
	result.Snapshot = run.snapshot
	run.mu.Unlock()
	if err := run.StoreErr(); err != nil {
		return result, &Error{Code: CodeUnavailable, Op: "Store.Save", Message: err.Error(), Cause: err}
	}
	if run.Err() != nil {
		return result, run.Err()
	}
	if result.Terminal != nil && result.Terminal.Type == "run_complete" {
		var complete struct {
			FinalOutput json.RawMessage `json:"final_output"`
		}
		if result.Terminal.Decode(&complete) == nil {
			result.FinalOutput = complete.FinalOutput
		}
	}
	return result, nil
}

// FinalText is run_complete's final_output when it is a string.
func (r *Result) FinalText() string {
	var text string
	_ = json.Unmarshal(r.FinalOutput, &text)
	return text
}

type eventAnswer struct {
	Event *wireEvent `json:"event"`
}

type conversationRequest struct {
	ConversationID string `json:"conversationId,omitempty"`
}

// Cancel cancels the active run and returns once it has ended, with the
// event that settled it (nil when no run was active).
func (c *Conversation) Cancel(ctx context.Context) (*Event, error) {
	var answer eventAnswer
	err := c.bridge.rpc.unary(ctx, "AgentService/Cancel", conversationRequest{c.id}, &answer)
	return answer.Event.event(), err
}

// Reset ends an active run (as cancelled) and clears the conversation;
// returns the backend's `reset` event.
func (c *Conversation) Reset(ctx context.Context) (*Event, error) {
	var answer eventAnswer
	err := c.bridge.rpc.unary(ctx, "AgentService/Reset", conversationRequest{c.id}, &answer)
	return answer.Event.event(), err
}

// Configure applies a runtime-configuration patch: a JSON object given as
// a string, json.RawMessage or []byte (sent exactly), or any value
// json.Marshal makes an object of. Returns the backend's `config` event.
// A patch the backend rejects is invalid_argument (unimplemented for
// `unsupported`, internal for `internal`) with a ConfigureFailure detail.
func (c *Conversation) Configure(ctx context.Context, patch interface{}) (*Event, error) {
	var text string
	switch p := patch.(type) {
	case string:
		text = p
	case json.RawMessage:
		text = string(p)
	case []byte:
		text = string(p)
	default:
		data, err := json.Marshal(patch)
		if err != nil {
			return nil, &Error{Code: CodeInvalidArgument, Op: "AgentService/Configure", Message: err.Error(), Cause: err}
		}
		text = string(data)
	}
	request := struct {
		PatchJSON      string `json:"patchJson"`
		ConversationID string `json:"conversationId,omitempty"`
	}{text, c.id}
	var answer eventAnswer
	err := c.bridge.rpc.unary(ctx, "AgentService/Configure", request, &answer)
	return answer.Event.event(), err
}

// Subscribe streams every backend stdout line from now on, for observers;
// batched asks for the backend's consecutive events together (fewer
// messages; Next still yields one event at a time).
func (c *Conversation) Subscribe(ctx context.Context, batched bool) (*Stream, error) {
	request := struct {
		Batched        bool   `json:"batched,omitempty"`
		ConversationID string `json:"conversationId,omitempty"`
	}{batched, c.id}
	f, err := c.bridge.rpc.stream(ctx, "AgentService/Subscribe", request)
	if err != nil {
		return nil, err
	}
	return &Stream{events{frames: f}}, nil
}
