package agentlane

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Options say which bridge to start and how. App is required.
type Options struct {
	// The bridge binary; empty: FindBinary's search.
	Binary string
	// The backend factory, `module:attribute` (--app).
	App string
	// The backend's working directory, where App's module is importable
	// (--project-dir).
	ProjectDir string
	// The Python interpreter that has `agentlane` (--python; the bridge's
	// default is python3). A relative path is relative to this program's
	// working directory.
	Python string
	// A launcher to run Python with instead, e.g. {"uv", "run",
	// "--project", DIR, "python"} (after --).
	Launcher []string
	// How long a backend may take to exit after `shutdown` (--grace-ms;
	// 0: the bridge's 1500 ms).
	GraceMs int
	// How long a backend may take from its spawn (or fork) to its ready
	// line (--ready-timeout-ms; 0: the bridge's 30 s). Cold starts wait
	// for a start slot before their spawn, so many at once do not eat
	// each other's time: raise it only for an app whose import alone is
	// slow.
	ReadyTimeout time.Duration
	// How many cold backends may be starting at once
	// (--max-concurrent-starts; 0: the bridge's default, the number of
	// cores, at least 2).
	MaxConcurrentStarts int
	// Conversations (bridges with capability "conversations"): how many may
	// be open at once, the default one included (--max-conversations; 0:
	// the bridge's 64); how long a created conversation may sit idle
	// before the bridge closes it (--idle-timeout-ms; 0: never); start
	// without the default conversation (--no-default-conversation);
	// start conversations warm, from one prefork server (--warm, with
	// --supervisor when the supervisor is neither beside the bridge nor on
	// PATH); what a warm start that cannot be made does: "cold" (the
	// bridge's default: it starts cold, said on the bridge's stderr) or
	// "error" (--warm-fallback).
	MaxConversations      int
	IdleTimeout           time.Duration
	NoDefaultConversation bool
	Warm                  bool
	Supervisor            string
	WarmFallback          string
	// More bridge arguments, before the launcher.
	ExtraArgs []string
	// The bridge's stderr, where it forwards its backends' diagnostics;
	// nil: this program's stderr.
	Stderr io.Writer
	// The bridge's environment; nil: this program's.
	Env []string
	// Answers every approval request of every conversation of this bridge
	// whose Run or Stream is given no handler of its own. Nil: such requests are
	// denied with a reason naming the missing handler (a run never waits
	// for an answer nobody will give).
	OnApproval ApprovalHandler
	// The largest answer message accepted (0: 256 MiB).
	MaxMessageBytes int
}

// Bridge is a running agentlane-bridge, started by Start. Its methods are
// safe for concurrent use. Close it; should this program end without
// Close (a normal return from main, os.Exit, a panic, a signal, SIGKILL),
// the kernel closes the liveness pipe and the bridge shuts itself down:
// its backends get `shutdown`, then SIGKILL after the grace.
type Bridge struct {
	info       Discovery
	binary     string
	rpc        *transport
	proc       *process
	onApproval ApprovalHandler
	closeOnce  sync.Once
	closeErr   error
	closeInfo  *ExitReport
	def        *Conversation
}

// Start finds the binary, starts it (its stdin is the liveness pipe),
// waits for its discovery line (ctx bounds the wait; the bridge itself
// gives its default conversation's backend Options.ReadyTimeout) and reads
// the token file.
func Start(ctx context.Context, opts Options) (*Bridge, error) {
	if opts.App == "" {
		return nil, &Error{Code: CodeInvalidArgument, Op: "start", Message: "Options.App is required (module:factory)"}
	}
	binary, err := FindBinary(opts.Binary)
	if err != nil {
		return nil, err
	}
	proc, info, err := launch(ctx, binary, bridgeArgs(&opts), &opts)
	if err != nil {
		return nil, err
	}
	token, err := readToken(info.TokenFile)
	if err != nil {
		proc.kill()
		return nil, err
	}
	max := opts.MaxMessageBytes
	if max <= 0 {
		max = 256 << 20
	}
	b := &Bridge{info: *info, binary: binary, rpc: newTransport(info.URL, token, max), proc: proc, onApproval: opts.OnApproval}
	b.def = &Conversation{bridge: b}
	return b, nil
}

