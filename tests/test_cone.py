"""Issue 4: the dependency cone across project modules. For each kind of edit, which steps run
again (and the WHY a dry run gives), through the real CLI."""
from __future__ import annotations

import json
import os
import py_compile
import re
import textwrap
from pathlib import Path

import pytest
from conftest import Project

FILES = {
    "pipeline.py": '''\
        from barca import asset
        import helpers
        import valmod
        import extpkg
        from helpers import Scaler
        from aliased import twice as tw
        from pkg import norm
        from starmod import *


        @asset()
        def uses_clean() -> int:
            return helpers.clean(1)


        @asset()
        def uses_scale() -> int:
            return helpers.SCALE * 2


        @asset()
        def uses_class() -> int:
            return Scaler().scale(3)


        @asset()
        def uses_alias() -> int:
            return tw(4)


        @asset()
        def uses_inner() -> int:
            from inner import triple
            return triple(5)


        @asset()
        def uses_pkg() -> float:
            return norm(6)


        @asset()
        def uses_star() -> int:
            return sfun(7)


        @asset()
        def uses_value() -> int:
            return getattr(valmod, "a")()


        @asset()
        def uses_ext() -> int:
            return extpkg.VALUE


        @asset()
        def uses_loud() -> str:
            return helpers.loud("x")
        ''',
    "helpers.py": '''\
        """Helpers of the pipeline."""
        import json
        from lib import shout

        SCALE = 10
        UNUSED_CONST = 1


        def clean(x):
            return x + 1


        def unused(x):
            return x * 2


        def loud(s):
            return shout(s)


        class Base:
            factor = 2


        class Scaler(Base):
            def scale(self, x):
                return x * self.factor
        ''',
    # lib and helpers import each other: each is followed once
    "lib.py": '''\
        import helpers


        def shout(s):
            return s.upper() + str(helpers.SCALE)


        def lib_unused():
            return 0
        ''',
    "aliased.py": '''\
        def twice(x):
            return 2 * x
        ''',
    "inner.py": '''\
        def triple(x):
            return 3 * x


        def inner_unused(x):
            return x
        ''',
    "pkg/__init__.py": '''\
        from .core import norm
        ''',
    "pkg/core.py": '''\
        from .util import base_norm


        def norm(x):
            return base_norm(x)


        def other():
            return 0
        ''',
    "pkg/util.py": '''\
        def base_norm(x):
            return x / 1
        ''',
    "starmod.py": '''\
        def sfun(x):
            return x - 1


        def sother():
            return 0
        ''',
    "valmod.py": '''\
        def a():
            return 1


        def b():
            return 2
        ''',
}

# Outside the project root, on PYTHONPATH: an "installed" package.
EXTPKG = "VALUE = 1\n"

ALL = sorted(f"pipeline.py:{n}"
             for n in re.findall(r"^def (\w+)", textwrap.dedent(FILES["pipeline.py"]), re.M))

