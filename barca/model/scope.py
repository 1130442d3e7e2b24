"""Python's scope rules as barca reads them, in one place: the module-level names a definition
reads (for its definition hash, in files and in notebooks alike) and the names an ``except``
handler or a ``match`` pattern binds (for the dependency cone and key expressions)."""
from __future__ import annotations

import ast
import symtable


def global_names(tree: ast.AST, lines: list[str] | None = None) -> set[str]:
    """The module-level names a definition reads, by Python's own scope analysis
    (``symtable``): a parameter or local that shadows a global is not mistaken for it. Builtins
    are kept: a module (or a star import) may shadow them. In a class body every name read
    counts (``X = X`` there reads the global). ``lines``, the module's source, saves unparsing
    a module-level statement (its own lines are its text; a trailing ``; stmt`` only adds)."""
    text = None
    if lines is not None and isinstance(tree, ast.stmt) and tree.col_offset == 0 \
            and tree.end_lineno is not None:
        first = min([tree.lineno] + [d.lineno for d in getattr(tree, "decorator_list", ())])
        text = "\n".join(lines[first - 1:tree.end_lineno])
        if isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                not text.startswith(("@", "def", "async", "class")):
            text = None  # an unusual layout: unparse instead
    try:
        table = symtable.symtable(text if text is not None else ast.unparse(tree),
                                  "<barca>", "exec")
    except SyntaxError:
        try:
            table = symtable.symtable(ast.unparse(tree), "<barca>", "exec")
        except SyntaxError:  # pragma: no cover - unparse of a parsed tree compiles
            return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    out: set[str] = set()

    def visit(t: symtable.SymbolTable, top: bool) -> None:
        cls = t.get_type() == "class"
        for sym in t.get_symbols():
            # (3.11's is_global() is also true for a function's parameters: check is_local)
            if sym.is_referenced() and (top or cls or sym.is_declared_global()
                                        or (sym.is_global() and not sym.is_local())):
                out.add(sym.get_name())
        for child in t.get_children():
            visit(child, False)

    visit(table, True)
    return out


def pattern_names(n: ast.AST) -> tuple[str, ...]:
    """The names ``n`` binds without an ``ast.Name``: ``except E as e``, a ``match`` capture
    (``case x``, ``case [*rest]``, ``case P() as p``) or a mapping's ``**rest``."""
    if isinstance(n, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and n.name:
        return (n.name,)
    if isinstance(n, ast.MatchMapping) and n.rest:
        return (n.rest,)
    return ()


def globals_reads(tree: ast.AST) -> tuple[set[str], bool]:
    """The names a definition reads through ``globals()``: ``globals()['K']`` and
    ``globals().get('K')`` name ``K``; any other use of ``globals()`` or ``vars()`` cannot be
    told statically (the second item is then True)."""
    names: set[str] = set()
    unknown = False
    parents: dict[int, ast.AST] = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            parents[id(child)] = parent
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
            continue
        if n.func.id == "vars" and not n.args:
            unknown = True
        if n.func.id != "globals" or n.args:
            continue
        up = parents.get(id(n))
        key: ast.AST | None = None
        if isinstance(up, ast.Subscript) and up.value is n:
            key = up.slice
        elif isinstance(up, ast.Attribute) and up.attr == "get":
            call = parents.get(id(up))
            if isinstance(call, ast.Call) and call.func is up and call.args:
                key = call.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            names.add(key.value)
        else:
            unknown = True
    return names, unknown
