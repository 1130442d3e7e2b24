"""The DAG (the pipeline's topology): references resolved to node ids, usage errors found
before anything runs, phases, and the static part of partition expansion (key lists that the
source text pins down)."""
from __future__ import annotations

import itertools
import os

from barca.core.errors import UsageError, did_you_mean
from barca.core.record import Fields
from barca.core.types import NodeId, PartitionKey, format_key, ids_named, key_strings, short_name
from barca.model import graphcache
from barca.model.discovery import (
    PSEUDO_ABSPATH,
    FileModel,
    InputRef,
    NodeModel,
    find_files,
    parse_file,
    relative_id,
)

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any

    from barca.core.settings import Settings


class Graph(Fields):
    __slots__ = ("root_dir", "files", "nodes", "order", "upstream", "downstream", "phase",
                 "groups")

    def __init__(self, root: str | Path, files: dict[str, FileModel],
                 nodes: dict[NodeId, NodeModel],
                 order: list[NodeId], upstream: dict[NodeId, list[NodeId]] | None = None,
                 downstream: dict[NodeId, list[NodeId]] | None = None,
                 phase: dict[NodeId, int] | None = None) -> None:
        self.root_dir = os.fspath(root)  # a str: see ``root``
        self.files = files
        self.nodes = nodes
        self.order = order                # topological, stable
        self.upstream = {} if upstream is None else upstream
        self.downstream = {} if downstream is None else downstream
        self.phase = {} if phase is None else phase
        self.groups: list[Any] = []       # barca.model.groups.Group, metadata only

    @property
    def root(self) -> Path:
        """The project root as a Path, made when asked (a cached command works on the str
        ``root_dir``: pathlib is not loaded on its path, #31 item 2)."""
        from pathlib import Path
        return Path(self.root_dir)

    # -------------------------------------------------------------- names
    def resolve(self, name: str, what: str = "Asset", command: str = "get") -> NodeId:
        """A node id from a full id or a bare function name."""
        matches = ids_named(name, self.nodes)
        if len(matches) == 1:
            return NodeId(matches[0])
        if len(matches) > 1:
            raise UsageError(
                f"'{name}' is defined in several files: {', '.join(sorted(matches))}",
                "Name it by its full id (file:function).")
        avail = self.available(command)
        hint = did_you_mean(name, [short_name(n) for n in avail] + list(avail))
        files = " ".join(sorted(self.files))
        there = self.defined_elsewhere(name)
        if there:  # a notebook's own scope: the name is a pipeline file's
            raise UsageError(
                f"{what} '{name}' is not one of this notebook's assets: it is defined in "
                f"{', '.join(there)}. Without a file, barca reads the notebook's own assets "
                "once a cell defines one.", f"Name the file: `barca {command} {name} "
                f"{there[0]}`.")
        raise UsageError(
            f"{what} '{name}' not found. Available: {', '.join(avail) or '(none)'}",
            (hint.strip() + "\n\n" if hint else "") +
            f"Run `barca list {files}` to see available assets and tasks.".replace("  ", " "))

    def defined_elsewhere(self, name: str) -> list[str]:
        """The pipeline files under the root that define ``name``, when this graph is a
        notebook's own nodes (a magic without files): the scope the user may have meant."""
        if not any(fm.abspath == PSEUDO_ABSPATH for fm in self.files.values()):
            return []
        out = []
        for p in find_files(self.root_dir):
            try:
                fm = parse_file(p, self.root_dir)
            except Exception:  # noqa: BLE001 - a file that does not parse defines nothing here
                continue
            if any(n.function == name for n in fm.nodes):
                out.append(fm.path)
        return out

    def available(self, command: str = "get") -> list[NodeId]:
        kinds = ("task",) if command == "run" else (
            ("asset", "sensor", "task") if command == "stats" else ("asset", "sensor"))
        return [n for n in self.order if self.nodes[n].kind in kinds]

    # -------------------------------------------------------------- cones
    def upstream_cone(self, targets: list[NodeId]) -> set[NodeId]:
        seen: set[NodeId] = set(targets)
        todo, upstream = list(seen), self.upstream
        while todo:
            for u in upstream[todo.pop()]:
                if u not in seen:
                    seen.add(u)
                    todo.append(u)
        return seen

    def downstream_cone(self, sources: list[NodeId], within: set[NodeId]) -> set[NodeId]:
        seen: set[NodeId] = set()
        todo = list(sources)
        while todo:
            n = todo.pop()
            if n not in seen and n in within:
                seen.add(n)
                todo.extend(self.downstream[n])
        return seen

    def input_of(self, node: NodeId, upstream: NodeId) -> list[InputRef]:
        return [i for i in self.nodes[node].inputs if i.target == upstream]

    def source_dim(self, nid: NodeId) -> tuple[NodeId, bool] | None:
        """The partitions_from source of a node, and whether its keys come from its output."""
        for d in self.nodes[nid].dims:
            if d.kind == "from" and d.source is not None:
                return d.source, not self.nodes[d.source].partitioned
        return None