# (case, file, old, new, steps that run again, the WHY of the first of them)
EDITS = [
    ("used helper in another module", "helpers.py", "return x + 1", "return x + 2",
     ["uses_clean"], "changed: helper helpers.py:clean"),
    ("unused helper", "helpers.py", "return x * 2", "return x * 3", [], None),
    ("used constant", "helpers.py", "SCALE = 10", "SCALE = 11",
     ["uses_loud", "uses_scale"], "changed: helper helpers.py:SCALE"),
    ("unused constant", "helpers.py", "UNUSED_CONST = 1", "UNUSED_CONST = 2", [], None),
    ("class method", "helpers.py", "return x * self.factor", "return x * self.factor + 0",
     ["uses_class"], "changed: helper helpers.py:Scaler"),
    ("base class", "helpers.py", "factor = 2", "factor = 3",
     ["uses_class"], "changed: helper helpers.py:Base"),
    ("alias import", "aliased.py", "return 2 * x", "return x + x",
     ["uses_alias"], "changed: helper aliased.py:twice"),
    ("import inside the function", "inner.py", "return 3 * x", "return 3 * x + 0",
     ["uses_inner"], "changed: helper inner.py:triple"),
    ("unused helper of a module imported inside a function", "inner.py", "return x\n",
     "return -x\n", [], None),
    ("re-export chain through a package __init__", "pkg/util.py", "return x / 1",
     "return x / 2", ["uses_pkg"], "changed: helper pkg/util.py:base_norm"),
    ("unused definition in a re-exporting package", "pkg/core.py", "return 0", "return 1",
     [], None),
    ("chain through a module that imports back", "lib.py", 'return s.upper() + ',
     'return s.lower() + ', ["uses_loud"], "changed: helper lib.py:shout"),
    ("unused helper of a module that imports back", "lib.py", "return 0", "return 1", [], None),
    ("star import (whole defining module)", "starmod.py", "return 0", "return 1",
     ["uses_star"], "changed: module starmod.py"),
    ("module used as a value (whole module)", "valmod.py", "return 2", "return 3",
     ["uses_value"], "changed: module valmod.py"),
    ("comment and formatting", "helpers.py", "def clean(x):\n    return x + 1",
     "def clean( x ):   # cleans\n\n    # one more\n    return (x+1)", [], None),
    ("installed package upgraded", "../site/extpkg/__init__.py", "VALUE = 1", "VALUE = 2",
     [], None),
]


def _make(tmp_path: Path) -> tuple[Project, dict[str, str]]:
    project = Project(tmp_path / "proj")
    project.path.mkdir()
    for name, text in FILES.items():
        project.write(name, text)
    site = tmp_path / "site" / "extpkg"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(EXTPKG)
    env = {"PYTHONPATH": str(tmp_path / "site")}
    return project, env


def _ran(project: Project, env: dict[str, str]) -> list[str]:
    r = project.barca("get", "pipeline.py", "--json", "--agent", env=env)
    assert r.code == 0, r.err
    return sorted(r.completed())


@pytest.mark.slow
@pytest.mark.parametrize("case,file,old,new,reruns,why", EDITS, ids=[e[0] for e in EDITS])
def test_edit_reruns(tmp_path: Path, case: str, file: str, old: str, new: str,
                     reruns: list[str], why: str | None) -> None:
    project, env = _make(tmp_path)
    assert _ran(project, env) == ALL
    project.edit(file, old, new)
    expected = [f"pipeline.py:{s}" for s in reruns]
    for step in reruns[:1]:
        dry = project.barca("get", step, "pipeline.py", "--dry-run", "--pretty", env=env)
        assert dry.code == 0, dry.err
        row = next(line for line in dry.out.splitlines() if line.rstrip().endswith(step))
        assert row.startswith("will run"), dry.out
        assert why in row, dry.out
    assert _ran(project, env) == expected
    assert _ran(project, env) == []


