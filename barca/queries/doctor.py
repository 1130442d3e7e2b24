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
    """One check: its name (barca 0.30.2's where it checks the same: ``project_root``,
    ``configuration``, ``metadata``, ...), whether it passed, what it found, the fix, and its
    findings as values (``data``) for a script."""
    __slots__ = ("name", "ok", "detail", "fix", "data")
    _defaults = {"fix": "", "data": None}
    name: str
    ok: bool
    detail: str
    fix: str
    data: dict[str, Any] | None


class Checkup(Record):
    """What ``barca doctor`` found: one check per line; healthy when every check passed."""
    __slots__ = ("checks",)
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [
            {"name": c.name, "ok": c.ok, "detail": c.detail + (f" -- {c.fix}" if c.fix else ""),
             "data": c.data or {}} for c in self.checks]}

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


def _error_check(name: str, exc: BarcaError, data: dict[str, Any] | None = None) -> Check:
    """A check failed with barca's own error: its first line (which names the file and line)
    and its fix."""
    first = exc.message.strip().splitlines()[0] if exc.message.strip() else exc.message
    return Check(name, False, first, " ".join(exc.remediation.split()), data)


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
    """The files found (``discovery``), each parsed (``source:FILE``, with its definitions),
    the graph loaded, and each file imported in a child process: every problem found is
    listed, one never hiding another."""
    from barca.model.discovery import parse_file
    from barca.model.topology import load_graph
    root = settings.root
    paths = _paths(settings, files)
    shown = [str(_rel(p, root)) for p in paths]
    out: list[Check] = [Check("discovery", bool(paths),
                              f"{len(paths)} source file{'s' if len(paths) != 1 else ''}",
                              "" if paths else "Name a pipeline file, or add one that imports "
                              "barca under the project root.", {"files": shown})]
    parsed: list[Path] = []
    for p, rel in zip(paths, shown, strict=True):
        name = f"source:{rel}"
        if not p.is_file():
            out.append(Check(name, False, f"{p}: not found",
                             "Pass the path of a pipeline file, or a folder of them.",
                             {"file": rel}))
            continue
        try:
            model = parse_file(p, root)
        except BarcaError as exc:
            out.append(_error_check(name, exc, {"file": rel}))
            continue
        parsed.append(p)
        n = len(model.nodes)
        out.append(Check(name, True, f"{n} definition{'s' if n != 1 else ''} parsed without "
                         "imports", data={"file": rel, "nodes": n}))
    if len(parsed) == len(paths):
        try:
            load_graph(tuple(str(p) for p in paths), settings)
        except BarcaError as exc:
            out.append(_error_check("pipeline graph", exc))
    return out + _imports(root, parsed)


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


def _root(root: Path) -> Check:
    here = Path.cwd().resolve()
    how = "cwd" if root == here else "barca.toml above cwd"
    return Check("project_root", True, f"{root} (found from {how})",
                 data={"path": str(root), "source": how})


def _config(root: Path) -> Check:
    from barca.core.config import FILE, load
    name, path = "configuration", root / FILE
    if not path.is_file():
        return Check(name, True, f"no {FILE}; defaults apply", data={"found": False})
    data = {"found": True, "path": str(path)}
    try:
        load(root)
    except BarcaError as exc:
        return _error_check(name, exc, data)
    return Check(name, True, f"{FILE} is valid", data=data)


def _environment(settings: Settings) -> Check:
    name = settings.env or "default"
    return Check("environment", True, name, data={"name": name,
                                                  "store": settings.store_prefix})


def _database(root: Path, prefix: str) -> Check:
    from barca.store.database import made_by_barca_030, quick_check
    from barca.store.schema import barca_030_error
    db = root / prefix / "metadata.db"
    data = {"path": f"{prefix}/metadata.db"}
    if not db.exists():
        return Check("metadata", True, f"no {prefix}/metadata.db yet (the first run makes it)",
                     data=data)
    if made_by_barca_030(db):
        e = barca_030_error(root, db)
        return Check("metadata", False, e.message, e.remediation, data)
    verdict = quick_check(db)
    if verdict != "ok":
        return Check("metadata", False, f"{db.relative_to(root)} fails PRAGMA quick_check: "
                     f"{verdict}", f"Move it aside (mv {db} {db}.broken); the next run rebuilds "
                     "it and adopts the results on disk.", data)
    return Check("metadata", True, f"{prefix}/metadata.db passes PRAGMA quick_check", data=data)


