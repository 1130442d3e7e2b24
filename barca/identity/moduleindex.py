"""What one module of the project defines, and what one definition in it uses: the static
(``ast``) facts the cone walk of ``barca.identity.cone`` follows from module to module."""
from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from barca.identity.digests import digest
from barca.identity.effects import Effects, function_changes, local_name, statement_effects
from barca.model.scope import global_names

Chain = tuple  # the attribute names read after a name: ``helpers.clean`` -> ("clean",)
Import = ast.Import | ast.ImportFrom
Binding = tuple  # (import statement, alias)

_LINE_END = re.compile(r"\r\n|\r|\n")
_DYNAMIC = frozenset({"globals", "vars", "exec", "__getattr__"})  # may bind any global


def dump(node: ast.AST) -> str:
    return ast.dump(node, include_attributes=False)


# ----------------------------------------------------------------------------- one module

@dataclass
class Index:
    """How each module-level name of a module is bound and changed."""
    defs: dict[str, list[ast.stmt]]   # every statement that binds or changes it, in order
    bound: set[str]                   # names some module-level statement binds
    conservative: set[str]            # bound where static analysis cannot pin it down
    stars: list[ast.ImportFrom]       # ``from x import *`` (at any depth of module code)
    dynamic: bool                     # globals()/exec/vars/__getattr__: any name may exist


def _stars(stmt: ast.stmt, stars: list[ast.ImportFrom]) -> None:
    for n in ast.walk(stmt) if not isinstance(stmt, ast.ImportFrom) else (stmt,):
        if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names):
            stars.append(n)


def build_index(tree: ast.Module, source: str | None = None) -> Index:
    """A name's definition is every module-level statement that can change it (see
    ``barca.identity.effects``), in source order."""
    stars: list[ast.ImportFrom] = []
    effects: list[tuple[ast.stmt, Effects]] = []
    imported: set[str] = set()      # bound by an import: a module (or a thing from one)
    defined: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr)
                                          and isinstance(stmt.value, ast.Constant)):
            continue  # a docstring changes no name
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            fx = Effects(binds={local_name(stmt, a) for a in stmt.names if a.name != "*"})
            imported |= fx.binds
        else:
            fx = statement_effects(stmt)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defined[stmt.name] = stmt
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                 ast.Assign, ast.AnnAssign, ast.Expr)):
            _stars(stmt, stars)
        effects.append((stmt, fx))
    # a module function called at module level changes what its body (and what it calls)
    # changes; a name that is also rebound elsewhere may not be that function any more,
    # which only hashes more. Only the functions called at module level are read.
    functions: dict[str, tuple[set[str], set[str]]] = {}
    todo = [f for _, fx in effects for f in fx.calls if f in defined]
    while todo:
        f = todo.pop()
        if f not in functions:
            functions[f] = function_changes(defined[f])
            todo += [g for g in functions[f][1] if g in defined and g not in functions]
    reach: dict[str, set[str]] = {f: set(ch) for f, (ch, _) in functions.items()}
    grew = True
    while grew:
        grew = False
        for f, (_, calls) in functions.items():
            for g in calls & functions.keys():
                if not reach[g] <= reach[f]:
                    reach[f] |= reach[g]
                    grew = True
    changers: dict[str, list[int]] = {}
    binders: dict[str, list[int]] = {}
    aliases: set[tuple[str, str]] = set()
    for i, (_, fx) in enumerate(effects):
        changed = fx.changes | (fx.weak - imported)
        for f in fx.calls & functions.keys():
            changed |= reach[f] - imported
        for n in fx.binds:
            binders.setdefault(n, []).append(i)
        for n in changed:
            changers.setdefault(n, []).append(i)
        aliases |= {(b, a) for b, a in fx.aliases if a not in imported}
    # ``ROW = TABLE[0]`` then ``ROW.append(1)``: changing ROW's object changes TABLE's
    grew = True
    while grew:
        grew = False
        for b, a in aliases:
            extra = set(changers.get(b, ())) - set(changers.get(a, ()))
            if extra:
                changers.setdefault(a, []).extend(extra)
                grew = True
    defs: dict[str, list[ast.stmt]] = {}
    for n in binders.keys() | changers.keys():
        order = sorted(set(binders.get(n, ())) | set(changers.get(n, ())))
        defs[n] = [effects[i][0] for i in order]
    conservative: set[str] = set()
    dynamic = False
    needles = (":=", "global", *_DYNAMIC)
    for node in ast.walk(tree) if source is None or any(x in source for x in needles) else ():
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            conservative.add(node.target.id)  # a walrus may bind a module global
        elif isinstance(node, ast.Global):
            conservative.update(node.names)   # rebound from inside a function
        elif isinstance(node, ast.Name) and node.id in _DYNAMIC:
            dynamic = True
    for n in conservative:
        defs.pop(n, None)
    dynamic = dynamic or "__getattr__" in defs or "__getattr__" in conservative
    return Index(defs, set(binders) - conservative, conservative, stars, dynamic)


