"""The one way bertkit tells the user something while it works: a ``bertkit:`` line on stderr."""

from __future__ import annotations

import sys


def notice(message: str) -> None:
    """Write ``bertkit: <message>`` to stderr (stdout stays for results)."""
    print(f"bertkit: {message}", file=sys.stderr)
