"""The decision alone (issue 27): ``decide`` and its named phases, in-process, on what the store
said (``StoreSays``: rows in memory, no database read by the decision). One row per action and
reason: the definitions come from a real pipeline file read by barca (a ``Session`` in
``tmp_path``), the history, the snapshot and the upstream states from the row."""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from barca.core.errors import InfrastructureError
from barca.engine.decision import (
    StoreSays,
    adopted,
    decide,
    identity,
    keys_unknown,
    repaired,
)
from barca.engine.states import NodeState, StepState
from barca.store.metadata import Row, Snapshot
from barca.store.view import NodeHistory

PIPELINE = '''
from barca import Manual, asset, partitions, partitions_from, sensor, task


@asset
def raw() -> int:
    return 1


@asset(inputs={"raw": raw})
def clean(raw: int) -> int:
    return raw + 1


@asset(inputs={"raw": raw}, freshness=Manual)
def pinned(raw: int) -> int:
    return raw


@asset(partitions={"day": partitions(["d1", "d2"])})
def daily(day: str) -> str:
    return day


@sensor
def feed() -> str:
    return "v1"


@asset(inputs={"version": feed})
def watch(version: str) -> str:
    return version


@task(inputs={"clean": clean})
def push(clean: int) -> None:
    pass


@sensor
def tickers() -> list:
    return ["AAPL"]


@asset(partitions={"ticker": partitions_from(tickers)})
def quotes(ticker: str) -> str:
    return ticker
'''

RAW, CLEAN, PINNED, DAILY = ("pipeline.py:raw", "pipeline.py:clean", "pipeline.py:pinned",
                             "pipeline.py:daily")
FEED, WATCH, PUSH = "pipeline.py:feed", "pipeline.py:watch", "pipeline.py:push"
DAYS = ["day=d1", "day=d2"]


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from barca import api
    root = tmp_path_factory.mktemp("decisions")
    (root / "pipeline.py").write_text(PIPELINE)
    here = Path.cwd()
    import os
    os.chdir(root)
    try:
        sess = api.Session([str(root / "pipeline.py")])
    finally:
        os.chdir(here)
    yield sess.ctx
    sess.close()


def row(nid: str, key: str, run_hash: str, status: str = "success", row_id: int = 1,
        parts: dict[str, str] | None = None, error: str | None = None) -> Row:
    return Row(id=row_id, node=nid, asset=nid, partition=key, run_hash=run_hash,
               path=f".barca/artifacts/x/{run_hash}.pkl" if status == "success" else None,
               format="pickle" if status == "success" else None, size=1, sha256="0" * 64,
               parts=json.dumps(parts) if parts else None, status=status, error=error,
               elapsed=0.1, run_id="r1", created_at=0.0, shape=None, value_hash=None)


def said(nid: str, rows: Sequence[Row] = (), evicted: frozenset[str] = frozenset(),
         snapshot: Snapshot | None = None) -> StoreSays:
    return StoreSays(NodeHistory.of(nid, list(rows)), evicted, snapshot)


def upstream(nid: str, action: str = "cached", run_hash: str | None = "a" * 64,
             reason: str = "materialized") -> NodeState:
    ns = NodeState(nid, [""])  # a node's state as the runner builds one it cannot decide
    ns.steps[""] = StepState(nid, "", action=action, reason=reason, run_hash=run_hash)
    ns.seal()
    return ns


def fresh(ctx: Any, nid: str, keys: list[str], states: dict[str, NodeState]) -> NodeState:
    """The decision with no history: every key's run hash now."""
    return decide(ctx, nid, keys, states, said(nid))


@dataclass
class Case:
    nid: str
    keys: list[str]
    # (ctx, states of the upstreams) -> what the store says of the node
    store: Callable[[Any, dict[str, NodeState]], StoreSays]
    expect: tuple[str, str]                       # every key's (action, reason)
    ups: dict[str, NodeState] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)
    detail: str | None = None                     # the first key's detail starts with this


