// Package agentlane drives AgentLane agents from Go through agentlane-bridge,
// with the standard library only.
//
//	import "github.com/agentlanejs/process-bridge-native/clients/go/agentlane"
//
// Start finds the bridge binary (Options.Binary, $AGENTLANE_BRIDGE, PATH,
// or target/release of a checkout), starts it as a child whose stdin is a
// liveness pipe, reads its discovery line and token file, and speaks the
// Connect protocol's JSON form to it over HTTP/1.1 on 127.0.0.1.
//
// A bridge hosts conversations, each its own Python backend:
// Bridge.Default is the one it starts with, CreateConversation makes more.
// Conversation.Run runs a prompt to its end and returns the whole run (a
// *Result); Conversation.Stream returns the run as it happens (a
// *RunStream, read with Next).
//
// A run is a server stream, and its approval requests are answered by
// unary calls on other connections while the stream is read: Run and
// Stream do both, calling an ApprovalHandler on its own goroutine for each
// request, so a caller that only reads events cannot stall the run on an
// approval. One handler may serve every conversation (Options.OnApproval):
// ApprovalRequest.ConversationID says whose run asks ("" for the default
// conversation), and ApprovalRequest.ApprovalID names the request in the
// whole bridge (Bridge.Approve answers it from anywhere).
//
// Close stops the bridge and waits for it. A program that ends without
// Close still leaves nothing behind: its end closes the liveness pipe, and
// the bridge shuts down its backends and exits by itself.
//
// Every error is an *Error with a stable Code: the Connect code the bridge
// answered, or CodeBridgeNotFound and CodeStartFailed for a start that
// never reached a bridge.
package agentlane
