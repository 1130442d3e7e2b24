"""The differential oracle of "never stale, never wrong", in a kernel (issue 36, Build 7).

A notebook of cells (constants by statement, a set, helpers, a closure, a partial, a class,
an lru_cache helper, a ``%run`` script) is driven through random edits in one real kernel:
each edit re-runs its cell and the cells that bake what it defines (as "run all below" would),
sometimes the kernel restarts and runs every cell, sometimes only a later cell runs again
(out of order). After each step, ``%barca get out`` in the kernel must equal the value the
current cells give run from scratch in a fresh interpreter. Bounded: two seeds, a dozen steps.
"""
from __future__ import annotations

import ast
import random
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Project

pytestmark = pytest.mark.slow  # a real kernel

MUL = "import functools\ndef mul(a, b):\n    return a {op} b\n"
# slot -> variants; the cells run in this order
SLOTS: dict[str, list[str]] = {
    "K": ["K = 1", "K = 2", "K = 1\nK += 5"],
    "S": ['S = {"a", "b", "c"}', 'S = {"a", "b", "d"}', 'S = frozenset({"x"})'],
    "CFG": ['CFG = {"clip": 3}', 'CFG = {"clip": 3}\nCFG["clip"] = 4', 'CFG = {"clip": 9}'],
    "h": ["def h(x):\n    return x * K", "def h(x):\n    return x * K + 1",
          "def h(x):\n    return min(x * K, CFG['clip'])"],
    "make": ["def make(k):\n    def f(x):\n        return x * k\n    return f",
             "def make(k):\n    def f(x):\n        return x + k\n    return f"],
    "scale": ["scale = make(3)", "scale = make(4)"],
    "part": [f"{MUL.format(op='*')}triple = functools.partial(mul, 3)",
             f"{MUL.format(op='*')}triple = functools.partial(mul, 5)",
             f"{MUL.format(op='-')}triple = functools.partial(mul, 3)"],
    "cls": ["class C:\n    def f(self, x):\n        return x + K\nc = C()",
            "class C:\n    def f(self, x):\n        return x * 10 + K\nc = C()"],
    "lru": ["import functools\n@functools.lru_cache\ndef sq(x):\n    return x * x",
            "import functools\n@functools.lru_cache\ndef sq(x):\n    return x * x + 1"],
    "run": ["%run prep.py"],
    "out": ["@asset()\ndef out() -> list:\n"
            "    return [h(2), scale(2), triple(2), c.f(1), sq(3), prep(1), sorted(S)]"],
}
# a cell whose names are baked by later cells: those run again after it (run all below)
BAKED_BY = {"make": ["scale"], "cls": [], "K": [], "part": []}
PREP = ["def prep(x):\n    return x + 100\n", "def prep(x):\n    return x + 200\n"]


def _program(cells: dict[str, str], prep: str) -> str:
    """The cells as a plain script (``%run prep.py`` as the script's text run in place)."""
    body = [prep if cells[s] == "%run prep.py" else cells[s] for s in SLOTS]
    return "from barca import asset\n" + "\n".join(body) + "\nprint(repr(out()))\n"


def _fresh(cells: dict[str, str], prep: str, cwd: Path) -> object:
    """The value the current cells give, run from scratch in a new interpreter."""
    got = subprocess.run([sys.executable, "-c", _program(cells, prep)], cwd=cwd,
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    return ast.literal_eval(got.stdout.strip().splitlines()[-1])


class Kernel:
    def __init__(self, cwd: Path) -> None:
        from jupyter_client.manager import start_new_kernel
        self.km, self.kc = start_new_kernel(kernel_name="python3", cwd=str(cwd))

    def run(self, code: str) -> str:
        out: list[str] = []

        def hook(msg: dict) -> None:
            c = msg["content"]
            if msg["msg_type"] == "stream" and c["name"] == "stdout":
                out.append(c["text"])
            elif msg["msg_type"] == "error":
                out.append(f"ERROR {c['ename']}: {c['evalue']}")

        self.kc.execute_interactive(code, output_hook=hook, timeout=120)
        text = "".join(out)
        assert "ERROR" not in text, (code, text)
        return text

    def get(self) -> object:
        text = self.run("_v = %barca get out\nprint('ORACLE', repr(_v))")
        line = next(ln for ln in text.splitlines() if ln.startswith("ORACLE "))
        return ast.literal_eval(line[len("ORACLE "):])

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def _start(project: Project, cells: dict[str, str]) -> Kernel:
    k = Kernel(project.path)
    k.run("%load_ext barca\nfrom barca import asset")
    for s in SLOTS:
        k.run(cells[s])
    return k


@pytest.mark.parametrize("seed", [1, 2])
def test_random_cell_edits_against_a_fresh_run(project: Project, seed: int) -> None:
    rng = random.Random(seed)
    cells = {s: v[0] for s, v in SLOTS.items()}
    prep = PREP[0]
    project.write("prep.py", prep)
    kernel = _start(project, cells)
    try:
        for step in range(12):
            op = rng.choice(["edit", "edit", "edit", "prep", "again", "restart"])
            if op == "edit":
                slot = rng.choice([s for s in SLOTS if len(SLOTS[s]) > 1])
                cells[slot] = rng.choice(SLOTS[slot])
                kernel.run(cells[slot])
                for later in BAKED_BY.get(slot, []):
                    kernel.run(cells[later])
            elif op == "prep":   # prep.py edited, and %run again
                prep = rng.choice(PREP)
                project.write("prep.py", prep)
                kernel.run("%run prep.py")
            elif op == "again":  # out of order: a later cell run again on its own
                kernel.run(cells[rng.choice(["out", "scale", "cls", "lru"])])
            else:
                kernel.close()
                kernel = _start(project, cells)
            assert kernel.get() == _fresh(cells, prep, project.path), (seed, step, op, cells)
    finally:
        kernel.close()