@pytest.mark.slow
def test_values_follow_the_edits(tmp_path: Path) -> None:
    """The re-run steps compute with the new source (no stale module, no stale .pyc)."""
    project, env = _make(tmp_path)
    _ran(project, env)

    def value(target: str) -> object:
        r = project.barca("get", target, "pipeline.py", "--json", env=env)
        assert r.code == 0, r.err
        return r.json()["final_output"]

    assert value("uses_clean") == 2
    assert value("uses_pkg") == 6.0
    helpers = project.path / "helpers.py"
    # A .pyc that Python would accept for the edited file: same size, same mtime.
    py_compile.compile(str(helpers), cfile=None, doraise=True)
    st = helpers.stat()
    project.edit("helpers.py", "return x + 1", "return x + 5")
    os.utime(helpers, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert helpers.stat().st_size == st.st_size
    assert value("uses_clean") == 6
    project.edit("pkg/util.py", "return x / 1", "return x / 2")
    assert value("uses_pkg") == 3.0


@pytest.mark.slow
def test_syntax_error_in_a_helper_module(tmp_path: Path) -> None:
    project, env = _make(tmp_path)
    assert _ran(project, env) == ALL
    project.edit("helpers.py", "return x + 1", "return x + 2")  # uses_clean would run first
    project.edit("pkg/util.py", "return x / 1", "return x / (1")
    r = project.barca("get", "pipeline.py", "--pretty", "--agent", env=env)
    assert r.code == 2, r.err
    assert "pkg/util.py:2:" in r.err and "SyntaxError" in r.err
    lines = r.err.splitlines()
    i = next(i for i, line in enumerate(lines) if line.strip() == "return x / (1")
    assert lines[i + 1].strip() == "^"
    assert "Traceback" not in r.err
    assert "completed" not in r.err
    j = project.barca("get", "pipeline.py", "--json", env=env)
    assert j.code == 2
    err = json.loads(j.err.strip().splitlines()[-1])
    assert err["code"] == 2 and err["kind"] == "usage" and "pkg/util.py" in err["error"]
    # fixed: nothing ran in between, the cache is kept
    project.edit("pkg/util.py", "return x / (1", "return x / 1")
    assert _ran(project, env) == ["pipeline.py:uses_clean"]


@pytest.mark.slow
def test_syntax_error_in_a_module_imported_only_inside_a_function(tmp_path: Path) -> None:
    project, env = _make(tmp_path)
    project.edit("inner.py", "return 3 * x", "return 3 * x +")
    r = project.barca("get", "uses_clean", "pipeline.py", "--pretty", "--agent", env=env)
    assert r.code == 2
    assert "inner.py:2:" in r.err and "^" in r.err and "completed" not in r.err


def test_pipeline_in_a_package_follows_both_resolutions(tmp_path: Path) -> None:
    """Inside a package, `import helpers` is the package's helpers.py for a worker (its folder
    comes first on sys.path) but the root's for `python -m`: both are hashed."""
    parts = _parts(tmp_path, {
        "flows/__init__.py": "",
        "flows/pipeline.py": "from barca import asset\nimport helpers\n\n@asset()\n"
                             "def step() -> int:\n    return helpers.f()\n",
        "flows/helpers.py": "def f():\n    return 1\n",
        "helpers.py": "def f():\n    return 2\n"}, pipeline="flows/pipeline.py")
    assert "helper:flows/helpers.py:f" in parts and "helper:helpers.py:f" in parts


# ----------------------------------------------------------------------------- finer rules
# Each case: project files, the step (in pipeline.py), parts the cone must hold and parts it
# must not. Checked in-process on the definition hash (no run needed).

RULES = [
    ("default argument", {
        "pipeline.py": "from barca import asset\nimport helpers\n\n@asset()\n"
                       "def step(n=helpers.N) -> int:\n    return n\n",
        "helpers.py": "N = 1\nM = 2\n"},
     ["helper:helpers.py:N"], ["helper:helpers.py:M", "module:helpers.py"]),
    ("decorator of a helper", {
        "pipeline.py": "from barca import asset\nfrom helpers import f\n\n@asset()\n"
                       "def step() -> int:\n    return f()\n",
        "helpers.py": "from deco import wrap\n\n@wrap\ndef f():\n    return 1\n",
        "deco.py": "def wrap(fn):\n    return fn\n\ndef unused():\n    pass\n"},
     ["helper:helpers.py:f", "helper:helpers.py:wrap", "helper:deco.py:wrap"],
     ["helper:deco.py:unused", "module:deco.py"]),
    ("exception type", {
        "pipeline.py": "from barca import asset\nfrom errs import Oops\n\n@asset()\n"
                       "def step() -> int:\n    try:\n        return 1\n"
                       "    except Oops:\n        return 2\n",
        "errs.py": "class Oops(Exception):\n    pass\n"},
     ["helper:errs.py:Oops"], []),
    ("match class pattern", {
        "pipeline.py": "from barca import asset\nimport shapes\n\n@asset()\n"
                       "def step() -> int:\n    match 1:\n        case shapes.Point(x=0):\n"
                       "            return 0\n        case _:\n            return 1\n",
        "shapes.py": "class Point:\n    __match_args__ = ('x',)\n\nclass Other:\n    pass\n"},
     ["helper:shapes.py:Point"], ["helper:shapes.py:Other"]),
    ("metaclass and base in another module", {
        "pipeline.py": "from barca import asset\nfrom models import Model\n\n@asset()\n"
                       "def step() -> int:\n    return Model.n\n",
        "models.py": "from meta import Meta, Root\n\nclass Model(Root, metaclass=Meta):\n"
                     "    n = 1\n",
        "meta.py": "class Meta(type):\n    pass\n\nclass Root:\n    pass\n"},
     ["helper:models.py:Model", "helper:meta.py:Meta", "helper:meta.py:Root"], []),
    ("counted decorator argument serializer=", {
        "pipeline.py": "from barca import asset\nimport formats\n\n"
                       "@asset(serializer=formats.FMT)\ndef step() -> int:\n    return 1\n",
        "formats.py": "FMT = 'json'\nOTHER = 'pickle'\n"},
     ["helper:formats.py:FMT"], ["helper:formats.py:OTHER", "module:formats.py"]),
    ("a non-barca decorator counts", {
        "pipeline.py": "from barca import asset\nfrom deco import wrap\n\n"
                       "@asset()\n@wrap\ndef step() -> int:\n    return 1\n",
        "deco.py": "def wrap(fn):\n    return fn\n"},
     ["helper:deco.py:wrap"], []),
    ("partition keys from another module do not count", {
        "pipeline.py": "from barca import asset, partitions\nimport regions\n\n"
                       "@asset(partitions={'r': partitions(regions.KEYS)})\n"
                       "def step(r: str) -> str:\n    return r\n",
        "regions.py": "KEYS = ['a', 'b']\n"},
     [], ["helper:regions.py:KEYS", "module:regions.py"]),
    ("module-level if: the block is the name's definition", {
        "pipeline.py": "from barca import asset\nfrom conf import MODE\n\n@asset()\n"
                       "def step() -> str:\n    return MODE\n",
        "conf.py": "import os\nif os.environ.get('X'):\n    MODE = 'a'\nelse:\n    MODE = 'b'\n"
                   "OTHER = 1\n"},
     ["helper:conf.py:MODE", "helper:conf.py:os"], ["module:conf.py", "helper:conf.py:OTHER"]),
    ("module-level try import: the block, and what it imports", {
        "pipeline.py": "from barca import asset\nfrom compat import fast\n\n@asset()\n"
                       "def step() -> int:\n    return fast()\n",
        "compat.py": "try:\n    from speedy import fast\nexcept ImportError:\n"
                     "    def fast():\n        return 0\n",
        "speedy.py": "def fast():\n    return 1\n"},
     ["helper:compat.py:fast", "helper:speedy.py:fast"], []),
    ("tuple unpacking", {
        "pipeline.py": "from barca import asset\nfrom conf import A\n\n@asset()\n"
                       "def step() -> int:\n    return A\n",
        "conf.py": "A, B = 1, 2\nC = 3\n"},
     ["helper:conf.py:A"], ["module:conf.py", "helper:conf.py:C"]),
    ("augmented assignment", {
        "pipeline.py": "from barca import asset\nfrom conf import A\n\n@asset()\n"
                       "def step() -> int:\n    return A\n",
        "conf.py": "A = 1\nA += 1\nC = 3\n"},
     ["helper:conf.py:A"], ["module:conf.py", "helper:conf.py:C"]),
    ("module-level with and for", {
        "pipeline.py": "from barca import asset\nfrom conf import A, B\n\n@asset()\n"
                       "def step() -> int:\n    return A + B\n",
        "conf.py": "import contextlib\nwith contextlib.nullcontext(1) as A:\n    pass\n"
                   "for B in range(3):\n    pass\nC = 3\n"},
     ["helper:conf.py:A", "helper:conf.py:B", "helper:conf.py:contextlib"],
     ["module:conf.py", "helper:conf.py:C"]),
    ("a change after a star import: the star's source too", {
        "pipeline.py": "from barca import asset\nfrom conf import *\nCFG['k'] = 1\n\n"
                       "@asset()\ndef step() -> int:\n    return CFG['k']\n",
        "conf.py": "CFG = {}\nOTHER = 1\n"},
     ["helper:pipeline.py:CFG", "helper:conf.py:CFG"], ["helper:conf.py:OTHER"]),
    ("a folder put on sys.path by a literal", {
        "pipeline.py": "import sys\nfrom barca import asset\nsys.path.insert(0, 'lib')\n"
                       "import libmod\n\n@asset()\ndef step() -> int:\n"
                       "    return libmod.f()\n",
        "lib/libmod.py": "def f():\n    return 1\n\ndef g():\n    return 2\n"},
     ["helper:lib/libmod.py:f", "path:lib"], ["helper:lib/libmod.py:g", "untracked:libmod"]),
    ("a module passed as a value: whole, with what it imports", {
        "pipeline.py": "from barca import asset\nimport valmod\n\ndef run(m):\n"
                       "    return m.a()\n\n@asset()\ndef step() -> int:\n"
                       "    return run(valmod)\n",
        "valmod.py": "from deep import a\n",
        "deep.py": "def a():\n    return 1\n\ndef b():\n    return 2\n"},
     ["module:valmod.py", "helper:deep.py:a"], ["helper:deep.py:b"]),
    ("a parameter shadowing a module-level name is not followed", {
        "pipeline.py": "from barca import asset\nfrom helpers import x\n\n@asset()\n"
                       "def step(x: int = 1) -> int:\n    return x\n",
        "helpers.py": "x = 5\n"},
     [], ["helper:helpers.py:x", "helper:pipeline.py:x"]),
    ("import a.b and a.b.f()", {
        "pipeline.py": "from barca import asset\nimport a.b\n\n@asset()\n"
                       "def step() -> int:\n    return a.b.f()\n",
        "a/__init__.py": "", "a/b.py": "def f():\n    return 1\n\ndef g():\n    return 2\n"},
     ["helper:a/b.py:f"], ["helper:a/b.py:g", "module:a/b.py"]),
    ("from pkg import submodule", {
        "pipeline.py": "from barca import asset\nfrom a import b as bee\n\n@asset()\n"
                       "def step() -> int:\n    return bee.f()\n",
        "a/__init__.py": "", "a/b.py": "def f():\n    return 1\n\ndef g():\n    return 2\n"},
     ["helper:a/b.py:f"], ["helper:a/b.py:g", "module:a/b.py"]),
    ("namespace package (no __init__)", {
        "pipeline.py": "from barca import asset\nfrom ns.mod import f\n\n@asset()\n"
                       "def step() -> int:\n    return f()\n",
        "ns/mod.py": "def f():\n    return 1\n"},
     ["helper:ns/mod.py:f"], []),
    ("relative import two levels up", {
        "pipeline.py": "from barca import asset\nfrom p.q.r import f\n\n@asset()\n"
                       "def step() -> int:\n    return f()\n",
        "p/__init__.py": "", "p/base.py": "def g():\n    return 1\n",
        "p/q/__init__.py": "", "p/q/r.py": "from ..base import g\n\ndef f():\n    return g()\n"},
     ["helper:p/q/r.py:f", "helper:p/base.py:g"], []),
    ("a module-level name shadowing a builtin", {
        "pipeline.py": "from barca import asset\nfrom helpers import len\n\n@asset()\n"
                       "def step() -> int:\n    return len([1])\n",
        "helpers.py": "def len(x):\n    return 0\n"},
     ["helper:helpers.py:len"], []),
    ("__file__ and builtins are not unknown names", {
        "pipeline.py": "from barca import asset\nimport helpers\n\n@asset()\n"
                       "def step() -> str:\n    return str(len(__file__))\n",
        "helpers.py": "X = 1\n"},
     [], ["module:pipeline.py", "module:helpers.py"]),
    ("importlib.import_module with a literal name", {
        "pipeline.py": "from barca import asset\nimport importlib\n\n@asset()\n"
                       "def step() -> int:\n    return importlib.import_module('dyn').f()\n",
        "dyn.py": "def f():\n    return 1\n"},
     ["module:dyn.py"], []),
    ("the standard library and barca are never followed", {
        "pipeline.py": "import json\nfrom barca import asset\nimport barca\n\n@asset()\n"
                       "def step() -> str:\n    return json.dumps(barca.__name__)\n"},
     ["helper:pipeline.py:json", "helper:pipeline.py:barca"], []),
]


def _parts(root: Path, files: dict[str, str], pipeline: str = "pipeline.py",
           step: str = "step") -> dict[str, str]:
    from barca.identity.hashing import DefinitionHasher
    from barca.model.topology import load_graph

    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    graph = load_graph([str(root / pipeline)], root=root.resolve())
    hasher = DefinitionHasher(graph.root, graph.files)
    node = next(n for n in graph.nodes.values() if n.function == step)
    return hasher.parts(node, {})


@pytest.mark.parametrize("case,files,present,absent", RULES, ids=[r[0] for r in RULES])
def test_cone_rules(tmp_path: Path, case: str, files: dict[str, str], present: list[str],
                    absent: list[str]) -> None:
    parts = _parts(tmp_path, files)
    for p in present:
        assert p in parts, sorted(parts)
    for p in absent:
        assert p not in parts, sorted(parts)


def test_resolution_pipeline_dir_then_root(tmp_path: Path) -> None:
    """A pipeline in a sub-folder imports as its worker would: its own folder, then the root."""
    parts = _parts(tmp_path, {
        "flows/pipeline.py": "from barca import asset\nimport near, far\n\n@asset()\n"
                             "def step() -> int:\n    return near.f() + far.g()\n",
        "flows/near.py": "def f():\n    return 1\n",
        "near.py": "def f():\n    return 2\n",          # shadowed by flows/near.py
        "far.py": "def g():\n    return 3\n"}, pipeline="flows/pipeline.py")
    assert "helper:flows/near.py:f" in parts and "helper:far.py:g" in parts
    assert "helper:near.py:f" not in parts


def test_modules_outside_the_root_are_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (tmp_path / "outside.py").write_text("def f():\n    return 1\n")
    root.mkdir()
    (root / "linked.py").symlink_to(tmp_path / "outside.py")
    parts = _parts(root, {
        "pipeline.py": "from barca import asset\nimport linked\n\n@asset()\n"
                       "def step() -> int:\n    return linked.f()\n"})
    assert not [p for p in parts if "outside" in p or p.startswith("module:")], parts
    assert "helper:pipeline.py:linked" in parts


def test_each_module_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ast as ast_mod

    from barca.identity import cone

    calls: list[str] = []
    real = ast_mod.parse

    def counting(source, filename="<unknown>", *a, **k):  # type: ignore[no-untyped-def]
        calls.append(str(filename))
        return real(source, filename, *a, **k)

    files = {"pipeline.py": "from barca import asset\nimport helpers\n\n"
             + "".join(f"@asset()\ndef s{i}() -> int:\n    return helpers.f()\n\n"
                       for i in range(20)),
             "helpers.py": "import lib\n\ndef f():\n    return lib.g()\n",
             "lib.py": "import helpers\n\ndef g():\n    return 1\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    from barca.identity.hashing import DefinitionHasher
    from barca.model.topology import load_graph
    graph = load_graph([str(tmp_path / "pipeline.py")], root=tmp_path.resolve())
    monkeypatch.setattr(cone.ast, "parse", counting)
    hasher = DefinitionHasher(graph.root, graph.files)
    for node in graph.nodes.values():
        assert "helper:lib.py:g" in hasher.parts(node, {})
    assert sorted(calls) == ["helpers.py", "lib.py"]


def test_pythonpath_inside_the_project_is_followed(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A src layout on PYTHONPATH (or an editable install) is project code: followed."""
    import sys
    (tmp_path / "src").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    parts = _parts(tmp_path, {
        "pipeline.py": "from barca import asset\nimport srclib_cone_test\n\n@asset()\n"
                       "def step() -> int:\n    return srclib_cone_test.f()\n",
        "src/srclib_cone_test.py": "def f():\n    return 1\n\ndef g():\n    return 2\n"})
    assert "helper:src/srclib_cone_test.py:f" in parts
    assert "helper:src/srclib_cone_test.py:g" not in parts
    assert "srclib_cone_test" not in sys.modules  # located, never imported
