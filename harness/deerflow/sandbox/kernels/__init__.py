"""A thread's Python kernel: its lifecycle, the per-thread pool, rendered cell output, the notebook log.

Builds on :mod:`deerflow.sandbox.execution` (a kernel is launched by the thread's provider).
"""
