"""Text utilities shared across the harness (linear-time regexes: :mod:`.safe_regex`)."""
