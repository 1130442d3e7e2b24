"""A result's indented JSON (``--json`` of status, plan, list...: barca.core.jsontext) is
byte for byte what ``json.dumps(doc, indent=2, default=str, ensure_ascii=False)`` writes."""
from __future__ import annotations

import datetime
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barca import api
from barca.core import jsontext


def dumps(doc: object) -> str:
    """What ``json_text`` (status, plan, list... in a terminal) writes."""
    return jsontext.dumps(doc, indent=2, default=str, ensure_ascii=False)


def _json(doc: object) -> str:
    return json.dumps(doc, indent=2, default=str, ensure_ascii=False)


_leaf = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
         | st.text() | st.just(math.inf) | st.just(-math.inf))
_key = st.text() | st.integers() | st.floats(allow_nan=False) | st.booleans() | st.none()
_doc = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=4)
                    | st.tuples(inner, inner)
                    | st.dictionaries(_key, inner, max_size=4), max_leaves=30)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(_doc)
def test_any_document_is_written_as_json_dumps_writes_it(doc: object) -> None:
    assert dumps(doc) == _json(doc)


@pytest.mark.parametrize("doc", [
    {}, [], (), {"a": {}, "b": [], "c": [{}]},
    {"when": datetime.date(2026, 12, 2), "path": Path("a/b"), "set": {1}},  # default=str
    {"s": "caf\u00e9 \"q\" \\ \n\t\x01 \ud800 \u2028"}, [1.5e300, -0.0, 1e-7, 10**30, True],
])
def test_odd_documents_are_written_as_json_dumps_writes_them(doc: object) -> None:
    assert dumps(doc) == _json(doc)


def test_what_json_refuses_it_refuses_the_same_way() -> None:
    for doc in ({(1, 2): 3}, {"x": [float("nan")], (1,): 0}):
        with pytest.raises(TypeError) as ours:
            dumps(doc)
        with pytest.raises(TypeError) as theirs:
            _json(doc)
        assert str(ours.value) == str(theirs.value)
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(loop)


PIPELINE = """
from barca import asset, partitions


@asset()
def source() -> dict:
    return {"n": 1}


@asset(inputs={"source": source}, partitions={"k": partitions(["a", "b"])})
def parts(source: dict, k: str) -> str:
    return k
"""


def test_status_and_plan_documents_are_what_json_dumps_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    before = api.status(None, "pipeline.py")
    api.materialize(None, "pipeline.py")
    for res in (before, api.status(None, "pipeline.py"), api.plan_run(None, "pipeline.py")):
        assert res.json_text() == _json(res.to_json())
