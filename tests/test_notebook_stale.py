"""Issue 36, assets defined in notebook cells are never stale either: each numbered case of the
trial, in a real kernel run by nbclient. Every test is one short notebook (or two, a restart)."""
from __future__ import annotations

import ast

import pytest
from conftest import Project
from nbtools import error, execute, notebook, result, text

pytestmark = pytest.mark.slow  # real kernels


def state(name: str) -> str:
    return f"st = %barca status\n{{r.name: r.state for r in st.rows}}[{name!r}]"


def run(project: Project, *cells: str):
    nb = notebook("%load_ext barca", "from barca import asset", *cells)
    execute(nb, project.path)
    return nb


def value(nb, i: int):
    return ast.literal_eval(result(nb, i)["text/plain"])


def no_errors(nb) -> None:
    for i in range(len(nb.cells)):
        assert error(nb, i) is None, (i, nb.cells[i].source, error(nb, i), text(nb, i))


# ------------------------------------------------------------------ 13: stable digests

SETS = ('TAGS = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}\n'
        'NESTED = (frozenset({"x", "y", "z", "w"}), {"k": {"a", "b", "c", "d"}}, 1.5j)')
TAGGED = ("@asset()\ndef tagged() -> list:\n"
          "    return [sorted(TAGS), sorted(NESTED[0]), sorted(NESTED[1]['k'])]")


def test_set_constants_are_cached_across_kernel_restarts(project: Project, monkeypatch) -> None:
    """#13: a set (and a frozenset or set inside a value that is not JSON) has one digest,
    whatever ``PYTHONHASHSEED`` the kernel started with."""
    # one notebook across kernels: its path told, as Jupyter tells it
    monkeypatch.setenv("JPY_SESSION_NAME", str(project.path / "tags.ipynb"))
    monkeypatch.setenv("PYTHONHASHSEED", "1")
    first = run(project, SETS, TAGGED, "%barca get tagged")
    no_errors(first)
    monkeypatch.setenv("PYTHONHASHSEED", "2")
    again = run(project, SETS, TAGGED, state("tagged"))
    no_errors(again)
    assert result(again, 4)["text/plain"] == "'cached'"
    changed = run(project, SETS.replace('"zeta"', '"eta"'), TAGGED, state("tagged"))
    assert result(changed, 4)["text/plain"] == "'stale'"   # a changed member still counts


# ------------------------------------------------------------------ 6: ids mean one notebook

def test_unrelated_function_of_another_notebook_is_not_adopted(project: Project,
                                                               monkeypatch) -> None:
    """#6: a new notebook's ``summary`` is not the other notebook's ``summary``: no rows of
    it are adopted (status says never run; history has nothing), while a renamed notebook
    (same definition) still keeps its results."""
    monkeypatch.setenv("JPY_SESSION_NAME", str(project.path / "sales.ipynb"))
    run(project, "@asset()\ndef summary() -> int:\n    return 1", "%barca get summary")
    monkeypatch.setenv("JPY_SESSION_NAME", str(project.path / "weather.ipynb"))
    other = run(project, "@asset()\ndef summary() -> str:\n    return 'rain'",
                "st = %barca status\nr = st.rows[0]\n(r.id, r.state, r.last_run)",
                "%barca get summary")
    no_errors(other)
    rid, st, last = value(other, 3)
    assert (rid, st) == ("weather:summary", "never_run"), (rid, st, last)
    assert result(other, 4)["text/plain"] == "'rain'"
    monkeypatch.setenv("JPY_SESSION_NAME", str(project.path / "sales_v2.ipynb"))
    renamed = run(project, "@asset()\ndef summary() -> int:\n    return 1", state("summary"))
    assert result(renamed, 3)["text/plain"] == "'cached'"


# ------------------------------------------------------------------ 5: hash what runs

def test_default_argument_after_only_the_constant_cell_changed(project: Project) -> None:
    """#5: ``k=K`` is bound when the ``def`` runs. Re-running only the ``K`` cell leaves the
    kernel's function with the old default: the run hash says so, and "Restart and run all"
    never gets the old value stored under the new definition."""
    kernel = run(project, "K = 1", "@asset()\ndef a(k=K) -> int:\n    return k",
                 "%barca get a", "K = 2", "%barca get a")
    no_errors(kernel)
    assert result(kernel, 4)["text/plain"] == "1"
    fresh = run(project, "K = 2", "@asset()\ndef a(k=K) -> int:\n    return k", "%barca get a")
    no_errors(fresh)
    assert result(fresh, 4)["text/plain"] == "2"


