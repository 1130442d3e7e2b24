"""JSON text exactly as ``json.dumps`` and ``json.loads`` give it, from CPython's C half of
``json`` (``_json``) alone.

``import json`` compiles its module-level regular expressions: it loads ``re``, and with it
``enum``, ``functools`` and ``collections`` (~5 ms, ~20 M instructions of a cached command's
start) to write one small document and read a few short texts, work its C accelerator does
anyway. These are the very functions ``json`` calls (``make_encoder``, ``make_scanner``,
``encode_basestring(_ascii)``), called as ``json.JSONEncoder.encode`` and
``json.JSONDecoder.decode`` call them, with their defaults -- the same text for the same value
(tests/test_jsontext.py compares them over many values). Whatever that path does not cover
is ``json``'s own, imported then: ``indent`` (pure-Python in ``json`` too), bytes to decode,
and any error -- a failed call is made again by ``json``, which raises its own error (a
``default`` function may so be called twice for a value that fails; barca's is ``str``).
Another Python without ``_json``: ``json`` throughout. As ``barca.core.sha`` and
``barca.store.driver`` do for ``_sha256`` and ``_sqlite3``."""
from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any



def _c_half() -> Any:
    try:
        return __import__("_json")
    except ImportError:  # pragma: no cover - not CPython: json's own (pure-Python twins)
        return None


_C = _c_half()
_QUOTES: Any = _C if _C is not None else __import__("json.encoder").encoder
encode_basestring: Callable[[str], str] = _QUOTES.encode_basestring
encode_basestring_ascii: Callable[[str], str] = _QUOTES.encode_basestring_ascii

__all__ = ["dumps", "encode_basestring", "encoder", "loads", "scanner"]

_WHITESPACE = " \t\n\r"  # json.decoder.WHITESPACE's characters


def encoder(*, ensure_ascii: bool = True, separators: tuple[str, str] | None = None,
            default: Callable[[Any], Any] | None = None, sort_keys: bool = False,
            allow_nan: bool = True) -> Callable[[Any], str]:
    """``json.JSONEncoder(...).encode`` for these arguments (and the others' defaults: no
    indent, circular references checked, no skipped keys): made once, called for many values."""
    item_sep, key_sep = separators if separators is not None else (", ", ": ")
    quote = encode_basestring_ascii if ensure_ascii else encode_basestring

    def again(value: Any) -> str:  # json's own: a value the C path failed on, or no C path
        import json
        return json.JSONEncoder(ensure_ascii=ensure_ascii, separators=separators,
                                default=default, sort_keys=sort_keys,
                                allow_nan=allow_nan).encode(value)

    if _C is None:  # pragma: no cover - not CPython
        return again
    make_encoder = _C.make_encoder

    def unserializable(value: Any) -> Any:  # json.JSONEncoder.default's place (json says why)
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    def encode(value: Any) -> str:
        if isinstance(value, str):  # as JSONEncoder.encode: a lone string is quoted
            return quote(value)
        try:  # a new encoder per value, as json's: its own dict of the objects being encoded
            chunks = make_encoder({}, default or unserializable, quote, None, key_sep,
                                  item_sep, sort_keys, False, allow_nan)(value, 0)
        except Exception:  # noqa: BLE001 - json raises its own error (or gives its text)
            return again(value)
        return "".join(chunks)

    return encode


_ENCODERS: dict[tuple[Any, ...], Callable[[Any], str]] = {}


