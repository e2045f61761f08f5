"""The user's own notebooks: read them, propose or apply cell edits, undo a run's edits.

``access`` (where notebooks live, the seam; ``files``: a folder; ``contents``: a ContentsManager), ``edits``
(cell changes as data), ``records`` (proposals and undo records per thread),
``render`` (cells as bounded, fenced text), ``service`` (what tools and
commands do), ``host`` (run context and apply/undo for hosts).
"""

from deerflow.notebooks.access import NotebookAccess, NotebookError
from deerflow.notebooks.contents import ContentsNotebookAccess
from deerflow.notebooks.files import FileNotebookAccess

__all__ = ["ContentsNotebookAccess", "FileNotebookAccess", "NotebookAccess", "NotebookError"]
