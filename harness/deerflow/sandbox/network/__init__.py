"""A sandbox's network: the allowlist policy, the egress proxy that enforces it, approval requests.

Imports :mod:`deerflow.web.addresses` (one address classifier for the proxy and the web tools)
and no other sandbox sub-package.
"""
