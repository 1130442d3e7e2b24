"""A result's shape: what its value looks like, described once, when the value is written.

The description is kept in the ``shape`` column of metadata.db as JSON text, so ``barca
status`` says what a result holds without opening its file, importing the pipeline's modules
or unpickling anything (unpickling runs code). As barca 0.30.2 words it:

- a table (parquet, csv): ``{"type": "table", "rows": 3, "columns": [{"name", "type"}]}``,
  arrow type names;
- a JSON list: ``{"type": "list", "rows": N}``, and for a list of objects ``columns`` with the
  JSON types seen (``"int | null"``);
- a JSON object: ``{"type": "dict", "keys": [...]}`` (the first 100; ``key_count`` when more);
- any other JSON value: ``{"type": "int"}`` (``str``, ``float``, ``bool``, ``null``);
- a pickle: ``{"type": "module.QualName"}`` of the value's class, taken from the value itself.

Rows written by a barca that recorded a short text (``3 rows x 2 cols``) are read back as
well as that text allows (``decode``); ``label`` is the short text a table shows."""
from __future__ import annotations

import os
from itertools import islice

from barca.core import jsontext  # (json's C half: no re, #31 item 2)

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

MAX_KEYS = 100       # keys of a dict listed (barca 0.30.2 lists as many, with key_count past)
# Columns listed. barca 0.30.2 lists every column because it reads them from the file when
# asked; this description is stored with every materialization, so a 20,000-column table (or
# each of 100,000 keys of a wide partitioned asset) would weigh on metadata.db and on every
# status. Past the cap, ``column_count`` says how many there are (as ``key_count`` does).
MAX_COLUMNS = 500
LEGACY = "recorded by an older barca: "   # the note of a shape read from a text row

_JSON_NAMES = {bool: "bool", int: "int", float: "float", str: "str", type(None): "null"}
_JSON_TYPES: dict[type, str] = {**_JSON_NAMES, dict: "dict", list: "list", tuple: "list"}


def _json_type_of(t: type) -> str:
    """The JSON type of a value of class ``t`` (a subclass: its base's JSON word)."""
    for base, name in (*_JSON_NAMES.items(), (dict, "dict"), (list, "list"), (tuple, "list")):
        if issubclass(t, base):
            return name
    return t.__name__


def _json_type(v: Any) -> str:
    """A JSON value's type in the words Python gives it (``null`` for None: the JSON word)."""
    return _JSON_TYPES.get(type(v)) or _json_type_of(type(v))


def _keys(value: dict[Any, Any]) -> dict[str, Any]:
    """``keys`` (the first MAX_KEYS), ``key_count`` when there are more. A pickled dict whose
    keys are not all strings (tuples, ints) gives only ``key_count``: a key list in JSON would
    turn them into strings they are not."""
    first = list(islice(value, MAX_KEYS))
    if not all(type(k) is str for k in first):
        return {"key_count": len(value)}
    out: dict[str, Any] = {"keys": first}
    if len(value) > MAX_KEYS:
        out["key_count"] = len(value)
    return out


def _columns(cols: list[dict[str, str]]) -> dict[str, Any]:
    out: dict[str, Any] = {"columns": cols[:MAX_COLUMNS]}
    if len(cols) > MAX_COLUMNS:
        out["column_count"] = len(cols)
    return out


def _record_columns(rows: Any) -> dict[str, Any]:
    """The columns of a JSON list whose items are all objects: each key (in the order first
    seen) with the types its values have (``int | null``); nothing for any other list. Every
    row is read (a type seen once counts), by the types' identity: a million rows cost about
    as much as writing them."""
    seen: dict[Any, dict[type, None]] = {}
    for row in rows:
        if not isinstance(row, dict):
            return {}
        for k, v in row.items():
            types = seen.get(k)
            if types is None:
                types = seen[k] = {}
            types[type(v)] = None
    if not seen:
        return {}
    cols = []
    for k, ts in seen.items():
        names = list(dict.fromkeys(_JSON_TYPES.get(t) or _json_type_of(t) for t in ts))
        names.sort(key=lambda n: n == "null")  # null last: ``str | null``, a key sometimes unset
        cols.append({"name": str(k), "type": " | ".join(names)})
    return _columns(cols)


