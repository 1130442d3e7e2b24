"""A result's indented JSON document (``--json``: ``json_text``), written as ``json.dumps(doc,
indent=2, default=str, ensure_ascii=False)`` writes it -- byte for byte (tests/test_indented
_json.py) -- in one recursive pass that joins each container's items, rather than by json's
pure-Python encoder (its C one writes no indentation): the 15,000 lines of ``barca status
--json`` over 500 nodes were ~120 M instructions that way, a third of the command."""
from __future__ import annotations

import json
from json.encoder import INFINITY
from json.encoder import encode_basestring as _text  # what json.dumps writes a str with here

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

_int, _float = int.__repr__, float.__repr__


def dumps(doc: Any) -> str:
    """``json.dumps(doc, indent=2, default=str, ensure_ascii=False)``."""
    try:
        return _value(doc, "\n")
    except (TypeError, ValueError, RecursionError):  # what json.dumps says of it, as it says it
        return json.dumps(doc, indent=2, default=str, ensure_ascii=False)


def _number(o: float) -> str:
    if o != o:
        return "NaN"
    if o == INFINITY:
        return "Infinity"
    if o == -INFINITY:
        return "-Infinity"
    return _float(o)


def _key(k: Any) -> str:
    if isinstance(k, str):
        return _text(k)
    if isinstance(k, float):
        return _text(_number(k))
    if k is True:
        return '"true"'
    if k is False:
        return '"false"'
    if k is None:
        return '"null"'
    if isinstance(k, int):
        return _text(_int(k))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")


def _value(o: Any, pad: str) -> str:
    """``o`` at the indentation ``pad`` (a newline and its spaces), in json's order of checks."""
    if isinstance(o, str):
        return _text(o)
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    if isinstance(o, int):
        return _int(o)
    if isinstance(o, float):
        return _number(o)
    if isinstance(o, (list, tuple)):
        if not o:
            return "[]"
        inner = pad + "  "
        out = []
        for v in o:  # (a plain str or a dict at once: most of a document)
            t = type(v)
            out.append(_text(v) if t is str else _dict(v, inner) if t is dict
                       else _value(v, inner))
        return "[" + inner + ("," + inner).join(out) + pad + "]"
    if isinstance(o, dict):
        return _dict(o, pad)
    return _value(str(o), pad)  # (default=str)


def _dict(o: dict[Any, Any], pad: str) -> str:
    if not o:
        return "{}"
    inner = pad + "  "
    out = []
    for k, v in o.items():
        t = type(v)
        out.append((_text(k) if type(k) is str else _key(k)) + ": " + (
            _text(v) if t is str else "null" if v is None else _dict(v, inner) if t is dict
            else _value(v, inner)))
    return "{" + inner + ("," + inner).join(out) + pad + "}"