PREP = "def prep(x):\n    return x + {n}\n"


def test_run_script_edited_without_running_it_again(project: Project) -> None:
    """#5: ``%run prep.py``, then prep.py edited on disk: the kernel still holds the old
    ``prep``; its result is never stored as the new source's."""
    project.write("prep.py", PREP.format(n=1))
    kernel = run(project, "%run prep.py",
                 "@asset()\ndef prepped() -> int:\n    return prep(10)",
                 "%barca get prepped",
                 f"from pathlib import Path\nPath('prep.py').write_text({PREP.format(n=2)!r})",
                 "%barca get prepped")
    no_errors(kernel)
    assert result(kernel, 4)["text/plain"] == "11"
    assert result(kernel, 6)["text/plain"] == "11"    # what the kernel's prep gives
    assert "'prep' in this kernel is not prep.py as it is now" in text(kernel, 6)
    fresh = run(project, "%run prep.py", "@asset()\ndef prepped() -> int:\n    return prep(10)",
                "%barca get prepped")
    no_errors(fresh)
    assert result(fresh, 4)["text/plain"] == "12"


# ------------------------------------------------------------------ 2: callables that are values

MAKE = "def make(k):\n    def f(x):\n        return x * k\n    return f"


def test_closures_and_partials_are_hashed_by_what_they_do(project: Project) -> None:
    """#2: ``scale = make(3)`` is its code and its cells' contents; a ``functools.partial``
    its function and arguments; a callable instance its class and state."""
    nb = run(project, MAKE,
             "import functools\ndef mul(a, b):\n    return a * b\n"
             "scale = make(3)\ntriple = functools.partial(mul, 3)",
             "class Adder:\n    def __init__(self, n):\n        self.n = n\n"
             "    def __call__(self, x):\n        return x + self.n\nadd = Adder(1)",
             "@asset()\ndef used() -> list:\n    return [scale(2), triple(2), add(2)]",
             "%barca get used",
             "scale = make(4)", state("used"), "%barca get used",
             "triple = functools.partial(mul, 5)", state("used"), "%barca get used",
             "class Adder:\n    def __init__(self, n):\n        self.n = n\n"
             "    def __call__(self, x):\n        return x + 10 * self.n\nadd = Adder(1)",
             state("used"), "%barca get used")
    no_errors(nb)
    assert value(nb, 6) == [6, 6, 3]
    assert result(nb, 8)["text/plain"] == "'stale'"
    assert value(nb, 9) == [8, 6, 3]
    assert result(nb, 11)["text/plain"] == "'stale'"
    assert value(nb, 12) == [8, 10, 3]
    assert result(nb, 14)["text/plain"] == "'stale'"
    assert value(nb, 15) == [8, 10, 12]


# ------------------------------------------------------------------ 1: project modules, followed

CONSTS = "K = 2\nOTHER = 0\n"
HELPERS = ("from consts import K\n\n\ndef scale(x):\n    return x * K\n\n\n"
           "def other():\n    return 0\n\n\nclass Scaler:\n    def __call__(self, x):\n"
           "        return x * K\n")


def edit(name: str, old: str, new: str) -> str:
    """A cell that edits a project file on disk (as an editor would)."""
    return (f"from pathlib import Path\np = Path({name!r})\n"
            f"p.write_text(p.read_text().replace({old!r}, {new!r}))")


def test_project_modules_are_followed_transitively(project: Project) -> None:
    """#1 and #4: a notebook reads ``helpers.scale`` (by name, through the module, and a
    project class's instance); helpers.py imports ``K`` from consts.py. Editing consts.py's
    ``K`` or the class's method re-runs; editing what is not used does not."""
    project.write("consts.py", CONSTS)
    project.write("helpers.py", HELPERS)
    nb = run(project, "from helpers import scale, Scaler\nimport helpers as h\nsc = Scaler()",
             "@asset()\ndef scaled() -> list:\n    return [scale(10), h.scale(1), sc(100)]",
             "%barca get scaled",
             edit("consts.py", "K = 2", "K = 3"), state("scaled"), "%barca get scaled",
             edit("helpers.py", "return 0", "return 1"), state("scaled"),
             edit("consts.py", "OTHER = 0", "OTHER = 5"), state("scaled"),
             edit("helpers.py", "return x * K\n", "return x * K + 1\n"), state("scaled"))
    no_errors(nb)
    assert value(nb, 4) == [20, 2, 200]
    assert result(nb, 6)["text/plain"] == "'stale'"
    assert value(nb, 7) == [30, 3, 300]
    assert result(nb, 9)["text/plain"] == "'cached'"    # helpers.other: not used
    assert result(nb, 11)["text/plain"] == "'cached'"   # consts.OTHER: not used
    assert result(nb, 13)["text/plain"] == "'stale'"    # scale's (and Scaler's) body


