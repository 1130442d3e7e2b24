"""What is legal in a step's source but probably not meant, read from the syntax tree (nothing
imported): an input the body never uses (``unused_input``), and an environment variable read
without being declared in ``env=`` (``undeclared_env``, which the run hash cannot see)."""
from __future__ import annotations

import ast
import re
from typing import Any

# calls that reach names the tree cannot see: a body using one may use any input
DYNAMIC = {"locals", "vars", "eval", "exec", "globals", "getattr"}
SQL_CALLS = {"sql", "execute", "query", "from_query"}


def unused_inputs(node: Any) -> list[str]:
    """The parameters wired by ``inputs=`` that the function never names (a whole-word mention
    in a string counts: SQL text, a format string). None for a body that only raises or does
    nothing, takes ``**kwargs``, looks names up dynamically, or runs SQL text built at run
    time; never ``_``-prefixed inputs or DuckDB relations (visible to SQL as views)."""
    if node.kind == "sensor":
        return []
    fn = node.fn
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring
    if node.var_kw or not body or all(
            isinstance(s, (ast.Pass, ast.Raise)) or (isinstance(s, ast.Expr)
                                                     and isinstance(s.value, ast.Constant))
            for s in body):
        return []
    names: set[str] = set()
    text: list[str] = []
    for n in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(n, ast.Name):
            names.add(n.id)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            text.append(n.value)
        elif isinstance(n, ast.Call):
            f = n.func
            called = f.id if isinstance(f, ast.Name) else (
                f.attr if isinstance(f, ast.Attribute) else "")
            if called in DYNAMIC:
                return []
            if called in SQL_CALLS and n.args and not (
                    isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)):
                return []
    joined = "\n".join(text)
    out = []
    for inp in node.inputs:
        p = inp.param
        if p.startswith("_") or p in names or node.readers.get(p) == "duckdb":
            continue
        if re.search(rf"(?<![\w]){re.escape(p)}(?![\w])", joined):
            continue
        out.append(p)
    return sorted(set(out))


def file_functions(fm: Any) -> dict[str, Any]:
    """The functions defined at the top of a file, by name."""
    return {s.name: s for s in fm.tree.body
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}


def env_reads(node: Any, fm: Any, funcs: dict[str, Any] | None = None) -> set[str]:
    """The variable names the step reads literally from the environment (``os.environ[...]``,
    ``os.environ.get(...)``, ``os.getenv(...)``, ``environ.get`` after ``from os import
    environ``), in its body or in the functions of its file it calls, at any depth
    (``funcs``: file_functions(fm), when the caller has it)."""
    if funcs is None:
        funcs = file_functions(fm)
    seen: set[str] = set()
    out: set[str] = set()
    todo: list[ast.AST] = [node.fn]
    while todo:
        fn = todo.pop()
        for n in ast.walk(fn):
            name = _env_name(n)
            if name is not None:
                out.add(name)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                callee = n.func.id
                if callee in funcs and callee not in seen and callee != node.function:
                    seen.add(callee)
                    todo.append(funcs[callee])
    return out


def _is_environ(e: ast.expr) -> bool:
    return (isinstance(e, ast.Attribute) and e.attr == "environ") or (
        isinstance(e, ast.Name) and e.id == "environ")


def _literal(args: list[ast.expr]) -> str | None:
    if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
        return args[0].value
    return None


def _env_name(n: ast.AST) -> str | None:
    if isinstance(n, ast.Subscript) and _is_environ(n.value):
        return _literal([n.slice])
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
        f = n.func
        if f.attr in ("get", "pop", "setdefault") and _is_environ(f.value):
            return _literal(n.args)
        if f.attr == "getenv":
            return _literal(n.args)
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getenv":
        return _literal(n.args)
    return None


def warnings(node: Any) -> list[dict[str, str]]:
    """The node's ``unused_input`` and ``undeclared_env`` warnings (plan_warnings' form), from
    what discovery found when it read the file (``node.unused``, ``node.env_reads``)."""
    if not node.unused and not node.env_reads:  # most nodes: nothing to say, nothing built
        return []
    out = []
    for p in node.unused:
        out.append({"node": node.id, "parameter": p, "kind": "unused_input",
                    "message": f"{node.id} never uses its input `{p}`. Remove it from "
                               f"inputs=, or name the parameter `_{p}` if it is there only "
                               "to run after it."})
    for name in sorted(set(node.env_reads) - set(node.env)):
        out.append({"node": node.id, "parameter": name, "kind": "undeclared_env",
                    "message": f"{node.id} reads the environment variable {name}, which is "
                               f"not in its env=, so a change of it does not run the step "
                               f"again. Add env=[\"{name}\"] to its decorator."})
    return out
