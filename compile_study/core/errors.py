"""What a bad input raises where the message says it all: `python -m compile_study` (compile_study/__main__.py)
prints it as one line and exits 2, with no traceback. Torch-free."""

from __future__ import annotations


class InputError(ValueError):
    """A bad input named in its message (a damaged record, data that cannot be used): no traceback adds to it."""
