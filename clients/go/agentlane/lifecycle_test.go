package agentlane_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentlanejs/process-bridge-native/clients/go/agentlane"
)

const helperEnv = "AGENTLANE_GO_TEST_HELPER"

// TestMain doubles as a helper program for the exit tests: it starts a
// bridge, prints the bridge's and backend's pids, and then either returns
// from main without Close ("return") or waits to be killed ("wait").
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

func helper(mode string) int {
	b, err := agentlane.Start(context.Background(), demoOptions())
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Printf("pids %d %d\n", b.PID(), b.Info().Backend.PID)
	if mode == "wait" {
		time.Sleep(time.Hour)
	}
	return 0 // no Close: the liveness pipe closes with the process
}

func runHelper(t *testing.T, mode string) (cmd *exec.Cmd, bridgePID, backendPID int) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if _, err := fmt.Sscanf(line, "pids %d %d", &bridgePID, &backendPID); err != nil {
		t.Fatalf("the helper said %q", line)
	}
	if !alive(bridgePID) || !alive(backendPID) {
		t.Fatalf("the bridge %d or backend %d is not running", bridgePID, backendPID)
	}
	return cmd, bridgePID, backendPID
}

// The discovery line and the token file (private while the bridge runs, a
// wrong token unauthenticated); Close stops the bridge and its backend (by
// pid, no process is left) and removes the token file.
func TestDiscoveryTokenAndClose(t *testing.T) {
	t.Parallel()
	b := start(t, demoOptions())
	info := b.Info()
	bridgePID, backendPID := b.PID(), info.Backend.PID
	if info.PID != bridgePID || !strings.HasPrefix(info.URL, "http://127.0.0.1:") || info.Backend.Version != "0.22.0" {
		t.Fatalf("discovery %+v", info)
	}
	if !alive(bridgePID) || !alive(backendPID) {
		t.Fatal("not running")
	}
	stat, err := os.Stat(info.TokenFile)
	if err != nil || stat.Mode().Perm() != 0o600 {
		t.Fatalf("token file %v %v", stat, err)
	}
	ctx := within(t, 20*time.Second)
	wantCode(t, agentlane.WithToken(b, "0000").Ping(ctx), agentlane.CodeUnauthenticated)
	if err := b.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	default:
		t.Fatal("Close returned before the bridge exited")
	}
	goneWithin(t, 0, bridgePID, backendPID)
	if _, err := os.Stat(info.TokenFile); !os.IsNotExist(err) {
		t.Fatalf("the token file outlived the bridge: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	wantCode(t, b.Ping(ctx), agentlane.CodeUnavailable)
}

// A program that returns from main without Close, and one that is
// SIGKILLed: either way the liveness pipe closes and the bridge and its
// backend exit by themselves.
func TestProgramExitLeavesNoProcess(t *testing.T) {
	for _, mode := range []string{"return", "wait"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			cmd, bridgePID, backendPID := runHelper(t, mode)
			if mode == "wait" {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
			_ = cmd.Wait()
			goneWithin(t, 5*time.Second, bridgePID, backendPID)
		})
	}
}

// Wrong binaries are typed errors, and so is a bridge whose backend fails.
func TestStartFailures(t *testing.T) {
	ctx := within(t, 60*time.Second)
	// The bridge the rest of the suite uses ($AGENTLANE_BRIDGE when set: npm
	// test's build is not in target/release), for the last case.
	bridge := os.Getenv(agentlane.BinaryEnv)
	opts := demoOptions()
	opts.Binary = "/nonexistent/agentlane-bridge"
	_, err := agentlane.Start(ctx, opts)
	if e := wantCode(t, err, agentlane.CodeBridgeNotFound); !strings.Contains(e.Message, "/nonexistent/agentlane-bridge") {
		t.Fatalf("the message does not name the path: %v", e)
	}

	t.Setenv(agentlane.BinaryEnv, filepath.Join(t.TempDir(), "missing"))
	_, err = agentlane.Start(ctx, demoOptions())
	if e := wantCode(t, err, agentlane.CodeBridgeNotFound); !strings.Contains(e.Message, "$"+agentlane.BinaryEnv) {
		t.Fatalf("the message does not name the variable: %v", e)
	}

	opts.Binary = "/bin/echo" // runs, but is not the bridge
	_, err = agentlane.Start(ctx, opts)
	if e := wantCode(t, err, agentlane.CodeStartFailed); !strings.Contains(e.Message, "is not agentlane-bridge") {
		t.Fatalf("%v", e)
	}
	opts.Binary = "/bin/true" // ends without a line
	_, err = agentlane.Start(ctx, opts)
	if e := wantCode(t, err, agentlane.CodeStartFailed); !strings.Contains(e.Message, "without a discovery line") {
		t.Fatalf("%v", e)
	}

	if bridge == "" {
		os.Unsetenv(agentlane.BinaryEnv)
	} else {
		os.Setenv(agentlane.BinaryEnv, bridge)
	}
	opts = demoOptions()
	opts.App = "no_such_module:create_backend"
	opts.Stderr = &strings.Builder{}
	_, err = agentlane.Start(ctx, opts)
	if e := wantCode(t, err, agentlane.CodeStartFailed); e.Stage != "backend" || !strings.Contains(e.Stderr+e.Message, "no_such_module") {
		t.Fatalf("the bridge's failed line: %#v", e)
	}
}

// The backend killed mid-run: the run's stream ends unavailable, and the
// single-conversation bridge exits.
func TestBackendDeathEndsTheStream(t *testing.T) {
	t.Parallel()
	opts := scenarioOptions()
	opts.Stderr = &strings.Builder{}
	b := start(t, opts)
	ctx := within(t, 30*time.Second)
	run, err := b.Default().Stream(ctx, "slow 30", nil)
	if err != nil {
		t.Fatal(err)
	}
	for run.Next() {
		if run.Event().Type == "run_start" {
			_ = syscall.Kill(-b.Info().Backend.PID, syscall.SIGKILL)
		}
	}
	wantCode(t, run.Err(), agentlane.CodeUnavailable)
	select {
	case <-b.Done():
	case <-ctx.Done():
		t.Fatal("the bridge did not exit after its backend died")
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close of an exited bridge: %v", err)
	}
}
