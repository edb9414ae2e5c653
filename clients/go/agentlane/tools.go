package agentlane

// The conversation's own tools (capability "host-tools"): the agent calls
// a tool this program defines, the bridge sends the call as an item of the
// run's stream, and the handler's result goes back with AnswerToolCall.

import (
	"context"
	"encoding/json"
	"time"
)

// ToolHandler runs one call of a tool. Each call gets its own goroutine,
// so calls the model makes together run concurrently. ctx ends when the
// call ends without the answer being needed any more: the run's cancel,
// the bridge's deadline for the call, the run's stream let go of. The
// result goes to the model: a string as it is, json.RawMessage exactly,
// anything else as its JSON. An error goes to the model as the tool's
// failure (tool_end ok:false) and the run goes on.
type ToolHandler func(ctx context.Context, call ToolCall) (interface{}, error)

// Tool is one tool the application gives a conversation's agent.
type Tool struct {
	// The name the model calls it by.
	Name        string
	Description string
	// Its input's JSON Schema: a string, json.RawMessage or []byte of a
	// JSON object, or any value json.Marshal makes one of. The bridge
	// checks each call's arguments against it before the handler sees
	// them (the model is told what to correct otherwise).
	InputSchema interface{}
	// The call's deadline; 0: the conversation's (ConversationOptions.ToolTimeout).
	Timeout time.Duration
	Handler ToolHandler
}

// ToolCall is one call of a tool, as the handler gets it.
type ToolCall struct {
	// The call's bridge-wide id, "<conversation id>/tool-call-<n>".
	ID             string
	ConversationID string
	Name           string
	// The arguments exactly as the model gave them (a JSON object that
	// satisfies the tool's schema).
	Arguments json.RawMessage
	// The model's id of the call and the run's id.
	ToolCallID, RunID string
	// How long the bridge waits for the answer (0: no deadline).
	Timeout time.Duration
}

// Decode unmarshals the call's arguments into v.
func (c *ToolCall) Decode(v interface{}) error { return json.Unmarshal(c.Arguments, v) }

// ToolResult is how one tool call went.
type ToolResult struct {
	Call ToolCall
	// What the handler returned (Err is its error).
	Value interface{}
	Err   error
	// Why the call ended without its answer being taken ("cancelled",
	// "timeout", "host-unavailable", "lost"); "" when it was answered.
	Ended string
	// AnswerToolCall's error (not_found: the call had ended first).
	AnswerErr error
}

type wireToolCall struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversationId"`
	Name           string `json:"name"`
	ArgumentsJSON  string `json:"argumentsJson"`
	ToolCallID     string `json:"toolCallId"`
	RunID          string `json:"runId"`
	TimeoutMs      uint32 `json:"timeoutMs"`
}

type wireToolCallEnded struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

type wireTool struct {
	Name            string `json:"name"`
	Description     string `json:"description,omitempty"`
	InputSchemaJSON string `json:"inputSchemaJson"`
	TimeoutMs       uint32 `json:"timeoutMs,omitempty"`
}

func jsonText(op string, v interface{}) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.RawMessage:
		return string(x), nil
	case []byte:
		return string(x), nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return "", &Error{Code: CodeInvalidArgument, Op: op, Message: err.Error(), Cause: err}
	}
	return string(data), nil
}

func wireTools(tools []Tool) ([]wireTool, map[string]Tool, error) {
	out := make([]wireTool, 0, len(tools))
	byName := make(map[string]Tool, len(tools))
	for _, tool := range tools {
		if tool.Handler == nil {
			return nil, nil, &Error{Code: CodeInvalidArgument, Op: "ConversationService/CreateConversation", Message: "tool " + tool.Name + " has no Handler"}
		}
		schema, err := jsonText("ConversationService/CreateConversation", tool.InputSchema)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, wireTool{Name: tool.Name, Description: tool.Description, InputSchemaJSON: schema, TimeoutMs: uint32(tool.Timeout.Milliseconds())})
		byName[tool.Name] = tool
	}
	return out, byName, nil
}

// resultText is the answer's result_json for a handler's value.
func resultText(value interface{}) (string, error) {
	switch x := value.(type) {
	case json.RawMessage:
		if !json.Valid(x) {
			return "", &Error{Code: CodeInvalidArgument, Op: "AgentService/AnswerToolCall", Message: "the handler's json.RawMessage is not JSON"}
		}
		return string(x), nil
	}
	data, err := json.Marshal(value)
	if err != nil {
		return "", err
	}
	return string(data), nil
}

