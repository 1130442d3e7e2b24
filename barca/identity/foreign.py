"""Changes made from another module: ``import conf`` then ``conf.CFG["k"] = 1``, or
``from conf import CFG`` then ``CFG.update(...)``, at module level of a module the pipeline
imports (at any depth), change ``conf``'s ``CFG`` for every reader once that module has run.
The same for a module outside the project (``import numpy as np`` then ``np.random.seed(0)``).

The index maps what is changed -- (a project module, one of its names, or ``*`` for any of
them) or (``ext``, a top-level module outside the project) -- to the importing module's local
name, whose definition (barca.identity.effects) holds the changing statements: the cone follows
that name as well."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from barca.identity.moduleindex import Module, local_name

# what is changed -> (the changing module, its local name, the chain to read it with)
Foreign = dict[tuple[Any, str], list[tuple[Module, str, tuple[str, ...]]]]


def foreign_index(project: Any, modules: list[Module],
                  searches: list[tuple[Path, ...]]) -> Foreign:
    out: Foreign = {}
    for m in modules:
        if m.tree is None:
            continue
        for local, stmts in m.index.defs.items():
            top = [s for s in stmts if isinstance(s, (ast.Import, ast.ImportFrom))]
            if len(top) == len(stmts):
                continue  # never changed here
            # imported at the top level, or inside a block (``try: from conf import CFG``)
            imports = top + [i for i, _ in m.bindings.get(local, ()) if i not in top and any(
                s.lineno <= i.lineno <= (s.end_lineno or s.lineno) for s in stmts)]
            for st in imports:
                for a in st.names:
                    if a.name == "*" or local_name(st, a) != local:
                        continue
                    for key in _targets(project, m, st, a, searches):
                        out.setdefault(key, []).append((m, local, ()))
    return out


def _targets(project: Any, m: Module, st: ast.Import | ast.ImportFrom, a: ast.alias,
             searches: list[tuple[Any, ...]]) -> list[tuple[Any, str]]:
    keys: list[tuple[Any, str]] = []
    if isinstance(st, ast.Import):
        dotted = a.name if a.asname else a.name.split(".")[0]
        found = [t for s in searches if (t := project.find(dotted, s)) is not None]
        keys += [(id(t), "*") for t in found]
        if not found:
            keys.append(("ext", dotted.split(".")[0]))
        return keys
    if st.level:
        srcs = [project.import_source(m, st, ())]
    else:
        srcs = [project.find(st.module, s) for s in searches] if st.module else []
    for src in srcs:
        if src is None:
            continue
        sub = project.submodule(src, a.name)
        keys.append((id(sub), "*") if sub is not None else (id(src), a.name))
    if not keys and not st.level and st.module:
        keys.append(("ext", st.module.split(".")[0]))
    return keys
