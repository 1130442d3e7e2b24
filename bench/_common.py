"""Shared helpers for barca's benchmark scripts.

These scripts print figures; they are not tests and never pass or fail on a time. Each scenario
module has ``run(opts, ctx) -> list[Figure]`` and a ``__main__`` that calls ``main(run)``.
``run_all`` imports them, shares ``ctx`` between them (the S1 project is reused by S2-S6 and
S13), and prints a table.
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
SEED_EXAMPLE = REPO / "examples" / "seed"
TIME_BIN = "/usr/bin/time"

# Targets from spec/performance.md (2-core machine). Keyed by figure id.
TARGETS: dict[str, str] = {
    "S1": "≤ 1.5 s",
    "S1 floor": "S1 ≤ floor + 0.5 s",
    "S2": "≤ 0.09 s",
    "S3": "≤ 0.15 s",
    "S4": "≤ 0.5 s",
    "S5": "≤ 0.3 s",
    "S6": "≤ 20 MB",
    "S7 first": "≤ 10 s",
    "S7 tick": "≤ 0.5 s",
    "S8 first": "- (setup)",
    "S8 tick": "≤ 3 s, ≤ 1 GB peak",
    "S9": "≤ 5.3 s (floor 5.0 s)",
    "S10 first": "≤ 0.3 s",
    "S10 cached": "≤ 0.05 s",
    "S11 first": "≤ 0.9 s",
    "S11 cached": "≤ 0.06 s",
    "S12 floor": "-",
    "S12 first": "≤ 30 s",
    "S12 cached": "≤ 0.9 s",
    "S12 add key": "≤ 2 s",
    "S13": "≤ 10 ms",
    "S16 one": "-",
    "S16 two": "each step once; ≤ 1.2 × one get",
    "S17": "≤ 2 × DuckDB alone (time, peak)",
    "S17 duckdb": "-",
    "S14 help": "≤ 60 ms",
    "S14 list": "≤ 80 ms",
}


# --------------------------------------------------------------------------- figures
@dataclass
class Figure:
    """One printed figure: a timing (seconds) or a size (MB)."""

    id: str
    what: str
    unit: str = "s"
    median: float | None = None
    min: float | None = None
    max: float | None = None
    runs: int = 0
    peak_mb: float | None = None
    target: str = ""
    note: str = ""
    error: str | None = None     # the figure could not be measured (a command failed)
    skipped: str | None = None   # deliberately not measured (e.g. S13 without the magic)
    unavailable: str | None = None  # the command does not exist yet (e.g. S4 without `sql`)
    values: list[float] = field(default_factory=list)

    def line(self) -> str:
        if self.skipped:
            return f"{self.id} skipped: {self.skipped}"
        if self.unavailable:
            return f"{self.id} unavailable: {self.unavailable}"
        if self.error:
            return f"{self.id} {self.what}: FAILED: {self.error}"
        parts = [f"{self.id:<11} {self.what:<52} median {fmt_value(self.median, self.unit)}"]
        if self.runs > 1:
            parts.append(f"min {fmt_value(self.min, self.unit)}  "
                         f"max {fmt_value(self.max, self.unit)}")
        parts.append(f"({self.runs} run{'s' if self.runs != 1 else ''})")
        if self.peak_mb is not None:
            parts.append(f"peak {self.peak_mb:.0f} MB")
        if self.target:
            parts.append(f"target {self.target}")
        if self.note:
            parts.append(f"[{self.note}]")
        return "  ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def fmt_value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s"
    return f"{v:.1f} {unit}"


def vs_floor(seconds: float, floor: float) -> str:
    d = seconds - floor
    return f"floor {'+' if d >= 0 else '-'} {abs(d):.2f} s"


def emit(fig: Figure) -> Figure:
    """Print one line per figure, as soon as it is known."""
    print(fig.line(), flush=True)
    return fig


def target(fid: str, scaled: str | None = None) -> str:
    t = TARGETS.get(fid, "")
    return f"{t} at {scaled}" if scaled and t else t


# --------------------------------------------------------------------------- projects
_SESSION: Path | None = None


def session_dir() -> Path:
    """One temp folder per benchmark process; removed at exit unless BARCA_BENCH_KEEP=1."""
    global _SESSION
    if _SESSION is None:
        base = os.environ.get("BARCA_BENCH_TMP") or None
        _SESSION = Path(tempfile.mkdtemp(prefix="barca-bench-", dir=base))
        if os.environ.get("BARCA_BENCH_KEEP", "") in ("", "0"):
            atexit.register(shutil.rmtree, _SESSION, True)
        else:
            atexit.register(print, f"[bench] kept temp projects in {_SESSION}", file=sys.stderr)
    return _SESSION


def make_project(name: str, source: str, files: dict[str, str | bytes] | None = None) -> Path:
    """A fresh project folder holding pipeline.py (and any data files)."""
    root = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=session_dir()))
    (root / "pipeline.py").write_text(source)
    for rel, content in (files or {}).items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
    return root


def copy_project(src: Path, name: str | None = None) -> Path:
    dst = Path(tempfile.mkdtemp(prefix=f"{name or src.name}-copy-", dir=session_dir()))
    shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
    return dst


class Fresh:
    """Untimed setup for "first run" figures: each call gives a new copy of the template
    project and deletes the previous copy (so 50,000-key trees do not pile up). The last copy
    is kept (``.last``) for scenarios that continue from it."""

    def __init__(self, template: Path):
        self.template = template
        self.last: Path | None = None

    def __call__(self, _i: int = 0) -> Path:
        if self.last is not None:
            shutil.rmtree(self.last, ignore_errors=True)
        self.last = copy_project(self.template)
        return self.last


def du_bytes(path: Path) -> tuple[int, int]:
    """(bytes on disk as `du -sk` counts them, apparent bytes)."""
    on_disk = None
    if shutil.which("du"):
        p = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True)
        if p.returncode == 0 and p.stdout.split():
            on_disk = int(p.stdout.split()[0]) * 1024
    apparent = 0
    blocks = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            apparent += st.st_size
            blocks += st.st_blocks * 512
    return (on_disk if on_disk is not None else blocks), apparent


# --------------------------------------------------------------------------- timing
REPO = Path(__file__).resolve().parent.parent


def install_venv(extras: str = "sql") -> str:
    """A regular (wheel) install of this checkout in a fresh virtualenv, as a user gets it:
    no editable-install import hook, none of the base interpreter's ``.pth`` files. Returns
    its ``barca`` and makes it the one every scenario times (BARCA_BENCH_EXE)."""
    venv = session_dir() / "venv"
    exe = venv / "bin" / "barca"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", f"{REPO}[{extras}]"], check=True)
    os.environ["BARCA_BENCH_EXE"] = str(exe)
    return str(exe)


def barca_exe() -> str:
    """The real `barca` console script, not a pyenv/asdf shim (a shim adds ~60 ms per call).
    Override with BARCA_BENCH_EXE."""
    env = os.environ.get("BARCA_BENCH_EXE")
    if env:
        return env
    cand = Path(sys.executable).parent / "barca"
    if cand.exists():
        return str(cand)
    return shutil.which("barca") or "barca"


def barca(*args: str) -> list[str]:
    return [barca_exe(), *args]


@dataclass
class Run:
    seconds: float
    rc: int
    stdout: str
    stderr: str
    peak_kb: int | None


def run_once(argv: Sequence[str], cwd: Path | str | None = None, env: dict[str, str] | None = None,
             timeout: float | None = None) -> Run:
    """Run one whole command; wall clock around it; peak RSS of its largest process
    (`/usr/bin/time -v`, else getrusage(RUSAGE_CHILDREN), which is a running maximum over
    every child this benchmark process has waited for)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    use_time = os.access(TIME_BIN, os.X_OK)
    tfile = None
    cmd = list(argv)
    if use_time:
        fd, tfile = tempfile.mkstemp(prefix="time-", suffix=".txt", dir=session_dir())
        os.close(fd)
        cmd = [TIME_BIN, "-v", "-o", tfile, *cmd]
    t0 = time.perf_counter()
    # its own process group, so that a timeout kills barca and its workers, not just `time`
    p = subprocess.Popen(cmd, cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        dt = time.perf_counter() - t0
        with contextlib.suppress(OSError):
            os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return Run(dt, -1, out, f"timed out after {timeout:.0f} s\n{err}", None)
    dt = time.perf_counter() - t0
    peak_kb: int | None = None
    if use_time and tfile:
        try:
            text = Path(tfile).read_text()
            os.unlink(tfile)
        except OSError:
            text = ""
        for line in text.splitlines():
            if "Maximum resident set size" in line:
                with contextlib.suppress(ValueError):
                    peak_kb = int(line.rsplit(":", 1)[1].strip())
            elif line.startswith("Command terminated by signal"):
                err = err + "\n" + line
    else:
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    return Run(dt, rc, out, err, peak_kb)


def stderr_summary(err: str, rc: int | None = None) -> str:
    """The first line of stderr; for a Python traceback, its last line (the exception); for
    barca's JSON error object (stderr is a pipe here), its "error" text."""
    text = _stderr_summary(err, rc)
    return text if len(text) <= 200 else text[:199] + "…"


def _stderr_summary(err: str, rc: int | None) -> str:
    for candidate in (err, *reversed(err.strip().splitlines()[-1:])):
        try:
            doc = json.loads(candidate)
        except (ValueError, TypeError):
            continue
        if isinstance(doc, dict) and doc.get("error"):
            return str(doc["error"]).splitlines()[0].strip() + _where(str(doc.get("traceback")))
    lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
    # drop barca's progress lines, keep what explains the failure
    useful = [ln for ln in lines if not ln.startswith("[barca] step:")] or lines
    if not useful:
        return f"exit {rc}, no stderr" if rc is not None else "no stderr"
    if useful[0].startswith("Traceback"):
        return f"{useful[-1]}{_where(err)}"
    return useful[0]


def _where(tb: str) -> str:
    """ " (at file.py:LINE in fn)" for the innermost frame of a traceback text, or ""."""
    import re
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', tb or "")
    if not frames:
        return ""
    path, line, fn = frames[-1]
    return f" (at {Path(path).name}:{line} in {fn})"


@dataclass
class Measurement:
    times: list[float] = field(default_factory=list)
    peak_kb: int | None = None
    last: Run | None = None
    error: str | None = None
    failed_run: Run | None = None


def measure(argv: Sequence[str], *, runs: int, warmup: int = 1,
            prepare: Callable[[int], Path] | None = None, cwd: Path | None = None,
            env: dict[str, str] | None = None, timeout: float | None = 600) -> Measurement:
    """Time a whole command `runs` times after `warmup` untimed runs.

    `prepare(i)` runs untimed before every run (warm-up runs get negative i) and returns the
    folder to run in; otherwise `cwd`. Stops at the first non-zero exit and reports it."""
    m = Measurement()
    for i in range(-warmup, runs):
        where = prepare(i) if prepare is not None else cwd
        r = run_once(argv, cwd=where, env=env, timeout=timeout)
        if r.rc != 0:
            m.error = f"exit {r.rc}: {stderr_summary(r.stderr, r.rc)}"
            m.failed_run = r
            m.last = r
            return m
        m.last = r
        if i >= 0:
            m.times.append(r.seconds)
            if r.peak_kb is not None:
                m.peak_kb = max(m.peak_kb or 0, r.peak_kb)
    return m


def figure(fid: str, what: str, m: Measurement, *, tgt: str | None = None, note: str = "",
           expect_steps: int | None = None) -> Figure:
    """A Figure from a Measurement, with a steps note parsed from `--json` output."""
    fig = Figure(fid, what, target=TARGETS.get(fid, "") if tgt is None else tgt)
    if m.error:
        fig.error = m.error
        return fig
    fig.values = [round(t, 6) for t in m.times]
    fig.runs = len(m.times)
    if m.times:
        fig.median = statistics.median(m.times)
        fig.min = min(m.times)
        fig.max = max(m.times)
    if m.peak_kb is not None:
        fig.peak_mb = m.peak_kb / 1024
    notes = [note] if note else []
    if m.last is not None:
        steps = steps_of(m.last.stdout)
        if steps is not None:
            ex, tot = steps
            s = f"{ex}/{tot} steps"
            if expect_steps is not None and ex != expect_steps:
                s += f", expected {expect_steps}"
            notes.append(s)
    fig.note = "; ".join(notes)
    return fig


def steps_of(stdout: str) -> tuple[int, int] | None:
    """(steps_executed, steps_total) from `barca get --json` output, if it is that."""
    try:
        d = json.loads(stdout)
    except (ValueError, TypeError):
        return None
    if isinstance(d, dict) and "steps_executed" in d:
        return d.get("steps_executed"), d.get("steps_total")
    return None


def failed(fid: str, what: str, error: str, tgt: str | None = None) -> Figure:
    return Figure(fid, what, target=TARGETS.get(fid, "") if tgt is None else tgt, error=error)


def prime(project: Path, args: Sequence[str], env: dict[str, str] | None = None,
          timeout: float | None = 1800) -> str | None:
    """Run a barca command once, untimed (setup). Returns an error text, or None."""
    r = run_once(barca(*args), cwd=project, env=env, timeout=timeout)
    if r.rc != 0:
        return f"setup `barca {' '.join(args)}` exit {r.rc}: {stderr_summary(r.stderr, r.rc)}"
    return None


# --------------------------------------------------------------------------- pipelines
def keys_pipeline(n_keys: int) -> str:
    """S1/S12: n keys of `item` and a collect fan-in `total`. N_KEYS is edited to add a key."""
    width = max(4, len(str(n_keys - 1)))
    return f'''from barca import asset, collect, partitions

N_KEYS = {n_keys}
KEYS = [f"k{{i:0{width}d}}" for i in range(N_KEYS)]


@asset(partitions={{"key": partitions(KEYS)}})
def item(key: str) -> dict:
    return {{"key": key, "n": len(key)}}


@asset(inputs={{"items": collect(item)}})
def total(items: list[dict]) -> dict:
    return {{"count": len(items), "sum": sum(i["n"] for i in items)}}
'''


def set_n_keys(project: Path, n_keys: int) -> None:
    """Edit N_KEYS in a keys_pipeline project (adds keys at the end of the list)."""
    p = project / "pipeline.py"
    lines = p.read_text().splitlines(keepends=True)
    lines = [f"N_KEYS = {n_keys}\n" if ln.startswith("N_KEYS = ") else ln for ln in lines]
    write_edit(p, "".join(lines))


def write_edit(path: Path, text: str) -> None:
    """Rewrite a source file so that its mtime moves by at least a whole second: a .pyc
    records the source's mtime in seconds and its size, and two quick edits of the same size
    (N_KEYS = 2001 -> 2002) would otherwise leave a stale .pyc for the next import."""
    old = int(path.stat().st_mtime) if path.exists() else 0
    path.write_text(text)
    new = max(int(time.time()), old + 1)
    os.utime(path, (new, new))


def current_n_keys(project: Path) -> int:
    for ln in (project / "pipeline.py").read_text().splitlines():
        if ln.startswith("N_KEYS = "):
            return int(ln.split("=", 1)[1])
    raise ValueError("no N_KEYS line")


def s1_project(opts: argparse.Namespace, ctx: dict[str, Any]) -> tuple[Path | None, str | None]:
    """The primed 2,000-key project that S2-S6 and S13 continue from: S1's last copy when run
    by run_all, else a new one with one untimed first run."""
    proj = ctx.get("s1_project")
    if proj is not None and Path(proj).exists():
        return Path(proj), None
    proj = make_project("s1", keys_pipeline(2000))
    err = prime(proj, ["get", "total", "pipeline.py", "--json"], timeout=opts.timeout)
    if err:
        return None, err
    ctx["s1_project"] = proj
    return proj, None


# --------------------------------------------------------------------------- CLI
def arg_parser(description: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--runs", type=int, default=5,
                    help="timed runs per figure (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="untimed warm-up runs before them (default: %(default)s)")
    ap.add_argument("--heavy-runs", type=int, default=None,
                    help="timed runs for the expensive first runs (S7/S12 first, S9) "
                         "(default: %(default)s; None means --runs)")
    ap.add_argument("--heavy-warmup", type=int, default=None,
                    help="warm-up runs for those (default: %(default)s; None means --warmup)")
    ap.add_argument("--quick", action="store_true",
                    help="scale S8 down to 20,000 keys and S12 to 10,000")
    ap.add_argument("--timeout", type=float, default=900,
                    help="seconds per command (default: %(default)s)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON at the end")
    ap.add_argument("--venv", action="store_true",
                    help="time a regular install of this checkout in a fresh virtualenv "
                         "(default: the barca next to this Python, often an editable install)")
    return ap


def heavy_runs(opts: argparse.Namespace) -> int:
    return max(1, opts.heavy_runs if opts.heavy_runs is not None else opts.runs)


def heavy_warmup(opts: argparse.Namespace) -> int:
    return max(0, opts.heavy_warmup if opts.heavy_warmup is not None else opts.warmup)


def main(run: Callable[[argparse.Namespace, dict[str, Any]], list[Figure]],
         description: str) -> int:
    opts = arg_parser(description).parse_args()
    if opts.venv:
        install_venv()
    print(f"[bench] barca = {barca_exe()}", file=sys.stderr)
    figs = run(opts, {})
    if opts.json:
        print(json.dumps([f.as_dict() for f in figs], indent=2))
    return 0


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "barca_exe": barca_exe(),
        "time_bin": TIME_BIN if os.access(TIME_BIN, os.X_OK) else None,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    with contextlib.suppress(OSError):
        info["loadavg"] = os.getloadavg()
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "barca"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        info["git"] = head + ("+dirty" if dirty else "")
    except OSError:
        pass
    return info
