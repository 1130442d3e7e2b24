"""A size setting (the cache size limit): bytes, a unit, a share of the disk, or off."""
from __future__ import annotations

import re

from barca.core.errors import UsageError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.I)
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(text: str | int, what: str, disk: int | None = None) -> int | None:
    """A cache size: bytes, ``"500MB"``, ``"20GiB"``, ``"10%"`` of ``disk`` (the filesystem's
    size), or ``"off"`` (None: no limit). Anything else is a usage error naming ``what``."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text >= 0:
            return text
    elif isinstance(text, str):
        t = text.strip().lower()
        if t == "off":
            return None
        if t.endswith("%"):
            try:
                pct = float(t[:-1])
            except ValueError:
                pct = -1.0
            if 0 < pct <= 100:
                return int((disk or 0) * pct / 100) if disk is not None else 0
        else:
            m = _SIZE.match(text)
            if m:
                return int(float(m.group(1)) * _UNITS[(m.group(2) or "b").lower()])
    raise UsageError(f"{what} = {text!r} is not a size.",
                     f'Write {what} as bytes, "500MB", "20GB", "20GiB", "10%" (of the disk) '
                     'or "off".')
