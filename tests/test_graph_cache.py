"""The kept graph (.barca/discovery/*.graph, barca.model.graphcache): a cached command does not
build the graph again, and an edit that changes the graph is never served from the kept one."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from barca.core.errors import UsageError
from barca.model.topology import Graph, load_graph

TWO = """
from barca import asset


@asset()
def source() -> int:
    return 1


@asset(inputs={"x": source})
def reader(x: int) -> int:
    return x
"""


def _load(root: Path, *files: str) -> Graph:
    return load_graph(tuple(str(root / f) for f in files), root=root)


def _shape(g: Graph) -> tuple:
    return (list(g.files), g.order, g.upstream, g.downstream, g.phase,
            {n: [(i.param, i.ref, i.target) for i in m.inputs] for n, m in g.nodes.items()})


def _kept(root: Path) -> list[Path]:
    return sorted((root / ".barca" / "discovery").glob("*.graph"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "barca.toml").write_text("")
    (tmp_path / ".barca").mkdir()
    (tmp_path / "pipeline.py").write_text(TWO)
    return tmp_path


def _write(path: Path, text: str) -> None:
    """A new text, with another mtime (the model cache keys on the text, not the stamp)."""
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def test_the_built_graph_is_kept_and_served_the_same(root: Path) -> None:
    first = _load(root, "pipeline.py")
    assert len(_kept(root)) == 1
    again = _load(root, "pipeline.py")
    assert again is not first and _shape(again) == _shape(first)
    assert again.nodes["pipeline.py:reader"].inputs[0].target == "pipeline.py:source"
    assert again.nodes["pipeline.py:reader"].fn.name == "reader"  # the tree, parsed again


def test_no_project_store_nothing_kept(tmp_path: Path) -> None:
    (tmp_path / "pipeline.py").write_text(TWO)
    _load(tmp_path, "pipeline.py")
    assert not (tmp_path / ".barca").exists()


def test_a_new_edge_a_removed_node_a_renamed_input_are_built_again(root: Path) -> None:
    _load(root, "pipeline.py")
    p = root / "pipeline.py"
    _write(p, TWO + '\n\n@asset(inputs={"a": source, "b": reader})\ndef both(a, b):\n'
           "    return a + b\n")
    g = _load(root, "pipeline.py")
    assert g.upstream["pipeline.py:both"] == ["pipeline.py:source", "pipeline.py:reader"]
    assert g.downstream["pipeline.py:reader"] == ["pipeline.py:both"]
    _write(p, TWO)  # removed again: the first text's graph
    g = _load(root, "pipeline.py")
    assert "pipeline.py:both" not in g.nodes and g.downstream["pipeline.py:reader"] == []
    _write(p, TWO.replace('"x": source', '"y": source').replace("(x: int)", "(y: int)"))
    g = _load(root, "pipeline.py")
    assert [i.param for i in g.nodes["pipeline.py:reader"].inputs] == ["y"]
    _write(p, TWO.replace('"x": source', '"y": source'))  # a renamed input, not its parameter
    with pytest.raises(UsageError, match="inputs names 'y', which is not a parameter"):
        _load(root, "pipeline.py")


def test_an_edit_of_an_imported_file_is_built_again(root: Path) -> None:
    _write(root / "other.py", "from barca import asset\n\n\n@asset()\ndef prices() -> int:\n"
           "    return 1\n")
    _write(root / "pipeline.py", TWO + "\n\nfrom other import prices\n\n\n"
           '@asset(inputs={"p": prices})\ndef costs(p: int) -> int:\n    return p\n')
    g = _load(root, "pipeline.py")
    assert g.upstream["pipeline.py:costs"] == ["other.py:prices"]
    assert _shape(_load(root, "pipeline.py")) == _shape(g)
    _write(root / "other.py", "from barca import asset\n\n\n@asset()\ndef cost() -> int:\n"
           "    return 1\n")  # prices renamed: the reference names nothing now
    with pytest.raises(UsageError, match="names 'prices', which is not an @asset"):
        _load(root, "pipeline.py")


def test_a_new_file_that_an_import_now_finds_is_built_again(root: Path) -> None:
    """An import looks in the file's folder before the root: a file created there moves the
    import, though no text that the graph read changed."""
    (root / "sub").mkdir()
    _write(root / "prices.py", "from barca import asset\n\n\n@asset()\ndef daily() -> int:\n"
           "    return 1\n")
    _write(root / "sub" / "pipeline.py", "from barca import asset\nfrom prices import daily\n\n\n"
           '@asset(inputs={"d": daily})\ndef report(d: int) -> int:\n    return d\n')
    g = _load(root, "sub/pipeline.py")
    assert g.upstream["sub/pipeline.py:report"] == ["prices.py:daily"]
    _write(root / "sub" / "prices.py", (root / "prices.py").read_text())
    g = _load(root, "sub/pipeline.py")
    assert g.upstream["sub/pipeline.py:report"] == ["sub/prices.py:daily"]


def test_an_error_is_never_kept_and_says_the_same(root: Path) -> None:
    cyclic = TWO.replace("@asset()\ndef source()", '@asset(inputs={"r": reader})\ndef source(r)')
    _write(root / "pipeline.py", cyclic)
    with pytest.raises(UsageError) as one:
        _load(root, "pipeline.py")
    assert _kept(root) == []
    with pytest.raises(UsageError) as two:
        _load(root, "pipeline.py")
    assert str(one.value) == str(two.value) and "Dependency cycle" in str(one.value)


def test_a_damaged_kept_graph_is_a_miss(root: Path) -> None:
    first = _load(root, "pipeline.py")
    (kept,) = _kept(root)
    kept.write_bytes(b"garbage")
    assert _shape(_load(root, "pipeline.py")) == _shape(first)
    assert kept.read_bytes() != b"garbage"


def test_a_damaged_model_cache_beside_a_kept_graph_changes_nothing(root: Path) -> None:
    first = _load(root, "pipeline.py")
    for model in (root / ".barca" / "discovery").glob("*.pickle"):
        model.write_bytes(b"garbage")
    assert _shape(_load(root, "pipeline.py")) == _shape(first)


def test_an_entry_symlink_retargeted_is_built_again(root: Path) -> None:
    """The file named is a symlink: pointed at another file, the graph is that file's."""
    (root / "a.py").write_text(TWO)
    (root / "b.py").write_text(TWO.replace("def reader", "def other"))
    (root / "pipeline.py").unlink()
    (root / "pipeline.py").symlink_to("a.py")
    assert "a.py:reader" in _load(root, "pipeline.py").nodes
    (root / "pipeline.py").unlink()
    (root / "pipeline.py").symlink_to("b.py")
    g = _load(root, "pipeline.py")
    assert "b.py:other" in g.nodes and "a.py:reader" not in g.nodes


