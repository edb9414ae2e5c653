// A Go service that gives each of its users an AgentLane agent: one
// agentlane-bridge, one conversation (its own backend) per user, run at
// once, each answering its own approval requests.
// Run it here: cd examples/clients/go-library && go run .
package main

import (
	"context"
	"fmt"
	"log"
	"sync"

	agentlane "github.com/agentlanejs/process-bridge-native/clients/go"
)

func main() {
	ctx := context.Background()
	bridge, err := agentlane.Start(ctx, agentlane.Options{
		App:                   "demo_app:create_backend",
		ProjectDir:            "../../backend",
		Python:                "../../../.venv/bin/python",
		NoDefaultConversation: true, // every user gets one, below
	})
	if err != nil {
		log.Fatal(err) // an *agentlane.Error: agentlane.CodeOf(err) says which kind
	}
	defer bridge.Close() // stops every conversation's backend

	users := []string{"alice", "bob"}
	answers := make([]string, len(users))
	var wg sync.WaitGroup
	for i, user := range users {
		conversation, err := bridge.CreateConversation(ctx, agentlane.StartDefault)
		if err != nil {
			log.Fatal(err)
		}
		wg.Add(1)
		go func(i int, user string) {
			defer wg.Done()
			defer conversation.Close(ctx, 0)
			// The handler runs on its own goroutine for each approval
			// request, while Run keeps reading the run's events.
			approve := func(ctx context.Context, request agentlane.ApprovalRequest) agentlane.Decision {
				if user == "bob" {
					return agentlane.Deny("Bob's notebook is full.")
				}
				return agentlane.Allow()
			}
			result, err := conversation.Run(ctx, "Please save a note: "+user+" needs milk.", approve)
			if err != nil {
				answers[i] = user + ": " + err.Error()
				return
			}
			answers[i] = fmt.Sprintf("%s: %s", user, result.FinalText())
		}(i, user)
	}
	wg.Wait()
	for _, answer := range answers {
		fmt.Println(answer)
	}
}
