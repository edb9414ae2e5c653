// A Go service that gives each of its users an AgentLane agent: one
// agentlane-bridge, one conversation (its own backend) per user, run at
// once, one approval handler for all of them.
//
// In this repository: cd examples/clients/go-library && go run .
// Elsewhere: go run . -project-dir DIR -python PYTHON (see the README).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"sync"

	"github.com/agentlanejs/process-bridge-native/clients/go/agentlane"
)

func main() {
	projectDir := flag.String("project-dir", "../../backend", "the directory where the app's module imports")
	python := flag.String("python", "../../../.venv/bin/python", "a Python that has agentlane")
	flag.Parse()

	ctx := context.Background()
	users := map[string]string{} // conversation ID -> user, filled before any run
	bridge, err := agentlane.Start(ctx, agentlane.Options{
		App:                   "demo_app:create_backend",
		ProjectDir:            *projectDir,
		Python:                *python, // relative: to the working directory
		NoDefaultConversation: true,    // every user gets one, below
		// One handler for every conversation, on its own goroutine for each
		// request while the runs go on: ConversationID says whose run asks.
		OnApproval: func(ctx context.Context, request agentlane.ApprovalRequest) agentlane.Decision {
			if users[request.ConversationID] == "bob" {
				return agentlane.Deny("Bob's notebook is full.")
			}
			return agentlane.Allow()
		},
	})
	if err != nil {
		log.Fatal(err) // an *agentlane.Error: agentlane.CodeOf(err) says which kind
	}
	defer bridge.Close() // stops every conversation's backend

	names := []string{"alice", "bob"}
	conversations := make([]*agentlane.Conversation, len(names))
	for i, name := range names {
		if conversations[i], err = bridge.CreateConversation(ctx, agentlane.StartDefault); err != nil {
			log.Fatal(err)
		}
		users[conversations[i].ID()] = name
	}
	answers := make([]string, len(names))
	var wg sync.WaitGroup
	for i, conversation := range conversations {
		wg.Add(1)
		go func(i int, conversation *agentlane.Conversation) {
			defer wg.Done()
			defer conversation.Close(ctx, 0)
			// Run reads the whole run (Stream gives it event by event).
			result, err := conversation.Run(ctx, "Please save a note: "+names[i]+" needs milk.", nil)
			if err != nil {
				answers[i] = names[i] + ": " + err.Error()
				return
			}
			answers[i] = fmt.Sprintf("%s: %s", names[i], result.FinalText())
		}(i, conversation)
	}
	wg.Wait()
	for _, answer := range answers {
		fmt.Println(answer)
	}
}
