"""S13: in a live kernel, `%barca get total pipeline.py` on the S1 project when everything is
cached (target 10 ms, spec/performance.md).

Needs the `%barca` magic (faces.jupyter.magics) and jupyter_client + ipykernel. Until the magic
exists this prints "S13 skipped: %barca magic not available". Each figure is the round trip of
one cell execution as a client sees it (execute request -> reply and kernel idle), after
`%load_ext barca` and a warm-up; each is preceded by an empty cell (`pass`), whose median round
trip, the kernel's own floor, is in the note.

"S13 over empty" is what issue #31 item 5 asks about: a cached get's round trip less the empty
cell's just before it, per pair (the median of those differences, in ms; target 3 ms). The
pairs cancel most of a busy machine's drift, which moves both cells alike. Its note says how
much of that any cell showing the same value pays (`_shown`, the value kept from a get: the
kernel formats it, flushes its streams and sends the result the same way), and what the same get
costs when nothing is shown (the line ending in `;`): barca's work and IPython's for a line magic.
"""
from __future__ import annotations

import importlib
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import TARGETS, Figure, emit, failed, main, s1_project  # noqa: E402

WHAT = "`%barca get total pipeline.py` in a kernel, cached"
CELL = "%barca get total pipeline.py"


def magic_available() -> str | None:
    """None if the magic imports, else why not."""
    try:
        importlib.import_module("barca.faces.jupyter.magics")
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        return f"{type(e).__name__}: {e}"
    try:
        importlib.import_module("jupyter_client")
    except ImportError as e:
        return f"jupyter_client not installed ({e})"
    return None


def run_cell(kc, code: str, timeout: float) -> tuple[float, str | None]:
    """Seconds for one cell round trip, and an error text if the cell failed."""
    errors: list[str] = []

    def hook(msg) -> None:
        if msg.get("msg_type") == "error":
            c = msg["content"]
            errors.append(f"{c.get('ename')}: {c.get('evalue')}")

    t0 = time.perf_counter()
    reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook, store_history=False)
    dt = time.perf_counter() - t0
    if reply["content"].get("status") != "ok":
        c = reply["content"]
        errors.append(f"{c.get('ename')}: {c.get('evalue')}")
    return dt, (errors[0] if errors else None)


def run(opts, ctx) -> list[Figure]:
    why = magic_available()
    if why is not None:
        print("S13 skipped: %barca magic not available", flush=True)
        return [Figure("S13", WHAT, target=TARGETS["S13"],
                       skipped=f"%barca magic not available ({why})")]
    proj, err = s1_project(opts, ctx)
    if proj is None:
        return [emit(failed("S13", WHAT, err or "no project"))]
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name="python3")
    # the kernel's own stderr (e.g. its "running over TCP" warning) is not a figure
    km.start_kernel(cwd=str(proj), stderr=subprocess.DEVNULL)
    kc = km.client()
    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        _, e = run_cell(kc, "%load_ext barca", opts.timeout)
        if e:
            return [emit(failed("S13", WHAT, f"%load_ext barca: {e}"))]
        _, e = run_cell(kc, "_shown = " + CELL, opts.timeout)
        if e:
            return [emit(failed("S13", WHAT, e))]
        times, floor, shown, quiet = [], [], [], []
        for i in range(-max(1, opts.warmup), opts.runs):
            empty, _ = run_cell(kc, "pass", opts.timeout)  # the kernel's own round trip
            dt, e = run_cell(kc, CELL, opts.timeout)
            if e:
                return [emit(failed("S13", WHAT, e))]
            value, _ = run_cell(kc, "_shown", opts.timeout)  # the same value, shown by no barca
            hidden, _ = run_cell(kc, CELL + ";", opts.timeout)  # the same get, nothing shown
            if i >= 0:
                times.append(dt)
                floor.append(empty)
                shown.append(value - empty)
                quiet.append(hidden - empty)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    fig = Figure("S13", WHAT, median=statistics.median(times), min=min(times), max=max(times),
                 runs=len(times), target=TARGETS["S13"], values=[round(t, 6) for t in times],
                 note=f"cell round trip; an empty cell's: "
                      f"{statistics.median(floor) * 1000:.1f} ms")
    over = [(t - e) * 1000 for t, e in zip(times, floor, strict=True)]
    diff = Figure("S13 over empty", "the same, less the empty cell run just before it", unit="ms",
                  median=statistics.median(over), min=min(over), max=max(over), runs=len(over),
                  target="≤ 3 ms", values=[round(d, 3) for d in over],
                  note=f"median of the paired differences; a cell showing the same value: "
                       f"{statistics.median(shown) * 1000:.1f} ms over empty; the get showing "
                       f"nothing (`;`): {statistics.median(quiet) * 1000:.1f} ms")
    return [emit(fig), emit(diff)]


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
