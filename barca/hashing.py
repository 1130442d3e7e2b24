"""Run hashes: the definition hash of a node (code + counted decorator arguments + the static
dependency cone) and the per-step hash that folds in inputs, sensor values and the key."""
from __future__ import annotations

import ast
import builtins
import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from barca.discovery import FileModel, NodeModel
from barca.types import RunHash

_BUILTINS = frozenset(dir(builtins))


def sha(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def digest(*parts: str | bytes) -> str:
    """A short digest of one part, stored so a cache miss can say what changed."""
    return sha(*parts)[:16]


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def value_digest(value: Any) -> str:
    """SHA-256 of a value: canonical JSON when it is JSON, else its pickle bytes."""
    try:
        return sha("json", canonical_json(value))
    except (TypeError, ValueError):
        import pickle
        return sha("pickle", pickle.dumps(value, protocol=5))


def is_json_value(value: Any, _depth: int = 0) -> bool:
    """True when ``value`` round-trips through JSON unchanged (exact types, finite floats)."""
    if _depth > 200:
        return False
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return True
    if t is float:
        return math.isfinite(value)
    if t is list:
        return all(is_json_value(v, _depth + 1) for v in value)
    if t is dict:
        return all(type(k) is str and is_json_value(v, _depth + 1) for k, v in value.items())
    return False


# ----------------------------------------------------------------------------- the module model

@dataclass
class ModuleIndex:
    """Where each module-level name of a file is bound, for following the dependency cone."""
    simple: dict[str, ast.stmt]      # bound exactly once, by a def/class/assign/import
    conservative: set[str]           # bound in a way static analysis cannot pin down
    whole: str                       # digest of the whole module (the conservative fallback)


def index_module(tree: ast.Module) -> ModuleIndex:
    simple: dict[str, ast.stmt] = {}
    counts: dict[str, int] = {}
    conservative: set[str] = set()

    def bind(name: str, stmt: ast.stmt) -> None:
        counts[name] = counts.get(name, 0) + 1
        simple[name] = stmt

    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(stmt.name, stmt)
        elif isinstance(stmt, ast.Assign):
            if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                bind(stmt.targets[0].id, stmt)
            else:
                for t in stmt.targets:
                    conservative |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            bind(stmt.target.id, stmt)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for a in stmt.names:
                if a.name == "*":
                    conservative.add("*")
                else:
                    bind(a.asname or a.name.split(".")[0], stmt)
        elif isinstance(stmt, (ast.Expr, ast.Pass)):
            continue
        else:  # if/try/for/while/with/augassign/...: whatever they bind is conservative
            for n in ast.walk(stmt):
                if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                    conservative.add(n.id)
                elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    conservative.add(n.name)
                elif isinstance(n, (ast.Import, ast.ImportFrom)):
                    conservative |= {a.asname or a.name.split(".")[0] for a in n.names}
    conservative |= {n for n, c in counts.items() if c > 1}
    for n in conservative:
        simple.pop(n, None)
    return ModuleIndex(simple, conservative, digest(ast.dump(tree, include_attributes=False)))


def used_names(tree: ast.AST) -> set[str]:
    """The global names a definition reads: Python's own scope analysis (``symtable``), so a
    parameter or local that shadows a module-level name is not mistaken for it."""
    import symtable

    try:
        table = symtable.symtable(ast.unparse(tree), "<barca>", "exec")
    except SyntaxError:  # pragma: no cover - unparse of a parsed tree compiles
        return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - _BUILTINS
    out: set[str] = set()

    def visit(t: symtable.SymbolTable, top: bool) -> None:
        for sym in t.get_symbols():
            if sym.is_referenced() and (top or sym.is_global()):
                out.add(sym.get_name())
        for child in t.get_children():
            visit(child, False)

    visit(table, True)
    return out - _BUILTINS


def _strip_decorators(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
    import copy
    clone = copy.copy(fn)
    clone.decorator_list = []
    return clone


# ----------------------------------------------------------------------------- definition hash

class DefinitionHasher:
    """Computes definition hashes for the nodes of a set of parsed files (memoised per run)."""

    def __init__(self, root: Path, files: dict[str, FileModel]) -> None:
        self.root = root
        self.files = files
        self._index: dict[str, ModuleIndex] = {}
        self._module_digest: dict[str, str] = {}

    def index(self, fm: FileModel) -> ModuleIndex:
        if fm.path not in self._index:
            self._index[fm.path] = index_module(fm.tree)
        return self._index[fm.path]

    def parts(self, node: NodeModel, decorator_shape: Any) -> dict[str, str]:
        """Digest of each part of a node's definition, by part name."""
        fm = self.files[node.file]
        parts = {
            "code": digest(ast.dump(_strip_decorators(node.fn), include_attributes=False)),
            "decorator": digest(canonical_json(decorator_shape), *node.counted_decorator),
        }
        parts.update(self._cone(fm, used_names(_strip_decorators(node.fn)) | node.counted_names,
                                exclude=node.function))
        for name in node.env:
            val = os.environ.get(name)
            parts[f"env:{name}"] = digest("unset" if val is None else "set", val or "")
        return parts

    def _cone(self, fm: FileModel, names: Iterable[str], exclude: str) -> dict[str, str]:
        idx = self.index(fm)
        out: dict[str, str] = {}
        seen: set[str] = {exclude}
        todo = list(names)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in idx.conservative or ("*" in idx.conservative and name not in idx.simple):
                out[f"module:{fm.path}"] = idx.whole
                continue
            stmt = idx.simple.get(name)
            if stmt is None:
                continue
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                out[f"helper:{fm.path}:{name}"] = digest(ast.dump(stmt, include_attributes=False))
                for mod_path in self._project_modules(fm, stmt, name):
                    out.update(self._module_cone(mod_path))
                continue
            out[f"helper:{fm.path}:{name}"] = digest(ast.dump(stmt, include_attributes=False))
            todo.extend(used_names(stmt) - seen)
        return out

    # A project module a node imports is hashed whole, with what it imports in turn. (Following
    # only the definitions used, across modules, is the job of the cross-module cone.)
    def _module_cone(self, path: Path) -> dict[str, str]:
        key = str(path)
        if key in self._module_digest:
            return {}
        self._module_digest[key] = ""
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source, filename=str(path))
        except (OSError, SyntaxError, UnicodeDecodeError) as exc:
            from barca.errors import UsageError
            from barca.discovery import relative_id, syntax_error
            rel = relative_id(path, self.root)
            if isinstance(exc, SyntaxError):
                raise syntax_error(rel, exc) from None
            raise UsageError(f"{rel}: cannot read ({exc})", "Fix or remove the module.") from None
        from barca.discovery import relative_id
        rel = relative_id(path, self.root)
        d = digest(ast.dump(tree, include_attributes=False))
        self._module_digest[key] = d
        out = {f"module:{rel}": d}
        dirs = [path.parent]
        for stmt in ast.walk(tree):
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for p in self._resolve_imports(stmt, dirs):
                    out.update(self._module_cone(p))
        return out

    def _project_modules(self, fm: FileModel, stmt: ast.Import | ast.ImportFrom,
                         name: str) -> list[Path]:
        dirs = [Path(fm.abspath).parent]
        if isinstance(stmt, ast.Import):
            stmt = ast.Import(names=[a for a in stmt.names
                                     if (a.asname or a.name.split(".")[0]) == name])
        return self._resolve_imports(stmt, dirs)

    def _resolve_imports(self, stmt: ast.Import | ast.ImportFrom, dirs: list[Path]) -> list[Path]:
        names: list[str] = []
        if isinstance(stmt, ast.Import):
            names = [a.name for a in stmt.names]
        elif stmt.module and stmt.level == 0:
            names = [stmt.module] + [f"{stmt.module}.{a.name}" for a in stmt.names]
        elif stmt.level > 0:
            base = dirs[0]
            for _ in range(stmt.level - 1):
                base = base.parent
            rel = (stmt.module or "").replace(".", "/")
            cands = [base / rel] if rel else [base]
            cands += [base / rel / a.name if rel else base / a.name for a in stmt.names]
            return [p for c in cands for p in self._module_file(c)]
        out: list[Path] = []
        for mod in names:
            for d in (*dirs, self.root):
                out.extend(self._module_file(d / mod.replace(".", "/")))
        return out

    def _module_file(self, stem: Path) -> list[Path]:
        for cand in (stem.with_suffix(".py"), stem / "__init__.py"):
            try:
                resolved = cand.resolve()
                resolved.relative_to(self.root)
            except (ValueError, OSError):
                continue
            if resolved.is_file() and "site-packages" not in resolved.parts:
                return [resolved]
        return []


def definition_hash(parts: dict[str, str]) -> str:
    return sha(canonical_json(parts))


def run_hash(definition: str, inputs: dict[str, str], key: str, value: str | None) -> RunHash:
    """A step's run hash: definition, each input's run hash or digest, the key, a dict value."""
    return RunHash(sha(definition, canonical_json(inputs), key, value or ""))


def sensor_run_hash(definition: str, value: str) -> RunHash:
    """A sensor's run hash: its definition and the value it returned."""
    return RunHash(sha(definition, "value", value))
