// Package agentlane drives AgentLane agents from Go through agentlane-bridge,
// with the standard library only.
//
// Start finds the bridge binary (Options.Binary, $AGENTLANE_BRIDGE, PATH,
// or target/release of a checkout), starts it as a child whose stdin is a
// liveness pipe, reads its discovery line and token file, and speaks the
// Connect protocol's JSON form to it over HTTP/1.1 on 127.0.0.1.
//
// A run is a server stream, and its approval requests are answered by
// unary calls on other connections while the stream is read: Prompt does
// both, calling an ApprovalHandler on its own goroutine for each request,
// so a caller that only reads events cannot stall the run on an approval.
//
// Close stops the bridge and waits for it. A program that ends without
// Close still leaves nothing behind: its end closes the liveness pipe, and
// the bridge shuts down its backends and exits by itself.
//
// Every error is an *Error with a stable Code: the Connect code the bridge
// answered, or CodeBridgeNotFound and CodeStartFailed for a start that
// never reached a bridge.
package agentlane
