"""The folders a pipeline file puts on ``sys.path`` by a literal ``sys.path.insert(i, ...)`` or
``sys.path.append(...)`` at module level, so that the cone follows the modules found there as
its worker will import them. A literal is a string, ``__file__``, or what ``os.path`` and
``pathlib.Path`` make of literals (``os.path.join(os.path.dirname(__file__), "lib")``,
``Path(__file__).parent / "lib"``). Anything else cannot be told statically: its imports then
resolve nowhere and are an ``untracked_import`` warning."""
from __future__ import annotations

import ast
import os
from pathlib import Path

_SAME = frozenset({"str", "abspath", "realpath", "normpath", "fspath", "Path", "PurePath",
                   "resolve", "absolute", "expanduser"})


def _name(f: ast.AST) -> str:
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def literal_path(e: ast.AST, file: Path, root: Path) -> Path | None:
    """The folder ``e`` names, or None when it is not a literal one. A relative string is
    relative to the project root, where barca runs its workers."""
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return root / e.value
    if isinstance(e, ast.Name) and e.id == "__file__":
        return file
    if isinstance(e, ast.Attribute) and e.attr == "parent":
        inner = literal_path(e.value, file, root)
        return inner.parent if inner is not None else None
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div):
        a, b = literal_path(e.left, file, root), _text(e.right)
        return a / b if a is not None and b is not None else None
    if not isinstance(e, ast.Call) or e.keywords:
        return None
    fn = _name(e.func)
    target = e.func.value if isinstance(e.func, ast.Attribute) else None
    if fn in ("resolve", "absolute") and target is not None and not e.args:
        return literal_path(target, file, root)  # Path(...).resolve()
    if fn == "joinpath" and target is not None:
        base = literal_path(target, file, root)
        rest = [_text(a) for a in e.args]
        parts = [t for t in rest if t is not None]
        return base.joinpath(*parts) if base is not None and len(parts) == len(rest) else None
    if fn in _SAME and len(e.args) == 1:
        return literal_path(e.args[0], file, root)
    if fn == "dirname" and len(e.args) == 1:
        inner = literal_path(e.args[0], file, root)
        return inner.parent if inner is not None else None
    if fn == "join" and e.args:
        base = literal_path(e.args[0], file, root)
        rest = [_text(a) for a in e.args[1:]]
        parts = [t for t in rest if t is not None]
        return base.joinpath(*parts) if base is not None and len(parts) == len(rest) else None
    return None


def _text(e: ast.AST) -> str | None:
    return e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None


def _is_sys_path(e: ast.AST) -> bool:
    return (isinstance(e, ast.Attribute) and e.attr == "path" and isinstance(e.value, ast.Name)
            and e.value.id == "sys")


def sys_path_dirs(tree: ast.Module, file: Path, root: Path) -> tuple[list[Path], list[Path]]:
    """(folders put first, folders put last) by the module-level statements of ``tree``, in
    the order Python would search them; each resolved (outside the project: the caller's
    concern)."""
    front: list[Path] = []
    back: list[Path] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        n = stack.pop(0)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                _is_sys_path(n.func.value):
            if n.func.attr == "insert" and len(n.args) == 2:
                p = literal_path(n.args[1], file, root)
                if p is not None:
                    front.insert(0, Path(os.path.realpath(p)))  # the later insert is first
            elif n.func.attr == "append" and len(n.args) == 1:
                p = literal_path(n.args[0], file, root)
                if p is not None:
                    back.append(Path(os.path.realpath(p)))
            continue
        stack[0:0] = list(ast.iter_child_nodes(n))
    return front, back
