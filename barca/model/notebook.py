"""Nodes defined in notebook cells (the kernel's ``__main__``): their static model, their
definition hash from the live namespace, and the function to ship to workers by value.

A notebook node's id is ``<notebook stem>:<function>`` when the kernel knows the notebook's
path, else ``__notebook-<kernel>__:<function>`` (``__notebook__`` outside a Jupyter kernel;
see ``notebook_stem``). Its definition hash is its normalised source plus the
cone of notebook-defined names it uses (functions and classes by source, other values by
value), never a cell's temp-file name or execution count: re-running the cells, or all of them
after a kernel restart, is a cache hit.
"""
from __future__ import annotations

import ast
import inspect
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from barca.model import decorators
from barca.model.discovery import PSEUDO_ABSPATH
from barca.model.kernel import interactive  # noqa: F401 - re-exported (magics, widget)


def namespace() -> dict[str, Any]:
    main = sys.modules.get("__main__")
    return vars(main) if main is not None else {}


def notebook_stem() -> str:
    """The notebook's file stem, when the kernel knows its path. A kernel that is not told
    (nbclient, nbconvert, papermill) is one notebook: ``__notebook-<kernel id>__``, so two
    such notebooks never share ids. A new kernel of the same notebook takes the results of
    the very same definitions (``Session``'s adoption, as for a rename): re-runs stay cached.
    A terminal IPython, no kernel: ``__notebook__``."""
    for value in (namespace().get("__session__"), os.environ.get("JPY_SESSION_NAME"),
                  namespace().get("__vsc_ipynb_file__")):
        if isinstance(value, str) and value.endswith(".ipynb"):
            return Path(value).stem
    kernel = _kernel_id()
    return f"__notebook-{kernel}__" if kernel else "__notebook__"


def _kernel_id() -> str:
    """Eight hex characters naming the running Jupyter kernel: its id's start (from its
    connection file, ``kernel-<id>.json``), else a digest of that file's path; "" outside a
    kernel."""
    app = getattr(sys.modules.get("ipykernel.kernelapp"), "IPKernelApp", None)
    if app is None or not app.initialized():
        return ""
    path = str(getattr(app.instance(), "connection_file", "") or "")
    name = Path(path).stem
    if name.startswith("kernel-"):  # Jupyter's own: the kernel's id, as its UI shows it
        return "".join(c for c in name[7:] if c in "0123456789abcdef")[:8]
    import hashlib  # nbclient's temp file: named after it
    return hashlib.sha256(path.encode()).hexdigest()[:8] if path else ""


def cells_stamp() -> tuple[Any, ...]:
    """What changes when a cell runs: the kernel's execution count and which function each
    notebook node is (cheap; a cell may change a value a node reads without redefining it)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    count = getattr(shell, "execution_count", None)
    return count, tuple(sorted((n, id(f)) for n, f in list(decorators.NOTEBOOK.items())))


def current_functions() -> dict[str, Callable[..., Any]]:
    """Decorated functions defined in ``__main__`` that its namespace still holds (the last
    definition wins; a function deleted from the namespace is no node any more)."""
    ns = namespace()
    out = {}
    for name, fn in list(decorators.NOTEBOOK.items()):
        if ns.get(name) is fn:
            out[name] = fn
        elif name in ns and not callable(ns[name]):
            # ``raw = %barca get raw``: the name now holds the asset's value; the asset stays
            out[name] = fn
            _shadowed(name)
        else:
            decorators.NOTEBOOK.pop(name, None)
    return out


_SAID: set[str] = set()


def _shadowed(name: str) -> None:
    """Say once per name that a value took an asset's name in the notebook."""
    if name not in _SAID:
        _SAID.add(name)
        import warnings
        warnings.warn(f"'{name}' in the notebook now names a value, not the asset {name}: the "
                      f"asset is kept, but a cell that uses {name} as an input (inputs=..., "
                      f"partitions_from) reads the value. Assign the value to another name, "
                      f"e.g. {name}_value = %barca get {name}.", UserWarning, stacklevel=3)


def _source(obj: Any) -> str:
    return textwrap.dedent(inspect.getsource(obj))


def file_model(root: str | Path) -> Any:
    """A FileModel holding every notebook node, parsed from each function's cell source."""
    from barca.model.discovery import FileModel, UsageError, _node_from_function

    fns = current_functions()
    if not fns:
        return None
    ns = namespace()
    barca_names: dict[str, str] = {}
    barca_modules: set[str] = set()
    public = {getattr(decorators, n): n for n in ("asset", "sensor", "task", "sink", "partitions",
                                                   "partitions_from", "collect")}
    imports: dict[str, tuple[str, str | None]] = {}
    for name, value in ns.items():
        if isinstance(value, ModuleType) and value.__name__ == "barca":
            barca_modules.add(name)
        elif isinstance(getattr(value, "__barca__", None), dict) and \
                getattr(value, "__module__", "__main__") != "__main__":
            # a pipeline file's asset imported into the notebook: an input it may name
            imports[name] = (value.__module__, value.__name__)
        else:
            try:
                if value in public:
                    barca_names[name] = public[value]
            except TypeError:  # unhashable
                continue
    stem = notebook_stem()
    body: list[ast.stmt] = []
    sources: list[str] = []
    for name, fn in fns.items():
        try:
            src = _source(fn)
            tree = ast.parse(src)
        except (OSError, TypeError, SyntaxError) as exc:
            raise UsageError(f"cannot read the source of notebook function '{name}' ({exc})",
                             "Define it in a cell of its own and run the cell again.") from None
        body.extend(tree.body)
        sources.append(src)
    module = ast.Module(body=body, type_ignores=[])
    fm = FileModel(stem, PSEUDO_ABSPATH, "\n".join(sources), module, "__main__", imports,
                   barca_names, barca_modules)
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node = _node_from_function(fm, stmt)
            if node is not None:
                fm.nodes.append(node)
    return fm