# ---------------------------------------------------------------------------- building

def load_graph(files: list[str] | tuple[str, ...] = (), settings: Settings | None = None,
               root: str | Path | None = None) -> Graph:
    """The graph of ``files`` (default: every pipeline file under the project root that the
    ``Settings``' discovery patterns keep)."""
    if settings is None:
        from barca.core.settings import Settings
        settings = Settings.resolve(root)
    root = os.fspath(root or settings.root_dir)
    found = settings.include, settings.exclude
    nb: FileModel | None = None
    paths: list[str | Path] = []
    if files:
        for f in files:
            where = os.path.join(os.getcwd(), f)  # (f itself when absolute)
            if os.path.isdir(where):
                # barca.toml's patterns are relative to the root: they apply to it alone
                paths.extend(find_files(where, *found) if os.path.realpath(where) == root
                             else find_files(where))
            elif not os.path.exists(where):
                raise UsageError(f"File not found: {f}",
                                 "Pass the path of a pipeline file, relative to the current "
                                 "directory, or no file to read every pipeline under the project.")
            else:
                paths.append(where)
    else:
        from barca.model.kernel import interactive  # (not the notebook's reader: no kernel)
        if interactive():
            from barca.model import notebook
            nb = notebook.file_model(root)
        # a notebook's own nodes (cells): plan over them (and the pipeline files whose
        # assets they read, below)
        if nb is None:
            paths.extend(find_files(root, *found))
    entries = [os.fspath(p) for p in paths]
    if nb is None and (kept := graphcache.get(root, entries)) is not None:
        return kept  # (a notebook's cells: built each time)
    parsed: dict[str, FileModel] = {nb.path: nb} if nb is not None else {}
    for p in paths:
        fm = parse_file(p, root)
        parsed.setdefault(fm.path, fm)
    # files that the given ones import nodes from are part of the graph too
    todo, looked = list(parsed.values()), {}
    while todo:
        fm = todo.pop()
        looked[fm.path] = graphcache.lookups(fm, root)
        for _, _, other in looked[fm.path]:
            if other is not None and relative_id(other, root) not in parsed:
                ofm = parse_file(other, root)
                parsed[ofm.path] = ofm
                todo.append(ofm)
    graph = build(root, parsed)
    if nb is None:
        graphcache.put(root, entries, graph, looked)
    return graph


def _imported_name(fm: FileModel, ref: str) -> str:
    head, *rest = ref.split(".")
    attr = fm.imports[head][1]
    return rest[-1] if rest else (attr or head)


def _resolve_id(nodes: dict[NodeId, NodeModel], n: NodeModel, inp: InputRef) -> NodeId:
    """The node an ``asset_ref()`` names: its id exactly (a bare name is no id)."""
    if inp.ref in nodes and ":" in inp.ref:
        return NodeId(inp.ref)
    hint = did_you_mean(inp.ref, list(nodes))
    raise UsageError(
        f"{n.file}:{inp.line}: inputs['{inp.param}'] of '{n.function}' is "
        f"asset_ref({inp.ref!r}), which names no @asset or @sensor",
        "Name a node by its id: the file relative to the project root, a colon, the function "
        f'(asset_ref("other.py:prices")); barca list shows the ids.{hint}')


