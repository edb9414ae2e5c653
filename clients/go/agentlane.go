// Package agentlane is the old import path of the Go library, kept so
// that programs written against it still build: every name here stands
// for the same name of the package it moved to, whose import path ends in
// its package name (no alias needed).
//
// Deprecated: import "github.com/agentlanejs/process-bridge-native/clients/go/agentlane".
package agentlane

import moved "github.com/agentlanejs/process-bridge-native/clients/go/agentlane"

// The types.
type (
	Options          = moved.Options
	Bridge           = moved.Bridge
	Version          = moved.Version
	ExitReport       = moved.ExitReport
	Discovery        = moved.Discovery
	Conversation     = moved.Conversation
	ConversationInfo = moved.ConversationInfo
	StartMode        = moved.StartMode
	RunStream        = moved.RunStream
	Run              = moved.RunStream
	Result           = moved.Result
	Stream           = moved.Stream
	Event            = moved.Event
	InvalidLine      = moved.InvalidLine
	Usage            = moved.Usage
	ApprovalRequest  = moved.ApprovalRequest
	ApprovalHandler  = moved.ApprovalHandler
	ApprovalResult   = moved.ApprovalResult
	Decision         = moved.Decision
	ConfigureFailure = moved.ConfigureFailure
	Error            = moved.Error
	ErrorDetail      = moved.ErrorDetail
	Code             = moved.Code
)

// The functions.
var (
	Start              = moved.Start
	FindBinary         = moved.FindBinary
	Allow              = moved.Allow
	Deny               = moved.Deny
	CodeOf             = moved.CodeOf
	ConfigureFailureOf = moved.ConfigureFailureOf
)

// The constants.
const (
	BinaryEnv             = moved.BinaryEnv
	DefaultConversationID = moved.DefaultConversationID

	StartDefault = moved.StartDefault
	StartCold    = moved.StartCold
	StartWarm    = moved.StartWarm

	CodeCanceled           = moved.CodeCanceled
	CodeUnknown            = moved.CodeUnknown
	CodeInvalidArgument    = moved.CodeInvalidArgument
	CodeDeadlineExceeded   = moved.CodeDeadlineExceeded
	CodeNotFound           = moved.CodeNotFound
	CodeAlreadyExists      = moved.CodeAlreadyExists
	CodePermissionDenied   = moved.CodePermissionDenied
	CodeResourceExhausted  = moved.CodeResourceExhausted
	CodeFailedPrecondition = moved.CodeFailedPrecondition
	CodeAborted            = moved.CodeAborted
	CodeOutOfRange         = moved.CodeOutOfRange
	CodeUnimplemented      = moved.CodeUnimplemented
	CodeInternal           = moved.CodeInternal
	CodeUnavailable        = moved.CodeUnavailable
	CodeDataLoss           = moved.CodeDataLoss
	CodeUnauthenticated    = moved.CodeUnauthenticated
	CodeBridgeNotFound     = moved.CodeBridgeNotFound
	CodeStartFailed        = moved.CodeStartFailed
)