def test_an_imported_symlink_retargeted_is_built_again(root: Path) -> None:
    """An imported module that is a symlink: pointed at another file, the import reads that
    file's assets, though no text the kept graph read changed."""
    _write(root / "x.py", "from barca import asset\n\n\n@asset()\ndef prices() -> int:\n"
           "    return 1\n")
    _write(root / "y.py", "from barca import asset\n\n\n@asset()\ndef cost() -> int:\n"
           "    return 1\n")
    (root / "other.py").symlink_to("x.py")
    _write(root / "pipeline.py", TWO + "\n\nfrom other import prices\n\n\n"
           '@asset(inputs={"p": prices})\ndef costs(p: int) -> int:\n    return p\n')
    first = _load(root, "pipeline.py")
    assert _shape(_load(root, "pipeline.py")) == _shape(first)
    (root / "other.py").unlink()
    (root / "other.py").symlink_to("y.py")
    with pytest.raises(UsageError, match="names 'prices', which is not an @asset"):
        _load(root, "pipeline.py")


def _fresh_digest(text: str) -> str:
    """``text_digest`` as it is defined: SHA-256 of the salt, NUL, the text (no memo)."""
    import hashlib

    from barca.core.salt import salt
    return hashlib.sha256(salt().encode() + b"\0" + text.encode()).hexdigest()


def test_a_served_graph_gives_its_texts_the_digest_they_have_now(root: Path) -> None:
    from barca.model import modelcache
    _load(root, "pipeline.py")
    for text in (TWO, TWO.replace("return 1", "return 2")):  # (the same size: another text)
        _write(root / "pipeline.py", text)
        _load(root, "pipeline.py")  # built (a new text), then kept
        modelcache._TEXTS.clear()
        served = _load(root, "pipeline.py")
        assert served.files["pipeline.py"].source == text
        assert modelcache.text_digest(text) == _fresh_digest(text)


def test_a_kept_digest_of_another_text_is_a_miss_not_served(root: Path) -> None:
    """The digest the kept graph holds is served only beside the text it was made of: a
    kept graph whose text is not the file's (the file saved since) gives no digest."""
    from barca.model import modelcache
    _load(root, "pipeline.py")
    edited = TWO.replace("return 1", "return 3")
    _write(root / "pipeline.py", edited)
    modelcache._TEXTS.clear()
    got = _load(root, "pipeline.py")  # a miss: built from the text now
    assert got.files["pipeline.py"].source == edited
    assert modelcache.text_digest(edited) == _fresh_digest(edited)
    assert all(v[1] == _fresh_digest(k) for k, v in modelcache._TEXTS.items())


def test_a_new_projects_first_run_keeps_its_models_and_graph(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``.barca/`` before the first run: nothing is written by discovery, but once the run
    has made the store, the file models and the graph are kept, and the second run parses
    nothing (issue #31 item 2: a new project had two runs before the fast path)."""
    from barca import api
    from barca.model import topology
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(TWO)
    assert api.materialize(None, "pipeline.py").steps_executed == 2
    assert len(_kept(tmp_path)) == 1
    assert list((tmp_path / ".barca" / "discovery").glob("*.pickle"))
    parsed: list[str] = []
    real = topology.parse_file
    monkeypatch.setattr(topology, "parse_file",
                        lambda p, root: parsed.append(str(p)) or real(p, root))
    assert api.materialize(None, "pipeline.py").steps_executed == 0
    assert parsed == []  # served from the kept graph
    _write(tmp_path / "pipeline.py", TWO.replace("return 1", "return 5"))
    res = api.materialize(None, "pipeline.py", load_values=True)
    assert parsed and res.steps_executed == 2  # an edit: built again, and run
    assert res.value() == {"pipeline.py:source": 5, "pipeline.py:reader": 5}


def test_a_usage_error_on_a_new_project_leaves_no_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from barca import api
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(TWO)
    with pytest.raises(UsageError):
        api.materialize("nowhere", "pipeline.py")
    assert not (tmp_path / ".barca").exists()


def test_what_waits_for_a_store_is_the_newest_per_file_and_bounded(tmp_path: Path) -> None:
    """A process that reads a storeless project again and again (a kernel's status) holds the
    newest model or graph per file it would be written to, and no more than a few."""
    from barca.model import modelcache
    root = str(tmp_path)
    for i in range(100):
        modelcache._later(root, f"file{i % 80}", object(), i)
    held = modelcache._PENDING[os.path.normpath(root)]
    assert len(held) == 64 and held["file19"][1] == 99 and held["file79"][1] == 79
    assert "file20" not in held and "file35" not in held  # the oldest let go
    modelcache._PENDING.pop(os.path.normpath(root))
