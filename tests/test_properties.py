"""Property tests of the decision core: random small pipelines and random edit sequences.

After every edit, the decisions and run hashes are the same with every memo layer on and off
(node snapshots, the definition cache, the discovery cache, the settle record), whatever the
pool size (1, 2, 4); and at the end a full ``--refresh-all`` recomputes exactly the values
the cached run served.

After "rules_changed" (barca upgraded: its memo salt and a hashing rule move, tests/rulechange.py)
the memo layers made under the older rules must not answer.

Two copies of one project get the same edits: ``on`` keeps its memo layers, ``off`` loses them
before every command (its snapshot and definition rows deleted, ``.barca/discovery/`` removed,
and its predictions made with ``Context(memo=False)``). The API runs in this process; steps run
in the pool's worker processes. Bounded in examples to keep the suite within its budget."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rulechange import set_rules

pytestmark = pytest.mark.slow

EDITS = ("none", "code", "helper", "constant", "key_added", "key_removed", "dict_value",
         "dict_key", "sensor", "artifact_deleted", "artifact_corrupted", "rules_changed")


@st.composite
def pipelines(draw: Any) -> dict[str, Any]:
    return {
        "readers": draw(st.integers(0, 3)),          # fan-out: assets reading one source
        "chain": draw(st.integers(0, 3)),            # a chain below the source
        "keys": draw(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=4,
                              unique=True)),          # partitions from a list
        "dict": draw(st.booleans()),                 # partitions from a dict source
        "sensor": draw(st.booleans()),
        "fanin": draw(st.booleans()),                # collect over the partitioned assets
        "scale": draw(st.integers(1, 9)), "c0": draw(st.integers(0, 9)),
        "h": draw(st.integers(0, 9)),
        "prices": draw(st.dictionaries(st.sampled_from(["AAPL", "MSFT", "GOOG", "IBM"]),
                                       st.integers(1, 99), min_size=1, max_size=3)),
        "signal": draw(st.sampled_from(["v1", "v2"])),
    }


def source(p: dict[str, Any]) -> str:
    """The pipeline file of one drawn pipeline."""
    out = ["from pathlib import Path", "",
           "from barca import asset, collect, partitions, partitions_from, sensor", "",
           f"SCALE = {p['scale']}", f"KEYS = {sorted(p['keys'])!r}", "", "",
           "def bump(x: int) -> int:", f"    return x + {p['h']}", "", "",
           "@asset()", "def base() -> int:", f"    return SCALE * 10 + {p['c0']}", "", ""]
    for i in range(p["readers"]):
        out += ['@asset(inputs={"base": base})', f"def reader{i}(base: int) -> int:",
                f"    return base * {i + 2}", "", ""]
    prev = "base"
    for j in range(p["chain"]):
        out += [f'@asset(inputs={{"up": {prev}}})', f"def link{j}(up: int) -> int:",
                f"    return bump(up) + {j}", "", ""]
        prev = f"link{j}"
    out += ['@asset(partitions={"k": partitions(KEYS)})', "def item(k: str) -> dict:",
            '    return {"k": k, "n": bump(len(k)) * SCALE}', "", "",
            '@asset(inputs={"item": item}, partitions={"k": partitions_from(item)})',
            "def double(item: dict) -> int:", '    return item["n"] * 2', "", ""]
    collects = ['"doubles": collect(double)']
    if p["dict"]:
        out += [f"PRICES = {json.dumps(p['prices'], sort_keys=True)}", "", "",
                "@asset()", "def prices() -> dict:", "    return dict(PRICES)", "", "",
                '@asset(partitions={"ticker": partitions_from(prices)})',
                "def quote(ticker: str, prices: int) -> str:",
                '    return f"{ticker}:{prices}"', "", ""]
        collects.append('"quotes": collect(quote)')
    if p["sensor"]:
        out += ["@sensor()", "def signal() -> str:",
                '    return Path("signal.txt").read_text().strip()', "", "",
                '@asset(inputs={"signal": signal, "base": base})',
                "def stamped(signal: str, base: int) -> str:",
                '    return f"{signal}:{base}"', "", ""]
    if p["fanin"]:
        params = "doubles: list, quotes: list" if p["dict"] else "doubles: list"
        out += [f"@asset(inputs={{{', '.join(collects)}}})", f"def total({params}) -> dict:",
                '    return {"n": sum(doubles)' + (', "q": sorted(quotes)' if p["dict"] else "")
                + "}", "", ""]
    return "\n".join(out)


def write(root: Path, p: dict[str, Any]) -> None:
    (root / "pipeline.py").write_text(source(p))
    (root / "signal.txt").write_text(p["signal"] + "\n")


def edit(roots: list[Path], p: dict[str, Any], what: str, pick: int) -> None:
    """Apply one edit to the drawn pipeline (and so to every copy of the project)."""
    if what == "code":
        p["c0"] = (p["c0"] + 1) % 10
    elif what == "helper":
        p["h"] = (p["h"] + 1) % 10
    elif what == "constant":
        p["scale"] = p["scale"] % 9 + 1
    elif what == "key_added":
        free = [k for k in "abcdefgh" if k not in p["keys"]]
        p["keys"].append(free[pick % len(free)])
    elif what == "key_removed" and len(p["keys"]) > 1:
        p["keys"].pop(pick % len(p["keys"]))
    elif what == "dict_value":
        k = sorted(p["prices"])[pick % len(p["prices"])]
        p["prices"][k] = p["prices"][k] % 99 + 1
    elif what == "dict_key":
        free = [k for k in ("AAPL", "MSFT", "GOOG", "IBM", "TSLA") if k not in p["prices"]]
        p["prices"][free[pick % len(free)]] = pick % 99 + 1
    elif what == "sensor":
        p["signal"] = "v2" if p["signal"] == "v1" else "v1"
    elif what == "rules_changed":  # an upgraded barca: its salt and a hashing rule move
        p["rules"] = p.get("rules", 0) + 1
        set_rules(p["rules"])
    for root in roots:
        write(root, p)
    if what in ("artifact_deleted", "artifact_corrupted"):  # the same artifact in each copy
        for root in roots:
            files = sorted(f for f in (root / ".barca" / "artifacts").rglob("*") if f.is_file())
            f = files[pick % len(files)]
            if what == "artifact_deleted":
                f.unlink()
            else:
                f.write_bytes(b"corrupt" + f.read_bytes()[:3])


@contextmanager
def inside(root: Path) -> Iterator[None]:
    here = os.getcwd()
    os.chdir(root)
    try:
        yield
    finally:
        os.chdir(here)


def forget_memo(root: Path) -> None:
    """The memo layers of a store, gone: snapshots, definition cache, discovery cache, settle
    records."""
    shutil.rmtree(root / ".barca" / "discovery", ignore_errors=True)
    db = root / ".barca" / "metadata.db"
    if db.exists():
        with sqlite3.connect(db) as conn:
            conn.execute("DELETE FROM snapshots")
            conn.execute("DELETE FROM definitions")
            with contextlib.suppress(sqlite3.OperationalError):  # a store before settle records
                conn.execute("DELETE FROM settle_records")


def decisions(root: Path, memo: bool, forget: bool = False) -> dict[str, tuple]:
    """Every step's decision, run hash and recorded SHA-256 for ``get`` of every asset."""
    from barca import api
    if forget:
        forget_memo(root)
    with inside(root):
        sess = api.Session(("pipeline.py",), write=False, memo=memo)
        try:
            w = api._predict(sess, api._targets(sess.graph, None, "get"))
            return {s.id: (s.action, s.reason, s.detail, s.run_hash,
                           s.sha256 if s.action == "cached" else None)
                    for n in w.order for s in w.states[n].steps.values()}
        finally:
            sess.close()


