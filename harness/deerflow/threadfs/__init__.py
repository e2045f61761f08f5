"""The one way host-side code touches a thread's files.

See :mod:`deerflow.threadfs.root` for the rules (no link followed, regular
files only, atomic writes under unpredictable names) and why they exist.
"""

from deerflow.threadfs._resolve import force_walk, using_openat2
from deerflow.threadfs.root import EntryInfo, Kind, SafeDir, UnsafePath

__all__ = ["EntryInfo", "Kind", "SafeDir", "UnsafePath", "force_walk", "using_openat2"]
