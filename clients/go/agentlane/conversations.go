package agentlane

// Many conversations in one bridge (capability "conversations"): each its
// own backend, addressed by the conversation_id of every AgentService call.

import (
	"context"
	"time"
)

// StartMode is how a conversation's backend starts.
type StartMode string

const (
	// The bridge's default: warm when it was started with Options.Warm.
	StartDefault StartMode = ""
	// A new Python process that imports the app.
	StartCold StartMode = "START_MODE_COLD"
	// Forked from the bridge's prefork server, the app already imported
	// (only with Options.Warm; invalid_argument otherwise).
	StartWarm StartMode = "START_MODE_WARM"
)

// DefaultConversationID is the id of the conversation a bridge starts
// with; Bridge.Default addresses it without naming it, which old bridges
// understand too.
const DefaultConversationID = "default"

// ConversationInfo is one open conversation, as the bridge reports it.
type ConversationInfo struct {
	ID string `json:"id"`
	// Its backend's exact ready line.
	ReadyJSON string    `json:"readyJson"`
	StartMode StartMode `json:"startMode"`
	// The leader of its backend's process group.
	BackendPID int `json:"backendPid"`
	// A run is active.
	Running bool `json:"running"`
}

// CreateConversation starts a new conversation's backend and returns once
// its ready line came. resource_exhausted past Options.MaxConversations;
// unavailable when its backend failed to start or the bridge is stopping;
// unimplemented from a bridge without conversations.
func (b *Bridge) CreateConversation(ctx context.Context, mode StartMode) (*Conversation, error) {
	request := struct {
		StartMode StartMode `json:"startMode,omitempty"`
	}{mode}
	var answer struct {
		Conversation *ConversationInfo `json:"conversation"`
	}
	if err := b.rpc.unary(ctx, "ConversationService/CreateConversation", request, &answer); err != nil {
		return nil, err
	}
	if answer.Conversation == nil || answer.Conversation.ID == "" {
		return nil, &Error{Code: CodeInternal, Op: "ConversationService/CreateConversation", Message: "the answer names no conversation"}
	}
	return &Conversation{bridge: b, id: answer.Conversation.ID, info: *answer.Conversation}, nil
}

// Conversation addresses a conversation by id (one that another client
// created, or one listed by ListConversations). "" is the default one.
func (b *Bridge) Conversation(id string) *Conversation {
	if id == "" {
		return b.def
	}
	return &Conversation{bridge: b, id: id, info: ConversationInfo{ID: id}}
}

// ListConversations returns the open conversations, in creation order.
func (b *Bridge) ListConversations(ctx context.Context) ([]ConversationInfo, error) {
	var answer struct {
		Conversations []ConversationInfo `json:"conversations"`
	}
	if err := b.rpc.unary(ctx, "ConversationService/ListConversations", struct{}{}, &answer); err != nil {
		return nil, err
	}
	return answer.Conversations, nil
}

// Info is the conversation as CreateConversation reported it (only the id
// for one addressed by Bridge.Conversation or Default).
func (c *Conversation) Info() ConversationInfo { return c.info }

// Close ends the conversation as Bridge.Close ends the bridge: its new
// calls refused (not_found once closed), its backend sent `shutdown`, which
// ends an active run as cancelled (its stream ends with run_cancelled and no
// error; Subscribe streams end without error), SIGKILLed after the grace
// (0: the bridge's; only a run still going then ends unavailable); returns
// its backend's exit. not_found for an unknown or already closed id. The
// other conversations are untouched.
func (c *Conversation) Close(ctx context.Context, grace time.Duration) (*ExitReport, error) {
	id := c.id
	if id == "" {
		id = DefaultConversationID
	}
	request := struct {
		ID      string `json:"id"`
		GraceMs uint32 `json:"graceMs,omitempty"`
	}{id, uint32(grace.Milliseconds())}
	var report ExitReport
	if err := c.bridge.rpc.unary(ctx, "ConversationService/CloseConversation", request, &report); err != nil {
		return nil, err
	}
	return &report, nil
}
