"""Admission warnings as the API server passes them on: one line, at most 120 characters.

The API server forwards each warning as an HTTP `Warning` header and truncates longer
ones itself, mid-word. `fit_warning` shortens first and keeps whole words: clauses
(split at "; ") are kept from the front while they fit, and a single clause too long
is cut at the last space and ends in " …". Writers put the actionable part first, so
what is dropped is detail. Pure text; no other gangkeeper module is imported.
"""

from __future__ import annotations

#: What the API server passes on per warning without cutting it.
MAX_WARNING = 120
#: Appended where words were dropped; the space before it marks a whole-word cut.
ELLIPSIS = " …"


def fit_warning(text: str, limit: int = MAX_WARNING) -> str:
    """`text` on one line within `limit` characters, shortened at word boundaries."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    room = limit - len(ELLIPSIS)
    clauses = text.split("; ")
    kept = clauses[0]
    for clause in clauses[1:]:
        if len(kept) + 2 + len(clause) > room:
            break
        kept = f"{kept}; {clause}"
    if len(kept) > room:
        cut = kept.rfind(" ", 0, room + 1)
        # A single word longer than the room (a generated name) is cut where it must be.
        kept = kept[:cut] if cut > 0 else kept[:room]
    return kept.rstrip(" ;,:(") + ELLIPSIS
