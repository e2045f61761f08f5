"""The sandbox, by concern (each sub-package imports only those listed before it).

* :mod:`~deerflow.sandbox.files` — virtual paths, file operations, uploads, read marks, changes;
* :mod:`~deerflow.sandbox.network` — allowlist policy, egress proxy, network approvals;
* :mod:`~deerflow.sandbox.execution` — the provider contract, ``local`` and ``bwrap``, processes,
  environment, limits, the in-sandbox supervisor;
* :mod:`~deerflow.sandbox.docker` — the ``docker`` provider (optional extra);
* :mod:`~deerflow.sandbox.kernels` — a thread's Python kernel and the kernel pool.

:mod:`deerflow.sandbox.factory` composes them from the config (the provider, its egress proxy and
the kernel pool), which is why it sits above the sub-packages rather than in one.
"""
