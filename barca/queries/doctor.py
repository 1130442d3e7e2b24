"""``barca doctor``: a project's health, checked without importing a pipeline or running a
step -- files, ``barca.toml``, the metadata database, the artifacts folder, the remote store,
the optional libraries the project uses -- and the report of those checks."""
from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from barca.core.errors import BarcaError
from barca.core.record import Record
from barca.core.render import html_table, text_table

if TYPE_CHECKING:
    from barca.core.settings import Settings

# a library the project's files import -> (the module barca needs for it, the extra)
_EXTRAS = {
    "pandas": ("pyarrow", "parquet"), "pyarrow": ("pyarrow", "parquet"),
    "polars": ("pyarrow", "parquet"), "duckdb": ("duckdb", "sql"),
    "ipywidgets": ("ipywidgets", "jupyter"),
}


class Check(Record):
    __slots__ = ("name", "ok", "detail", "fix")
    _defaults = {"fix": ""}
    name: str
    ok: bool
    detail: str
    fix: str


class Checkup(Record):
    """What ``barca doctor`` found: one check per line; healthy when every check passed."""
    __slots__ = ("checks",)
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [
            {"name": c.name, "ok": c.ok, "detail": c.detail + (f" -- {c.fix}" if c.fix else "")}
            for c in self.checks]}

    def _rows(self) -> list[list[str]]:
        return [["ok" if c.ok else "PROBLEM", c.name, c.detail, c.fix] for c in self.checks]

    def summary(self) -> str:
        bad = sum(not c.ok for c in self.checks)
        return "healthy" if not bad else f"{bad} problem{'s' if bad != 1 else ''} found"

    def __str__(self) -> str:
        return text_table(["CHECK", "NAME", "DETAIL", "FIX"], self._rows()) + \
            f"\n\n{self.summary()}"

    def _repr_html_(self) -> str:
        """A badge per check (as every table colours its states); "-" where nothing needs a
        fix."""
        rows = [[*r[:3], r[3] or "-"] for r in self._rows()]
        return html_table(["CHECK", "NAME", "DETAIL", "FIX"], rows, 0, self.summary())

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}

    def json_text(self) -> str:
        import json
        return json.dumps(self.to_json(), indent=2)


def _error_check(name: str, exc: BarcaError) -> Check:
    """A check failed with barca's own error: its first line (which names the file and line)
    and its fix."""
    first = exc.message.strip().splitlines()[0] if exc.message.strip() else exc.message
    return Check(name, False, first, " ".join(exc.remediation.split()))


def _paths(settings: Settings, files: tuple[str, ...]) -> list[Path]:
    """The pipeline files checked: those named, a named folder's pipelines, else the
    project's."""
    from barca.model.discovery import find_files
    if not files:
        return [Path(p) for p in find_files(settings.root, settings.include, settings.exclude)]
    out: list[Path] = []
    for f in files:
        p = Path(f).resolve()
        out += (map(Path, find_files(p, settings.include, settings.exclude)) if p.is_dir()
                else [p])
    return out


def _pipelines(settings: Settings, files: tuple[str, ...]) -> list[Check]:
    """Each file parsed, the graph loaded, and each file imported in a child process: every
    problem found is listed, one never hiding another."""
    from barca.model.discovery import parse_file
    from barca.model.topology import load_graph
    root = settings.root
    paths = _paths(settings, files)
    out: list[Check] = []
    parsed: list[Path] = []
    for p in paths:
        if not p.is_file():
            out.append(Check(f"file {p.name}", False, f"{p}: not found",
                             "Pass the path of a pipeline file, or a folder of them."))
            continue
        try:
            parse_file(p, root)
            parsed.append(p)
        except BarcaError as exc:
            out.append(_error_check(f"file {_rel(p, root)}", exc))
    graph = None
    if not out:
        try:
            graph = load_graph(tuple(str(p) for p in paths), settings)
        except BarcaError as exc:
            out.append(_error_check("pipeline graph", exc))
    out += _imports(root, parsed)
    if out:
        return out
    n = len(graph.nodes) if graph is not None else 0
    return [Check("pipeline files", True,
                  f"{len(paths)} file{'s' if len(paths) != 1 else ''}, "
                  f"{n} node{'s' if n != 1 else ''}")]