def type_name(value: Any) -> str:
    """``module.QualName`` of a value's class (a builtin by its name alone: ``set``)."""
    t = type(value)
    module = getattr(t, "__module__", None) or ""
    name = getattr(t, "__qualname__", None) or t.__name__
    return name if module in ("builtins", "") else f"{module}.{name}"


def describe(value: Any, fmt: str) -> dict[str, Any]:
    """The shape of ``value`` as stored in ``fmt`` (json or pickle; a table written into a file
    is described from that file, see ``table``)."""
    if fmt == "json":  # what the file holds: a tuple is a list there, an OrderedDict a dict
        t = _json_type(value)
        if t == "dict":
            return {"type": "dict", **_keys(value)}
        if t == "list":
            return {"type": "list", "rows": len(value), **_record_columns(value)}
        return {"type": t}
    out: dict[str, Any] = {"type": type_name(value)}
    if isinstance(value, dict):   # e.g. a dict of DataFrames: its keys help as in JSON
        out.update(_keys(value))
    elif type(value) in (list, tuple):
        out["rows"] = len(value)
    else:
        out.update(_table_of(value))
    return out


def _table_of(value: Any) -> dict[str, Any]:
    """rows and columns of a table kept as a pickle (parquet could not hold it); of any
    other value with a ``shape`` (a numpy array), its first dimension as rows."""
    from barca.store import frames
    k = frames.kind(value)
    if k is not None:
        try:  # its class stays its type: it is a pickle, not a table file
            return {n: v for n, v in table(value, k).items() if n != "type"}
        except Exception:  # noqa: BLE001 - a table arrow cannot hold: its type is still said
            pass
    s = getattr(value, "shape", None)
    if isinstance(s, tuple) and s and all(type(n) is int for n in s):
        return {"rows": s[0]}
    return {}


def written(value: Any, fmt: str, path: str) -> dict[str, Any] | None:
    """The shape of a table just written into ``path`` (parquet or csv); None if it cannot be
    said -- the file is written and stays: a shape is no reason to store the value otherwise."""
    from barca.store import frames
    k = frames.kind(value)
    try:
        if k is None:
            return None
        parquet = fmt == "parquet" and frames.installed("pyarrow")
        got = table(value, k, path if parquet else None)
        if got["rows"] < 0:  # a relation, executed into the file: its rows are counted there
            got["rows"] = _count(path, fmt)
        return got
    except Exception:  # noqa: BLE001
        return None


def _count(path: str, fmt: str) -> int:
    import duckdb
    quoted = "'" + path.replace("'", "''") + "'"
    reader = "read_parquet" if fmt == "parquet" else "read_csv_auto"
    con = duckdb.connect()
    try:
        return int(con.sql(f"SELECT count(*) FROM {reader}({quoted})").fetchall()[0][0])
    finally:
        con.close()


def table(value: Any, k: str, path: str | None = None) -> dict[str, Any]:
    """``rows`` and ``columns`` of a table. From a parquet file's footer when ``path`` names
    one and pyarrow is installed (what the file holds, as any reader will see it); else from
    the table in memory -- for a csv, whose text has no types, the types the step produced."""
    from barca.store import frames
    if path is not None and frames.installed("pyarrow"):
        got = of_file(path, "parquet")
        if got is not None:
            return got
    if k == "pyarrow":
        rows, cols = value.num_rows, _arrow_columns(value.schema)
    elif k == "pandas":
        rows = len(value)
        if frames.installed("pyarrow"):
            import pyarrow as pa
            cols = _arrow_columns(pa.Schema.from_pandas(value, preserve_index=False))
        else:
            cols = [{"name": str(c), "type": str(t)} for c, t in value.dtypes.items()]
    elif k == "polars":
        value = frames.settle(value)
        rows = value.height
        try:  # arrow's words, as for every other table, when pyarrow can say them
            cols = _arrow_columns(value.head(0).to_arrow().schema)
        except Exception:  # noqa: BLE001 - no pyarrow: polars' own names (Int64, String)
            cols = [{"name": c, "type": str(t)} for c, t in value.schema.items()]
    else:  # duckdb: its own type names (BIGINT, VARCHAR); rows counted by the caller
        rows = -1
        cols = [{"name": c, "type": str(t)} for c, t in zip(value.columns, value.types,
                                                            strict=True)]
    return {"type": "table", "rows": rows, **_columns(cols)}


