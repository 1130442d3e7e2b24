"""Result objects, events and step records are plain slotted classes (barca.core.record), not
dataclasses: they must still build, compare, show, freeze, copy and pickle like the dataclasses
they replaced."""
from __future__ import annotations

import copy
import pickle

import pytest

from barca.core import events as ev
from barca.core.record import Fields, Record
from barca.engine.executors.job import StepJob, StepRecord
from barca.engine.runner import Walk
from barca.model.discovery import NodeModel
from barca.present import listview, results


def _records() -> list[type[Record]]:
    mods = (results, ev)
    return [c for m in mods for c in vars(m).values()
            if isinstance(c, type) and issubclass(c, Record) and c.__module__ == m.__name__]


def _run_result(**kw: object) -> results.RunResult:
    item = results.OutputItem("", ".barca/artifacts/x.json", "json", True)
    out = results.Output("pipeline.py:x", False, (item,), values={"a": 1})
    return results.RunResult("get x", "abc", "success", 0.5, 1, 1, 1, (), (out,), **kw)


def test_every_record_declares_its_fields_once() -> None:
    classes = _records()
    assert results.RunResult in classes and ev.Note in classes
    for cls in classes:
        assert tuple(cls.__dict__.get("__annotations__", {})) == cls.__slots__, cls
        assert set(cls._defaults) <= set(cls.__slots__), cls


def test_built_by_position_or_keyword_with_defaults() -> None:
    r = _run_result(verb="ran")
    assert (r.warnings, r.failed_node, r.skipped_downstream, r.verb, r.failures) == \
        ((), None, 0, "ran", ())
    assert listview.ListRow("a", "asset", "always", ()) == \
        listview.ListRow(id="a", kind="asset", freshness="always", deps=(), dims=())
    assert ev.StepCompleted("s", 1.0, 1, 2).output == ""
    with pytest.raises(TypeError, match="missing required argument: 'deps'"):
        listview.ListRow("a", "asset", "always")
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        listview.ListRow("a", "asset", "always", (), nope=1)
    with pytest.raises(TypeError, match="multiple values for argument 'kind'"):
        listview.ListRow("a", "asset", "always", (), kind="task")
    with pytest.raises(TypeError, match="takes 5 positional arguments"):
        listview.Listing((), "", None, None, None, ())


def test_repr_eq_hash_like_a_frozen_dataclass() -> None:
    assert repr(ev.Note("hi")) == "Note(text='hi', level='note')"
    assert repr(results.OutputItem("k", None, None, False)) == \
        "OutputItem(key='k', path=None, format=None, computed=False)"
    assert ev.Note("hi") == ev.Note("hi", "note") != ev.Note("hi", "warning")
    assert ev.StepCached("s") != ev.Importing("s")   # same fields, another class
    assert hash(ev.Note("hi")) == hash(ev.Note("hi"))
    assert len({listview.ListRow("a", "asset", "always", ()),
                listview.ListRow("a", "asset", "always", ())}) == 1


def test_frozen() -> None:
    r = _run_result()
    with pytest.raises(AttributeError):
        r.status = "failed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del r.status
    with pytest.raises(AttributeError):
        r.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        ev.Note("hi").text = "bye"  # type: ignore[misc]
    assert r.status == "success"


def test_copy_and_pickle() -> None:
    r = _run_result(warnings=("w",))
    for other in (copy.copy(r), copy.deepcopy(r), pickle.loads(pickle.dumps(r))):
        assert other == r and type(other) is results.RunResult
        assert other.to_json() == r.to_json() and str(other) == str(r)
    e = ev.StepFailedEvent("s", "boom")
    assert pickle.loads(pickle.dumps(e)) == e


def test_mutable_records_pickle_for_workers() -> None:
    task = StepJob(3, "p.py:x", "p.py:x", "", "asset", "/p.py", "p", "x", "h" * 64, None,
                    {"a": ("value", 1)}, timeout=2.0)
    rec = StepRecord(3, "success", 0.25, keys=["a"], key_values={"a": "d"})
    rec.uploaded = True
    for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
        t2 = pickle.loads(pickle.dumps(task, protocol=proto))
        r2 = pickle.loads(pickle.dumps(rec, protocol=proto))
        assert (t2, r2) == (task, rec)
        assert t2.sinks == [] and t2.store_prefix == ".barca" and r2.uploaded is True
    assert repr(rec).startswith("StepRecord(index=3, status='success', elapsed=0.25, ")
    with pytest.raises(TypeError):
        hash(task)   # mutable: unhashable, as the dataclass was
    assert isinstance(task, Fields) and not isinstance(task, Record)


def test_fresh_default_lists_per_instance() -> None:
    a, b = Walk([], {}, set()), Walk([], {}, set())
    a.notes.append("x")
    a.infra.append("y")
    assert b.notes == [] and b.infra == [] and b.skipped_fanins == []
    n1 = NodeModel("p.py:x", "p.py", "/p.py", "x", "asset", 1, None, [])  # type: ignore[arg-type]
    n2 = NodeModel("p.py:x", "p.py", "/p.py", "x", "asset", 1, None, [])  # type: ignore[arg-type]
    n1.sinks.append("s")
    n1.counted_names.add("c")
    assert n2.sinks == [] and n2.counted_names == set() and n2.inputs is not n1.inputs
    assert n1.freshness == "always" and not n1.partitioned