def is_notebook_id(asset: str) -> bool:
    """Whether an asset id is a notebook node's (``<stem>:<function>``, no file path)."""
    stem = asset.rsplit(":", 1)[0] if ":" in asset else ""
    return bool(stem) and not stem.endswith(".py") and "/" not in stem and ":" not in stem


def function_for(name: str) -> Callable[..., Any] | None:
    return current_functions().get(name)


def ship(fn: Callable[..., Any]) -> bytes:
    """The function by value, for a worker process that never saw the notebook: with the
    globals it reads through ``globals()['K']`` (cloudpickle ships only the names its code
    names), and ``functools.lru_cache`` helpers of the notebook rebuilt from the function they
    wrap (pickled by name, they would not exist in the worker)."""
    import functools
    import io

    import cloudpickle

    class Shipper(cloudpickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, functools._lru_cache_wrapper) and \
                    getattr(obj, "__module__", None) == "__main__":
                p = obj.cache_parameters()
                return rebuild_lru, (obj.__wrapped__, p["maxsize"], p["typed"])
            return super().reducer_override(obj)

    extra: dict[str, Any] = {}
    try:
        from barca.model.scope import globals_reads
        names, _ = globals_reads(ast.parse(_source(fn)))
        scope = getattr(fn, "__globals__", {})
        extra = {n: scope[n] for n in sorted(names) if n in scope}
    except (OSError, TypeError, SyntaxError):
        pass
    try:
        buf = io.BytesIO()
        Shipper(buf, protocol=5).dump(_Shipped(fn, extra) if extra else fn)
        import pickle
        # the kernel's own import folders first (``sys.path.insert(0, '../src')``): the worker
        # imports the notebook's modules from where the kernel did, whatever its own folder
        return pickle.dumps(_Loaded(kernel_paths(), buf.getvalue()), protocol=5)
    except Exception as exc:
        from barca.core.errors import UsageError
        raise UsageError(f"cannot send notebook function '{fn.__name__}' to a worker process: "
                         f"{type(exc).__name__}: {exc}",
                         "Keep what the function uses picklable (no open files, locks or "
                         "sockets in notebook globals it reads), or move it to a .py file."
                         ) from None


def kernel_paths() -> list[str]:
    """The kernel's ``sys.path`` folders that hold the user's code (absolute; not the standard
    library or installed packages)."""
    import sysconfig
    skip = [os.path.realpath(p) for k in ("stdlib", "platstdlib", "purelib", "platlib")
            if (p := sysconfig.get_paths().get(k))]
    out: list[str] = []
    for entry in sys.path:
        real = os.path.realpath(entry or os.getcwd())
        if not os.path.isdir(real) or real in out or "site-packages" in real \
                or "dist-packages" in real or any(real == b or real.startswith(b + os.sep)
                                                  for b in skip):
            continue
        out.append(real)
    return out


class _Loaded:
    """A shipped function with the import folders it needs, set before it is unpickled."""

    def __init__(self, paths: list[str], payload: bytes) -> None:
        self.paths, self.payload = paths, payload

    def __reduce__(self) -> tuple[Any, ...]:
        return load_shipped, (self.paths, self.payload)


def load_shipped(paths: list[str], payload: bytes) -> Callable[..., Any]:
    """(In the worker) put the kernel's import folders on ``sys.path`` (after the root, which
    the worker put first), then load the function."""
    import cloudpickle
    for p in reversed(paths):
        if p not in sys.path:
            sys.path.insert(1, p)
    return cloudpickle.loads(payload)


class _Shipped:
    """A function and globals it reads that its code does not name, pickled together."""

    def __init__(self, fn: Callable[..., Any], extra: dict[str, Any]) -> None:
        self.fn, self.extra = fn, extra

    def __reduce__(self) -> tuple[Any, ...]:
        return with_globals, (self.fn, self.extra)


def with_globals(fn: Callable[..., Any], extra: dict[str, Any]) -> Callable[..., Any]:
    """(In the worker) ``fn`` with ``extra`` among its globals."""
    fn.__globals__.update(extra)
    return fn


def rebuild_lru(fn: Callable[..., Any], maxsize: int | None, typed: bool) -> Callable[..., Any]:
    """(In the worker) a notebook's ``lru_cache`` helper, around the function it wraps."""
    import functools
    return functools.lru_cache(maxsize=maxsize, typed=typed)(fn)