def build(root: str, files: dict[str, FileModel]) -> Graph:
    nodes: dict[NodeId, NodeModel] = {}
    by_file_fn: dict[tuple[str, str], NodeId] = {}
    for fm in files.values():
        for n in fm.nodes:
            if n.id in nodes:
                raise UsageError(f"{fm.path}:{n.line}: two nodes are named '{n.id}'",
                                 "Rename one of the functions (or its name=).")
            nodes[n.id] = n
            by_file_fn[(fm.path, n.function)] = n.id
    graph = Graph(root, files, nodes, [])

    def resolve_ref(node: NodeModel, ref: str, line: int, param: str | None) -> NodeId:
        """``param``: the input's (None: partitions_from's), named only in an error."""
        got = by_file_fn.get((node.file, ref)) if "." not in ref else None
        if got is not None:
            return got
        fm = files[node.file]
        other = graphcache.imported_file(fm, ref, root)
        if other is not None:
            from barca.model.discovery import relative_id
            rel = relative_id(other, root)
            fn_name = _imported_name(fm, ref)
            if (rel, fn_name) in by_file_fn:
                return by_file_fn[(rel, fn_name)]
        names = [short_name(n) for n in nodes]
        where = "partitions_from()" if param is None else f"inputs['{param}']"
        raise UsageError(
            f"{node.file}:{line}: {where} of '{node.function}' names '{ref}', which is not an "
            f"@asset or @sensor.",
            f"Pass a function decorated with @asset or @sensor.{did_you_mean(ref, names)}")

    for nid, n in nodes.items():
        ups: list[NodeId] = []
        for inp in n.inputs:
            if inp.by_id:
                inp.target = _resolve_id(nodes, n, inp)
                ups.append(inp.target)
                continue
            inp.target = resolve_ref(n, inp.ref, inp.line, inp.param)
            ups.append(inp.target)
        for d in n.dims:
            if d.kind == "from":
                d.source = resolve_ref(n, d.source_ref or "", d.line, None)
                ups.append(d.source)
        graph.upstream[nid] = ups if len(ups) < 2 else list(dict.fromkeys(ups))
        graph.downstream.setdefault(nid, [])
    for nid, ups in graph.upstream.items():
        for u in ups:
            graph.downstream.setdefault(u, []).append(nid)
    graph.order = _toposort(graph)
    for nid in graph.order:
        _validate(graph, nodes[nid])
    _assign_phases(graph)
    if any(getattr(fm, "groups", None) for fm in files.values()):  # else no groups module
        from barca.model.groups import resolve
        graph.groups = resolve(files)
    return graph


def _toposort(graph: Graph) -> list[NodeId]:
    order: list[NodeId] = []
    state: dict[NodeId, int] = {}

    path: list[NodeId] = []  # the nodes being visited, outermost first (one list, not a copy
    upstream = graph.upstream  # per step: a 100-chain would copy 5,000 entries)

    def visit(n: NodeId) -> None:
        s = state.get(n)
        if s == 2:
            return
        if s == 1:
            cycle = path[path.index(n):] + [n]
            raise UsageError(f"Dependency cycle: {' -> '.join(cycle)}",
                             "Remove one of these inputs so the graph has no cycle.")
        state[n] = 1
        path.append(n)
        for u in upstream[n]:
            if state.get(u) != 2:
                visit(u)
        path.pop()
        state[n] = 2
        order.append(n)

    for n in graph.nodes:  # files in given order, functions in source order
        if state.get(n) != 2:  # (a node visited already, as an upstream: no call)
            visit(n)
    return order


