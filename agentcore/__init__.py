"""agentcore: one agent run."""