def _now(ctx: Any, c: Case) -> list[str]:
    ns = fresh(ctx, c.nid, c.keys, c.ups)
    return [ns.steps[k].run_hash or "" for k in c.keys]


UP = {RAW: upstream(RAW)}

CASES = {
    "task: always runs": Case(PUSH, [""], lambda ctx, ups: said(PUSH), ("run", "task"),
                              ups={CLEAN: upstream(CLEAN)}, detail="tasks always run"),
    "refresh: forced": Case(CLEAN, [""], lambda ctx, ups: said(CLEAN), ("run", "refresh"),
                            ups=UP, flags={"forced": True}),
    "refresh_cascade: below a forced one": Case(
        CLEAN, [""], lambda ctx, ups: said(CLEAN), ("run", "refresh_cascade"), ups=UP,
        flags={"forced": True, "why": "refresh_cascade"}, detail="upstream refreshed"),
    "sensor: always runs": Case(FEED, [""], lambda ctx, ups: said(FEED), ("run", "sensor")),
    "no_record: never run": Case(CLEAN, [""], lambda ctx, ups: said(CLEAN),
                                 ("run", "no_record"), ups=UP, detail="never run"),
    "failed: the last run failed": Case(
        CLEAN, [""], lambda ctx, ups: said(CLEAN, [row(CLEAN, "", "f" * 64, "failed",
                                                       error="boom")]),
        ("run", "failed"), ups=UP, detail="last run failed: boom"),
    "changed: an older success, other code": Case(
        CLEAN, [""], lambda ctx, ups: said(CLEAN, [row(CLEAN, "", "e" * 64,
                                                       parts={"code": "old"})]),
        ("run", "changed"), ups=UP, detail="changed: code"),
    "materialized: a success under the run hash now": Case(
        CLEAN, [""], lambda ctx, ups: said(CLEAN, [row(CLEAN, "", rh) for rh in _now(
            ctx, Case(CLEAN, [""], said, ("", ""), ups=ups))]),
        ("cached", "materialized"), ups=UP),
    "manual: an older success is kept": Case(
        PINNED, [""], lambda ctx, ups: said(PINNED, [row(PINNED, "", "e" * 64)]),
        ("cached", "materialized"), ups=UP),
    "evicted, predicted: runs": Case(
        CLEAN, [""], lambda ctx, ups: _evicted(ctx, ups), ("run", "evicted"), ups=UP,
        flags={"predict": True}),
    "evicted, executing: cached until read": Case(
        CLEAN, [""], lambda ctx, ups: _evicted(ctx, ups), ("cached", "evicted"), ups=UP),
    "snapshot: every key settled by one digest": Case(
        DAILY, DAYS, lambda ctx, ups: _snapshot(ctx), ("cached", "materialized")),
    "snapshot, vouched by a settle record": Case(
        DAILY, DAYS, lambda ctx, ups: _snapshot(ctx, digest="not computed"),
        ("cached", "materialized"), flags={"settled": True}),
    "upstream_failed: skipped": Case(
        CLEAN, [""], lambda ctx, ups: said(CLEAN), ("skipped", "upstream_failed"),
        ups={RAW: upstream(RAW, "failed", None, "failed")},
        detail="upstream pipeline.py:raw failed"),
    "upstream skipped: skipped": Case(
        CLEAN, [""], lambda ctx, ups: said(CLEAN), ("skipped", "upstream_failed"),
        ups={RAW: upstream(RAW, "skipped", None, "upstream_failed")},
        detail="upstream pipeline.py:raw skipped"),
    "partitions_unknown: an upstream's keys are not known": Case(
        CLEAN, [""], lambda ctx, ups: said(CLEAN), ("unknown", "partitions_unknown"),
        ups={RAW: NodeState(RAW, None, unknown_detail="keys come from a sensor")},
        detail="keys come from a sensor"),
    "sensor_output_unknown: predicted without the sensor's value": Case(
        WATCH, [""], lambda ctx, ups: said(WATCH), ("unknown", "sensor_output_unknown"),
        ups={FEED: upstream(FEED, "run", None, "sensor")}, flags={"predict": True},
        detail="sensor 'feed' has no recorded value"),
}


