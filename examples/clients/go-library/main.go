// A Go program that gives an AgentLane agent a prompt and answers its
// approval request, with github.com/agentlanejs/process-bridge-native/clients/go.
// Run from the repository root: go run ./examples/clients/go-library
// (cd there first: it is its own module).
package main

import (
	"context"
	"fmt"
	"log"

	agentlane "github.com/agentlanejs/process-bridge-native/clients/go"
)

func main() {
	ctx := context.Background()
	bridge, err := agentlane.Start(ctx, agentlane.Options{
		App:        "demo_app:create_backend",
		ProjectDir: "../../backend",
		Python:     "../../../.venv/bin/python",
		// Called on its own goroutine for each approval request.
		OnApproval: func(ctx context.Context, request agentlane.ApprovalRequest) agentlane.Decision {
			fmt.Printf("[approve %s %s]\n", request.ToolName, request.Path)
			return agentlane.Allow()
		},
	})
	if err != nil {
		log.Fatal(err) // an *agentlane.Error: agentlane.CodeOf(err) says which kind
	}
	defer bridge.Close()

	run, err := bridge.Default().Prompt(ctx, "Please save a note: remember milk.", nil)
	if err != nil {
		log.Fatal(err)
	}
	events := 0
	for run.Next() { // the approval is answered meanwhile
		events++
	}
	if run.Err() != nil {
		log.Fatal(run.Err())
	}
	var done struct {
		FinalOutput string `json:"final_output"`
	}
	if err := run.Terminal().Decode(&done); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s after %d events: %s\n", run.Terminal().Type, events, done.FinalOutput)
}
