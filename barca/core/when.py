"""Times as people and barca's JSON write them: RFC 3339 (``Z`` or an offset), ``YYYY-MM-DD
HH:MM:SS`` (with `` UTC`` or not), or a bare date; a time without a zone is UTC."""
from __future__ import annotations


def utc_seconds(text: str) -> float:
    """``text`` as Unix seconds; ValueError when it is none of the forms above."""
    import datetime as dt  # (only where a time is read from text: not on a cached command)
    when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace(" UTC", ""))
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()


def utc_text(ts: float | None) -> str | None:
    """Unix seconds as barca's JSON writes a time: ``YYYY-MM-DD HH:MM:SS``, UTC (the form
    barca 0.30.2's documents use, for a script that reads them); None stays None."""
    if ts is None:
        return None
    import time
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))
