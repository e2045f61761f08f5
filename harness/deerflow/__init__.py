"""DeerFlow harness: config, models, agents, tools, sandbox, runtime and the embedded client."""