def _validate(graph: Graph, n: NodeModel) -> None:
    where = f"{n.file}:{n.line}"
    params = dict(n.params)  # (made in C: not a set built by a comprehension, per node)
    has_var_kw = n.var_kw
    dims = n.dims
    if n.kind == "sensor" and dims:
        raise UsageError(f"{where}: sensor '{n.function}' is partitioned",
                         "A sensor's value is one value for the whole asset; partition the "
                         "assets that read it instead.")
    for inp in n.inputs:
        if inp.param not in params and not has_var_kw:
            raise UsageError(
                f"{where}: inputs names '{inp.param}', which is not a parameter of "
                f"'{n.function}'.",
                f"Add a parameter '{inp.param}' to the function or fix the name."
                f"{did_you_mean(inp.param, sorted(params))}")
        up = graph.nodes[inp.target]
        up_partitioned = bool(up.dims)  # (NodeModel.partitioned, without a property call)
        if up.kind == "task" and n.kind in ("asset", "sensor"):
            raise UsageError(f"{where}: task '{up.function}' feeds {n.kind} '{n.function}'",
                             "Tasks are never cached, so they cannot feed an asset or sensor. "
                             "Make it an @asset.")
        if inp.collect and not up_partitioned:
            raise UsageError(f"{where}: collect({up.function}) in '{n.function}', but "
                             f"'{up.function}' is not partitioned",
                             f"Pass it directly: inputs={{\"{inp.param}\": {up.function}}}.")
        if not inp.collect and up_partitioned:
            up_dims = sorted(d.name for d in up.dims)
            if not dims:
                raise UsageError(
                    f"{where}: '{n.function}' reads the partitioned asset '{up.function}' "
                    f"without collect().",
                    f"Either use inputs={{\"{inp.param}\": collect({up.function})}} to receive "
                    f"every key as one list, or partition '{n.function}' the same way: "
                    f"partitions={{\"{up_dims[0]}\": partitions_from({up.function})}}.")
            if sorted(d.name for d in n.dims) != up_dims:
                raise UsageError(
                    f"{where}: '{n.function}' reads '{up.function}' key by key, but their "
                    f"dimensions differ ({', '.join(sorted(d.name for d in n.dims))} vs "
                    f"{', '.join(up_dims)}).",
                    f"Use collect({up.function}) or give both the same dimensions.")
    if dims:
        _validate_dims(graph, n, where)
    branch = n.kind == "task" and not n.inputs and not dims  # parallel() fills its params
    if branch:
        return
    filled: set[str] | None = None  # made once a parameter without a default asks
    inputs = n.inputs
    for p, has_default in n.params:
        if has_default or (len(inputs) == 1 and inputs[0].param == p):  # (most: one input)
            continue
        if filled is None:
            filled = {i.param for i in n.inputs}
            for d in dims:
                filled.add(d.name)
                if d.kind == "from":
                    filled.add(graph.nodes[d.source].function)
        if p not in filled:
            raise UsageError(
                f"{where}: parameter '{p}' of '{n.function}' is not filled by any input or "
                f"partition dimension.",
                f"Add inputs={{\"{p}\": <upstream>}}, a dimension named '{p}', or a default value.")


def _validate_dims(graph: Graph, n: NodeModel, where: str) -> None:
    """What a partitioned node's dimensions must be (most nodes have none: not called)."""
    kinds = {d.kind for d in n.dims}
    if len(kinds) > 1:
        raise UsageError(
            f"{where}: '{n.function}' mixes partitions() and partitions_from() dimensions.",
            "Use only derived dimensions, or declare every dimension explicitly with "
            "partitions([...]).")
    froms = [d for d in n.dims if d.kind == "from"]
    if len(froms) > 1:
        raise UsageError(f"{where}: '{n.function}' has several partitions_from() dimensions.",
                         "Derive one dimension, or declare each explicitly with partitions([...]).")
    for d in froms:
        src = graph.nodes[d.source]
        if src.kind == "task":
            raise UsageError(f"{where}: partitions_from({src.function}) names a task",
                             "Keys must come from an @asset or @sensor.")
        if src.partitioned:
            src_dims = [x.name for x in src.dims]
            if src_dims != [d.name]:
                raise UsageError(
                    f"{where}: partitions_from({src.function}) must keep the upstream's dimension "
                    f"name: '{src.function}' is partitioned by {', '.join(src_dims)}, "
                    f"'{n.function}' calls it '{d.name}'.",
                    f"Write partitions={{\"{src_dims[0]}\": partitions_from({src.function})}}."
                    if len(src_dims) == 1 else
                    f"'{src.function}' has several dimensions; declare '{n.function}'s keys "
                    "explicitly with partitions([...]).")


def _assign_phases(graph: Graph) -> None:
    for nid in graph.order:
        n = graph.nodes[nid]
        # a Manual node with inputs is walked after them (its pinned result is still
        # looked up against their run hashes), so only one that reads nothing starts a phase
        if n.kind == "sensor" or (n.freshness == "manual" and not graph.upstream[nid]):
            graph.phase[nid] = 0
            continue
        ph = 1
        collected: Any = ()  # (most nodes: none, no set made)
        for i in n.inputs:
            if i.collect:
                collected = {i.target for i in n.inputs if i.collect}
                break
        dims = n.dims
        for u in graph.upstream[nid]:
            un = graph.nodes[u]
            boundary = (un.kind == "sensor" or un.freshness == "manual" or u in collected
                        or (dims and not un.dims and any(d.source == u for d in dims)))
            up = graph.phase[u] + (1 if boundary else 0)
            if up > ph:
                ph = up
        graph.phase[nid] = ph


