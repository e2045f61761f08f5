"""Durable batches of subagent tasks: SQL queue (:mod:`.store` over :mod:`.sql`), worker pool
(:mod:`.worker`), submitter and export (:mod:`.submitter`), lead tools (:mod:`.tools`), and the
standalone worker process (:mod:`.worker_main`)."""