# ------------------------------------------------------------------ 4, 8: classes, %%time

def test_notebook_classes_and_timed_cells(project: Project) -> None:
    """#4: a class's methods read globals, a base class is a notebook class, a redefined class's
    instance is re-created; #8: a helper defined in a ``%%time`` cell counts by content."""
    nb = run(project, "class Base:\n    def rate(self):\n        return RATE",
             "RATE = 2",
             "class Model(Base):\n    def __call__(self, x):\n        return x * self.rate()\n"
             "m = Model()",
             "%%time\ndef bump(x):\n    return x + 1",
             "@asset()\ndef modelled() -> list:\n    return [m(10), bump(1)]",
             "%barca get modelled",
             "RATE = 3", state("modelled"), "%barca get modelled",
             "class Base:\n    def rate(self):\n        return RATE * 10",
             "class Model(Base):\n    def __call__(self, x):\n        return x * self.rate()\n"
             "m = Model()", state("modelled"), "%barca get modelled",
             "%%time\ndef bump(x):\n    return x + 2", state("modelled"), "%barca get modelled")
    no_errors(nb)
    assert value(nb, 7) == [20, 2]
    assert result(nb, 9)["text/plain"] == "'stale'"
    assert value(nb, 10) == [30, 2]
    assert result(nb, 13)["text/plain"] == "'stale'"
    assert value(nb, 14) == [300, 2]
    assert result(nb, 16)["text/plain"] == "'stale'"
    assert value(nb, 17) == [300, 3]


# ------------------------------------------------------------------ 12, 15: %run -i, lru_cache

def test_run_i_keeps_cell_assets(project: Project) -> None:
    """#12: ``%run -i script.py`` runs the script in the notebook's namespace (``__file__`` is
    set there): the cells' assets are still the notebook's, and the script's helpers count."""
    project.write("script.py", "def bump(x):\n    return x + 1\n")
    nb = run(project, "@asset()\ndef before() -> int:\n    return 1",
             "%run -i script.py",
             "@asset()\ndef after() -> int:\n    return bump(before())",
             "%barca get after",
             "st = %barca status\nsorted(r.name for r in st.rows)")
    no_errors(nb)
    assert result(nb, 5)["text/plain"] == "2"
    assert value(nb, 6) == ["after", "before"]


def test_lru_cache_helpers_and_globals_lookups(project: Project) -> None:
    """#15: an ``lru_cache`` helper runs in the worker and counts by its code; a
    ``globals()['K']`` read counts K (the namespace is read as a whole, hash more)."""
    nb = run(project, "import functools\n@functools.lru_cache\ndef sq(x):\n    return x * x",
             "K = 3",
             "@asset()\ndef cached_sq() -> list:\n    return [sq(4), globals()['K']]",
             "%barca get cached_sq",
             "K = 4", state("cached_sq"), "%barca get cached_sq",
             "import functools\n@functools.lru_cache\ndef sq(x):\n    return x * x * x",
             state("cached_sq"), "%barca get cached_sq",
             "@asset()\ndef dyn() -> int:\n    name = 'K'\n    return globals()[name]",
             "%barca get dyn")
    err = error(nb, 13)
    assert err is not None and err["ename"] == "UsageError", text(nb, 13)
    assert "notebook function 'dyn' reads globals()" in err["evalue"]
    nb.cells = nb.cells[:12]
    no_errors(nb)
    assert value(nb, 5) == [16, 3]
    assert result(nb, 7)["text/plain"] == "'stale'"
    assert value(nb, 8) == [16, 4]
    assert result(nb, 10)["text/plain"] == "'stale'"
    assert value(nb, 11) == [64, 4]


# ------------------------------------------------------------------ 14: a run cut off is marked