def get(root: Path, memo: bool, pool: int, refresh_all: bool = False) -> Any:
    from barca import api
    if not memo:
        forget_memo(root)
    with inside(root):
        return api.materialize(None, "pipeline.py", pool_size=pool, refresh_all=refresh_all)


@contextmanager
def _own_rules_after() -> Iterator[None]:
    try:
        yield
    finally:
        set_rules(0)


def settled(d: dict[str, tuple]) -> bool:
    """Nothing left to run but sensors (which always run)."""
    return all(a == "cached" or r == "sensor" for a, r, *_ in d.values())


@settings(max_examples=int(os.environ.get("BARCA_PROPERTY_EXAMPLES", "6")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
          database=None)
@given(p=pipelines(), edits=st.lists(st.tuples(st.sampled_from(EDITS), st.integers(0, 99)),
                                     min_size=1, max_size=3),
       pools=st.tuples(st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4])))
def test_decisions_do_not_depend_on_memo_layers_or_pool_size(p, edits, pools) -> None:
    with tempfile.TemporaryDirectory() as tmp, _own_rules_after():
        on, off = Path(tmp, "on"), Path(tmp, "off")
        on.mkdir()
        off.mkdir()
        write(on, p)
        write(off, p)
        first = decisions(on, memo=True)
        assert first == decisions(off, memo=False, forget=True)
        get(on, True, pools[0])
        get(off, False, pools[1])
        for what, pick in edits:
            edit([on, off], p, what, pick)
            before = decisions(on, memo=True)
            assert before == decisions(on, memo=False), what
            assert before == decisions(off, memo=False, forget=True), what
            get(on, True, pools[0])
            get(off, False, pools[1])
            get(on, True, pools[0])  # cached: writes the settle record the next reads use
            after = decisions(on, memo=True)
            assert settled(after), (what, after)
            assert after == decisions(on, memo=False), what
            assert after == decisions(off, memo=False, forget=True), what
        served = decisions(on, memo=True)
        get(on, True, pools[0], refresh_all=True)
        assert decisions(on, memo=True) == served  # the same run hashes, the same bytes