def _evicted(ctx: Any, ups: dict[str, NodeState]) -> StoreSays:
    (rh,) = _now(ctx, Case(CLEAN, [""], said, ("", ""), ups=ups))
    r = row(CLEAN, "", rh)
    return said(CLEAN, [r], evicted=frozenset({r.path}))


def _snapshot(ctx: Any, digest: str | None = None) -> StoreSays:
    ns = fresh(ctx, DAILY, DAYS, {})
    hashes = ns.run_hashes()
    assert hashes is not None
    ident = identity(ctx, DAILY, DAYS, {})
    assert ident is not None
    snap = Snapshot(digest or ident, "c" * 64, "\x00".join(DAYS), "".join(hashes))
    return said(DAILY, snapshot=snap)


@pytest.mark.parametrize("name", list(CASES))
def test_decision_table(ctx: Any, name: str) -> None:
    c = CASES[name]
    ns = decide(ctx, c.nid, c.keys, dict(c.ups), c.store(ctx, c.ups), **c.flags)
    got = {k: (s.action, s.reason) for k, s in ns.steps.items()}
    assert got == {k: c.expect for k in c.keys}, name
    if c.detail is not None:
        assert ns.steps[c.keys[0]].detail.startswith(c.detail), ns.steps[c.keys[0]].detail
    st = ns.steps[c.keys[0]]
    if c.expect == ("run", "sensor"):  # its run hash is known once it ran (code and value)
        assert st.run_hash is None and st.parts
    elif c.expect[0] == "run":  # a step to run says what it is made of, and its run hash
        assert st.run_hash and len(st.run_hash) == 64 and st.parts


def test_only_a_step_with_no_success_is_adoptable(ctx: Any) -> None:
    """A step with no successful row at all (never run, or only failed) may be adopted (an
    artifact under its run hash, see phase 3); one whose older result changed may not."""
    assert fresh(ctx, CLEAN, [""], dict(UP)).steps[""].adoptable
    failed = decide(ctx, CLEAN, [""], dict(UP),
                    said(CLEAN, [row(CLEAN, "", "f" * 64, "failed", error="x")]))
    assert failed.steps[""].adoptable
    changed = decide(ctx, CLEAN, [""], dict(UP),
                     said(CLEAN, [row(CLEAN, "", "e" * 64, parts={"code": "old"})]))
    assert not changed.steps[""].adoptable


def test_a_sensor_value_missing_in_a_real_run_is_a_bug(ctx: Any) -> None:
    """Executing, every upstream value exists by the time a step is decided: else exit 3."""
    with pytest.raises(InfrastructureError, match="missing run hash"):
        decide(ctx, WATCH, [""], {FEED: upstream(FEED, "run", None, "sensor")}, said(WATCH))


def test_a_snapshot_of_another_state_decides_key_by_key(ctx: Any) -> None:
    """A snapshot whose digest is not the node's now settles nothing at once; a key whose run
    hash is still the one the snapshot holds for it is cached without reading its row, the
    others are looked up in the history (here: none)."""
    got = decide(ctx, DAILY, DAYS, {}, _snapshot(ctx, digest="0" * 64))
    assert not got.settled
    assert {(s.action, s.reason) for s in got.steps.values()} == {("cached", "materialized")}
    snap = _snapshot(ctx).snapshot
    assert snap is not None
    other = snap._replace(digest="0" * 64, hashes="1" * 64 + snap.hashes[64:])
    got = decide(ctx, DAILY, DAYS, {}, said(DAILY, snapshot=other))
    assert [(k, s.action, s.reason) for k, s in got.steps.items()] == [
        ("day=d1", "run", "no_record"), ("day=d2", "cached", "materialized")]