@dataclass(eq=False)
class Module:
    """A project module (or a namespace package, which has no source of its own)."""
    rel: str                          # path relative to the project root
    path: Path | None                 # the source file; None for a namespace package
    tree: ast.Module | None
    dirs: tuple[Path, ...]            # where its submodules live (packages only)
    source: str | None = None         # (lets the index skip a walk for absent constructs)
    _index: Index | None = None
    _chains: dict[str, set[Chain]] | None = None
    _bindings: dict[str, list[Binding]] | None = None
    _dynamic_imports: list[str] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)   # every import, at any depth
    _whole: str | None = None
    _lines: list[str] | None = None
    _guarded: set[int] | None = None

    @property
    def lines(self) -> list[str] | None:
        if self._lines is None and self.source is not None:
            self._lines = _LINE_END.split(self.source)  # as the tokenizer counts lines
        return self._lines

    @property
    def whole(self) -> str:
        """Digest of the whole module (formatting and comments do not count)."""
        if self._whole is None:
            assert self.tree is not None
            self._whole = digest(dump(self.tree))
        return self._whole

    @property
    def index(self) -> Index:
        if self._index is None:
            assert self.tree is not None
            self._index = build_index(self.tree, self.source)
        return self._index

    def _scan(self) -> None:
        assert self.tree is not None
        self._bindings = {}
        nodes = list(_walk_lines(self.tree, self.lines, "import"))
        for n in nodes:
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                self.imports.append(n)
                for a in n.names:
                    if a.name != "*":
                        self._bindings.setdefault(local_name(n, a), []).append((n, a))
        self._dynamic_imports = dynamic_imports(self.tree, nodes)

    @property
    def guarded_imports(self) -> set[int]:
        """Imports inside a ``try`` whose handler catches a failed import (``ImportError``,
        ``ModuleNotFoundError``, ``Exception``, a bare ``except``): an optional dependency."""
        if self._guarded is None:
            self._guarded = set()
            if self.tree is not None and self.source is not None and "try" in self.source:
                for n in ast.walk(self.tree):
                    if isinstance(n, ast.Try) and any(_catches_import(h) for h in n.handlers):
                        self._guarded |= {id(i) for b in n.body for i in ast.walk(b)
                                          if isinstance(i, (ast.Import, ast.ImportFrom))}
        return self._guarded

    @property
    def chains(self) -> dict[str, set[Chain]]:
        """Attribute chains of every name, anywhere in the module."""
        if self._chains is None:
            assert self.tree is not None
            self._chains = name_chains(self.tree, None)
        return self._chains

    @property
    def dynamic_imports(self) -> list[str]:
        if self._bindings is None:
            self._scan()
        return self._dynamic_imports

    @property
    def bindings(self) -> dict[str, list[Binding]]:
        """Every import in the module (at any depth), by the name it binds."""
        if self._bindings is None:
            self._scan()
        assert self._bindings is not None  # _scan sets it
        return self._bindings


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _catches_import(h: ast.ExceptHandler) -> bool:
    if h.type is None:
        return True
    types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
    return any((t.id if isinstance(t, ast.Name) else getattr(t, "attr", "")) in _IMPORT_ERRORS
               for t in types)


