"""Shared test harness: real projects in temp folders, the real CLI in a subprocess."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Every process a test starts (the CLI, `python -c`, a kernel) runs the barca of this checkout,
# whatever the interpreter has installed: an editable install of another checkout, since
# removed, would answer "No module named barca". Tests of an install make their own venv and
# drop PYTHONPATH themselves.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
PIPELINES = Path(__file__).resolve().parent / "pipelines"


def _temp_folders_in_memory(root: str = "/dev/shm", room: int = 4 << 30) -> None:
    """Tests' folders on the machine's tmpfs when it has one with room: nearly every test makes
    a new project, and SQLite syncs a new database's file, journal, WAL and folder (seven
    fsyncs for a first run, four for each later writing one), which a VM's disk can make cost
    more than the test's own work. What a test checks is the same on any filesystem; what
    durability costs is bench/'s to measure. A PYTEST_DEBUG_TEMPROOT given by the caller (pytest's
    own setting for where tmp_path lives) wins."""
    if "PYTEST_DEBUG_TEMPROOT" in os.environ or not os.access(root, os.W_OK | os.X_OK):
        return
    st = os.statvfs(root)
    if st.f_bavail * st.f_frsize >= room:
        os.environ["PYTEST_DEBUG_TEMPROOT"] = root


_temp_folders_in_memory()


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)

    def error(self) -> dict:
        """The JSON error line on stderr (with --agent, the run-failed line follows it)."""
        return json.loads(next(x for x in reversed(self.err.splitlines()) if x.startswith("{")))

    def sql_rows(self) -> list[list]:
        """``barca sql --json``'s rows (objects keyed by column) as lists, in column order."""
        doc = self.json()
        return [[row[c] for c in doc["columns"]] for row in doc["rows"]]

    def steps_line(self) -> str:
        """The '[barca] N/M steps | done in Xs' end line (without the time)."""
        m = re.findall(r"^\[barca\] (\d+/\d+ steps \| \w+)", self.err, re.M)
        return m[-1] if m else ""

    def completed(self) -> list[str]:
        """Step ids that the --agent lines report as completed, in order."""
        return re.findall(r"^\[barca\] step:(\S+) completed", self.err, re.M)


class Project:
    """A temp project folder with helpers to write files and run the barca CLI in it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, name: str, text: str) -> Path:
        p = self.path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
        return p

    def copy_pipeline(self, name: str, as_name: str = "pipeline.py") -> Path:
        return self.write(as_name, (PIPELINES / name).read_text())

    def edit(self, name: str, old: str, new: str) -> None:
        p = self.path / name
        text = p.read_text()
        assert old in text, f"{old!r} not in {name}"
        p.write_text(text.replace(old, new, 1))

    def barca(self, *args: str, env: dict[str, str] | None = None, timeout: float = 120,
              input: str | None = None) -> Result:
        full_env = dict(os.environ)
        full_env.pop("BARCA_OUTPUT", None)
        full_env.update(env or {})
        if str(REPO) not in full_env.get("PYTHONPATH", "").split(os.pathsep):
            # a test's own PYTHONPATH (a "site" folder) comes after this checkout's barca
            full_env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(REPO), full_env.get("PYTHONPATH", "")) if p)
        proc = subprocess.run([sys.executable, "-m", "barca", *args], cwd=self.path,
                              capture_output=True, text=True, timeout=timeout, env=full_env,
                              input=input)
        return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


@pytest.fixture
def seed(project: Project) -> Project:
    """The seed page's Example: pipeline.py and feed_version.txt = v1."""
    project.write("pipeline.py", (REPO / "examples" / "seed" / "pipeline.py").read_text())
    project.write("feed_version.txt", "v1\n")
    return project


@pytest.fixture
def ipython():
    """A real in-process IPython shell with barca's magics loaded, and no history: the history
    thread would outlive the test, and a process with a live thread starts its workers through
    a forkserver (never fork under threads), so every later in-process run would pay for it."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    config = Config()
    config.HistoryManager.enabled = False
    ip = InteractiveShell.instance(config=config)
    ip.run_line_magic("load_ext", "barca")
    yield ip
    InteractiveShell.clear_instance()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes a ``project`` or ``seed`` folder runs the CLI in a subprocess: it is
    ``slow``, so ``pytest -m "not slow"`` stays the fast inner loop. Kernel, browser and
    install tests carry the marker themselves."""
    for item in items:
        if {"project", "seed"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def evicted(doc: dict, tier: str | None = None) -> list[str]:
    """The paths a gc document (or a run's ``cache``) says were evicted, or of one tier."""
    return [e["path"] for e in doc["evicted"] if tier is None or e["tier"] == tier]