# ------------------------------------------------------------------ the phases around decide

def test_phase_keys_unknown(ctx: Any) -> None:
    """Phase 1: a node whose keys are not known yet is one step, unknown -- or skipped when
    the step its keys come from failed."""
    ns = keys_unknown(DAILY, "keys come from 'feed'", None)
    assert ns.keys is None
    assert [(s.action, s.reason, s.detail) for s in ns.steps.values()] == [
        ("unknown", "partitions_unknown", "keys come from 'feed'")]
    src = StepState(FEED, "", action="failed", reason="failed")
    ns = keys_unknown(DAILY, "why", src)
    assert ns.keys == [""]
    assert [(s.action, s.reason, s.detail) for s in ns.steps.values()] == [
        ("skipped", "upstream_failed", "upstream pipeline.py:feed failed")]


def test_phase_adoption(ctx: Any) -> None:
    """Phase 3: a step to run for want of any record whose artifact exists under its run hash
    is cached, as materialized, adopted; one that is not found still runs."""
    ns = fresh(ctx, DAILY, DAYS, {})
    found = {"day=d1"}

    def find(nid: str, key: str, run_hash: str) -> Row | None:
        return row(nid, key, run_hash) if key in found else None

    got = adopted(ns, find)
    assert [s.key for s in got] == ["day=d1"]
    d1, d2 = ns.steps["day=d1"], ns.steps["day=d2"]
    assert (d1.action, d1.reason, d1.adopted) == ("cached", "materialized", True)
    assert d1.row is not None and d1.path == d1.row.path
    assert (d2.action, d2.reason, d2.adopted) == ("run", "no_record", False)
    # a step that runs for another reason (here: its code changed) is never adopted
    changed = decide(ctx, CLEAN, [""], dict(UP),
                     said(CLEAN, [row(CLEAN, "", "e" * 64, parts={"code": "old"})]))
    assert adopted(changed, find) == []


def test_phase_repair(ctx: Any) -> None:
    """Phase 4: a cached step whose artifact is missing or damaged runs again under the same
    run hash."""
    ns = decide(ctx, CLEAN, [""], dict(UP), said(CLEAN, [row(CLEAN, "", rh) for rh in _now(
        ctx, Case(CLEAN, [""], said, ("", ""), ups=dict(UP)))]))
    st = ns.steps[""]
    before = st.run_hash
    repaired([st])
    assert (st.action, st.run_hash) == ("run", before)


def test_a_prediction_walks_the_phases_in_order(ctx: Any) -> None:
    """The runner's prediction (``status``, ``--dry-run``: in-process, nothing executed) over
    a cone: each node decided after what it reads, a node whose keys come from a sensor's
    output in phase 1, the others in phase 2; nothing recorded."""
    from barca.engine.runner import Runner
    targets = [CLEAN, WATCH, "pipeline.py:quotes"]
    w = Runner(ctx, targets, execute=False).run()
    got = {n: [(s.action, s.reason) for s in ns.steps.values()] for n, ns in w.states.items()}
    assert got == {
        RAW: [("run", "no_record")], CLEAN: [("run", "no_record")],
        FEED: [("run", "sensor")], WATCH: [("unknown", "sensor_output_unknown")],
        "pipeline.py:tickers": [("run", "sensor")],
        "pipeline.py:quotes": [("unknown", "partitions_unknown")]}
    assert w.order.index(RAW) < w.order.index(CLEAN)
    assert ctx.store.rows(RAW) == []


def test_a_word_shows_as_its_string_wherever_a_user_sees_it() -> None:
    import json

    from barca.core.types import Action, Reason, State, Status
    for word in (State.CACHED, Action.RUN, Status.SUCCESS, Reason.NO_RECORD):
        assert repr(word) == repr(word.value) and str(word) == f"{word}" == word.value
        assert json.dumps({"s": word}) == json.dumps({"s": word.value})