def _walk_lines(tree: ast.AST, lines: list[str] | None, needle: str) -> Iterable[ast.AST]:
    """``ast.walk``, pruned to the nodes whose lines hold ``needle`` (every node whose source
    text contains it is reached); without the source, all of them."""
    if lines is None:
        yield from ast.walk(tree)
        return
    hot = [i + 1 for i, line in enumerate(lines) if needle in line]
    stack = [tree]
    while stack:
        n = stack.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            lo = getattr(c, "lineno", None)
            if lo is not None:
                i = bisect.bisect_left(hot, lo)
                if i == len(hot) or hot[i] > (getattr(c, "end_lineno", None) or lo):
                    continue
            stack.append(c)


# ----------------------------------------------------------------------------- one definition

def name_chains(tree: ast.AST, wanted: set[str] | None,
                nodes: list[ast.AST] | None = None) -> dict[str, set[Chain]]:
    """For each name (of ``wanted``), the attribute chains read off it: ``h.a.b`` -> ("a", "b");
    a bare use (``f(h)``, ``getattr(h, x)``) -> ()."""
    if nodes is None:
        nodes = list(ast.walk(tree))
    attrs = [n for n in nodes if isinstance(n, ast.Attribute)]
    inner = {id(a.value) for a in attrs}       # nodes read through an attribute
    out: dict[str, set[Chain]] = {}
    for a in attrs:
        if id(a) in inner:
            continue                           # not the outermost attribute of its chain
        chain: list[str] = []
        cur: ast.AST = a
        while isinstance(cur, ast.Attribute):
            chain.append(cur.attr)
            cur = cur.value
        if isinstance(cur, ast.Name) and (wanted is None or cur.id in wanted):
            out.setdefault(cur.id, set()).add(tuple(reversed(chain)))
    for n in nodes:
        if isinstance(n, ast.Name) and id(n) not in inner and (wanted is None or n.id in wanted):
            out.setdefault(n.id, set()).add(())
    return out


def dynamic_imports(tree: ast.AST, nodes: list[ast.AST] | None = None) -> list[str]:
    """``importlib.import_module("x")`` / ``__import__("x")`` with a literal name."""
    out: list[str] = []
    for n in nodes if nodes is not None else ast.walk(tree):
        if (isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant)
                and isinstance(n.args[0].value, str)):
            f = n.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(
                f, ast.Attribute) else ""
            if name in ("import_module", "__import__") and not n.args[0].value.startswith("."):
                out.append(n.args[0].value)
    return out


@dataclass
class Uses:
    """What one definition reads: globals of its module, imports inside it, dynamic imports."""
    names: list[tuple[str, Chain]]
    imports: list[tuple[Binding, Chain]]
    dynamic: list[str]


def analyse(tree: ast.AST, extra: Iterable[ast.AST] = (), extra_names: Iterable[str] = (),
            lines: list[str] | None = None) -> Uses:
    """The uses of a definition. ``extra`` are expressions evaluated at module level (counted
    decorator arguments) whose names count too; ``lines`` is the module's source."""
    names = global_names(tree, lines)
    nodes = list(ast.walk(tree))
    locals_: dict[str, list[Binding]] = {}
    for n in nodes:
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                locals_.setdefault(local_name(n, a), []).append((n, a))
    chains = name_chains(tree, names | set(locals_), nodes)
    extra_names = set(extra_names)
    for e in extra:
        for nm, cs in name_chains(e, extra_names).items():
            chains.setdefault(nm, set()).update(cs)
    names |= extra_names
    return Uses(
        names=[(nm, c) for nm in sorted(names) for c in sorted(chains.get(nm) or {()})],
        imports=[(b, c) for nm in sorted(locals_) for b in locals_[nm]
                 for c in sorted(chains.get(nm, ()))],
        dynamic=dynamic_imports(tree, nodes))
