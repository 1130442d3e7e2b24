"""What a command walks: the upstream cone of its targets in phase order, the assets
``--refresh`` names and the keys ``--partition`` narrows it to, checked before anything runs."""
from __future__ import annotations

from barca.core.errors import UsageError, did_you_mean
from barca.core.record import Fields
from barca.core.types import NodeId, ids_named, parse_key, short_name
from barca.engine.planner import Context


class Selection(Fields):
    """``--partition``: the keys a run is narrowed to, by dimension."""
    __slots__ = ("dims",)

    def __init__(self, dims: dict[str, list[str]]) -> None:
        self.dims = dims

    def admits(self, key: str) -> bool:
        kv = parse_key(key)
        return all(kv[d] in vals for d, vals in self.dims.items() if d in kv)


def walk_order(ctx: Context, targets: list[NodeId]) -> list[NodeId]:
    """The targets' cone in walk order (phase, then graph order); found once per command (the
    API and the runner both ask), a copy each time."""
    got = ctx.orders.get(tuple(targets))
    if got is None:
        graph = ctx.graph
        cone, order = graph.upstream_cone(targets), graph.order
        # by phase, then graph order: a stable sort of the cone in graph order, keyed in C
        got = ctx.orders[tuple(targets)] = sorted(
            order if len(cone) == len(order) else [n for n in order if n in cone],
            key=graph.phase.__getitem__)
    return list(got)


def resolve_refresh(ctx: Context, order: list[NodeId], names: list[str], target_label: str
                    ) -> list[NodeId]:
    out: list[NodeId] = []
    assets = [n for n in order if ctx.graph.nodes[n].kind != "task"]
    for name in names:
        match = ids_named(name, assets)
        if len(match) != 1:
            short = [short_name(n) for n in assets]
            hint = did_you_mean(name, short)
            raise UsageError(
                f"--refresh: no upstream asset named '{name}' in the cone of '{target_label}'."
                + hint,
                f"Upstream assets you can refresh: {', '.join(short)}\n"
                f"Pass several as a comma-separated list: --refresh {','.join(short[:2])}",
                tight=True)
        out.append(NodeId(match[0]))
    return out


def check_selection(ctx: Context, order: list[NodeId], sel: Selection, target_label: str) -> None:
    dims: dict[str, set[str] | None] = {}
    for n in order:
        for spec in ctx.graph.nodes[n].dims:
            keys = ctx.static_keys(n)
            vals = None if keys is None else {parse_key(k).get(spec.name, "") for k in keys}
            if dims.get(spec.name, set()) is not None:
                dims[spec.name] = None if vals is None else (dims.get(spec.name) or set()) | vals
    for d, wanted in sel.dims.items():
        if d not in dims:
            raise UsageError(
                f"--partition: no dimension named '{d}' in the cone of '{target_label}'."
                + did_you_mean(d, list(dims)),
                "Dimensions you can select: "
                f"{', '.join(sorted(dims)) or '(none: nothing is partitioned)'}"
                f"\nWrite --partition {next(iter(sorted(dims)), 'dim')}=<key>.")
        valid = dims[d]
        if valid is not None:
            bad = [v for v in wanted if v not in valid]
            if bad:
                raise UsageError(
                    f"--partition: {', '.join(repr(b) for b in bad)} is not a key of dimension "
                    f"'{d}'." + did_you_mean(bad[0], sorted(valid)),
                    f"Valid values: {', '.join(sorted(valid))}")


def check_keys(sel: Selection, dims: list, keys: list[str], node: str) -> None:
    """``--partition`` against keys known only while walking (from a sensor's or an asset's
    output): a wanted key that is not among them is a usage error, as for keys known before."""
    for d in dims:
        wanted = sel.dims.get(d.name)
        if not wanted:
            continue
        valid = {parse_key(k).get(d.name, "") for k in keys}
        bad = [v for v in wanted if v not in valid]
        if bad:
            raise UsageError(
                f"--partition: {', '.join(repr(b) for b in bad)} is not a key of dimension "
                f"'{d.name}' (the keys of '{node}' now)." + did_you_mean(bad[0], sorted(valid)),
                f"Valid values: {', '.join(sorted(valid)) or '(none)'}")