def dumps(value: Any, *, ensure_ascii: bool = True, separators: tuple[str, str] | None = None,
          default: Callable[[Any], Any] | None = None, sort_keys: bool = False,
          allow_nan: bool = True, indent: int | str | None = None) -> str:
    """``json.dumps(value, ...)`` for these arguments (the others at their defaults)."""
    key = (ensure_ascii, separators, default, sort_keys, allow_nan)
    enc = _ENCODERS.get(key)
    if enc is None:
        enc = encoder(ensure_ascii=ensure_ascii, separators=separators, default=default,
                      sort_keys=sort_keys, allow_nan=allow_nan)
        if len(_ENCODERS) < 16:  # (a default made per call is not kept: a kernel lives long)
            _ENCODERS[key] = enc
    if indent is None:
        return enc(value)
    try:
        return _indented(value, enc, ensure_ascii, separators, default, sort_keys, indent)
    except Exception:  # noqa: BLE001 - json raises its own error (or gives its text)
        import json
        return json.dumps(value, ensure_ascii=ensure_ascii, separators=separators,
                          default=default, sort_keys=sort_keys, allow_nan=allow_nan,
                          indent=indent)


def _indented(value: Any, scalar: Callable[[Any], str], ensure_ascii: bool,
              separators: tuple[str, str] | None, default: Callable[[Any], Any] | None,
              sort_keys: bool, indent: int | str) -> str:
    """Indented text as json's pure-Python encoder (``_make_iterencode``) writes it: its
    layout, each scalar (and each key) by the C encoder, as json writes them. A circular
    value recurses until Python stops it (json then says so)."""
    pad = indent if isinstance(indent, str) else " " * indent
    item_sep, key_sep = separators if separators is not None else (",", ": ")
    quote = encode_basestring_ascii if ensure_ascii else encode_basestring
    out: list[str] = []

    def put(o: Any, level: int) -> None:
        if isinstance(o, (str, int, float)) or o is None:  # (bool is an int)
            out.append(scalar(o))
        elif isinstance(o, (list, tuple, dict)):
            if not o:
                out.append("{}" if isinstance(o, dict) else "[]")
                return
            inner = "\n" + pad * (level + 1)
            out.append("{" if isinstance(o, dict) else "[")
            out.append(inner)
            if isinstance(o, dict):
                first = True
                for k, v in (sorted(o.items()) if sort_keys else o.items()):
                    if not first:
                        out.append(item_sep + inner)
                    first = False
                    if not isinstance(k, (str, int, float)) and k is not None:
                        raise TypeError(k)  # (json says which)
                    out.append(quote(k) if isinstance(k, str) else quote(scalar(k)))
                    out.append(key_sep)
                    put(v, level + 1)
            else:
                for i, v in enumerate(o):
                    if i:
                        out.append(item_sep + inner)
                    put(v, level + 1)
            out.append("\n" + pad * level + ("}" if isinstance(o, dict) else "]"))
        elif default is None:
            raise TypeError(o)  # (json says why)
        else:
            put(default(o), level)

    put(value, 0)
    return "".join(out)


class _Defaults:
    """What ``make_scanner`` reads of ``json.JSONDecoder()``: its defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"),
                      "NaN": float("nan")}.__getitem__


def scanner() -> Callable[[str, int], tuple[Any, int]]:
    """``json.JSONDecoder().scan_once``: ``(value, end)`` of the value that starts at an index
    of a text (StopIteration: none starts there)."""
    if _C is None:  # pragma: no cover - not CPython
        import json
        got: Callable[[str, int], tuple[Any, int]] = vars(json.JSONDecoder())["scan_once"]
        return got
    made: Callable[[str, int], tuple[Any, int]] = _C.make_scanner(_Defaults())
    return made


_scan: list[Callable[[str, int], tuple[Any, int]]] = []


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``: a str that is one JSON value between whitespace is scanned here;
    bytes, and any text the scan does not take whole, are json's (its value or its error)."""
    if isinstance(text, str):
        if not _scan:
            _scan.append(scanner())
        start = len(text) - len(text.lstrip(_WHITESPACE))
        try:
            value, end = _scan[0](text, start)
        except Exception:  # noqa: BLE001 - no value there: json raises its own error
            end = -1
        if end >= 0 and not text[end:].lstrip(_WHITESPACE):
            return value
    import json
    return json.loads(text)
