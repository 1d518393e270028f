"""Text clean-up shared by the parsers: terminal escapes, line endings, input type."""

from __future__ import annotations

import re

# ECMA-48 control sequences (CSI ... final byte) and two-byte escapes: nvidia-smi underlines the
# topo -m header with ESC[4m ... ESC[0m when it writes to a terminal, and copies of a terminal keep them.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def clean_lines(text: str) -> list[str]:
    """Return the lines of ``text`` without terminal escape sequences, carriage returns or newlines."""
    if not isinstance(text, str):
        raise TypeError(f"expected the diagnostic output as str, got {type(text).__name__}")
    return [_ANSI.sub("", line).rstrip("\r") for line in text.replace("\r\n", "\n").split("\n")]
