"""``name = group("Title", members=[...], output=ref, description="...")``: named sets of nodes
(and of other groups) that say which node is the set's result. Metadata only: a group is no
node, no step and no input of any run hash. Read from the source like the nodes (never
imported), checked when the graph is built, so a bad group is exit 2 on every command."""
from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from barca.core.errors import UsageError
from barca.core.record import Fields

KEYWORDS = ("members", "output", "description")
FIX = ('Write name = group("Title", members=[node_a, node_b, other_group], output=node_b, '
       'description="...") at the top level of the file, after what it names.')


class GroupSpec(Fields):
    """One ``group()`` as written: ``members`` and ``output`` are names in its file."""
    __slots__ = ("var", "title", "members", "output", "description", "line")

    def __init__(self, var: str, title: str, members: list[str], output: str,
                 description: str, line: int) -> None:
        self.var, self.title, self.members, self.output = var, title, members, output
        self.description, self.line = description, line


class Group(Fields):
    """A resolved group: ids of nodes (``file:fn``) and groups (``group:file:var``)."""
    __slots__ = ("id", "name", "description", "members", "output", "file", "line")

    def __init__(self, id: str, name: str, description: str, members: list[str],  # noqa: A002
                 output: str, file: str, line: int) -> None:
        self.id, self.name, self.description = id, name, description
        self.members, self.output, self.file, self.line = members, output, file, line

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "description": self.description,
                "members": list(self.members), "output": self.output}


def _fail(path: str, line: int, message: str) -> UsageError:
    return UsageError(f"{path}:{line}: {message}", FIX, file=path, line=line)


def read(path: str, body: list[ast.stmt], is_group: Callable[[ast.expr], bool]
         ) -> list[GroupSpec]:
    """The module-level ``x = group(...)`` statements of a file, checked for their form."""
    out: list[GroupSpec] = []
    bound: dict[str, int] = {}
    for stmt in body:
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)
                and is_group(stmt.value.func)):
            continue
        call, line = stmt.value, stmt.lineno
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            raise _fail(path, line, "a group() is bound to one plain variable name")
        var = stmt.targets[0].id
        if var in bound:
            raise _fail(path, line, f"the variable '{var}' is bound to two groups (lines "
                        f"{bound[var]} and {line})")
        bound[var] = line
        if len(call.args) != 1 or not (isinstance(call.args[0], ast.Constant)
                                       and isinstance(call.args[0].value, str)):
            title_kw = any(k.arg in ("title", "name") for k in call.keywords)
            raise _fail(path, line, f"group() for '{var}' takes its title by position, as "
                        "one string" + (", not as a keyword" if title_kw else ""))
        kws = {}
        for k in call.keywords:
            if k.arg not in KEYWORDS:
                raise _fail(path, line, f"group() got an unexpected argument "
                            f"'{k.arg or '**'}'; it takes {', '.join(KEYWORDS)}")
            kws[k.arg] = k.value
        if "output" not in kws:
            raise _fail(path, line, f"group '{var}' has no output=: name the node (or group) "
                        "that is its result")
        members = kws.get("members")
        if not isinstance(members, (ast.List, ast.Tuple)):
            raise _fail(path, line, f"members= of group '{var}' must be a list of node "
                        "functions and groups")
        names = []
        for m in members.elts:
            if not isinstance(m, ast.Name):
                raise _fail(path, line, f"members= of group '{var}' holds "
                            f"{ast.unparse(m)}, which is not a node function or a group "
                            "variable")
            names.append(m.id)
        output = kws["output"]
        if not isinstance(output, ast.Name):
            raise _fail(path, line, f"output= of group '{var}' must name a node function or "
                        "a group variable")
        desc = kws.get("description")
        if desc is not None and not (isinstance(desc, ast.Constant)
                                     and isinstance(desc.value, str)):
            raise _fail(path, line, f"description= of group '{var}' must be a string")
        out.append(GroupSpec(var, call.args[0].value, names, output.id,
                             str(desc.value) if isinstance(desc, ast.Constant) else "", line))
    return out


def resolve(files: dict[str, Any]) -> list[Group]:
    """Every file's groups with their names resolved to ids, checked: a member names a node of
    the file (or one it imports) or a group bound earlier; no node sits in two groups; the
    output is among the group's descendants."""
    groups: list[Group] = []
    by_id: dict[str, Group] = {}
    owner: dict[str, str] = {}   # member id -> the group that lists it
    for fm in files.values():
        specs: list[GroupSpec] = getattr(fm, "groups", None) or []
        if not specs:
            continue
        nodes = {n.function: n.id for n in fm.nodes}
        local: dict[str, str] = {}

        def ident(name: str, spec: GroupSpec, fm: Any = fm, nodes: dict[str, str] = nodes,
                  local: dict[str, str] = local) -> str:
            if name in local:
                return local[name]
            if name in nodes:
                return str(nodes[name])
            imported = _imported_node(fm, name, files)
            if imported is not None:
                return imported
            raise _fail(fm.path, spec.line, f"group '{spec.var}' names '{name}', which is "
                        "not a node function or a group defined above it")

        for spec in specs:
            gid = f"group:{fm.path}:{spec.var}"
            members = [ident(m, spec) for m in spec.members]
            output = ident(spec.output, spec)
            for m in members:
                if m in owner and owner[m] != gid:
                    raise _fail(fm.path, spec.line, f"'{m}' is in two groups: "
                                f"{owner[m]} and {gid}")
                owner[m] = gid
            g = Group(gid, spec.title, spec.description, members, output, fm.path, spec.line)
            if output not in _descendants(g, by_id):
                raise _fail(fm.path, spec.line, f"the output of group '{spec.var}' is "
                            f"'{output}', which is not among its members (or theirs)")
            local[spec.var] = gid
            by_id[gid] = g
            groups.append(g)
    return groups


def _descendants(g: Group, by_id: dict[str, Group]) -> set[str]:
    out: set[str] = set()
    todo = list(g.members)
    while todo:
        m = todo.pop()
        if m not in out:
            out.add(m)
            if m in by_id:
                todo.extend(by_id[m].members)
    return out


def _imported_node(fm: Any, name: str, files: dict[str, Any]) -> str | None:
    """A node function imported by name (``from prices import daily``) from a file in the
    graph."""
    imp = fm.imports.get(name)
    if imp is None or imp[1] is None:
        return None
    module, attr = imp
    for other in files.values():
        if other.module == module or other.module.endswith("." + module):
            for n in other.nodes:
                if n.function == attr:
                    return str(n.id)
    return None
