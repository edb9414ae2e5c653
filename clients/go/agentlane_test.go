package agentlane_test

import (
	"context"
	"testing"

	old "github.com/agentlanejs/process-bridge-native/clients/go"
	"github.com/agentlanejs/process-bridge-native/clients/go/agentlane"
)

// The old import path still builds and is the same library: its names are
// the new package's (a value of one is a value of the other), and a call
// through it behaves as one through the new path.
func TestOldImportPathIsTheSameLibrary(t *testing.T) {
	var options old.Options = agentlane.Options{}
	var run *old.Run = (*agentlane.RunStream)(nil)
	_ = run
	_, err := old.Start(context.Background(), options)
	if old.CodeOf(err) != agentlane.CodeInvalidArgument {
		t.Fatalf("Start without an app through the old path: %v", err)
	}
	if old.StartWarm != agentlane.StartWarm || old.CodeStartFailed != agentlane.CodeStartFailed {
		t.Fatal("the constants differ")
	}
}
