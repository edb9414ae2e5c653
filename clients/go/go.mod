module github.com/agentlanejs/process-bridge-native/clients/go

go 1.19
