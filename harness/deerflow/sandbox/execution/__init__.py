"""Where commands and kernels run: the provider contract and the ``local`` and ``bwrap`` providers.

With what they share with :mod:`deerflow.sandbox.docker`: the process runner and its output caps,
the environment allowlist, resource limits, the in-sandbox supervisor and its egress wiring, the
relocated Python runtime, and the command audit.  Builds on :mod:`deerflow.sandbox.files` and
:mod:`deerflow.sandbox.network`.
"""
