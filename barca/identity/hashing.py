"""Run hashes: the definition hash of a node (code + counted decorator arguments + the static
dependency cone) and the per-step hash that folds in inputs, sensor values and the key."""
from __future__ import annotations

import operator
import os
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice

from barca.core.jsontext import encode_basestring, encoder
from barca.core.sha import constructor
from barca.core.types import RunHash
from barca.identity.digests import INSTALLED, digest, in_project, sha  # noqa: F401  (re-exported)
from barca.identity.pairs import text_digest, text_of
from barca.model.discovery import FileModel, NodeModel

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:  # (nor pathlib: the root is a str until the cone needs a Path)
    import ast
    from pathlib import Path
    from typing import Any

# json.JSONEncoder(...).encode (from json's C half: no re, #31 item 2)
_CANONICAL = encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, no NaN (one encoder, not one per call: dict sources call this
    once per key)."""
    return _CANONICAL(value)


def str_dict_json(value: dict[Any, Any]) -> tuple[str, str, str] | None:
    """For a dict whose keys and values are all strings: ``json.dumps(value,
    ensure_ascii=False)``, ``canonical_json(value)`` and ``json.dumps(list(value.values()),
    ensure_ascii=False)``, exactly, from one encoding of each string (the encoder's own
    function; none, when no string needs an escape) -- a dict source of 200,000 keys is
    encoded once, not three times. None: not such a dict (or an empty one)."""
    if not value or not _STRING.issuperset(map(type, value)) \
            or not _STRING.issuperset(map(type, value.values())):
        return None
    keys = list(value)
    in_order = all(map(operator.lt, keys, islice(keys, 1, None)))  # in key order already
    vals = list(value.values())
    if in_order and _unescaped("".join(keys)) and _unescaped("".join(vals)):
        # no string needs an escape: each is itself between quotes (no call per string), and
        # the texts are joined from one list of the pieces, not a "key": "value" string per
        # key first (the last separator stands for the closing brace)
        n = len(keys)
        pieces = [""] * (4 * n)
        pieces[0::4], pieces[1::4], pieces[2::4], pieces[3::4] = keys, ['": "'] * n, vals, \
            ['", "'] * n
        pieces[-1] = '"}'
        plain = '{"' + "".join(pieces)
        pieces[1::4], pieces[3::4] = ['":"'] * n, ['","'] * n
        pieces[-1] = '"}'
        return plain, '{"' + "".join(pieces), '["' + '", "'.join(vals) + '"]'
    ek = list(map(encode_basestring, keys))
    ev = list(map(encode_basestring, vals))
    plain = "{" + ", ".join(map(": ".join, zip(ek, ev, strict=True))) + "}"
    if in_order:
        canon = "{" + ",".join(map(":".join, zip(ek, ev, strict=True))) + "}"
    else:
        order = sorted(range(len(keys)), key=keys.__getitem__)
        canon = "{" + ",".join([f"{ek[i]}:{ev[i]}" for i in order]) + "}"
    return plain, canon, "[" + ", ".join(ev) + "]"


def _unescaped(text: str) -> bool:
    """Whether json's encoder (ensure_ascii=False) writes each string in ``text`` as it is: it
    escapes only a quote, a backslash and a control character, which is not printable (any
    other character that is not printable says no too: the encoding path is exact)."""
    return '"' not in text and "\\" not in text and text.isprintable()


def value_digest(value: Any) -> str:
    """SHA-256 of a value: canonical JSON when it is JSON, else its stable pickle bytes."""
    try:
        return sha("json", canonical_json(value))
    except (TypeError, ValueError):
        return sha("pickle", stable_pickle(value))


def stable_pickle(value: Any, hook: Any = None) -> bytes:
    """A value's pickle bytes, the same in every process: a set's (or frozenset's) members in
    the order of their own digests, never in the order ``PYTHONHASHSEED`` gives them, at any
    depth. ``hook(obj)``, when given, may stand for an object with a token of its own (a
    notebook function by what it does); None pickles it as usual."""
    import io
    import pickle

    class Stable(pickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:  # called for every object pickled
            if isinstance(obj, (set, frozenset)):
                t = type(obj)
                members = sorted(sha(stable_pickle(m, hook)) for m in obj)
                extra = stable_pickle(vars(obj), hook) if hasattr(obj, "__dict__") else b""
                return ("set", t.__module__, t.__qualname__, members, extra)
            return hook(obj) if hook is not None else None

    buf = io.BytesIO()
    Stable(buf, protocol=5).dump(value)
    return buf.getvalue()


def json_digests(values: Iterable[Any]) -> str:
    """``value_digest`` of each of many JSON values, concatenated (64 hex digits each, in
    order): a dict source's per-key digests. TypeError or ValueError: one is not JSON."""
    if not isinstance(values, (list, tuple)):
        values = list(values)
    sha256 = constructor(len(values))
    # a string's canonical JSON is what the encoder makes of a lone string
    enc = encode_basestring if _STRING.issuperset(map(type, values)) else _CANONICAL
    return "".join([sha256(f"json\x00{c}\x00".encode("utf-8", "surrogatepass")).hexdigest()
                    for c in map(enc, values)])


_INFINITE = (float("inf"), float("-inf"))


def is_json_value(value: Any, _depth: int = 0) -> bool:
    """True when ``value`` can be stored as JSON: exact builtin types, finite floats, string
    keys; tuples are written as arrays (and read back as lists)."""
    if _depth > 200:
        return False
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return True
    if t is float:  # finite: not NaN (unequal to itself), not infinite (math: not loaded)
        return value == value and value not in _INFINITE
    if t is list or t is tuple:
        items: Iterable[Any] = value
    elif t is dict:
        if not _STRING.issuperset(map(type, value)):
            return False
        items = value.values()
    else:
        return False
    if _SCALARS.issuperset(map(type, items)):  # strings, ints, ...: no call per item
        return True
    return all(is_json_value(v, _depth + 1) for v in items)


_SCALARS = frozenset({str, int, bool, type(None)})
_STRING = frozenset({str})


def _strip_decorators(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
    import copy
    clone = copy.copy(fn)
    clone.decorator_list = []
    return clone


# ----------------------------------------------------------------------------- definition hash

class DefinitionHasher:
    """Computes definition hashes for the nodes of a set of parsed files (memoised per run:
    each project module is parsed once, each helper analysed once)."""

    def __init__(self, root: str | Path, files: dict[str, FileModel]) -> None:
        self.root_dir = os.fspath(root)
        self.files = files
        self._project: Any = None
        self._checked = False

    @property
    def root(self) -> Path:
        """The project root as a Path (for the cone: a definition hashed from its source)."""
        from pathlib import Path
        return Path(self.root_dir)

    @property
    def project(self) -> Any:
        """The cone's view of the project, built on first use (a run whose definitions are
        all memoised never needs it, nor the import of ``barca.identity.cone``)."""
        if self._project is None:
            from barca.identity.cone import Project
            self._project = Project(self.root, {fm.abspath: (fm.source, fm.tree)
                                                for fm in self.files.values()})
        return self._project

    def parts(self, node: NodeModel, decorator_shape: Any) -> dict[str, str]:
        """Digest of each part of a node's definition, by part name: ``code``, ``decorator``,
        ``helper:<file>:<name>`` / ``module:<file>`` (the dependency cone), ``env:<NAME>``."""
        import ast
        if not self._checked:  # a helper module that does not parse: stop before any step runs
            self._checked = True
            for f in list(self.files.values()):
                self.project.check_imports(f.abspath)
        fm = self.files[node.file]
        code = _strip_decorators(node.fn)
        parts = {
            "code": digest(ast.dump(code, include_attributes=False)),
            "decorator": digest(canonical_json(decorator_shape), *node.counted_decorator),
        }
        from barca.identity.moduleindex import analyse
        uses = analyse(code, _counted_exprs(node), node.counted_names,
                       self.project.lines(fm.abspath))
        parts.update(self.project.cone(fm.abspath, uses, exclude=node.function))
        from barca.core import dotenv
        for name in node.env:  # the process's value, else the project's .env; keyed
            parts[f"env:{name}"] = dotenv.digest(name, dotenv.value(name, self.root), self.root)
        return parts


def _counted_exprs(node: NodeModel) -> list[ast.AST]:
    """The decorator expressions whose names count (the same ones discovery counted): whole
    decorators that are not barca's, and ``serializer=``. Attribute chains are read off them
    (``serializer=formats.FMT`` counts ``FMT`` of ``formats``, not all of it)."""
    import ast
    if not node.counted_decorator:
        return []
    counted = set(node.counted_decorator)
    out: list[ast.AST] = []
    for dec in node.fn.decorator_list:
        if ast.dump(dec, include_attributes=False) in counted:
            out.append(dec)
        elif isinstance(dec, ast.Call):
            out += [kw.value for kw in dec.keywords if kw.arg == "serializer" and
                    "serializer=" + ast.dump(kw.value, include_attributes=False) in counted]
    return out


def source_only(root: str | os.PathLike[str]) -> None:
    """Make this (worker) process run project modules from their source, as hashed: never from
    a ``.pyc``, which Python validates only by mtime in whole seconds and size, so an edit in
    the same second that keeps the size would run the old code. Files outside ``root`` and
    installed packages keep their bytecode cache."""
    import importlib
    from importlib.machinery import SourceFileLoader
    from pathlib import Path

    base = Path(os.path.realpath(root))
    original = SourceFileLoader.path_stats
    if getattr(original, "_barca_root", None) == base:
        return

    prefix = str(base) + os.sep

    def path_stats(self: Any, path: str) -> Any:
        real = os.path.realpath(path)  # the prefix first: most modules are not the project's
        if real.startswith(prefix) and in_project(base, Path(real)):
            raise OSError("barca: project modules are compiled from source")  # -> no .pyc
        return original(self, path)

    vars(path_stats)["_barca_root"] = base  # marks the patch, so a second call is a no-op
    # the patch itself: the import system calls path_stats through the class
    SourceFileLoader.path_stats = path_stats  # type: ignore[method-assign]
    importlib.invalidate_caches()


def definition_hash(parts: dict[str, str]) -> str:
    return sha(canonical_json(parts))


# ------------------------------------------------------------------ the digests a decision uses
# Every digest a decision compares is made here, and nowhere else: a step's run hash, a node's
# combined digest, a node's snapshot digest (and a sensor's run hash). Change a rule here and
# every path -- the snapshot, the per-key loop, the executor -- sees the same bytes.

def run_hash(definition: str, inputs: dict[str, str], key: str, value: str | None) -> RunHash:
    """A step's run hash: definition, each input's run hash or digest, the key, a dict value
    (``run_hashes`` for one key)."""
    return RunHash(run_hashes(definition, inputs, (key,), (value,))[0])


def run_hashes(definition: str, inputs: Mapping[str, str | Iterable[str]], keys: Sequence[str],
               values: Iterable[str | None] | None = None) -> list[str]:
    """The run hashes of steps of one node, in key order: ``sha256`` of the definition, each
    input (name and run hash or digest, by name), the key and its dict value. An input is one
    string for every key (an unpartitioned upstream, a fan-in's combined digest) or an iterable
    in key order (a partitioned upstream); ``values`` is in key order too, or None."""
    # the text of one step: <definition> NUL <name RS hash> US <name RS hash> ... NUL <key> NUL
    # <value>; the text between two per-key columns is the same for every key
    segments: list[str] = []
    columns: list[Iterable[str]] = []
    text = definition + "\x00"
    for i, name in enumerate(sorted(inputs)):
        text += ("\x1f" if i else "") + name + "\x1e"
        got = inputs[name]
        if isinstance(got, str):
            text += got
        else:
            segments.append(text)
            columns.append(got)
            text = ""
    text += "\x00"
    sha256 = constructor(len(keys))
    vals = values if values is not None else [""] * len(keys)
    texts: Iterable[str]
    if not columns:
        texts = (f"{text}{k}\x00{v or ''}" for k, v in zip(keys, vals, strict=True))
    elif len(columns) == 1:
        first = segments[0]
        texts = (f"{first}{c}{text}{k}\x00{v or ''}"
                 for c, k, v in zip(columns[0], keys, vals, strict=True))
    else:
        texts = ("".join([x for pair in zip(segments, cs, strict=True) for x in pair])
                 + f"{text}{k}\x00{v or ''}"
                 for *cs, k, v in zip(*columns, keys, vals, strict=True))
    return [sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts]


def combined_digest(keys: Sequence[str], hashes: Sequence[str]) -> str:
    """A whole node as one digest: ``sha("k1=h1", "k2=h2", ...)`` over its keys in sorted order
    -- what a fan-in reading every key, or a downstream snapshot, depends on."""
    # usually they are sorted and unique already: the text in their order (identity.pairs),
    # the same bytes as below (sha's closing NUL included)
    text = text_of(keys, hashes)
    if text is not None:
        return text_digest(text)
    return sha("\x00".join(map("=".join, sorted(zip(keys, hashes, strict=False)))))


def snapshot_digest(definition: str, freshness: str, keys: list[str], inputs: list[str],
                    source: str | None, joined: str | None = None) -> str:
    """What every run hash of an asset node is a function of (the key its snapshot is stored
    under): its definition, freshness, keys, each input's combined digest (``inputs``, already
    named and ordered), and its key source's digest -- under barca's one memo salt
    (barca.core.salt): a snapshot made by a barca whose rules differ is a miss. ``joined``:
    the keys joined by NUL, when made already."""
    from barca.core.salt import salt
    rest = [*inputs, f"source:{source}"] if source is not None else inputs
    if joined is not None and len(joined) > 1 << 16:
        # a large node's keys: hashed once for both digests a decision makes of them (now, and
        # then: see decision._value_delta, _delta), the state after them copied -- the bytes
        # hashed are sha's, each part followed by a NUL
        head = (salt(), definition, freshness, str(len(keys)))
        got = _PREFIX[0]
        if got is None or got[1] is not joined or got[0] != head:
            import hashlib
            h = hashlib.sha256()
            for p in (*head, joined):
                h.update(p.encode("utf-8", "surrogatepass"))
                h.update(b"\x00")
            got = _PREFIX[0] = (head, joined, h)
        h = got[2].copy()
        for p in rest:
            h.update(p.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
        return h.hexdigest()
    return sha(salt(), definition, freshness, str(len(keys)),
               "\x00".join(keys) if joined is None else joined, *rest)


# (the head parts and the keys text of the last large snapshot digest, and the SHA-256 state
# after them: the very string object, so the same text)
_PREFIX: list[Any] = [None]


def sensor_run_hash(definition: str, value: str) -> RunHash:
    """A sensor's run hash: its definition and the value it returned."""
    return RunHash(sha(definition, "value", value))
