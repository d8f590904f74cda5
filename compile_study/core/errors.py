"""What a bad input raises where the message says it all: `python -m compile_study` (compile_study/__main__.py)
prints it as one line and exits 2, with no traceback; and the count a command's option takes. Torch-free."""

from __future__ import annotations

import argparse


class InputError(ValueError):
    """A bad input named in its message (a damaged record, data that cannot be used): no traceback adds to it."""


def count(most: int):
    """argparse's type for a count from 1 to `most` (a bound against typos); argparse names the option and the value
    it refuses."""

    def parse(text: str) -> int:
        if not text.lstrip("-").isdigit() or not 1 <= int(text) <= most:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 1 to {most}")
        return int(text)

    return parse
