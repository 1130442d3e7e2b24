"""Whether this process is a kernel or a REPL (a notebook's own cells are then a pipeline): asked
by every command given no file, so it imports nothing (``barca.model.notebook``, which reads the
cells, loads ``ast``, ``inspect``, ``typing`` and ``pathlib``: only in a kernel)."""
from __future__ import annotations

import sys


def interactive() -> bool:
    """True in a kernel or REPL, where ``__main__`` is not a file. ``%run -i script.py`` sets
    ``__file__`` in the notebook's namespace: IPython's own user module is still the notebook."""
    main = sys.modules.get("__main__")
    if main is None:
        return False
    if not getattr(main, "__file__", None):
        return True
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "user_module", None) is main
