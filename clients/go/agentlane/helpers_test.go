package agentlane_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentlanejs/process-bridge-native/clients/go/agentlane"
)

// The repository's parts the tests use: the demo and scenario backends with
// the .venv of scripts/setup-python.sh, and the bridge FindBinary finds
// ($AGENTLANE_BRIDGE, PATH, or ../../../target/release).
var (
	repoRoot, _ = filepath.Abs("../../..")
	python      = filepath.Join(repoRoot, ".venv/bin/python")
)

func demoOptions() agentlane.Options {
	return agentlane.Options{App: "demo_app:create_backend", ProjectDir: filepath.Join(repoRoot, "examples/backend"), Python: python}
}

func scenarioOptions() agentlane.Options {
	return agentlane.Options{App: "scenario_app:create_backend", ProjectDir: filepath.Join(repoRoot, "tests/e2e/backends"), Python: python}
}

func start(t *testing.T, opts agentlane.Options) *agentlane.Bridge {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := agentlane.Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func wantCode(t *testing.T, err error, code agentlane.Code) *agentlane.Error {
	t.Helper()
	var e *agentlane.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("want an *agentlane.Error with code %s, got %#v (%v)", code, err, err)
	}
	return e
}

// alive reports whether pid is a live process (a zombie counts as gone).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// goneWithin waits until none of pids is alive.
func goneWithin(t *testing.T, d time.Duration, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var left []int
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v still alive %v later", left, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
