"""DeerFlow Notebook: Jupyter server extension (filled by the Jupyter integration)."""
