"""subagent: run LLM subagents on trio."""
