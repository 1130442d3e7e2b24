"""Partition keys computed from the source text alone, without importing the pipeline.

``partitions([f"k{i:04d}" for i in range(N)])`` with ``N = 2000`` at module level needs no
import: the expression reads only literals, module constants bound once (to expressions of the
same kind, earlier in the file) and pure builtins. Anything else -- an imported name, a
function, a constant bound twice or inside a block, a private attribute -- is not evaluated
here, and the caller imports the module as before."""
from __future__ import annotations

import ast
import builtins

from barca.model.scope import pattern_names

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

PURE_BUILTINS = frozenset((
    "abs", "all", "any", "bin", "bool", "chr", "dict", "divmod", "enumerate", "filter", "float",
    "format", "frozenset", "hex", "int", "len", "list", "map", "max", "min", "oct", "ord", "pow",
    "range", "repr", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip",
    "True", "False", "None"))
MAX_DEPTH = 8


class NotPure(Exception):
    """The expression needs the module (or more than literals and pure builtins)."""


def _bindings(tree: ast.Module) -> tuple[dict[str, list[ast.AST]], bool]:
    """Every place a name is bound, anywhere in the module (a local of the same name only
    makes us import, which is always right), and whether a star import hides bindings."""
    sites: dict[str, list[ast.AST]] = {}
    star = False
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            sites.setdefault(n.id, []).append(n)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            sites.setdefault(n.name, []).append(n)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                if a.name == "*":
                    star = True
                sites.setdefault((a.asname or a.name).split(".")[0], []).append(n)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            for name in n.names:
                sites.setdefault(name, []).extend([n, n])  # rebound from a function
        elif isinstance(n, ast.arg):
            sites.setdefault(n.arg, []).append(n)
        else:
            for name in pattern_names(n):
                sites.setdefault(name, []).append(n)
    return sites, star


class _Evaluator:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.sites, self.star = _bindings(tree)
        self.values: dict[str, Any] = {}

    def constant(self, name: str, before: int, depth: int) -> Any:
        if name in self.values:
            return self.values[name]
        sites = self.sites.get(name, [])
        if len(sites) != 1:
            raise NotPure(name)
        target = sites[0]
        stmt = next((s for s in self.tree.body if isinstance(s, (ast.Assign, ast.AnnAssign))
                     and s.lineno < before and s.value is not None
                     and (s.targets if isinstance(s, ast.Assign) else [s.target]) == [target]),
                    None)
        if stmt is None:  # bound in a block, by unpacking, after the use, or not by `=`
            raise NotPure(name)
        assert stmt.value is not None  # the search above skipped a bare annotation
        value = self.evaluate(stmt.value, stmt.lineno, depth + 1)
        self.values[name] = value
        return value

    def evaluate(self, expr: ast.expr, before: int, depth: int = 0) -> Any:
        if depth > MAX_DEPTH or self.star:
            raise NotPure("too deep")
        local: set[str] = set()
        loads: list[str] = []
        for n in ast.walk(expr):
            if isinstance(n, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
                raise NotPure(type(n).__name__)
            if isinstance(n, ast.Attribute) and n.attr.startswith("_"):
                raise NotPure(n.attr)
            if isinstance(n, ast.Name):
                if isinstance(n.ctx, ast.Load):
                    loads.append(n.id)
                else:
                    local.add(n.id)
            elif isinstance(n, ast.arg):
                local.add(n.arg)
        env: dict[str, Any] = {}
        for name in dict.fromkeys(loads):
            if name in local:
                continue
            if name in self.sites:
                env[name] = self.constant(name, before, depth)
            elif name not in PURE_BUILTINS:
                raise NotPure(name)
        scope = {"__builtins__": {n: getattr(builtins, n) for n in PURE_BUILTINS
                                  if hasattr(builtins, n)}, **env}
        try:
            return eval(compile(ast.Expression(expr), "<partition keys>", "eval"), scope)
        except Exception as exc:  # the module's own evaluation will say it properly
            raise NotPure(str(exc)) from None


def pure_value(tree: ast.Module, expr: ast.expr, before: int) -> Any:
    """The value of ``expr`` (written on line ``before`` of ``tree``) or ``NotPure``."""
    return _Evaluator(tree).evaluate(expr, before)
