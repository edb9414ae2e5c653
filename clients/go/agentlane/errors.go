package agentlane

import (
	"errors"
	"fmt"
)

// Code is an error's stable kind: one of the 16 Connect codes for what the
// bridge answered, or one of this package's own codes (CodeBridgeNotFound,
// CodeStartFailed) for what went wrong before there was a bridge to ask.
type Code string

// The Connect protocol's codes (https://connectrpc.com/docs/protocol).
const (
	CodeCanceled           Code = "canceled"
	CodeUnknown            Code = "unknown"
	CodeInvalidArgument    Code = "invalid_argument"
	CodeDeadlineExceeded   Code = "deadline_exceeded"
	CodeNotFound           Code = "not_found"
	CodeAlreadyExists      Code = "already_exists"
	CodePermissionDenied   Code = "permission_denied"
	CodeResourceExhausted  Code = "resource_exhausted"
	CodeFailedPrecondition Code = "failed_precondition"
	CodeAborted            Code = "aborted"
	CodeOutOfRange         Code = "out_of_range"
	CodeUnimplemented      Code = "unimplemented"
	CodeInternal           Code = "internal"
	CodeUnavailable        Code = "unavailable"
	CodeDataLoss           Code = "data_loss"
	CodeUnauthenticated    Code = "unauthenticated"
)

// This package's own codes, for failures before the first call.
const (
	// No agentlane-bridge binary where it was looked for (Options.Binary,
	// $AGENTLANE_BRIDGE, PATH, target/release of the working directory or
	// a parent); Error.Message lists the places.
	CodeBridgeNotFound Code = "bridge_not_found"
	// The binary ran but gave no usable discovery line: the bridge's own
	// `agentlane-bridge failed {json}` (Error.Stage says which step: spawn,
	// backend, protocol, timeout, listen, stopped, token), a program that
	// is not the bridge, or an unreadable token file.
	CodeStartFailed Code = "start_failed"
)

// Error is every error this package returns from a call or a start. Match
// it with errors.As, or read its code with CodeOf.
type Error struct {
	Code Code
	// What was wrong, as the bridge (or this package) words it.
	Message string
	// The call or step that failed ("AgentService/Approve", "start").
	Op string
	// For CodeStartFailed from the bridge's failed line: its stage, and
	// the backend's last stderr line when it had one.
	Stage, Stderr string
	// The Connect error details, undecoded (type name and base64 value).
	Details []ErrorDetail
	// The underlying error (a transport or process error), if any.
	Cause error
}

// ErrorDetail is one entry of a Connect error's `details`.
type ErrorDetail struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

func (e *Error) Error() string {
	where := ""
	if e.Op != "" {
		where = e.Op + ": "
	}
	if e.Stage != "" {
		return fmt.Sprintf("agentlane: %s%s (stage %s): %s", where, e.Code, e.Stage, e.Message)
	}
	return fmt.Sprintf("agentlane: %s%s: %s", where, e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// CodeOf returns the Code of an *Error in err's chain, "" when there is
// none (nil, or an error from a caller's callback).
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// codeFromHTTP is the Connect protocol's code for an error answer that
// carries no error body.
func codeFromHTTP(status int) Code {
	switch status {
	case 400:
		return CodeInternal
	case 401:
		return CodeUnauthenticated
	case 403:
		return CodePermissionDenied
	case 404:
		return CodeUnimplemented
	case 429, 502, 503, 504:
		return CodeUnavailable
	}
	return CodeUnknown
}

// knownCode keeps a code the wire sent only when it is one of the 16; an
// invalid one is `unknown`, as the protocol says.
func knownCode(code string) Code {
	switch c := Code(code); c {
	case CodeCanceled, CodeUnknown, CodeInvalidArgument, CodeDeadlineExceeded, CodeNotFound,
		CodeAlreadyExists, CodePermissionDenied, CodeResourceExhausted, CodeFailedPrecondition,
		CodeAborted, CodeOutOfRange, CodeUnimplemented, CodeInternal, CodeUnavailable,
		CodeDataLoss, CodeUnauthenticated:
		return c
	}
	return CodeUnknown
}