def _rel(p: Path, root: Path) -> Path:
    return p.relative_to(root) if p.is_relative_to(root) else p


# run in a child: import each file as a worker does, and name the first frame of the file that
# raised (a NameError at module level would otherwise be blamed on the first step to run)
_IMPORT_CHILD = """
import importlib.util, json, os, sys, traceback
sys.dont_write_bytecode = True  # (a doctor writes nothing into the project: no __pycache__)
root, files = sys.argv[1], sys.argv[2:]
sys.path.insert(0, root)
out = []
for name, path in zip(files[::2], files[1::2]):
    sys.path.insert(0, os.path.dirname(path))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    except BaseException as exc:
        line = next((f.lineno for f in reversed(traceback.extract_tb(exc.__traceback__))
                     if os.path.abspath(f.filename) == path), None)
        out.append([path, line, type(exc).__name__, str(exc).splitlines()[0] if str(exc) else ""])
print(json.dumps(out))
"""
IMPORT_TIMEOUT = 30.0


def _imports(root: Path, paths: list[Path]) -> list[Check]:
    """Module-level code that fails when a step imports its file, found now: each file
    imported once in a child process (never in this one), within ``IMPORT_TIMEOUT``."""
    import json
    import subprocess
    import sys

    from barca.model.discovery import module_name
    if not paths:
        return []
    argv = [a for p in paths for a in (module_name(str(_rel(p, root))), str(p))]
    try:
        r = subprocess.run([sys.executable, "-c", _IMPORT_CHILD, str(root), *argv], cwd=root,
                           capture_output=True, text=True, timeout=IMPORT_TIMEOUT)
        found = json.loads(r.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return [Check("imports", False, f"importing the pipeline files took over "
                      f"{IMPORT_TIMEOUT:.0f} s", "Move slow work out of module level, into "
                      "a step.")]
    except (ValueError, IndexError, OSError) as exc:
        return [Check("imports", False, f"the pipeline files could not be imported: {exc}",
                      "Run `python FILE.py` to see the error.")]
    return [Check(f"import {_rel(Path(path), root)}", False,
                  f"{_rel(Path(path), root)}:{line or '?'}: {kind}: {msg}".rstrip(": "),
                  "Fix the module-level code: every step imports its file before it runs.")
            for path, line, kind, msg in found]


def _config(root: Path) -> Check:
    from barca.core.config import FILE, load
    if not (root / FILE).is_file():
        return Check(FILE, True, "none (defaults apply)")
    try:
        load(root)
    except BarcaError as exc:
        return _error_check(FILE, exc)
    return Check(FILE, True, "valid")


def _database(root: Path, prefix: str) -> Check:
    from barca.store.database import made_by_barca_030, quick_check
    from barca.store.schema import barca_030_error
    db = root / prefix / "metadata.db"
    if not db.exists():
        return Check("metadata.db", True, "none yet (the first run makes it)")
    if made_by_barca_030(db):
        e = barca_030_error(root, db)
        return Check("metadata.db", False, e.message, e.remediation)
    verdict = quick_check(db)
    if verdict != "ok":
        return Check("metadata.db", False, f"{db.relative_to(root)} fails PRAGMA quick_check: "
                     f"{verdict}", f"Move it aside (mv {db} {db}.broken); the next run rebuilds "
                     "it and adopts the results on disk.")
    return Check("metadata.db", True, "passes PRAGMA quick_check")


def _artifacts(root: Path, prefix: str) -> Check:
    folder = root / prefix / "artifacts"
    probe = folder if folder.is_dir() else next(
        (p for p in (root / prefix, root) if p.is_dir()), root)
    if not os.access(probe, os.W_OK | os.X_OK):
        return Check("artifacts folder", False, f"{probe} is not writable",
                     f"Give your user write access to {probe}.")
    return Check("artifacts folder", True, f"{probe.relative_to(root) or '.'} is writable")


def _remote(settings: Settings) -> Check | list[Check] | None:
    from barca.core.errors import redact
    from barca.store import remote
    if settings.remote_uri is None:
        return None
    uri = redact(settings.remote_uri)  # shown: never its user or password
    try:
        store = remote.Remote(settings.remote_uri, key_file=settings.store_key_file)
        store.fs.exists(store.base)  # a read: doctor writes nothing to the store
    except BarcaError as exc:
        return _error_check("remote store", exc)
    except Exception as exc:
        return Check("remote store", False, f"{uri} does not answer: {type(exc).__name__}: "
                     f"{redact(str(exc))}", "Check BARCA_REMOTE_URI or [remote] uri, the "
                     "network and the credentials.")
    from barca.core.secret import store_key
    if store_key(settings.store_key_file) is None:
        return [Check("remote store", True, f"{uri} answers"),
                Check("store signatures", False, "no signing key: a pickle from the shared "
                      "store is trusted as code, and results that depend on env= values are "
                      "not shared across machines (barca docs remote)",
                      "Set BARCA_STORE_KEY (or [remote] key_file in barca.toml) on every "
                      "machine that shares the store.")]
    return [Check("remote store", True, f"{uri} answers"),
            Check("store signatures", True, "results are signed and checked with the key")]


def _extras(settings: Settings | None, files: tuple[str, ...]) -> list[Check]:
    """The optional libraries the project's files import, and what barca needs with them."""
    paths = (_paths(settings, files) if settings is not None
             else [Path(f) for f in files])
    used: set[str] = set()
    pattern = re.compile(r"^\s*(?:import|from)\s+(" + "|".join(_EXTRAS) + r")\b", re.M)
    for p in paths:
        try:
            used.update(pattern.findall(p.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    out, seen = [], set()
    for lib in sorted(used):
        module, extra = _EXTRAS[lib]
        if module in seen:
            continue
        seen.add(module)
        if importlib.util.find_spec(module) is None:
            out.append(Check(f"library {module}", False,
                             f"the project imports {lib}, and barca needs {module} with it",
                             f"pip install 'barca-pipelines[{extra}]'"))
        else:
            out.append(Check(f"library {module}", True, "installed"))
    return out


def checkup(*files: str, settings: Settings | None = None, **flags: Any) -> Checkup:
    """Every check, each on its own: one problem never hides another. While ``barca.toml`` is
    invalid, the checks that read settings from it are left out (its own line says why).
    The settings are resolved here, not by the caller: an invalid file is a finding."""
    from barca.core.root import find_root
    from barca.core.settings import settings_of
    root = settings.root if settings is not None else find_root()
    config = _config(root)
    checks: list[Check] = [config]

    def guarded(name: str, fn: Any) -> list[Check]:
        try:
            got = fn()
        except BarcaError as exc:
            if not config.ok and str(exc.extra.get("path", "")).endswith("barca.toml"):
                return []
            return [_error_check(name, exc)]
        return [] if got is None else got if isinstance(got, list) else [got]

    got: list[Settings] = []
    checks += guarded("settings", lambda: got.append(settings_of(settings, **flags)))
    prefixes: list[str] = []
    if got:
        checks += guarded("environment", lambda: prefixes.append(got[0].store_prefix))
        checks += guarded("pipeline files", lambda: _pipelines(got[0], files))
    prefix = prefixes[0] if prefixes else ".barca"
    checks += [_database(root, prefix), _artifacts(root, prefix)]
    if got:
        checks += guarded("remote store", lambda: _remote(got[0]))
    if got or files:
        checks += guarded("libraries", lambda: _extras(got[0] if got else None, files))
    return Checkup(tuple(checks))
