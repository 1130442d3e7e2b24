"""Issue 28 item 1: a name's definition is every module-level statement that can change it
(engine.md §2). For each kind of statement: after an edit, ``--dry-run`` and ``status`` say
stale and ``get`` re-runs and returns the new value; an edit of an unrelated module-level
statement re-runs nothing. In process (``barca.api`` on a real store in tmp_path)."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


def _edit(root: Path, file: str, old: str, new: str) -> None:
    p = root / file
    text = p.read_text()
    assert text.count(old) == 1, (old, text)
    p.write_text(text.replace(old, new))


def _run(target: str) -> tuple[object, int]:
    """(value, steps executed) of ``get target``."""
    from barca import api
    res = api.materialize(target, "pipeline.py", load_values=True)
    assert res.status == "success", res.error
    return res.value(), res.steps_executed


def _stale(target: str) -> bool:
    """Whether ``--dry-run`` and ``status`` both say the target would run; asserts they agree."""
    from barca import api
    plan = api.plan_run(target, "pipeline.py")
    will_run = plan.summary()["will_run"] > 0
    row = next(r for r in api.status(None, "pipeline.py").rows if r.id.endswith(":" + target))
    assert will_run == (row.state == "stale"), (plan.to_json(), row.state)
    return will_run


# (case, files, edited file, old text, new text, value before, value after)
CASES = [
    ("item assignment", {"pipeline.py": '''
        from barca import asset
        CFG = {"max_km": 0}
        CFG["max_km"] = 150

        @asset()
        def a() -> int:
            return CFG["max_km"]
        '''}, "pipeline.py", '= 150', '= 80', 150, 80),
    ("method call as a statement: append", {"pipeline.py": '''
        from barca import asset
        ZONES = ["Z01"]
        ZONES.append("Z02")

        @asset()
        def a() -> str:
            return ",".join(ZONES)
        '''}, "pipeline.py", '"Z02"', '"Z99"', "Z01,Z02", "Z01,Z99"),
    ("method call as a statement: update", {"pipeline.py": '''
        from barca import asset
        DEFAULTS = {"a": 1}
        DEFAULTS.update(b=2)

        @asset()
        def a() -> int:
            return sum(DEFAULTS.values())
        '''}, "pipeline.py", 'b=2', 'b=5', 3, 6),
    ("attribute assignment", {"pipeline.py": '''
        from barca import asset
        class Settings:
            k = 1

        SETTINGS = Settings()
        SETTINGS.k = 2

        @asset()
        def a() -> int:
            return SETTINGS.k
        '''}, "pipeline.py", 'SETTINGS.k = 2', 'SETTINGS.k = 3', 2, 3),
    ("a name bound in a module-level for loop", {"pipeline.py": '''
        from barca import asset
        for LAST in ["x", "y"]:
            pass

        @asset()
        def a() -> str:
            return LAST
        '''}, "pipeline.py", '"y"]', '"z"]', "y", "z"),
    ("a for loop that changes a name", {"pipeline.py": '''
        from barca import asset
        ZONES = []
        for z in range(2):
            ZONES.append(z)

        @asset()
        def a() -> int:
            return len(ZONES)
        '''}, "pipeline.py", 'range(2)', 'range(3)', 2, 3),
    ("augmented assignment", {"pipeline.py": '''
        from barca import asset
        N = 1
        N += 1

        @asset()
        def a() -> int:
            return N
        '''}, "pipeline.py", 'N += 1', 'N += 5', 2, 6),
    ("augmented assignment of an item", {"pipeline.py": '''
        from barca import asset
        COUNTS = {"a": 1}
        COUNTS["a"] += 1

        @asset()
        def a() -> int:
            return COUNTS["a"]
        '''}, "pipeline.py", '+= 1', '+= 4', 2, 5),
    ("del of an item", {"pipeline.py": '''
        from barca import asset
        D = {"a": 1, "b": 2}
        del D["a"]

        @asset()
        def a() -> str:
            return ",".join(D)
        '''}, "pipeline.py", 'del D["a"]', 'del D["b"]', "b", "a"),
    ("setattr", {"pipeline.py": '''
        from barca import asset
        import types
        S = types.SimpleNamespace(k=1)
        setattr(S, "k", 2)

        @asset()
        def a() -> int:
            return S.k
        '''}, "pipeline.py", '"k", 2', '"k", 7', 2, 7),
    ("a module function called at module level", {"pipeline.py": '''
        from barca import asset
        CFG = {}

        def _load():
            CFG["k"] = 1

        _load()

        @asset()
        def a() -> int:
            return CFG["k"]
        '''}, "pipeline.py", 'CFG["k"] = 1', 'CFG["k"] = 4', 1, 4),
    ("an alias changed in place", {"pipeline.py": '''
        from barca import asset
        TABLE = [[1]]
        ROW = TABLE[0]
        ROW.append(2)

        @asset()
        def a() -> int:
            return sum(TABLE[0])
        '''}, "pipeline.py", 'ROW.append(2)', 'ROW.append(5)', 3, 6),
    ("a registering decorator", {"pipeline.py": '''
        from barca import asset
        REGISTRY = []

        @REGISTRY.append
        def one():
            return 1

        @asset()
        def a() -> int:
            return sum(f() for f in REGISTRY)
        '''}, "pipeline.py", 'return 1', 'return 9', 1, 9),
    ("a helper module's item assignment (import helpers)", {
        "pipeline.py": '''
        from barca import asset
        import helpers

        @asset()
        def a() -> int:
            return helpers.CFG["k"]
        ''',
        "helpers.py": 'CFG = {}\nCFG["k"] = 1\n'}, "helpers.py", '= 1', '= 2', 1, 2),
    ("a helper module's method call (from helpers import)", {
        "pipeline.py": '''
        from barca import asset
        from helpers import ZONES

        @asset()
        def a() -> str:
            return ",".join(ZONES)
        ''',
        "helpers.py": 'ZONES = ["a"]\nZONES.extend(["b"])\n'}, "helpers.py", '"b"', '"c"',
     "a,b", "a,c"),
    ("a helper module's block", {
        "pipeline.py": '''
        from barca import asset
        from helpers import LIMIT

        @asset()
        def a() -> int:
            return LIMIT
        ''',
        "helpers.py": 'import os\nif os.sep:\n    LIMIT = 1\nelse:\n    LIMIT = 0\n'},
     "helpers.py", 'LIMIT = 1', 'LIMIT = 3', 1, 3),
    ("a module changed by another module", {
        "pipeline.py": '''
        from barca import asset
        import conf
        import setup_conf

        @asset()
        def a() -> int:
            return conf.CFG["k"]
        ''',
        "conf.py": 'CFG = {"k": 0}\n',
        "setup_conf.py": 'import conf\nconf.CFG["k"] = 1\n'},
     "pipeline.py", 'import setup_conf\n', 'import setup_conf  # noqa\nconf.CFG["k"] = 2\n',
     1, 2),
    ("another module changes an imported dict (from defaults import CFG)", {
        "pipeline.py": '''
        from barca import asset
        import overrides
        from defaults import CFG

        @asset()
        def a() -> int:
            return CFG["k"]
        ''',
        "defaults.py": 'CFG = {"k": 0}\n',
        "overrides.py": 'from defaults import CFG\n\nCFG["k"] = 1\n'},
     "overrides.py", '= 1', '= 2', 1, 2),
    ("another module changes a dict it imports inside try", {
        "pipeline.py": '''
        from barca import asset
        import overrides
        from defaults import CFG

        @asset()
        def a() -> int:
            return CFG["k"]
        ''',
        "defaults.py": 'CFG = {"k": 0}\n',
        "overrides.py": 'try:\n    from defaults import CFG\nexcept ImportError:\n'
                        '    CFG = {}\n\nCFG.update(k=1)\n'},
     "overrides.py", 'k=1', 'k=2', 1, 2),
    ("a module imported for its side effect starts changing another", {
        "pipeline.py": '''
        from barca import asset
        import conf
        import tweaks

        @asset()
        def a() -> int:
            return conf.CFG["k"]
        ''',
        "conf.py": 'CFG = {"k": 0}\n',
        "tweaks.py": 'X = 1\n'},
     "tweaks.py", 'X = 1\n', 'import conf\nconf.CFG["k"] = 5\n', 0, 5),
    ("a helper module seeds a module outside the project", {
        "pipeline.py": '''
        from barca import asset
        import random
        import seeding

        @asset()
        def a() -> int:
            return random.Random(random.getrandbits(32)).randint(0, 10**6) * 0 + seeding.N
        ''',
        "seeding.py": 'import random\n\nN = 1\nrandom.seed(1)\n'},
     "seeding.py", 'random.seed(1)', 'random.seed(2)', 1, 1),
    ("a lib folder put on sys.path by a literal", {
        "pipeline.py": '''
        from barca import asset
        import sys
        sys.path.insert(0, "lib")
        import libmod

        @asset()
        def a() -> int:
            return libmod.f()
        ''',
        "lib/libmod.py": 'def f():\n    return 1\n'}, "lib/libmod.py", 'return 1', 'return 2',
     1, 2),
    ("a lib folder beside __file__", {
        "pipeline.py": '''
        from barca import asset
        import os
        import sys
        sys.path.append(os.path.join(os.path.dirname(__file__), "lib"))
        from libmod import LIMITS

        @asset()
        def a() -> int:
            return LIMITS["x"]
        ''',
        "lib/libmod.py": 'LIMITS = {}\nLIMITS["x"] = 1\n'}, "lib/libmod.py", '= 1', '= 2',
     1, 2),
]


@pytest.mark.parametrize("case,files,file,old,new,before,after", CASES,
                         ids=[c[0] for c in CASES])
def test_a_changing_statement_reruns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     case: str, files: dict[str, str], file: str, old: str,
                                     new: str, before: object, after: object) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, files)
    assert _run("a") == (before, 1)
    assert not _stale("a")
    _edit(tmp_path, file, old, new)
    assert _stale("a"), "dry run and status must say stale before get"
    assert _run("a") == (after, 1)
    assert not _stale("a")
    assert _run("a") == (after, 0)


UNRELATED = [
    ("another name's item assignment", '''
        from barca import asset
        CFG = {"k": 1}
        OTHER = {"k": 1}
        OTHER["k"] = 2
        print(OTHER)

        @asset()
        def a() -> int:
            return CFG["k"]
        ''', [('OTHER["k"] = 2', 'OTHER["k"] = 3'), ('print(OTHER)', 'print(OTHER, 1)')]),
    ("another name's method call and loop", '''
        from barca import asset
        ZONES = ["a"]
        MORE = []
        MORE.append(1)
        for i in range(2):
            MORE.append(i)

        @asset()
        def a() -> str:
            return ",".join(ZONES)
        ''', [('MORE.append(1)', 'MORE.append(5)'), ('range(2)', 'range(4)')]),
    ("beside a for loop, an augmented assignment and a del of other names", '''
        from barca import asset
        CFG = {"k": 1}
        N = 1
        N += 1
        for LAST in ["x"]:
            pass
        T = [1]
        del T[0]
        OTHER = 1

        @asset()
        def a() -> int:
            return CFG["k"]
        ''', [('OTHER = 1', 'OTHER = 2'), ('N += 1', 'N += 2'), ('["x"]', '["y"]')]),
    ("a name bound by blocks and augmented assignment, beside other statements", '''
        from barca import asset
        N = 1
        N += 1
        for LAST in ["x"]:
            pass
        if N:
            MODE = "a"
        OTHER = 1
        MORE = []
        MORE.append(1)

        @asset()
        def a() -> str:
            return f"{N}{LAST}{MODE}"
        ''', [('OTHER = 1', 'OTHER = 2'), ('MORE.append(1)', 'MORE.append(2)')]),
    ("a derived constant, an import's method, a block that touches other names", '''
        from barca import asset
        import polars_like as pl
        CFG = {"k": 1}
        LIMIT = CFG["k"] + 1
        SCHEMA = pl.make("x")
        if True:
            FLAG = 1

        @asset()
        def a() -> int:
            return CFG["k"]
        ''', [('CFG["k"] + 1', 'CFG["k"] + 2'), ('pl.make("x")', 'pl.make("y")'),
              ('FLAG = 1', 'FLAG = 2')]),
]


def test_a_module_new_in_a_sys_path_folder_shadows_the_old_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``lib`` is searched first: a ``helpers.py`` created there is the one imported now (the
    definitions table depends on the folder's listing, not only on the files it read)."""
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"pipeline.py": '''
        import sys

        from barca import asset

        sys.path.insert(0, "lib")
        import helpers

        @asset()
        def a() -> int:
            return helpers.f()
        ''', "helpers.py": "def f():\n    return 1\n", "lib/README.txt": "libs\n"})
    assert _run("a") == (1, 1)
    _write(tmp_path, {"lib/helpers.py": "def f():\n    return 2\n"})
    assert _stale("a")
    assert _run("a") == (2, 1)


