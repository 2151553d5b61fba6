"""The one JSON body parser of every route: ``POST /``, ``/embed``, ``/v1/embeddings`` and the rest read a
request body through :func:`parse_json_body`, with the same limits and the same answers.

A body that is not JSON is a 422 (``the request body is not valid JSON (...)``); one whose arrays and
objects nest deeper than :data:`MAX_DEPTH` is a 400, whether Python's decoder would have given up on it
(``RecursionError``) or not: no request bertkit answers nests deeper than four levels.
"""

from __future__ import annotations

import json
from typing import Any

from bertkit.serve.errors import Problem

MAX_DEPTH = 32
"""The deepest nesting of arrays and objects a request body may have."""
TOO_DEEP = f"the request body nests arrays or objects deeper than {MAX_DEPTH} levels; send flat lists of inputs"


def parse_json_body(raw: bytes) -> Any:
    """The JSON value of ``raw``; :class:`Problem` 422 when it is not JSON, 400 when it nests too deep."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise Problem(400, TOO_DEEP) from None
    except ValueError as exc:  # JSONDecodeError, and bytes that are not UTF-8
        raise Problem(422, f"the request body is not valid JSON ({exc})") from None
    if nesting_depth(value) > MAX_DEPTH:
        raise Problem(400, TOO_DEEP)
    return value


def nesting_depth(value: Any) -> int:
    """How deep ``value``'s lists and dicts nest (a scalar: 0, ``[1]``: 1), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break
        stack.extend((child, depth + 1) for child in children if isinstance(child, (list, dict)))
    return deepest