def _arrow_columns(schema: Any) -> list[dict[str, str]]:
    return [{"name": f.name, "type": str(f.type)} for f in schema]


MAX_JSON_READ = 64 << 20   # an adopted JSON file larger than this is not read for its shape


def of_file(path: Any, fmt: str | None) -> dict[str, Any] | None:
    """The shape of a result found on disk with no record (adopted, after metadata.db was
    rebuilt): a JSON file's value, a parquet file's footer. None for a pickle (never
    unpickled), a csv, a JSON file past MAX_JSON_READ, or what cannot be read."""
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq
            meta = pq.read_metadata(path)
            cols = _arrow_columns(meta.schema.to_arrow_schema())
            return {"type": "table", "rows": meta.num_rows, **_columns(cols)}
        if fmt == "json" and os.path.getsize(path) <= MAX_JSON_READ:
            with open(path, encoding="utf-8") as f:
                return describe(jsontext.loads(f.read()), "json")  # (json.load)
    except Exception:  # noqa: BLE001 - no shape rather than no adoption
        return None
    return None


# ---------------------------------------------------------------------------- reading back

def encode(shape: dict[str, Any] | None) -> str | None:
    return None if shape is None else jsontext.dumps(shape, ensure_ascii=False,
                                                     separators=(",", ":"))


def decode(text: Any) -> dict[str, Any] | None:
    """The shape a ``shape`` column (or a status JSON from an older server) holds: the object,
    or for the short text an older barca recorded, what that text says (``rows`` of a list,
    ``key_count`` of a dict) with a ``note`` quoting it. None for no shape."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str) or not text or text == "-":
        return None
    if text.startswith("{"):
        try:
            got = jsontext.loads(text)
        except ValueError:
            got = None
        if isinstance(got, dict):
            return got
    return _from_text(text)


def _from_text(text: str) -> dict[str, Any]:
    words = text.split()
    note = {"note": LEGACY + text}
    if len(words) == 5 and words[1] == "rows" and words[2] == "x" and words[0].isdigit():
        return {"type": "table", "rows": int(words[0]), **note}
    if len(words) == 3 and words[0] in ("dict", "list") and words[1][1:].isdigit():
        n = int(words[1][1:])
        return {"type": "dict", "key_count": n, **note} if words[0] == "dict" \
            else {"type": "list", "rows": n}
    return {"type": text, **note} if text not in _JSON_NAMES.values() else {"type": text}


def label(shape: Any) -> str:
    """The SHAPE cell of a table: ``3 rows x 2 cols``, ``dict (2 keys)``, ``list (3 items)``,
    ``str``, ``Model`` (a class by its name: JSON has its module); ``-`` for none."""
    s = decode(shape)
    if s is None:
        return "-"
    note = s.get("note")
    if isinstance(note, str) and note.startswith(LEGACY):
        return note[len(LEGACY):]     # the older barca's own words
    # a class by its own name, as the table always showed it (``Model``); JSON has the module
    t = str(s.get("type", "?")).rsplit(".", 1)[-1]
    rows, cols = s.get("rows"), s.get("column_count", len(s.get("columns") or ()) or None)
    if t == "table":
        return f"{rows} rows x {cols or 0} cols"
    if t == "dict" and ("keys" in s or "key_count" in s):
        n = s.get("key_count", len(s.get("keys") or ()))
        return f"dict ({n} key{'' if n == 1 else 's'})"
    if t == "list" and rows is not None:
        return f"list ({rows} item{'' if rows == 1 else 's'})"
    if rows is not None:   # a pickled table, list or array
        return f"{t} ({rows} rows x {cols} cols)" if cols else f"{t} ({rows} rows)"
    if "keys" in s or "key_count" in s:
        n = s.get("key_count", len(s.get("keys") or ()))
        return f"{t} ({n} key{'' if n == 1 else 's'})"
    return t
