"""Which module-level statements can change which module-level names (engine.md §2): a name's
definition is every statement that binds it or changes its value in place, in source order --
``CFG["k"] = 1``, ``S.k = 2``, ``N += 1``, ``del N[k]``, ``ZONES.append(...)``,
``setattr(N, ...)``, a call of a module function whose body changes ``N``, and any module-level
``if``/``for``/``while``/``with``/``try``/``match`` block (or class body) that does one of these.

Static and conservative where it matters: a statement-level call changes the object it is a
method of and every object passed to it; a method call inside an expression changes its object
unless that object is an imported module (``pl.col(...)`` does not change ``pl``); a name bound
from another name (``ROW = TABLE[0]``, ``for z in ZONES``) and then changed in place changes
the other one too."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from barca.model.scope import pattern_names

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SETATTR = frozenset({"setattr", "delattr"})
_LEAVES = frozenset({ast.Constant, ast.Load, ast.Store, ast.Del, ast.Pass})


def local_name(stmt: ast.Import | ast.ImportFrom, alias: ast.alias) -> str:
    """The name an import binds: ``import a.b`` -> ``a``, ``import a.b as x`` -> ``x``."""
    if isinstance(stmt, ast.Import) and not alias.asname:
        return alias.name.split(".")[0]
    return alias.asname or alias.name


def root(e: ast.AST) -> str | None:
    """The name an expression reads its object from: ``CFG["a"].b`` -> ``CFG``,
    ``CFG.get("a").append`` -> ``CFG``."""
    while True:
        if isinstance(e, (ast.Attribute, ast.Subscript, ast.Starred)):
            e = e.value
        elif isinstance(e, ast.Call):
            e = e.func
        else:
            return e.id if isinstance(e, ast.Name) else None


def _bare_roots(e: ast.AST | None) -> set[str]:
    """The names whose object (or a part of it) ``e`` evaluates to: ``A``, ``A[0]``,
    ``(A, B)``, ``A or B``; not the result of a call or an operator."""
    if e is None:
        return set()
    if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*map(_bare_roots, e.elts))
    if isinstance(e, ast.Dict):
        return set().union(*map(_bare_roots, e.values))
    if isinstance(e, ast.IfExp):
        return _bare_roots(e.body) | _bare_roots(e.orelse)
    if isinstance(e, ast.BoolOp):
        return set().union(*map(_bare_roots, e.values))
    if isinstance(e, (ast.Starred, ast.NamedExpr)):
        return _bare_roots(e.value)
    if isinstance(e, (ast.Name, ast.Attribute, ast.Subscript)):
        r = root(e)
        return {r} if r else set()
    return set()


def _target_names(t: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}


@dataclass
class Effects:
    """What one module-level statement does to module-level names."""
    binds: set[str] = field(default_factory=set)       # (re)binds or deletes the name
    changes: set[str] = field(default_factory=set)     # changes its object in place
    weak: set[str] = field(default_factory=set)        # a method called inside an expression
    calls: set[str] = field(default_factory=set)       # bare names called (module functions?)
    aliases: set[tuple[str, str]] = field(default_factory=set)  # (bound name, name read)


def statement_effects(stmt: ast.stmt) -> Effects:
    """The effects of one module-level statement (its function bodies run later: only their
    decorators, defaults and annotations count; a class body runs now)."""
    fx = Effects()
    # (node, inside a class body: a name stored there is a class attribute, not a global)
    # Any: the walk dispatches on type(n) (faster than isinstance), which mypy cannot narrow by
    stack: list[tuple[Any, bool]] = [(stmt, False)]
    while stack:
        n, in_class = stack.pop()
        t = type(n)
        if t in _LEAVES:
            continue  # a constant, a read name, a context: nothing below changes anything
        if t is ast.Name:
            if not in_class and type(n.ctx) is not ast.Load:
                fx.binds.add(n.id)
            continue
        if isinstance(n, (*_FUNCS, ast.ClassDef)):
            if not in_class:
                fx.binds.add(n.name)
            for d in n.decorator_list:  # ``@REGISTRY.register`` / ``@register`` call it now
                if isinstance(d, ast.Name):
                    fx.calls.add(d.id)
                elif isinstance(d, ast.Attribute) and (r := root(d)):
                    fx.weak.add(r)
            kids: list[ast.AST] = list(n.decorator_list)
            if isinstance(n, ast.ClassDef):
                kids += n.bases + [k.value for k in n.keywords]
                stack += [(k, False) for k in kids] + [(b, True) for b in n.body]
            else:
                a = n.args
                kids += a.defaults + [d for d in a.kw_defaults if d is not None]
                stack += [(k, False) for k in kids]
            continue
        if isinstance(n, (ast.List, ast.Tuple, ast.Set)) and \
                all(type(e) is ast.Constant for e in n.elts):
            continue  # a literal of constants (a long key list) changes nothing
        if isinstance(n, ast.Lambda):
            stack += [(d, in_class) for d in n.args.defaults]
            continue
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            if not in_class:
                fx.binds |= {local_name(n, a) for a in n.names if a.name != "*"}
            continue
        if isinstance(n, (ast.Attribute, ast.Subscript)) and \
                isinstance(n.ctx, (ast.Store, ast.Del)):
            if (r := root(n)) is not None:
                fx.changes.add(r)
        elif isinstance(n, ast.Expr) and isinstance(n.value, ast.Call):
            _call(n.value, fx, statement=True)
        elif isinstance(n, ast.Call):
            _call(n, fx, statement=False)
        elif isinstance(n, ast.comprehension):
            # its target is the comprehension's own: walk what it reads only
            stack += [(x, in_class) for x in (n.iter, *n.ifs)]
            continue
        elif not in_class:
            fx.binds.update(pattern_names(n))
            _alias(n, fx)
        stack += [(c, in_class) for c in ast.iter_child_nodes(n)]
    fx.aliases = {(b, a) for b, a in fx.aliases if b != a}
    return fx


def _call(c: ast.Call, fx: Effects, statement: bool) -> None:
    f = c.func
    if isinstance(f, ast.Name):
        fx.calls.add(f.id)
        if f.id in _SETATTR and c.args and (r := root(c.args[0])):
            fx.changes.add(r)
    elif (r := root(f)) is not None:  # a method: its object
        (fx.changes if statement else fx.weak).add(r)
    if statement:  # ``register(CFG)``, ``random.shuffle(ZONES)``: what is passed may change
        for a in [*c.args, *(k.value for k in c.keywords)]:
            if (r := root(a)) is not None and not isinstance(a, ast.Call):
                fx.changes.add(r)


def _alias(n: ast.AST, fx: Effects) -> None:
    """A name bound to (a part of) another name's object."""
    pairs: list[tuple[ast.AST, ast.AST | None]] = []
    if isinstance(n, ast.Assign):
        pairs = [(t, n.value) for t in n.targets]
    elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)):
        pairs = [(n.target, n.value)]
    elif isinstance(n, (ast.For, ast.AsyncFor)):
        pairs = [(n.target, n.iter)]
    elif isinstance(n, ast.withitem) and n.optional_vars is not None:
        pairs = [(n.optional_vars, n.context_expr)]
    for target, value in pairs:
        for src in _bare_roots(value):
            fx.aliases |= {(b, src) for b in _target_names(target)}


def function_changes(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[set[str], set[str]]:
    """The global objects a module function changes in place when called (names it does not
    bind itself), and the bare names it calls (other module functions may change more)."""
    local = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    declared: set[str] = set()
    changed: set[str] = set()
    calls: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Global):
            declared.update(n.names)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            local.add(n.id)
        elif isinstance(n, (ast.Attribute, ast.Subscript)) and \
                isinstance(n.ctx, (ast.Store, ast.Del)):
            if (r := root(n)) is not None:
                changed.add(r)
        elif isinstance(n, ast.Call):
            if isinstance(n.func, ast.Name):
                calls.add(n.func.id)
                if n.func.id in _SETATTR and n.args and (r := root(n.args[0])):
                    changed.add(r)
            elif (r := root(n.func)) is not None:
                changed.add(r)
    local -= declared
    return changed - local, calls - local