func bridgeArgs(opts *Options) []string {
	args := []string{"--app", opts.App}
	if opts.ProjectDir != "" {
		args = append(args, "--project-dir", opts.ProjectDir)
	}
	if opts.Python != "" {
		args = append(args, "--python", absolutePath(opts.Python))
	}
	if opts.GraceMs > 0 {
		args = append(args, "--grace-ms", fmt.Sprint(opts.GraceMs))
	}
	if opts.ReadyTimeout > 0 {
		args = append(args, "--ready-timeout-ms", fmt.Sprint(opts.ReadyTimeout.Milliseconds()))
	}
	if opts.MaxConcurrentStarts > 0 {
		args = append(args, "--max-concurrent-starts", fmt.Sprint(opts.MaxConcurrentStarts))
	}
	if opts.MaxConversations > 0 {
		args = append(args, "--max-conversations", fmt.Sprint(opts.MaxConversations))
	}
	if opts.IdleTimeout > 0 {
		args = append(args, "--idle-timeout-ms", fmt.Sprint(opts.IdleTimeout.Milliseconds()))
	}
	if opts.NoDefaultConversation {
		args = append(args, "--no-default-conversation")
	}
	if opts.Warm {
		args = append(args, "--warm")
	}
	if opts.Supervisor != "" {
		args = append(args, "--supervisor", absolutePath(opts.Supervisor))
	}
	if opts.WarmFallback != "" {
		args = append(args, "--warm-fallback", opts.WarmFallback)
	}
	args = append(args, opts.ExtraArgs...)
	if len(opts.Launcher) > 0 {
		args = append(append(args, "--"), opts.Launcher...)
	}
	return args
}

// absolutePath resolves a relative path with a directory part against this
// program's working directory: the bridge runs Python in ProjectDir, where
// "../.venv/bin/python" would mean something else. A bare name is looked up
// on PATH as given.
func absolutePath(path string) string {
	if filepath.IsAbs(path) || !strings.ContainsRune(path, filepath.Separator) {
		return path
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// Info is the bridge's discovery line.
func (b *Bridge) Info() Discovery { return b.info }

// Binary is the path of the bridge that runs.
func (b *Bridge) Binary() string { return b.binary }

// PID is the bridge's process id.
func (b *Bridge) PID() int { return b.proc.cmd.Process.Pid }

// Done is closed once the bridge process has exited (after Close, or on
// its own: in a single-conversation bridge the backend's death ends it).
func (b *Bridge) Done() <-chan struct{} { return b.proc.exited }

// Default is the conversation every bridge starts with (the only one of
// a bridge without conversations).
func (b *Bridge) Default() *Conversation { return b.def }

// Ping answers nil while the bridge serves.
func (b *Bridge) Ping(ctx context.Context) error {
	var out struct {
		Message string `json:"message"`
	}
	if err := b.rpc.unary(ctx, "BridgeControlService/Ping", struct{}{}, &out); err != nil {
		return err
	}
	if out.Message != "pong" {
		return &Error{Code: CodeInternal, Op: "BridgeControlService/Ping", Message: fmt.Sprintf("answered %q, not pong", out.Message)}
	}
	return nil
}

// Version is GetVersion's answer.
type Version struct {
	BridgeVersion   string   `json:"bridgeVersion"`
	API             string   `json:"api"`
	ProtocolVersion string   `json:"protocolVersion"`
	ReadyJSON       string   `json:"readyJson"`
	Capabilities    []string `json:"capabilities"`
}

// Has reports whether the bridge lists a capability.
func (v *Version) Has(capability string) bool {
	for _, c := range v.Capabilities {
		if c == capability {
			return true
		}
	}
	return false
}

// Version asks the bridge for its version, the API, the NDJSON protocol,
// the default backend's ready line and the bridge's capabilities.
func (b *Bridge) Version(ctx context.Context) (*Version, error) {
	var v Version
	if err := b.rpc.unary(ctx, "BridgeControlService/GetVersion", struct{}{}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ExitReport is how a backend ended (Shutdown, CloseConversation).
type ExitReport struct {
	// The exit status, or -1 when a signal ended it.
	ExitCode int `json:"backendExitCode"`
	// The signal that ended it, or 0.
	Signal int `json:"backendSignal"`
	// The grace ran out and the backend's group was SIGKILLed.
	Killed bool `json:"killed"`
}

// Shutdown stops the bridge: `Shutdown{grace}` (new calls refused, every
// backend sent `shutdown`, SIGKILLed after the grace, every stream ended),
// then waits for the bridge process to exit. Should the call fail or the
// process outlive ctx, the liveness pipe is closed and, 3 s later, the
// bridge SIGKILLed. Only the first Shutdown or Close acts; later ones
// return its result.
func (b *Bridge) Shutdown(ctx context.Context, grace time.Duration) (*ExitReport, error) {
	b.closeOnce.Do(func() {
		defer b.rpc.http.CloseIdleConnections()
		var report ExitReport
		err := b.rpc.unary(ctx, "BridgeControlService/Shutdown", map[string]uint32{"graceMs": uint32(grace.Milliseconds())}, &report)
		if err == nil {
			b.closeInfo = &report
			select {
			case <-b.proc.exited:
				b.proc.liveness.Close()
				return
			case <-ctx.Done():
			}
		} else {
			select {
			case <-b.proc.exited:
				// It had already gone: nothing left to stop.
				b.proc.liveness.Close()
				return
			default:
			}
			b.closeErr = err
		}
		b.proc.kill()
	})
	return b.closeInfo, b.closeErr
}

// Close stops the bridge (Shutdown with the bridge's grace, bounded by
// 30 s) and returns once its process has exited. Safe to call twice.
func (b *Bridge) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := b.Shutdown(ctx, 0)
	return err
}
