"""A thread's files as the agent sees them: virtual paths, file operations, uploads, read marks, changes.

The bottom of :mod:`deerflow.sandbox`: it imports no other sandbox sub-package.
:mod:`~deerflow.sandbox.files.virtual_paths` is the only place virtual and host paths meet;
every host-side access goes through :mod:`deerflow.threadfs` (no symlink following).
"""