@pytest.mark.parametrize("case,text,edits", UNRELATED, ids=[u[0] for u in UNRELATED])
def test_an_unrelated_statement_reruns_nothing(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, case: str,
                                               text: str, edits: list[tuple[str, str]]) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"pipeline.py": text,
                      "polars_like.py": "def make(x):\n    return [x]\n"})
    value, ran = _run("a")
    assert ran == 1
    for old, new in edits:
        _edit(tmp_path, "pipeline.py", old, new)
        assert not _stale("a"), (old, new)
        assert _run("a") == (value, 0), (old, new)


def test_untracked_import_is_a_plan_warning(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder put on sys.path by a value barca cannot read: its modules resolve nowhere barca
    can see, and the plan says so (JSON ``warnings``, one stderr line per import)."""
    from barca import api
    from barca.core import events as ev
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {
        "pipeline.py": '''
        from barca import asset
        import os
        import sys
        sys.path.append(os.environ.get("EXTRA_LIB", "ext"))

        @asset()
        def a() -> int:
            import extmod
            return extmod.f()

        @asset()
        def b() -> int:
            import json
            try:
                import not_installed_anywhere  # an optional dependency: no warning
            except ImportError:
                not_installed_anywhere = None
            return len(json.dumps(1)) + (not_installed_anywhere is None)
        ''',
        "ext/extmod.py": "def f():\n    return 1\n"})
    notes: list[str] = []
    plan = api.plan("pipeline.py", on_event=lambda e: notes.append(e.text)
                    if isinstance(e, ev.Note) else None)
    warned = [w for w in plan.to_json()["warnings"] if w["kind"] == "untracked_import"]
    assert len(warned) == 1, plan.to_json()["warnings"]
    assert warned[0]["node"] == "pipeline.py:a"
    assert "extmod" in warned[0]["message"]
    assert [n for n in notes if "extmod" in n] and len(notes) == 1, notes
    json.dumps(plan.to_json())
    # the run says it too (once), and a later plan from the memoised definitions as well
    events: list[str] = []
    res = api.materialize("a", "pipeline.py", on_event=lambda e: events.append(e.text)
                          if isinstance(e, ev.Note) else None)
    assert res.status == "success"
    assert sum("extmod" in t for t in events) == 1, events
    again = api.plan("pipeline.py").to_json()["warnings"]
    assert [w["node"] for w in again if w["kind"] == "untracked_import"] == ["pipeline.py:a"]


# ----------------------------------------------------------------------------- the real CLI

def test_cli_item_assignment_in_a_helper_module(project) -> None:  # noqa: ANN001 (fixture)
    """Through the CLI: ``--dry-run`` and ``status`` name the changed definition before
    ``get`` re-runs it; an unrelated statement of the same module re-runs nothing."""
    project.write("pipeline.py", '''\
        from barca import asset
        import helpers


        @asset()
        def a() -> int:
            return helpers.CFG["max_km"]
        ''')
    project.write("helpers.py", 'CFG = {}\nCFG["max_km"] = 150\nZONES = []\nZONES.append("Z02")\n')
    assert project.barca("get", "a", "pipeline.py", "-o", "value").out.strip() == "150"
    project.edit("helpers.py", '= 150', '= 80')
    dry = project.barca("get", "a", "pipeline.py", "--dry-run", "--json").json()
    assert [s["action"] for s in dry["steps"]] == ["run"], dry  # (the table: "will run")
    assert "helper helpers.py:CFG" in dry["steps"][0]["detail"]
    status = project.barca("status", "pipeline.py", "--json").json()
    assert [r["cache"]["state"] for r in status["nodes"]] == ["stale"], status
    assert project.barca("get", "a", "pipeline.py", "-o", "value").out.strip() == "80"
    project.edit("helpers.py", '"Z02"', '"Z99"')
    res = project.barca("get", "a", "pipeline.py", "--json")
    assert res.code == 0 and res.json()["steps_executed"] == 0, res.out


def test_cli_untracked_import_warning(project) -> None:  # noqa: ANN001 (fixture)
    """``barca plan --json``: the warning in ``warnings``, and one line on stderr."""
    project.write("pipeline.py", '''\
        import os
        import sys

        from barca import asset

        sys.path.append(os.environ.get("EXTRA_LIB", "ext"))


        @asset()
        def a() -> int:
            import extmod
            return extmod.f()
        ''')
    project.write("ext/extmod.py", "def f():\n    return 1\n")
    res = project.barca("plan", "pipeline.py", "--json")
    assert res.code == 0, res.err
    kinds = [(w["kind"], w["node"]) for w in res.json()["warnings"]]
    assert kinds == [("untracked_import", "pipeline.py:a")], kinds
    lines = [ln for ln in res.err.splitlines() if "untracked import 'extmod'" in ln]
    assert len(lines) == 1, res.err
