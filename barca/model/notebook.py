"""Nodes defined in notebook cells (the kernel's ``__main__``): their static model, their
definition hash from the live namespace, and the function to ship to workers by value.

A notebook node's id is ``<notebook stem>:<function>`` when the kernel knows the notebook's
path, else ``__notebook__:<function>``. Its definition hash is its normalised source plus the
cone of notebook-defined names it uses (functions and classes by source, other values by
value), never a cell's temp-file name or execution count: re-running the cells, or all of them
after a kernel restart, is a cache hit.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from barca.core.types import short_name
from barca.identity.hashing import canonical_json, digest, in_project
from barca.model import decorators
from barca.model.discovery import PSEUDO_ABSPATH
from barca.model.scope import global_names


def interactive() -> bool:
    """True in a kernel or REPL, where ``__main__`` is not a file."""
    main = sys.modules.get("__main__")
    return main is not None and not getattr(main, "__file__", None)


def namespace() -> dict[str, Any]:
    main = sys.modules.get("__main__")
    return vars(main) if main is not None else {}


def notebook_stem() -> str:
    """The notebook's file stem, when the kernel knows its path."""
    for value in (namespace().get("__session__"), os.environ.get("JPY_SESSION_NAME"),
                  namespace().get("__vsc_ipynb_file__")):
        if isinstance(value, str) and value.endswith(".ipynb"):
            return Path(value).stem
    return "__notebook__"


def current_functions() -> dict[str, Callable[..., Any]]:
    """Decorated functions defined in ``__main__`` that its namespace still holds (the last
    definition wins; a function deleted from the namespace is no node any more)."""
    ns = namespace()
    out = {}
    for name, fn in list(decorators.NOTEBOOK.items()):
        if ns.get(name) is fn:
            out[name] = fn
        else:
            decorators.NOTEBOOK.pop(name, None)
    return out


def _source(obj: Any) -> str:
    return textwrap.dedent(inspect.getsource(obj))


def file_model(root: Path) -> Any:
    """A FileModel holding every notebook node, parsed from each function's cell source."""
    from barca.model.discovery import FileModel, UsageError, _node_from_function

    fns = current_functions()
    if not fns:
        return None
    ns = namespace()
    barca_names: dict[str, str] = {}
    barca_modules: set[str] = set()
    public = {getattr(decorators, n): n for n in ("asset", "sensor", "task", "sink", "partitions",
                                                   "partitions_from", "collect")}
    for name, value in ns.items():
        if isinstance(value, ModuleType) and value.__name__ == "barca":
            barca_modules.add(name)
        else:
            try:
                if value in public:
                    barca_names[name] = public[value]
            except TypeError:  # unhashable
                continue
    stem = notebook_stem()
    body: list[ast.stmt] = []
    sources: list[str] = []
    for name, fn in fns.items():
        try:
            src = _source(fn)
            tree = ast.parse(src)
        except (OSError, TypeError, SyntaxError) as exc:
            raise UsageError(f"cannot read the source of notebook function '{name}' ({exc})",
                             "Define it in a cell of its own and run the cell again.") from None
        body.extend(tree.body)
        sources.append(src)
    module = ast.Module(body=body, type_ignores=[])
    fm = FileModel(stem, PSEUDO_ABSPATH, "\n".join(sources), module, "__main__", {},
                   barca_names, barca_modules)
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node = _node_from_function(fm, stmt)
            if node is not None:
                fm.nodes.append(node)
    return fm


# ---------------------------------------------------------------------------- hashing

STEMLESS = "__notebook__"  # the stem a definition hash names, whatever the notebook is called


