package agentlane

// A conversation's committed state (capability "snapshots"): after each
// successful run the bridge sends the backend's snapshot as an item of the
// run's stream; this package keeps the last one, gives it to the
// conversation's Store, and resumes a conversation from it on create.

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Snapshot is a conversation's committed state: agentlane 0.22's
// AgentSnapshot document (schema_version, agent_id, revision, created_at,
// state with the whole history), the same document the Node package's
// stores keep.
type Snapshot struct {
	// The conversation it was taken from.
	ConversationID string
	// The document, exactly as the backend saved it.
	JSON json.RawMessage
	// The document's revision (it grows with every committed run).
	Revision uint64
}

// Store keeps snapshots for an application, by a key it chooses (one per
// conversation of the application's own: a user's chat, a ticket). Save
// gets every committed run's snapshot, in order; Load gives the last one
// saved (nil, nil when there is none). Implement it over your database;
// MemoryStore is the simplest.
type Store interface {
	Save(ctx context.Context, key string, snapshot Snapshot) error
	Load(ctx context.Context, key string) (*Snapshot, error)
}

// MemoryStore is a Store in this program's memory (safe for concurrent
// use): snapshots outlive a bridge, not this program.
type MemoryStore struct {
	mu   sync.Mutex
	kept map[string]Snapshot
}

func (m *MemoryStore) Save(_ context.Context, key string, snapshot Snapshot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.kept == nil {
		m.kept = map[string]Snapshot{}
	}
	m.kept[key] = snapshot
	return nil
}

func (m *MemoryStore) Load(_ context.Context, key string) (*Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if snapshot, ok := m.kept[key]; ok {
		return &snapshot, nil
	}
	return nil, nil
}

type wireSnapshot struct {
	ConversationID string     `json:"conversationId"`
	JSON           string     `json:"json"`
	Revision       wireUint64 `json:"revision"`
}

func (w *wireSnapshot) snapshot() *Snapshot {
	if w == nil {
		return nil
	}
	return &Snapshot{ConversationID: w.ConversationID, JSON: json.RawMessage(w.JSON), Revision: uint64(w.Revision)}
}

// ConversationOptions say how CreateConversationWith creates a
// conversation.
type ConversationOptions struct {
	StartMode StartMode
	// The conversation's own tools (capability "host-tools"): the
	// backend's factory must add them (`shims=[host.tools()]`).
	Tools []Tool
	// A tool call's deadline unless its tool has its own; 0: the
	// bridge's --tool-timeout-ms.
	ToolTimeout time.Duration
	// Keep the conversation's snapshots (the backend's factory passes
	// `state_store=host.state_store()`): Snapshot answers the last one.
	KeepSnapshots bool
	// Resume from this snapshot: the new backend continues with its
	// whole history.
	Resume *Snapshot
	// Save every snapshot into Store under StoreKey, and resume from
	// Store's snapshot for StoreKey when there is one (and Resume is nil).
	Store    Store
	StoreKey string
}

// CreateConversationWith starts a new conversation with tools, snapshots
// or a resume (see ConversationOptions). invalid_argument for a tool the
// bridge cannot serve (a name declared twice, a schema that is not JSON
// Schema) or a snapshot it cannot resume; failed_precondition for a
// backend whose factory does not take the tools or the store.
func (b *Bridge) CreateConversationWith(ctx context.Context, opts ConversationOptions) (*Conversation, error) {
	tools, byName, err := wireTools(opts.Tools)
	if err != nil {
		return nil, err
	}
	resume := opts.Resume
	if resume == nil && opts.Store != nil && opts.StoreKey != "" {
		if resume, err = opts.Store.Load(ctx, opts.StoreKey); err != nil {
			return nil, &Error{Code: CodeUnavailable, Op: "Store.Load", Message: err.Error(), Cause: err}
		}
	}
	request := struct {
		StartMode     StartMode  `json:"startMode,omitempty"`
		Tools         []wireTool `json:"tools,omitempty"`
		ToolTimeoutMs uint32     `json:"toolTimeoutMs,omitempty"`
		KeepSnapshots bool       `json:"keepSnapshots,omitempty"`
		ResumeJSON    string     `json:"resumeJson,omitempty"`
	}{StartMode: opts.StartMode, Tools: tools, ToolTimeoutMs: uint32(opts.ToolTimeout.Milliseconds()),
		KeepSnapshots: opts.KeepSnapshots || opts.Store != nil}
	if resume != nil {
		request.ResumeJSON = string(resume.JSON)
	}
	var answer struct {
		Conversation *ConversationInfo `json:"conversation"`
	}
	if err := b.rpc.unary(ctx, "ConversationService/CreateConversation", request, &answer); err != nil {
		return nil, err
	}
	if answer.Conversation == nil || answer.Conversation.ID == "" {
		return nil, &Error{Code: CodeInternal, Op: "ConversationService/CreateConversation", Message: "the answer names no conversation"}
	}
	c := &Conversation{bridge: b, id: answer.Conversation.ID, info: *answer.Conversation, tools: byName, store: opts.Store, storeKey: opts.StoreKey}
	if resume != nil {
		c.last = resume
	}
	return c, nil
}

// Snapshot is the conversation's last committed snapshot, as the bridge
// holds it (GetSnapshot); nil before its first committed run.
// failed_precondition for a backend that does not keep its state in the
// bridge.
func (c *Conversation) Snapshot(ctx context.Context) (*Snapshot, error) {
	request := struct {
		ConversationID string `json:"conversationId,omitempty"`
	}{c.id}
	var answer struct {
		Snapshot *wireSnapshot `json:"snapshot"`
	}
	if err := c.bridge.rpc.unary(ctx, "AgentService/GetSnapshot", request, &answer); err != nil {
		return nil, err
	}
	return answer.Snapshot.snapshot(), nil
}

// LastSnapshot is the last snapshot a run of this client saw (or the one
// the conversation was resumed from), without asking the bridge: what
// survives the bridge.
func (c *Conversation) LastSnapshot() *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// onSnapshot keeps a committed run's snapshot and saves it in the Store
// before the run's stream goes on (so that a run that returned has been
// saved).
func (r *RunStream) onSnapshot(w *wireSnapshot) {
	snapshot := w.snapshot()
	c := r.conv
	c.mu.Lock()
	c.last = snapshot
	c.mu.Unlock()
	r.mu.Lock()
	r.snapshot = snapshot
	r.mu.Unlock()
	if c.store == nil || c.storeKey == "" {
		return
	}
	if err := c.store.Save(r.parent, c.storeKey, *snapshot); err != nil {
		r.mu.Lock()
		r.storeErr = err
		r.mu.Unlock()
	}
}

// StoreErr is the Store's error for a snapshot of this run, if Save failed.
func (r *RunStream) StoreErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.storeErr
}