# ---------------------------------------------------------------------------- warnings

def plan_warnings(graph: Graph, nids: list[NodeId]) -> list[dict[str, str]]:
    """What is legal but probably not meant, per node and parameter (``barca plan``): a
    partition dimension the function never sees (every key makes the same call), and a
    default that an input or a dimension always overrides. Sorted by node, parameter, kind."""
    out: list[dict[str, str]] = []
    for nid in nids:
        n = graph.nodes[nid]
        params = dict(n.params)          # name -> has a default
        if n.dims or True in params.values():  # else neither warning can apply (most nodes)
            defaults = [name for name, has_default in n.params if has_default]
            filled = {i.param for i in n.inputs} | {d.name for d in n.dims}
            filled |= {graph.nodes[d.source].function for d in n.dims if d.source is not None}
            for d in n.dims:
                if d.kind != "from" and d.name not in params and not n.var_kw:
                    out.append({"node": nid, "parameter": d.name, "kind": "dimension_unused",
                                "message": f"'{n.function}' takes no '{d.name}' parameter, so "
                                           f"every key of dimension '{d.name}' makes the same "
                                           "call"})
            for name in defaults:
                if name in filled:
                    out.append({"node": nid, "parameter": name, "kind": "default_unused",
                                "message": f"the default of '{name}' in '{n.function}' is "
                                           "never used: an input or partition dimension "
                                           "always fills it"})
        if (n.unused or n.env_reads) and graph.files[n.file].abspath != PSEUDO_ABSPATH:
            from barca.model.lint import warnings  # a notebook's cells are not read; the lint
            out.extend(warnings(n))                # module loads once a node has a finding
    return sorted(out, key=lambda w: (w["node"], w["parameter"], w["kind"]))


def untracked_message(module: str, nodes: Sequence[str]) -> str:
    """The one line an ``untracked_import`` says (plan warning, stderr of a run)."""
    return (f"untracked import '{module}' (reached by {', '.join(nodes)}): it is neither a "
            "project module nor an installed package, so barca cannot hash its code and an "
            "edit of it re-runs nothing. Put it in the project (or on sys.path with a literal "
            "path in the pipeline), or install it.")


def untracked_warnings(graph: Graph, untracked: dict[str, list[NodeId]]
                       ) -> list[dict[str, str]]:
    """``untracked_import`` plan warnings: one per node and import, as ``plan_warnings``."""
    return [{"node": nid, "parameter": "", "kind": "untracked_import",
             "message": f"'{graph.nodes[nid].function}' imports '{module}', which is neither "
                        "a project module nor an installed package: barca cannot hash its "
                        "code, so an edit of it re-runs nothing"}
            for module, nids in sorted(untracked.items()) for nid in nids]


# ---------------------------------------------------------------------------- keys

def validate_keys(node: NodeModel, dim: str, keys: Any, line: int | None = None) -> list[str]:
    """Keys as strings, or a usage error naming the offending keys."""
    where = f"{node.file}:{line or node.line}"
    if isinstance(keys, (str, bytes, dict)) or not hasattr(keys, "__iter__"):
        raise UsageError(f"{where}: partition keys of '{node.function}' (dimension '{dim}') "
                         f"must be a list, got {type(keys).__name__}",
                         'Write partitions(["a", "b"]).')
    out, problems = key_strings(keys)
    if problems:
        said = [f"{k!r} ({type(k).__name__})" if earlier is None
                else f"{k!r} (duplicate of {earlier!r})" for k, earlier in problems]
        raise UsageError(
            f"{where}: invalid partition keys of '{node.function}' (dimension '{dim}'): "
            f"{', '.join(said)}",
            "Keys must be unique strings, also ignoring case (an integer key becomes its "
            "string, so 1 and \"1\" collide; AAPL and aapl would share a folder).")
    return out


def combine(dims: dict[str, list[str]]) -> list[PartitionKey]:
    """The cartesian product of each dimension's keys, as compound keys."""
    names = list(dims)
    if len(names) == 1:  # the common case, without a dict per key
        from barca.core.types import _escape
        prefix = _escape(names[0]) + "="
        return [PartitionKey(prefix + _escape(v)) for v in dims[names[0]]]
    return [format_key(dict(zip(names, combo, strict=False)))
            for combo in itertools.product(*(dims[d] for d in names))]
