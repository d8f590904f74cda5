"""One config error: its message, with the config keys whose values cause it (so that core/config/config_schema.py can
name the file that set them)."""

from __future__ import annotations


class Problem(str):
    """One error message, with the config keys whose values cause it (to name the file that set them)."""

    keys: tuple[tuple, ...]

    def __new__(cls, text: str, *keys: tuple) -> Problem:
        self = super().__new__(cls, text)
        self.keys = keys
        return self