def test_run_cut_off_by_a_kernel_restart_is_marked(project: Project) -> None:
    """#14: a kernel restarted while ``%barca get`` runs leaves its run ``crashed`` in
    ``history``, not ``running`` forever. The kernel is killed as a restart kills it: with
    SIGKILL (jupyter_client's restart interrupts first, and a kernel that handles that
    interrupt in time ends its run ``cancelled`` itself; this test is about the one that
    cannot)."""
    import json
    import signal
    import sqlite3
    import time

    from jupyter_client.manager import start_new_kernel
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(project.path))
    try:
        kc.execute_interactive("%load_ext barca\nfrom barca import asset", timeout=60)
        kc.execute_interactive("@asset()\ndef slow() -> int:\n    import time\n"
                               "    time.sleep(120)\n    return 1", timeout=60)
        kc.execute("%barca get slow")
        db = project.path / ".barca" / "metadata.db"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if db.exists():
                with sqlite3.connect(db) as conn:
                    try:
                        if conn.execute("SELECT 1 FROM runs WHERE status='running'").fetchone():
                            break
                    except sqlite3.OperationalError:
                        pass
            time.sleep(0.2)
        else:
            raise AssertionError("the run never began")
        km.signal_kernel(signal.SIGKILL)  # (the kill of restart_kernel(now=True), alone)
        km.restart_kernel(now=True)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    got = project.barca("history", "--json")
    assert got.code == 0, got.err
    runs = json.loads(got.out)
    runs = runs.get("runs", runs) if isinstance(runs, dict) else runs
    assert [r["status"] for r in runs] == ["crashed"], runs


# ------------------------------------------------------------------ 9, 7: what steps cannot see

def test_project_module_changed_in_the_kernel_is_said(project: Project) -> None:
    """#9: ``mycfg.K = 3`` changes ``feat()`` in the kernel, never in a worker (which imports
    mycfg.py as the file says): a warning names it."""
    project.write("mycfg.py", "K = 2\n\n\ndef feat():\n    return K * 10\n")
    nb = run(project, "import mycfg",
             "@asset()\ndef featured() -> int:\n    return mycfg.feat()",
             "mycfg.K = 3", "%barca get featured")
    assert result(nb, 5)["text/plain"] == "20"
    assert "mycfg.K" in text(nb, 5) and "mycfg.py" in text(nb, 5), text(nb, 5)


SRC = "def double(x):\n    return 2 * x\n"


def test_notebooks_and_src_layout(project: Project) -> None:
    """#7: notebooks/ + src/ with barca.toml at the top: the notebook's ``'../src'`` path
    works in the workers too, and src/ is tracked. Without barca.toml, src/ is outside the
    root (the notebook's folder): a warning names it."""
    project.write("barca.toml", "")
    project.write("src/feat.py", SRC)
    project.write("notebooks/.keep", "")
    cells = ["%load_ext barca", "import sys\nsys.path.insert(0, '../src')\nfrom barca import asset",
             "from feat import double",
             "@asset()\ndef doubled() -> int:\n    return double(2)", "%barca get doubled",
             edit("../src/feat.py", "2 * x", "3 * x"), state("doubled"), "%barca get doubled"]
    nb = notebook(*cells)
    execute(nb, project.path / "notebooks")
    no_errors(nb)
    assert result(nb, 4)["text/plain"] == "4"
    assert result(nb, 6)["text/plain"] == "'stale'"
    assert result(nb, 7)["text/plain"] == "6"

    (project.path / "barca.toml").unlink()
    project.write("src/feat.py", SRC)
    nb = notebook(*cells[:5])
    execute(nb, project.path / "notebooks")
    assert result(nb, 4)["text/plain"] == "4"
    assert "src/feat.py" in text(nb, 4) and "outside" in text(nb, 4), text(nb, 4)


# ------------------------------------------------------------------ 10: the widget follows cells

def test_widget_follows_cell_changes(project: Project) -> None:
    """#10: a status widget over the notebook's own assets redraws when a cell defines a new
    asset or changes one (no run, no file changed: only the cells)."""
    wait = "import time\ntime.sleep(2.5)\n"
    nb = run(project, "@asset()\ndef a() -> int:\n    return 1",
             "import barca\nw = barca.StatusWidget(poll_interval=0.2)",
             "%barca get a",
             "@asset()\ndef b() -> int:\n    return 2",
             wait + "sorted((r.name, r.state) for r in w.report.rows)",
             "@asset()\ndef a() -> int:\n    return 3",
             wait + "sorted((r.name, r.state) for r in w.report.rows)",
             "w.close()")
    no_errors(nb)
    assert value(nb, 6) == [("a", "cached"), ("b", "never_run")]
    assert value(nb, 8) == [("a", "stale"), ("b", "never_run")]


