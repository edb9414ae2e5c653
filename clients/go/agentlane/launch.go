package agentlane

// Finding the binary, starting it with the liveness pipe, and reading its
// discovery line and token file.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BinaryEnv names the environment variable read when Options.Binary is
// empty.
const BinaryEnv = "AGENTLANE_BRIDGE"

const binaryName = "agentlane-bridge"

// FindBinary returns the agentlane-bridge to run: given (when not empty),
// else $AGENTLANE_BRIDGE, else `agentlane-bridge` on PATH, else
// target/release/agentlane-bridge in the working directory or the nearest
// parent that has one (a checkout of this repository). A path that names
// no executable file is CodeBridgeNotFound.
func FindBinary(given string) (string, error) {
	if given != "" {
		return checkBinary(given, "Options.Binary")
	}
	if env := os.Getenv(BinaryEnv); env != "" {
		return checkBinary(env, "$"+BinaryEnv)
	}
	if path, err := exec.LookPath(binaryName); err == nil {
		return filepath.Abs(path)
	}
	looked := []string{"$" + BinaryEnv + " (unset)", binaryName + " on PATH"}
	if dir, err := os.Getwd(); err == nil {
		for {
			candidate := filepath.Join(dir, "target", "release", binaryName)
			if isExecutable(candidate) {
				return candidate, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
		looked = append(looked, "target/release/"+binaryName+" in the working directory and its parents")
	}
	return "", &Error{Code: CodeBridgeNotFound, Op: "find binary",
		Message: "no " + binaryName + " found; looked at " + strings.Join(looked, ", ") +
			" (build it with `cargo build --release -p bridge-server`, or set Options.Binary)"}
}

func checkBinary(path, from string) (string, error) {
	abs, err := filepath.Abs(path)
	if err == nil && isExecutable(abs) {
		return abs, nil
	}
	return "", &Error{Code: CodeBridgeNotFound, Op: "find binary",
		Message: fmt.Sprintf("%s names %q, which is not an executable file", from, path)}
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}

// Discovery is the bridge's `agentlane-bridge ready {json}` line.
type Discovery struct {
	Schema        int    `json:"schema"`
	API           string `json:"api"`
	BridgeVersion string `json:"bridgeVersion"`
	URL           string `json:"url"`
	Port          int    `json:"port"`
	// The bridge's process id.
	PID       int    `json:"pid"`
	TokenFile string `json:"tokenFile"`
	// The default conversation's backend (absent when the bridge was
	// started without one).
	Backend *struct {
		PID             int    `json:"pid"`
		Version         string `json:"version"`
		Package         string `json:"package"`
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"backend"`
	// What this bridge can do (newer bridges list them; unknown ones are
	// to be ignored).
	Capabilities []string `json:"capabilities"`
	// The line's JSON as it came.
	Raw json.RawMessage `json:"-"`
}

// failedLine is the bridge's `agentlane-bridge failed {json}` line.
type failedLine struct {
	Stage   string `json:"stage"`
	Message string `json:"message"`
	Stderr  string `json:"stderr"`
}

// process is the started bridge: its command, the write end of its stdin
// (the liveness pipe) and a channel closed once it has exited.
type process struct {
	cmd      *exec.Cmd
	liveness *os.File
	exited   chan struct{}
	waitErr  error
}

// launch starts the bridge and waits for its discovery line.
func launch(ctx context.Context, binary string, args []string, opts *Options) (*process, *Discovery, error) {
	fail := func(message string, cause error) error {
		return &Error{Code: CodeStartFailed, Op: "start", Message: message, Cause: cause}
	}
	// Both pipes are the bridge's own file descriptors (no copying
	// goroutine), and Go opens them close-on-exec, so no other child of
	// this program holds the liveness pipe's write end: when this process
	// ends, however it ends, the bridge reads end of file and shuts down.
	stdinRead, liveness, err := os.Pipe()
	if err != nil {
		return nil, nil, fail("cannot create the liveness pipe: "+err.Error(), err)
	}
	stdoutRead, stdoutWrite, err := os.Pipe()
	if err != nil {
		stdinRead.Close()
		liveness.Close()
		return nil, nil, fail("cannot create the discovery pipe: "+err.Error(), err)
	}
	stderrRead, stderrWrite, err := os.Pipe()
	if err != nil {
		stdinRead.Close()
		liveness.Close()
		stdoutRead.Close()
		stdoutWrite.Close()
		return nil, nil, fail("cannot create the stderr pipe: "+err.Error(), err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinRead, stdoutWrite, stderrWrite
	cmd.Env = opts.Env
	err = cmd.Start()
	stdinRead.Close()
	stdoutWrite.Close()
	stderrWrite.Close()
	if err != nil {
		liveness.Close()
		stdoutRead.Close()
		stderrRead.Close()
		return nil, nil, fail(fmt.Sprintf("cannot run %s: %v", binary, err), err)
	}
	p := &process{cmd: cmd, liveness: liveness, exited: make(chan struct{})}
	// The bridge's stderr goes on to Options.Stderr through a pipe of our
	// own (so that Wait never waits for a leftover holder of it), and its
	// end is kept for a start that fails without a failed line.
	stderr := &tail{limit: 2048, drained: make(chan struct{})}
	destination := opts.Stderr
	if destination == nil {
		destination = os.Stderr
	}
	go func() {
		defer close(stderr.drained)
		defer stderrRead.Close()
		_, _ = io.Copy(io.MultiWriter(destination, stderr), stderrRead)
	}()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()

	type lineOrErr struct {
		line string
		err  error
	}
	got := make(chan lineOrErr, 1)
	go func() {
		defer stdoutRead.Close()
		line, err := bufio.NewReaderSize(stdoutRead, 64*1024).ReadString('\n')
		got <- lineOrErr{line, err}
		// Nothing else comes on stdout; the rest is drained to its end.
		_, _ = io.Copy(io.Discard, stdoutRead)
	}()
	var result lineOrErr
	select {
	case result = <-got:
	case <-ctx.Done():
		p.kill()
		code := CodeCanceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			code = CodeDeadlineExceeded
		}
		return nil, nil, &Error{Code: code, Op: "start", Message: "no discovery line before the start's context ended", Cause: ctx.Err()}
	}
	line := strings.TrimRight(result.line, "\r\n")
	if word, body, ok := cutDiscovery(line); ok && word == "ready" {
		var info Discovery
		if err := json.Unmarshal([]byte(body), &info); err != nil || info.Schema != 1 || info.API != "agentlane.bridge.v1" || info.URL == "" || info.TokenFile == "" {
			p.kill()
			return nil, nil, fail(fmt.Sprintf("%s wrote an unknown discovery line: %.300s", binary, line), err)
		}
		info.Raw = json.RawMessage(body)
		return p, &info, nil
	} else if ok && word == "failed" {
		var failed failedLine
		_ = json.Unmarshal([]byte(body), &failed)
		p.kill()
		return nil, nil, &Error{Code: CodeStartFailed, Op: "start", Stage: failed.Stage, Message: failed.Message, Stderr: failed.Stderr}
	}
	p.kill()
	<-p.exited
	if line == "" {
		select {
		case <-stderr.drained:
		case <-time.After(time.Second):
		}
		e := &Error{Code: CodeStartFailed, Op: "start", Stderr: stderr.String(), Cause: p.waitErr,
			Message: fmt.Sprintf("%s ended (%v) without a discovery line", binary, p.waitErr)}
		if e.Stderr != "" {
			e.Message += "; its stderr ended with: " + e.Stderr
		}
		return nil, nil, e
	}
	return nil, nil, fail(fmt.Sprintf("%s is not agentlane-bridge: its first line is %.200q", binary, line), nil)
}

func cutDiscovery(line string) (word, body string, ok bool) {
	rest := strings.TrimPrefix(line, binaryName+" ")
	if rest == line {
		return "", "", false
	}
	word, body, ok = strings.Cut(rest, " ")
	return word, body, ok
}

// kill is the last resort: the liveness pipe closed (the bridge's own
// shutdown path) and, should it still run 3 s later, SIGKILL (on Linux the
// bridge's backends then get SIGKILL from the kernel).
func (p *process) kill() {
	p.liveness.Close()
	select {
	case <-p.exited:
	case <-time.After(3 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
}

func readToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", &Error{Code: CodeStartFailed, Op: "start", Message: "cannot read the token file: " + err.Error(), Cause: err}
	}
	token := strings.TrimSpace(string(data))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", &Error{Code: CodeStartFailed, Op: "start", Message: "the token file " + path + " holds no token"}
	}
	return token, nil
}

// tail keeps the last bytes written to it.
type tail struct {
	mu      sync.Mutex
	data    []byte
	limit   int
	drained chan struct{}
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.data = append(t.data, p...)
	if over := len(t.data) - t.limit; over > 0 {
		t.data = append(t.data[:0], t.data[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.data))
}
