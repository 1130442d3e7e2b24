"""Times as people and barca's JSON write them: RFC 3339 (``Z`` or an offset), ``YYYY-MM-DD
HH:MM:SS`` (with `` UTC`` or not), or a bare date; a time without a zone is UTC."""
from __future__ import annotations


def utc_seconds(text: str) -> float:
    """``text`` as Unix seconds; ValueError when it is none of the forms above."""
    import datetime as dt  # (only where a time is read from text: not on a cached command)
    when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace(" UTC", ""))
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()
