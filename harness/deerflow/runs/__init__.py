"""The run's wiring: :class:`~deerflow.runs.manager.RunManager` opens the host services, and per run
resolves model, policy, profile, skills and MCP once, builds the lead agent and the RunContext, and
drives one execution (:mod:`~deerflow.runs.execution`), compaction and the delivery receipt.

The top of the harness below the hosts: it may import every package; nothing but the hosts (the
client, the CLI, scheduling, the Jupyter and kernel extensions) imports it.
"""
