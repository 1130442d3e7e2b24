"""Loaded by every kernel of an environment where barca's Jupyter support is installed
(``etc/ipython/ipython_kernel_config.json``). Cheap and guarded: it only registers the magics,
and a broken barca never breaks the kernel."""
from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    try:
        from barca.faces.jupyter.magics import load_ipython_extension as load
        load(ipython)
    except Exception as exc:  # pragma: no cover - only when barca itself is broken
        import sys
        print(f"barca: the %barca magic is unavailable ({type(exc).__name__}: {exc})",
              file=sys.stderr)