def test_vectorize_and_decorators_without_wraps(project: Project) -> None:
    """#2: an ``np.vectorize`` of a notebook function counts the function; a decorator written
    without ``functools.wraps`` counts the function it wraps (the wrapper's closure)."""
    nb = run(project, "import numpy as np\ndef inc(x):\n    return x + 1\nvinc = np.vectorize(inc)",
             "def logged(f):\n    def wrapper(*a):\n        return f(*a)\n    return wrapper\n"
             "@logged\ndef twice(x):\n    return 2 * x",
             "@asset()\ndef vec() -> list:\n    return [int(v) for v in vinc([1, 2])] + [twice(5)]",
             "%barca get vec",
             "def inc(x):\n    return x + 10\nvinc = np.vectorize(inc)", state("vec"),
             "%barca get vec",
             "@logged\ndef twice(x):\n    return 3 * x", state("vec"), "%barca get vec")
    no_errors(nb)
    assert value(nb, 5) == [2, 3, 10]
    assert result(nb, 7)["text/plain"] == "'stale'"
    assert value(nb, 8) == [11, 12, 10]
    assert result(nb, 10)["text/plain"] == "'stale'"
    assert value(nb, 11) == [11, 12, 15]


# ------------------------------------------------------------------ 11: two kernels, one project

def test_two_kernels_on_one_notebook_never_corrupt(project: Project) -> None:
    """#11: the same notebook in two kernels, values that differ run to run, every step run
    again each round (the same run hashes, so the same artifact names): neither kernel ever
    reads the other's file as its own ("input artifact corrupt"), nor fails on a busy
    database."""
    from jupyter_client.manager import start_new_kernel
    setup = ("%load_ext barca\nfrom barca import asset, collect, partitions\nimport random\n"
             "@asset(partitions={'k': partitions(list('abcdef'))})\n"
             "def noisy(k: str) -> list:\n    return [random.random() for _ in range(5000)]\n"
             "@asset(partitions={'k': partitions(list('abcdef'))}, inputs={'xs': noisy})\n"
             "def part(k: str, xs: list) -> float:\n    return sum(xs)\n"
             "@asset(inputs={'ps': collect(part)})\ndef total(ps: list) -> float:\n"
             "    return sum(ps)")
    kernels = [start_new_kernel(kernel_name="python3", cwd=str(project.path)) for _ in range(2)]
    errors: list[str] = []

    def hook(msg: dict) -> None:
        if msg["msg_type"] == "error":
            errors.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")

    try:
        for _, kc in kernels:
            kc.execute_interactive(setup, timeout=60, output_hook=hook)
        for _ in range(6):
            ids = [kc.execute("%barca get total --refresh-all") for _, kc in kernels]
            for (_, kc), msg_id in zip(kernels, ids, strict=True):
                while True:
                    msg = kc.get_iopub_msg(timeout=120)
                    if msg["parent_header"].get("msg_id") != msg_id:
                        continue
                    hook(msg)
                    if msg["msg_type"] == "status" and \
                            msg["content"]["execution_state"] == "idle":
                        break
    finally:
        for km, kc in kernels:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    assert errors == []


def test_value_assigned_to_the_assets_name(project: Project) -> None:
    """Papercut: ``raw = %barca get raw`` puts the value under the asset's name; the asset and
    what reads it keep working, and a warning says what happened."""
    nb = run(project, "@asset()\ndef raw() -> int:\n    return 21",
             "@asset(inputs={'r': raw})\ndef doubled(r: int) -> int:\n    return 2 * r",
             "raw = %barca get raw\nraw", "%barca get doubled")
    no_errors(nb)
    assert result(nb, 4)["text/plain"] == "21"
    assert result(nb, 5)["text/plain"] == "42"
    assert "now names a value, not the asset raw" in text(nb, 5), text(nb, 5)


def test_notebook_asset_reads_a_pipeline_files_asset(project: Project) -> None:
    """Papercut: a notebook asset takes an asset of pipeline.py (imported into the notebook)
    as input; an edit of pipeline.py re-runs both."""
    project.write("pipeline.py", "from barca import asset\n\n\n@asset()\n"
                                 "def base() -> int:\n    return 5\n")
    nb = run(project, "from pipeline import base",
             "@asset(inputs={'b': base})\ndef top(b: int) -> int:\n    return b * 2",
             "%barca get top",
             edit("pipeline.py", "return 5", "return 6"), "%barca get top")
    no_errors(nb)
    assert result(nb, 4)["text/plain"] == "10"
    assert result(nb, 6)["text/plain"] == "12"