def _artifacts(root: Path, prefix: str) -> Check:
    folder = root / prefix / "artifacts"
    data = {"artifacts": f"{prefix}/artifacts", "metadata": f"{prefix}/metadata.db"}
    probe = folder if folder.is_dir() else next(
        (p for p in (root / prefix, root) if p.is_dir()), root)
    if not os.access(probe, os.W_OK | os.X_OK):
        return Check("local_cache", False, f"{probe} is not writable",
                     f"Give your user write access to {probe}.", data)
    return Check("local_cache", True, f"{probe.relative_to(root) or '.'} is writable",
                 data=data)


def _cache_size(settings: Settings) -> Check:
    from barca.store import cachelimit
    root = settings.root
    limit = cachelimit.limit(settings)
    size = cachelimit.usage(root / ".barca")
    st = os.statvfs(root)
    disk, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    raw = settings.cache_max_size
    source = "default" if raw is None else settings.where("cache_max_size", "[cache] max_size")
    written = str(raw) if raw is not None else f"{cachelimit.DEFAULT} of the filesystem"
    from barca.store.cachereport import human
    of = "no limit" if limit is None else f"its {human(limit)} limit ({written}, {source})"
    ok = limit is None or size <= limit
    return Check("cache_size", ok, f"{human(size)} of {of}; {human(free)} free of "
                 f"{human(disk)} on its filesystem",
                 "" if ok else "Run `barca gc`, or raise [cache] max_size.",
                 {"size_bytes": size, "limit_bytes": limit, "max_size": written,
                  "source": source, "available_bytes": free, "filesystem_bytes": disk})


def _capacity(settings: Settings) -> Check:
    from barca.present.notices import Capacity
    cap = Capacity(settings)
    return Check("capacity", True, f"steps running at once total at most weight "
                 f"{cap.capacity} ({cap.source}); pool of {cap.pool_size} workers",
                 data={"capacity": cap.capacity, "pool_size": cap.pool_size,
                       "source": cap.source})


def _python() -> Check:
    import platform
    import sys

    version = sys.modules["barca"].__version__  # (barca itself: loaded before this)
    return Check("python", True, sys.executable,
                 data={"barca_version": version, "executable": sys.executable,
                       "version": platform.python_version()})


STORE = "store:artifacts"  # the shared artifact store (barca 0.30.2's name for its check)


def _remote(settings: Settings) -> Check | list[Check]:
    from barca.core.errors import redact
    from barca.store import remote
    if settings.remote_uri is None:
        return Check(STORE, True, "local artifacts; no remote store", data={"enabled": False})
    uri = redact(settings.remote_uri)  # shown: never its user or password
    data = {"enabled": True, "uri": uri}
    try:
        store = remote.Remote(settings.remote_uri, key_file=settings.store_key_file)
        store.fs.exists(store.base)  # a read: doctor writes nothing to the store
    except BarcaError as exc:
        return _error_check(STORE, exc, data)
    except Exception as exc:
        return Check(STORE, False, f"{uri} does not answer: {type(exc).__name__}: "
                     f"{redact(str(exc))}", "Check BARCA_REMOTE_URI or [remote] uri, the "
                     "network and the credentials.", data)
    from barca.core.secret import store_key
    if store_key(settings.store_key_file) is None:
        return [Check(STORE, True, f"{uri} answers", data=data),
                Check("store signatures", False, "no signing key: a pickle from the shared "
                      "store is trusted as code, and results that depend on env= values are "
                      "not shared across machines (barca docs remote)",
                      "Set BARCA_STORE_KEY (or [remote] key_file in barca.toml) on every "
                      "machine that shares the store.")]
    return [Check(STORE, True, f"{uri} answers", data=data),
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
    checks.insert(0, _root(root))
    checks += guarded("settings", lambda: got.append(settings_of(settings, **flags)))
    prefixes: list[str] = []
    if got:
        def environment() -> Check:
            prefixes.append(got[0].store_prefix)  # (an invalid --env: its error, here)
            return _environment(got[0])
        checks += guarded("environment", environment)
    prefix = prefixes[0] if prefixes else ".barca"
    checks += [_artifacts(root, prefix), _database(root, prefix)]
    if got:
        checks += guarded("cache_size", lambda: _cache_size(got[0]))
        checks += guarded("capacity", lambda: _capacity(got[0]))
        checks += guarded("discovery", lambda: _pipelines(got[0], files))
    checks.append(_python())
    if got:
        checks += guarded(STORE, lambda: _remote(got[0]))
    if got or files:
        checks += guarded("libraries", lambda: _extras(got[0] if got else None, files))
    return Checkup(tuple(checks))
