"""The one way host-side code touches a thread's files.

See :mod:`deerflow.threadfs.root` for the rules (no link followed, regular
files only, atomic writes under unpredictable names) and why they exist, and
:mod:`deerflow.threadfs.entries` for what it hands out (entries, its error).
"""

from deerflow.threadfs._resolve import force_walk, using_openat2
from deerflow.threadfs.entries import EntryInfo, Kind, UnsafePath
from deerflow.threadfs.root import SafeDir
from deerflow.threadfs.tree import MAX_WALK_DEPTH, remove_tree

__all__ = ["MAX_WALK_DEPTH", "EntryInfo", "Kind", "SafeDir", "UnsafePath", "force_walk", "remove_tree", "using_openat2"]
