"""DeerFlow Notebook: IPython extension with %deerflow magics (filled by the Jupyter integration)."""