// AnswerToolCall answers a pending tool call yourself (the handlers do it
// for the runs this package reads): id is ToolCall.ID; a nil err sends
// value as the result, a non-nil one its message as the tool's failure.
// not_found when the call is not pending any more.
func (b *Bridge) AnswerToolCall(ctx context.Context, id string, value interface{}, err error) error {
	request := struct {
		ID           string  `json:"id"`
		ResultJSON   *string `json:"resultJson,omitempty"`
		ErrorMessage *string `json:"errorMessage,omitempty"`
	}{ID: id}
	if err != nil {
		message := err.Error()
		request.ErrorMessage = &message
	} else {
		text, jsonErr := resultText(value)
		if jsonErr != nil {
			message := "The tool's result is not JSON: " + jsonErr.Error()
			request.ErrorMessage = &message
		} else {
			request.ResultJSON = &text
		}
	}
	var answer struct{}
	return b.rpc.unary(ctx, "AgentService/AnswerToolCall", request, &answer)
}

// onToolCall runs the call's handler on its own goroutine and answers it.
func (r *RunStream) onToolCall(w *wireToolCall) {
	call := ToolCall{ID: w.ID, ConversationID: w.ConversationID, Name: w.Name, Arguments: json.RawMessage(w.ArgumentsJSON),
		ToolCallID: w.ToolCallID, RunID: w.RunID, Timeout: time.Duration(w.TimeoutMs) * time.Millisecond}
	ctx, cancel := context.WithCancel(r.ctx)
	r.mu.Lock()
	index := len(r.tools)
	r.tools = append(r.tools, ToolResult{Call: call})
	if r.calls == nil {
		r.calls = map[string]callState{}
	}
	r.calls[call.ID] = callState{cancel: cancel, index: index}
	r.mu.Unlock()
	tool, known := r.conv.tool(call.Name)
	r.answering.Add(1)
	go func() {
		defer r.answering.Done()
		defer cancel()
		var value interface{}
		var err error
		if known {
			value, err = runHandler(ctx, tool.Handler, call)
		} else {
			err = &Error{Code: CodeNotFound, Op: "tool", Message: "this Go client has no handler for the tool " + call.Name}
		}
		answerErr := error(nil)
		if ctx.Err() == nil {
			answerErr = r.conv.bridge.AnswerToolCall(r.parent, call.ID, value, err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		result := &r.tools[index]
		result.Value, result.Err, result.AnswerErr = value, err, answerErr
		delete(r.calls, call.ID)
	}()
}

// runHandler calls the handler; a panic is the tool's failure, not this
// program's crash.
func runHandler(ctx context.Context, handler ToolHandler, call ToolCall) (value interface{}, err error) {
	defer func() {
		if p := recover(); p != nil {
			value, err = nil, &Error{Code: CodeInternal, Op: "tool", Message: "the tool's handler panicked"}
		}
	}()
	return handler(ctx, call)
}

// onToolCallEnded stops the handler of a call the bridge ended.
func (r *RunStream) onToolCallEnded(w *wireToolCallEnded) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if state, ok := r.calls[w.ID]; ok {
		r.tools[state.index].Ended = w.Reason
		state.cancel()
	}
}

// endOpenCalls marks the calls still open when the stream ends (their end
// item may not have come first: it travels beside the backend's events):
// a cancelled run cancelled them; otherwise the stream was let go of.
func (r *RunStream) endOpenCalls() {
	reason := "host-unavailable"
	if r.terminal != nil && r.terminal.Type == "run_cancelled" {
		reason = "cancelled"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, state := range r.calls {
		if r.tools[state.index].Ended == "" {
			r.tools[state.index].Ended = reason
		}
	}
}

type callState struct {
	cancel context.CancelFunc
	index  int
}

// ToolCalls is how each tool call of the run went, in the order the calls
// came; complete once Next returned false (or Close returned).
func (r *RunStream) ToolCalls() []ToolResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ToolResult(nil), r.tools...)
}

// WithTools is this conversation with handlers for its tools' calls: for
// the default conversation, whose tools the bridge was given with
// `--tools FILE` (Options.ExtraArgs), or a conversation another client
// created with tools. The handlers serve the runs of the returned value.
func (c *Conversation) WithTools(tools ...Tool) *Conversation {
	byName := make(map[string]Tool, len(tools))
	for _, tool := range tools {
		byName[tool.Name] = tool
	}
	return &Conversation{bridge: c.bridge, id: c.id, info: c.info, tools: byName, store: c.store, storeKey: c.storeKey}
}