def json_map(value: Any, fn: Callable[[Any], Any]) -> Any:
    """``value`` (lists and dicts of plain values) with ``fn`` applied to every leaf."""
    if isinstance(value, dict):
        return {k: json_map(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_map(v, fn) for v in value]
    return fn(value)


def adopt_renamed(store: Any, ids: list[str]) -> list[tuple[str, str]]:
    """Results of a renamed notebook, reachable under its new name.

    A notebook node's id is ``<notebook stem>:<function>``, but its cache is keyed by its
    definition and inputs, which do not name the notebook. When a notebook node has no
    recorded result at all, the successful rows of the same function in other notebooks are
    recorded again under its id: a run then finds by run hash those whose definition and
    inputs match (the others are never used), and their artifacts stay where they are.
    Returns the (old, new) ids adopted."""
    import sqlite3
    conn = getattr(store, "conn", None)
    if conn is None or not ids:
        return []
    from barca.store.metadata import COLUMNS
    adopted = []
    try:
        for new in ids:
            if conn.execute("SELECT 1 FROM materializations WHERE asset=? LIMIT 1",
                            (new,)).fetchone():
                continue
            fn = short_name(new)
            olds = [a for (a,) in conn.execute(
                "SELECT DISTINCT asset FROM materializations WHERE asset LIKE ? ESCAPE '\\' "
                "AND status='success'", ("%:" + fn.replace("_", "\\_"),))
                if a != new and _is_notebook_id(a, fn)]
            for old in olds:
                cols = ", ".join(COLUMNS)
                picked = ", ".join(":new" if c == "asset" else
                                   ":new || substr(node, :rest)" if c == "node" else c
                                   for c in COLUMNS)
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(f"INSERT INTO materializations ({cols}) SELECT {picked} FROM "
                             "materializations WHERE asset=:old AND status='success' "
                             "ORDER BY id", {"new": new, "rest": len(old) + 1, "old": old})
                conn.execute("COMMIT")
                adopted.append((old, new))
    except sqlite3.DatabaseError:  # read-only or busy: the results are found another time
        with contextlib.suppress(sqlite3.DatabaseError):
            conn.execute("ROLLBACK")
    return adopted


def _is_notebook_id(asset: str, fn: str) -> bool:
    stem = asset[:-len(fn) - 1]
    return asset.endswith(":" + fn) and bool(stem) and not stem.endswith(".py") \
        and "/" not in stem and ":" not in stem

def _value_digest(value: Any) -> str:
    try:
        return digest("json", canonical_json(value))
    except (TypeError, ValueError):
        pass
    try:
        import pickle
        return digest("pickle", pickle.dumps(value, protocol=5))
    except Exception:  # hash more, never less: an unreadable value changes every run
        return digest("repr", repr(value), str(id(value)))


def parts(root: Path, node: Any, decorator_shape: Any) -> dict[str, str]:
    """The definition parts of a notebook node: code, counted decorator arguments, and the
    cone of notebook-defined names it uses, read from the live namespace."""
    from barca.identity.hashing import _strip_decorators
    ns = namespace()
    code = _strip_decorators(node.fn)
    # nothing of the notebook's name: renaming the notebook keeps every definition hash
    own = f"{node.file}:"
    shape = json_map(decorator_shape, lambda v: STEMLESS + v[len(own) - 1:]
                     if isinstance(v, str) and v.startswith(own) else v)
    out = {
        "code": digest(ast.dump(code, include_attributes=False)),
        "decorator": digest(canonical_json(shape), *node.counted_decorator),
    }
    seen: set[str] = {node.function}
    todo = list(global_names(code) | set(node.counted_names))
    while todo:
        name = todo.pop()
        if name in seen or name not in ns:
            continue
        seen.add(name)
        value = ns[name]
        label = f"helper:{STEMLESS}:{name}"
        if inspect.ismodule(value):
            path = getattr(value, "__file__", None)
            if path and _in_project(root, Path(path)):
                out[f"module:{Path(path).resolve().relative_to(root)}"] = digest(
                    Path(path).read_text(encoding="utf-8", errors="replace"))
            continue
        module = getattr(value, "__module__", None)
        if inspect.isfunction(value) or inspect.isclass(value):
            if module == "__main__":
                try:
                    src = _source(value)
                    tree = ast.parse(src)
                    out[label] = digest(ast.dump(tree, include_attributes=False))
                    todo.extend(global_names(tree) - seen)
                except (OSError, TypeError, SyntaxError):
                    out[label] = _class_digest(value) if inspect.isclass(value) else \
                        _value_digest(value)
                continue
            path = getattr(sys.modules.get(module or ""), "__file__", None)
            if path and _in_project(root, Path(path)):
                out[f"module:{Path(path).resolve().relative_to(root)}"] = digest(
                    Path(path).read_text(encoding="utf-8", errors="replace"))
            continue  # installed packages and the standard library are not followed
        if callable(value) and not isinstance(value, type) and module not in (None, "__main__"):
            continue
        out[label] = _value_digest(value)
    from barca.core.dotenv import value
    for name in node.env:  # the process's value, else the project's .env
        val = value(name, root)
        out[f"env:{name}"] = digest("unset" if val is None else "set", val or "")
    return out


def _class_digest(cls: type) -> str:
    """A class whose source inspect cannot find: its methods' sources and its bases."""
    parts = [c.__qualname__ for c in cls.__mro__]
    for name, member in sorted(vars(cls).items()):
        if inspect.isfunction(member):
            try:
                parts.append(ast.dump(ast.parse(_source(member)), include_attributes=False))
            except (OSError, TypeError, SyntaxError):
                parts.append(_value_digest(member))
        elif not name.startswith("__"):
            parts.append(f"{name}={_value_digest(member)}")
    return digest(*parts)


def _in_project(root: Path, path: Path) -> bool:
    try:
        return in_project(root.resolve(), path.resolve())
    except OSError:
        return False


def function_for(name: str) -> Callable[..., Any] | None:
    return current_functions().get(name)


def ship(fn: Callable[..., Any]) -> bytes:
    """The function by value, for a worker process that never saw the notebook."""
    import cloudpickle
    try:
        return cloudpickle.dumps(fn)
    except Exception as exc:
        from barca.core.errors import UsageError
        raise UsageError(f"cannot send notebook function '{fn.__name__}' to a worker process: "
                         f"{type(exc).__name__}: {exc}",
                         "Keep what the function uses picklable (no open files, locks or "
                         "sockets in notebook globals it reads), or move it to a .py file."
                         ) from None
