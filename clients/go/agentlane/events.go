package agentlane

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"sync"
)

// Event is one backend event, passed through exactly: its position among
// the backend's stdout lines (the ready line is 1), its type (run_start,
// run_event, run_complete, …) and the exact NDJSON line to decode with your
// own types. A stdout line that failed the bridge's strict validation
// comes as an Event of Type "invalid_line" with Invalid set and JSON empty.
type Event struct {
	Seq     uint64
	Type    string
	JSON    string
	Invalid *InvalidLine
	// On a tool_approval run_event: the approval's bridge-wide id (see
	// ApprovalRequest.ApprovalID); "" otherwise, in Subscribe batches, and
	// from bridges without the capability "approval-ids".
	ApprovalID string
}

// Decode unmarshals the event's line into v.
func (e *Event) Decode(v interface{}) error { return json.Unmarshal([]byte(e.JSON), v) }

// InvalidLine is a backend stdout line that is not a valid event.
type InvalidLine struct {
	// The decode error's stable code: invalid-json, not-an-object,
	// unknown-type, invalid-payload, line-too-long, … (new ones may come).
	Code     string   `json:"code"`
	Message  string   `json:"message"`
	Fields   []string `json:"fields"`
	LineHead string   `json:"lineHead"`
}

// Usage is a run's token usage totals, as reported by the model: the usage
// of each of the run's model responses, summed by the bridge (capability
// "usage"; Responses 0: the model reported none).
type Usage struct {
	PromptTokens, CompletionTokens, TotalTokens uint64
	// How many model responses carried usage.
	Responses uint32
}

func (u *Usage) UnmarshalJSON(data []byte) error {
	var w struct {
		PromptTokens     wireUint64 `json:"promptTokens"`
		CompletionTokens wireUint64 `json:"completionTokens"`
		TotalTokens      wireUint64 `json:"totalTokens"`
		Responses        uint32     `json:"responses"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*u = Usage{uint64(w.PromptTokens), uint64(w.CompletionTokens), uint64(w.TotalTokens), w.Responses}
	return nil
}

// wireUint64 is a proto3 JSON uint64: a string, or a number from lenient
// encoders.
type wireUint64 uint64

func (u *wireUint64) UnmarshalJSON(data []byte) error {
	text := strings.Trim(string(data), `"`)
	if text == "" || text == "null" {
		*u = 0
		return nil
	}
	n, err := strconv.ParseUint(text, 10, 64)
	*u = wireUint64(n)
	return err
}

type wireEvent struct {
	Seq        wireUint64 `json:"seq"`
	Type       string     `json:"type"`
	JSON       string     `json:"json"`
	ApprovalID string     `json:"approvalId"`
}

func (w *wireEvent) event() *Event {
	if w == nil {
		return nil
	}
	return &Event{Seq: uint64(w.Seq), Type: w.Type, JSON: w.JSON, ApprovalID: w.ApprovalID}
}

type wireInvalid struct {
	Seq wireUint64 `json:"seq"`
	InvalidLine
}

// wireItem is a PromptResponse or SubscribeResponse; an item with no case
// this package knows is skipped.
type wireItem struct {
	Event       *wireEvent   `json:"event"`
	InvalidLine *wireInvalid `json:"invalidLine"`
	Batch       *struct {
		FirstSeq wireUint64 `json:"firstSeq"`
		JSON     string     `json:"json"`
	} `json:"batch"`
	Usage *Usage `json:"usage"`
	// Host channel items (tools.go, snapshots.go).
	ToolCall      *wireToolCall      `json:"toolCall"`
	ToolCallEnded *wireToolCallEnded `json:"toolCallEnded"`
	Snapshot      *wireSnapshot      `json:"snapshot"`
}

// events turns a stream's items into Events, one at a time.
type events struct {
	frames  *frames
	pending []*Event
	current *Event
	err     error
	ended   bool
	// The last item's usage, when it carried one.
	usage     *Usage
	closeOnce sync.Once
	// Gets the items that are not events (tool calls, their ends,
	// snapshots); nil: they are skipped.
	onSide func(*wireItem)
}

// next advances to the next event; false at the end (err holds a failed
// end, nil for an OK one).
func (s *events) next() bool {
	for len(s.pending) == 0 {
		if s.ended {
			s.current = nil
			return false
		}
		data, err := s.frames.next()
		if err != nil {
			s.ended = true
			if err != io.EOF {
				s.err = err
			}
			s.close()
			continue
		}
		var item wireItem
		if err := json.Unmarshal(data, &item); err != nil {
			s.ended, s.err = true, &Error{Code: CodeInternal, Op: s.frames.method, Message: "undecodable stream item: " + err.Error(), Cause: err}
			s.close()
			continue
		}
		if item.Usage != nil {
			s.usage = item.Usage
		}
		switch {
		case item.ToolCall != nil || item.ToolCallEnded != nil || item.Snapshot != nil:
			if s.onSide != nil {
				s.onSide(&item)
			}
		case item.Event != nil:
			s.pending = append(s.pending, item.Event.event())
		case item.InvalidLine != nil:
			invalid := item.InvalidLine.InvalidLine
			s.pending = append(s.pending, &Event{Seq: uint64(item.InvalidLine.Seq), Type: "invalid_line", Invalid: &invalid})
		case item.Batch != nil:
			var lines []json.RawMessage
			if err := json.Unmarshal([]byte(item.Batch.JSON), &lines); err != nil {
				s.ended, s.err = true, &Error{Code: CodeInternal, Op: s.frames.method, Message: "undecodable batch: " + err.Error(), Cause: err}
				s.close()
				continue
			}
			for i, line := range lines {
				var head struct {
					Type string `json:"type"`
				}
				_ = json.Unmarshal(line, &head)
				s.pending = append(s.pending, &Event{Seq: uint64(item.Batch.FirstSeq) + uint64(i), Type: head.Type, JSON: string(line)})
			}
		}
	}
	s.current, s.pending = s.pending[0], s.pending[1:]
	return true
}

func (s *events) close() { s.closeOnce.Do(s.frames.close) }

// Stream is a Subscribe stream: every backend stdout line from the call on.
type Stream struct{ events }

// Next advances to the next event; false once the stream ended (see Err).
func (s *Stream) Next() bool { return s.next() }

// Event is the current event.
func (s *Stream) Event() *Event { return s.current }

// Err is the stream's failed end (nil for an OK end or while it runs).
func (s *Stream) Err() error { return s.err }

// Close lets go of the stream.
func (s *Stream) Close() { s.ended = true; s.close() }
