module agentlane-go-library-example

go 1.19

require github.com/agentlanejs/process-bridge-native/clients/go v0.0.0

replace github.com/agentlanejs/process-bridge-native/clients/go => ../../../clients/go
