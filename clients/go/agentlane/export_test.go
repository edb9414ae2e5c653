package agentlane

// WithToken is a view of b that sends another token (the refusal tests).
func WithToken(b *Bridge, token string) *Bridge {
	other := &Bridge{info: b.info, binary: b.binary, proc: b.proc, rpc: newTransport(b.info.URL, token, b.rpc.maxMessage)}
	other.def = &Conversation{bridge: other}
	return other
}
