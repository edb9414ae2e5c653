"""Generated from proto/agentlane/bridge/v1/bridge.proto by scripts/proto.sh. DO NOT EDIT."""