def test_every_executor_is_an_executor(tmp_path) -> None:
    """The runner talks to the ``Executor`` protocol only; both executors are one."""
    from barca.core.settings import Settings
    from barca.engine.executors import Executor, start
    from barca.engine.executors.dask import DaskExecutor
    pool = start(Settings(tmp_path, pool_size=2), lambda path: None)  # starts no process yet
    try:
        assert isinstance(pool, Executor) and pool.size == 2
    finally:
        pool.close()
    assert all(callable(getattr(DaskExecutor, m, None)) for m in ("run", "close"))


def test_tuples_behave_as_typing_namedtuples() -> None:
    """core.record.Tuple (the store's rows, a decision's inputs): the NamedTuple a type checker
    sees, made at run time without typing's per-annotation compile; fields, defaults, methods,
    docstring, pickling and the NamedTuple API as typing.NamedTuple gives them."""
    from typing import NamedTuple

    from barca.core.record import Tuple
    from barca.engine.decision import StoreSays
    from barca.engine.inputs import Hold
    from barca.store.rows import Row, Snapshot

    class Typed(NamedTuple):
        """A row."""
        a: int
        b: str | None = None

        def both(self) -> str:
            return f"{self.a}{self.b}"

    class Cheap(Tuple):
        """A row."""
        a: int
        b: str | None = None

        def both(self) -> str:
            return f"{self.a}{self.b}"

    for cls in (Typed, Cheap):
        t = cls(1)
        assert (t, t.both(), cls.__doc__, cls._fields, cls._field_defaults) == (
            (1, None), "1None", "A row.", ("a", "b"), {"b": None})
        assert t._replace(b="x") == (1, "x") and t._asdict() == {"a": 1, "b": None}
        assert repr(t) == f"{cls.__name__}(a=1, b=None)"
        assert cls.__qualname__.endswith(f"<locals>.{cls.__name__}")
    with pytest.raises(TypeError):
        class Bad(Tuple):
            a: int = 1
            b: int
    row = Row(1, "p.py:x", "p.py:x", "", "h" * 64, "a/b.json", "json", 2, "s", '{"code": "c"}',
              "success", None, 0.1, "r", 1.0, None, None)
    assert pickle.loads(pickle.dumps(row)) == row and row.part_digests() == {"code": "c"}
    assert Row._fields[:3] == ("id", "node", "asset") and len(Row._fields) == 17
    assert Snapshot("d", "c", "k", "h").keys == "k"
    assert Hold() == (None, None, None) and Hold(unknown="why").unknown == "why"
    assert StoreSays(None, set(), None).values is None


def test_tuples_are_made_as_collections_namedtuple_makes_them() -> None:
    """core.record.Tuple builds its classes without namedtuple's eval (#31 item 2): every
    behaviour a caller can see is namedtuple's, errors included."""
    import collections

    from barca.core.record import Tuple

    class Mine(Tuple):
        a: int
        b: str
        c: object = None
        d: int = 4

    ref = collections.namedtuple("Mine", "a b c d", defaults=(None, 4))
    cases = [((1, "x"), {}), ((1, "x", 3, 5), {}), ((), {"a": 1, "b": "x"}),
             ((1,), {"b": "x", "d": 9}), ((1, "x", 3, 5, 6), {}), ((1,), {}),
             ((1, "x"), {"a": 2}), ((1, "x"), {"e": 2}), ((), {})]
    for args, kwargs in cases:
        got, want = [], []
        for cls, out in ((Mine, got), (ref, want)):
            try:
                out.append(tuple(cls(*args, **kwargs)))
            except TypeError:  # (the same error; its words are Python's own, not copied)
                out.append(("TypeError",))
        assert got == want, (args, kwargs)
    m, r = Mine(1, "x"), ref(1, "x")
    assert (m._fields, m._field_defaults, Mine.__match_args__) == (
        r._fields, r._field_defaults, ref.__match_args__)
    assert repr(m) == repr(r) and m._asdict() == r._asdict() and m == r and hash(m) == hash(r)
    assert m._replace(d=7) == r._replace(d=7) and type(m._replace(d=7)) is Mine
    assert Mine._make([1, 2, 3, 4]) == (1, 2, 3, 4) and type(Mine._make([1, 2, 3, 4])) is Mine
    for bad in (lambda: Mine._make([1]), lambda: m._replace(z=1)):
        with pytest.raises((TypeError, ValueError)) as got_e:
            bad()
        with pytest.raises(type(got_e.value)) as want_e:
            (ref._make([1]) if "Expected" in str(got_e.value) else r._replace(z=1))
        assert str(got_e.value) == str(want_e.value)
    assert copy.copy(m) == m and copy.deepcopy(m) == m  # (pickled: a store Row, above)
    assert Mine.a.__doc__ == ref.a.__doc__ and not hasattr(m, "__dict__")
    match m:
        case Mine(1, "x", None, 4):
            pass
        case _:
            raise AssertionError("positional match")
