package agentlane

import (
	"context"
	"strings"
)

// ApprovalRequest is a pending `tool_approval` record of a run: the agent
// waits for the answer.
type ApprovalRequest struct {
	// The record's request_id, what Conversation.Approve answers. Each
	// backend numbers its own (tool-approval-1, 2, …), so two
	// conversations' requests may have the same ID: with one handler for
	// several conversations (Options.OnApproval), tell them apart by
	// ConversationID, or use ApprovalID.
	ID string
	// The conversation whose run asks: its ID ("" for the default
	// conversation, which Bridge.Default addresses).
	ConversationID string
	// The request's bridge-wide id, "<conversation id>/<request_id>": it
	// names this one request in the whole bridge, and Bridge.Approve
	// answers it without the conversation ("" from a bridge without the
	// capability "approval-ids").
	ApprovalID string
	// What the tool wants to do, from the record's request.
	ToolName, Operation, Path, Command, AgentName, ToolCallID string
	// Why the policy asks (approval_required_decision.reason).
	Reason string
	// The pending record's event, for anything else in it.
	Event *Event
}

// Decision is an ApprovalHandler's answer.
type Decision struct {
	Allow bool
	// A denial's reason (the backend ignores it on allow).
	Reason string
}

// Allow allows the request.
func Allow() Decision { return Decision{Allow: true} }

// Deny denies the request with a reason the agent sees.
func Deny(reason string) Decision { return Decision{Reason: reason} }

// ApprovalHandler answers one approval request. Each request gets its own
// goroutine, while the run's events keep coming, so handlers may block (a
// human deciding) and several may run at once. ctx ends when the run's
// stream ends or is let go of: the answer is then moot.
type ApprovalHandler func(ctx context.Context, request ApprovalRequest) Decision

// ApprovalResult is how one approval request went.
type ApprovalResult struct {
	Request  ApprovalRequest
	Decision Decision
	// The resolved record's final_decision.outcome ("allow", "deny").
	Outcome string
	// The resolved tool_approval event, as Approve answered it.
	Resolved *Event
	// Approve's error: not_found when nothing was pending under the id
	// (an automatic decision), failed_precondition when the run ended
	// first, canceled when the stream was let go of.
	Err error
}

// approvalRecord is the part of a tool_approval run_event this package
// reads.
type approvalRecord struct {
	Event struct {
		Type    string `json:"type"`
		Payload struct {
			Event struct {
				Record struct {
					RequestID string `json:"request_id"`
					Status    string `json:"status"`
					Request   struct {
						ToolName   string `json:"tool_name"`
						Operation  string `json:"operation"`
						Path       string `json:"path"`
						Command    string `json:"command"`
						AgentName  string `json:"agent_name"`
						ToolCallID string `json:"tool_call_id"`
					} `json:"request"`
					Required struct {
						Reason string `json:"reason"`
					} `json:"approval_required_decision"`
					Final *struct {
						Outcome string `json:"outcome"`
					} `json:"final_decision"`
				} `json:"record"`
			} `json:"event"`
		} `json:"payload"`
	} `json:"event"`
}

func decodeApproval(e *Event) (*approvalRecord, bool) {
	if e.Type != "run_event" || !strings.Contains(e.JSON, `"tool_approval"`) {
		return nil, false
	}
	var r approvalRecord
	if e.Decode(&r) != nil || r.Event.Type != "tool_approval" {
		return nil, false
	}
	return &r, true
}

// pendingApproval returns the request of a pending tool_approval event.
func pendingApproval(e *Event, conversationID string) (ApprovalRequest, bool) {
	r, ok := decodeApproval(e)
	if !ok {
		return ApprovalRequest{}, false
	}
	record := r.Event.Payload.Event.Record
	if record.Status != "pending" || record.RequestID == "" {
		return ApprovalRequest{}, false
	}
	q := record.Request
	return ApprovalRequest{ID: record.RequestID, ConversationID: conversationID, ApprovalID: e.ApprovalID, ToolName: q.ToolName,
		Operation: q.Operation, Path: q.Path, Command: q.Command, AgentName: q.AgentName,
		ToolCallID: q.ToolCallID, Reason: record.Required.Reason, Event: e}, true
}

func outcomeOf(e *Event) string {
	if r, ok := decodeApproval(e); ok && r.Event.Payload.Event.Record.Final != nil {
		return r.Event.Payload.Event.Record.Final.Outcome
	}
	return ""
}

// Approve answers a pending approval of this conversation yourself (the
// handlers do it for the runs this package reads): id is the request's ID
// (or its ApprovalID); returns the resolved tool_approval event.
// not_found when nothing is pending under the id; invalid_argument for an
// ApprovalID of another conversation.
func (c *Conversation) Approve(ctx context.Context, id string, decision Decision) (*Event, error) {
	return c.bridge.approve(ctx, id, c.id, decision)
}

// Approve answers a pending approval by its bridge-wide ApprovalID,
// whichever conversation it is in (capability "approval-ids"); returns
// the resolved tool_approval event.
func (b *Bridge) Approve(ctx context.Context, approvalID string, decision Decision) (*Event, error) {
	return b.approve(ctx, approvalID, "", decision)
}

func (b *Bridge) approve(ctx context.Context, id, conversationID string, decision Decision) (*Event, error) {
	request := struct {
		ID             string  `json:"id"`
		Allowed        bool    `json:"allowed"`
		Reason         *string `json:"reason,omitempty"`
		ConversationID string  `json:"conversationId,omitempty"`
	}{ID: id, Allowed: decision.Allow, ConversationID: conversationID}
	if !decision.Allow && decision.Reason != "" {
		request.Reason = &decision.Reason
	}
	var answer struct {
		Resolved *wireEvent `json:"resolved"`
	}
	if err := b.rpc.unary(ctx, "AgentService/Approve", request, &answer); err != nil {
		return nil, err
	}
	return answer.Resolved.event(), nil
}

// noHandler denies: a request nobody answers would hold the run forever.
func noHandler(context.Context, ApprovalRequest) Decision {
	return Deny("No approval handler is set in the Go client (Options.OnApproval, or the handler given to Run or Stream).")
}
