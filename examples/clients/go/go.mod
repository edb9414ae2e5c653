module agentlane-bridge-go-check

go 1.19
