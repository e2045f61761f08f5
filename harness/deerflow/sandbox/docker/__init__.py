"""The ``docker`` provider: the container spec, the provider and the ``docker exec`` shim.

Apart because it needs the optional ``docker`` extra; :mod:`deerflow.sandbox.factory` imports it only
when ``sandbox.use`` is ``docker``.  Builds on :mod:`deerflow.sandbox.execution`.
"""
