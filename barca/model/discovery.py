"""Finds pipeline files and builds a static (``ast``) model of every node they declare.
Nothing here imports user code: the model is read from the source text."""
from __future__ import annotations

import os

from barca.core.errors import UsageError, did_you_mean
from barca.core.record import Fields
from barca.core.root import find_root  # noqa: F401 - re-exported: the model finds its root
from barca.core.types import TYPE_CHECKING, NodeId  # (typing: not at run time, #31)
from barca.model.modelcache import ModelCache
from barca.model.refs import DimSpec, InputRef  # noqa: F401 - re-exported: the model's parts

if TYPE_CHECKING:  # ast and the argument readers load where a file is parsed: a cached model
    import ast  # (a command whose files did not change) needs neither; nor pathlib, re
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any

KINDS = ("asset", "sensor", "task")
PSEUDO_ABSPATH = "<notebook>"   # the abspath of the file model holding a notebook's own nodes
MARKERS = ("partitions", "partitions_from", "collect")
SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", "tests", "test", "venv", "env",
             "build", "dist"}
_IMPORTS_BARCA = r"^\s*(from\s+barca[\s.]|import\s+barca\b)"  # (re.M: model.sniff)


class _Model(Fields):
    """A discovery model, pickled for the model cache without its syntax tree (``_TREE``)."""
    __slots__: tuple[str, ...] = ()
    _TREE = ""

    def __getstate__(self) -> Any:  # (no dict, the slots' values: set in C when unpickled)
        return None, {k: None if k == self._TREE else getattr(self, k) for k in self.__slots__}


class NodeModel(_Model):
    _TREE = "_fn"
    __slots__ = ("id", "file", "abspath", "function", "kind", "line", "_fn", "params", "inputs",
                 "dims", "serializer", "freshness", "env", "retries", "retry_backoff", "timeout",
                 "description", "weight", "schedule", "max_failures", "unused", "env_reads",
                 "counted_decorator", "counted_names", "sinks", "var_kw", "_file", "readers")

    def __init__(self, id: NodeId, file: str, abspath: str, function: str, kind: str, line: int,
                 fn: ast.FunctionDef | ast.AsyncFunctionDef, params: list[tuple[str, bool]],
                 inputs: list[InputRef] | None = None, dims: list[DimSpec] | None = None,
                 serializer: str | None = None, freshness: str = "always",
                 env: list[str] | None = None, retries: int = 0, timeout: float | None = None,
                 description: str | None = None, counted_decorator: list[str] | None = None,
                 counted_names: set[str] | None = None, sinks: list[str] | None = None) -> None:
        # a None list/set argument: a fresh empty one
        from barca.model import arguments  # the decorator readers: a parse only
        self.id = id
        self.file = file          # path relative to the project root, "/"-separated
        self.abspath = abspath
        self.function = function
        self.kind = kind
        self.line = line
        self._fn: ast.FunctionDef | ast.AsyncFunctionDef | None = fn
        self._file: FileModel | None = None   # where ``fn`` is found again (cached models)
        self.var_kw = fn is not None and fn.args.kwarg is not None  # takes **kwargs
        self.params = params      # (name, has_default)
        self.inputs = [] if inputs is None else inputs
        self.dims = [] if dims is None else dims
        self.serializer = serializer
        self.freshness = freshness
        self.env = [] if env is None else env
        self.retries = retries
        self.retry_backoff = 0.0  # seconds x failed attempt k waited before the next one
        self.weight = 1           # how much of the capacity the step takes while it runs
        self.schedule: str | None = None  # freshness=Schedule(cron): the cron as written
        self.max_failures = arguments.MAX_FAILURES
        self.unused: list[str] = []       # barca.model.lint's findings, read with the file
        self.env_reads: list[str] = []
        self.timeout = timeout
        self.description = description
        # dumps that enter the hash, and the names those counted arguments use
        self.counted_decorator = [] if counted_decorator is None else counted_decorator
        self.counted_names = set() if counted_names is None else counted_names
        self.sinks = [] if sinks is None else sinks
        self.readers: dict[str, str] = {}  # parameter -> reader its annotation asks for

    def __getstate__(self) -> tuple[Any, ...]:  # (restored by __setstate__, below)
        # an empty list, set or dict field: one object shared by every node of the pickle,
        # made once when it is read (nothing changes a node's fields in place once it is
        # parsed: a kept graph of 500 nodes made ~4,000 empty containers, ~0.3 MB)
        return tuple(None if k == "_fn" else _shared(getattr(self, k))
                     for k in NodeModel.__slots__)

    def __setstate__(self, st: tuple[Any, ...]) -> None:
        # one assignment: a cached command unpickles every node (tests/test_wide_cached.py)
        (self.id, self.file, self.abspath, self.function, self.kind, self.line, self._fn,
         self.params, self.inputs, self.dims, self.serializer, self.freshness, self.env,
         self.retries, self.retry_backoff, self.timeout, self.description, self.weight,
         self.schedule, self.max_failures, self.unused, self.env_reads, self.counted_decorator,
         self.counted_names, self.sinks, self.var_kw, self._file, self.readers) = st

    @property
    def partitioned(self) -> bool:
        return bool(self.dims)

    @property
    def fn(self) -> ast.FunctionDef | ast.AsyncFunctionDef:
        """The function's syntax tree (found again in its file's tree for a cached model)."""
        import ast
        if self._fn is None:
            assert self._file is not None
            self._fn = next(s for s in self._file.tree.body
                            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                            and s.name == self.function and s.lineno == self.line)
        return self._fn


_EMPTY: dict[type, Any] = {list: [], set: set(), dict: {}}


def _shared(value: Any) -> Any:
    """The one empty container of its type for an empty list, set or dict; else the value."""
    return value if value or type(value) not in _EMPTY else _EMPTY[type(value)]


class FileModel(_Model):
    _TREE = "_tree"
    __slots__ = ("path", "abspath", "source", "_tree", "module", "imports", "barca_names",
                 "barca_modules", "nodes", "groups")

    def __init__(self, path: str, abspath: str, source: str, tree: ast.Module, module: str,
                 imports: dict[str, tuple[str, str | None]], barca_names: dict[str, str],
                 barca_modules: set[str], nodes: list[NodeModel] | None = None) -> None:
        self.path = path
        self.abspath = abspath
        self.source = source
        self._tree: ast.Module | None = tree
        self.module = module              # import name used by workers
        self.imports = imports            # local name -> (module, attr or None)
        self.barca_names = barca_names    # local name -> barca attribute ("asset", ...)
        self.barca_modules = barca_modules  # local names bound to the barca module
        self.nodes = [] if nodes is None else nodes
        self.groups: list[Any] = []       # its group() statements (barca.model.groups)

    @property
    def tree(self) -> ast.Module:
        """The file's syntax tree: parsed again on first use for a cached model."""
        import ast
        if self._tree is None:
            self._tree = ast.parse(self.source, filename=self.path)
        return self._tree


def find_files(root: str | Path, include: Sequence[str] = (), exclude: Sequence[str] = ()
               ) -> list[str]:
    """Every ``.py`` file under ``root`` that imports barca (hidden dirs, venvs, tests skipped),
    kept to the ``include`` patterns and without the ``exclude`` ones (``Settings``: barca.toml's
    ``[discovery]``; globs on the path relative to the root: ``pipelines/*.py``, ``scratch/**``).
    Their paths as str (no pathlib on a cached command's path, #31 item 2)."""
    from barca.model.sniff import imports_barca  # (_IMPORTS_BARCA, without re)
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIP_DIRS
                             and not os.path.exists(os.path.join(dirpath, d, "pyvenv.cfg")))
        for name in sorted(filenames):
            if name.endswith(".py") and not name.startswith("test_"):
                p = os.path.join(dirpath, name)
                try:
                    with open(p, encoding="utf-8", errors="replace") as f:
                        text = f.read()
                except OSError:
                    continue
                if imports_barca(text):
                    found.append(p)
    if include or exclude:
        from fnmatch import fnmatchcase

        def rel(p: str) -> str:
            return os.path.relpath(p, root).replace(os.sep, "/")
        found = [p for p in found
                 if (not include or any(fnmatchcase(rel(p), g) for g in include))
                 and not any(fnmatchcase(rel(p), g) for g in exclude)]
    return found


def relative_id(path: str | Path, root: str | Path) -> str:
    rel = os.path.relpath(os.path.realpath(path), root)
    return rel if os.sep == "/" else rel.replace(os.sep, "/")


def module_name(rel: str) -> str:
    """Import name for a pipeline file: ``pipeline.py`` -> ``pipeline``, ``a/b.py`` -> ``a.b``
    when ``a`` is a package, else the file's stem."""
    parts = rel[:-3].split("/") if rel.endswith(".py") else rel.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(p for p in parts if p not in ("", ".."))


def syntax_error(path: str, exc: SyntaxError) -> UsageError:
    line = (exc.text or "").rstrip("\n")
    caret = " " * max((exc.offset or 1) - 1, 0) + "^"
    return UsageError(
        f"{path}:{exc.lineno}:{exc.offset}: SyntaxError: {exc.msg}\n    {line}\n    {caret}",
        f"Fix the syntax error in {path}; nothing was run and the cache is kept.",
        file=path, line=exc.lineno, column=exc.offset)


def parse_file(path: str | Path, root: str | Path) -> FileModel:
    rel = relative_id(path, root)
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except FileNotFoundError:
        raise UsageError(f"File not found: {path}",
                         "Pass the path of a pipeline file, relative to the current directory."
                         ) from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{rel}: not UTF-8 text ({exc.reason})",
                         "Save the file as UTF-8.") from None
    abspath = os.path.realpath(path)
    cache = ModelCache(root, rel, abspath, source)
    kept = cache.get(FileModel)
    if kept is not None:
        return kept
    import ast  # a file to parse (not the cached model): only now
    try:
        tree = ast.parse(source, filename=rel)
    except SyntaxError as exc:
        raise syntax_error(rel, exc) from None
    fm = FileModel(rel, abspath, source, tree, module_name(rel), {}, {}, set())
    for stmt in _module_level(tree.body):
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                local = a.asname or a.name.split(".")[0]
                if a.name == "barca":
                    fm.barca_modules.add(local)
                fm.imports[local] = (a.name if a.asname else a.name.split(".")[0], None)
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
            for a in stmt.names:
                local = a.asname or a.name
                if stmt.module == "barca" and a.name == "*":  # every decorator, as Python does
                    fm.barca_names.update((n, n) for n in _star_names())
                    continue
                if stmt.module == "barca":
                    fm.barca_names[local] = a.name
                fm.imports[local] = (stmt.module, a.name)
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node = _node_from_function(fm, stmt)
            if node is not None:
                node._file = fm
                fm.nodes.append(node)
    from barca.model import lint  # what plan warnings say, kept with the cached model
    funcs = lint.file_functions(fm)  # once per file: per node, 500 nodes cost 500 x 500
    for node in fm.nodes:
        node.unused = lint.unused_inputs(node)
        node.env_reads = sorted(lint.env_reads(node, fm, funcs))
    if "group" in fm.barca_names.values() or fm.barca_modules:
        from barca.model import groups
        fm.groups = groups.read(fm.path, tree.body,
                                lambda e: _barca_attr(fm, e) == "group")
    cache.put(fm)
    return fm


def _star_names() -> list[str]:
    """What ``from barca import *`` binds that a pipeline can say: the public names defined
    by the decorators module (the package re-exports them)."""
    from barca.model import decorators
    return [n for n, v in vars(decorators).items() if not n.startswith("_")
            and getattr(v, "__module__", None) == decorators.__name__]


def _module_level(body: list[ast.stmt]) -> Any:
    """Module-level statements, including those inside module-level if/try/with blocks (not
    function or class bodies: walking those costs a lot in big pipeline files)."""
    import ast
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for field in ("body", "orelse", "finalbody"):
                yield from _module_level(getattr(stmt, field, []) or [])
            for handler in getattr(stmt, "handlers", []) or []:
                yield from _module_level(handler.body)


def _barca_attr(fm: FileModel, expr: ast.expr) -> str | None:
    """The barca attribute an expression names (``asset``, ``partitions``...), if any."""
    import ast
    if isinstance(expr, ast.Name):
        return fm.barca_names.get(expr.id)
    if (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)
            and expr.value.id in fm.barca_modules):
        return expr.attr
    return None


def _fail(fm: FileModel, line: int, message: str, remediation: str) -> UsageError:
    return UsageError(f"{fm.path}:{line}: {message}", remediation, file=fm.path, line=line)


def _node_from_function(fm: FileModel, fn: ast.FunctionDef | ast.AsyncFunctionDef
                        ) -> NodeModel | None:
    import ast
    kind = None
    call: ast.Call | None = None
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        attr = _barca_attr(fm, target)
        if attr in KINDS:
            if kind is not None:
                raise _fail(fm, dec.lineno, f"'{fn.name}' has two barca decorators "
                            f"(@{kind} and @{attr})", "Keep exactly one of @asset, @sensor, @task.")
            kind = attr
            call = dec if isinstance(dec, ast.Call) else None
    if kind is None:
        return None
    args = fn.args
    positional = args.posonlyargs + args.args
    defaults = [False] * (len(positional) - len(args.defaults)) + [True] * len(args.defaults)
    params = list(zip([a.arg for a in positional], defaults, strict=False))
    params += [(a.arg, d is not None)
               for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=False)]
    node = NodeModel(id=NodeId(f"{fm.path}:{fn.name}"), file=fm.path, abspath=fm.abspath,
                     function=fn.name, kind=kind, line=fn.lineno, fn=fn, params=params,
                     freshness="manual" if kind == "sensor" else "always")
    from barca.model.readers import readers  # only where a file is parsed (not a cached model)
    node.readers = readers(fn, fm.imports)
    from barca.model.decorators import ASSET_ARGS, SENSOR_ARGS  # (a file parsed: not cached)
    accepted = SENSOR_ARGS if kind == "sensor" else ASSET_ARGS
    if call is not None:
        if call.args:
            raise _fail(fm, call.lineno, f"@{kind} takes keyword arguments only",
                        f"Write @{kind}(inputs=..., ...). Accepted: {', '.join(accepted)}.")
        for kw in call.keywords:
            if kw.arg is None:
                raise _fail(fm, call.lineno, f"@{kind} does not accept **kwargs",
                            f"Write each argument out. Accepted: {', '.join(accepted)}.")
            if kw.arg not in accepted:
                hint = did_you_mean(kw.arg, accepted)
                extra = (" Sensors observe outside data and take no inputs."
                         if kind == "sensor" and kw.arg == "inputs" else "")
                raise _fail(fm, kw.value.lineno,
                            f"@{kind} got an unexpected argument '{kw.arg}'.{extra}",
                            f"Accepted arguments: {', '.join(accepted)}.{hint}")
            _read_argument(fm, node, kw.arg, kw.value)
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        attr = _barca_attr(fm, target)
        if attr in KINDS or attr == "unsafe":  # @unsafe marks, never changes: not counted
            continue
        if attr == "sink":
            if (not isinstance(dec, ast.Call) or len(dec.args) != 1
                    or not isinstance(dec.args[0], ast.Constant)
                    or not isinstance(dec.args[0].value, str)):
                raise _fail(fm, dec.lineno, "@sink takes one path as a string",
                            'Write @sink("out.parquet") or @sink("out/").')
            node.sinks.append(dec.args[0].value)
        node.counted_decorator.append(ast.dump(dec, include_attributes=False))
        node.counted_names |= _names(dec)
    return node


def _names(tree: ast.AST) -> set[str]:
    import ast
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _ref_text(expr: ast.expr) -> str | None:
    import ast
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        base = _ref_text(expr.value)
        return f"{base}.{expr.attr}" if base else None
    return None


def _marker(fm: FileModel, expr: ast.expr) -> tuple[str, ast.expr] | None:
    """``partitions(x)`` -> ("partitions", x); validates exactly one positional argument."""
    import ast
    if isinstance(expr, ast.Call):
        attr = _barca_attr(fm, expr.func)
        if attr in MARKERS:
            if len(expr.args) != 1 or expr.keywords:
                raise _fail(fm, expr.lineno, f"{attr}() takes exactly one positional argument",
                            {"partitions": 'Write partitions(["a", "b"]).',
                             "partitions_from": "Write partitions_from(upstream_asset).",
                             "collect": "Write collect(partitioned_asset)."}[attr])
            return attr, expr.args[0]
    return None


def _read_argument(fm: FileModel, node: NodeModel, name: str, value: ast.expr) -> None:
    import ast

    from barca.model import arguments
    line = value.lineno
    if name in arguments.HANDLED:
        arguments.read(fm.path, node, name, value)
    elif name == "inputs":
        if not isinstance(value, ast.Dict):
            raise _fail(fm, line, "inputs= must be a dict literal",
                        'Write inputs={"param": upstream_function}.')
        for k, v in zip(value.keys, value.values, strict=False):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                raise _fail(fm, line, "inputs= keys must be parameter names as strings",
                            'Write inputs={"param": upstream_function}.')
            marker = _marker(fm, v)
            is_collect = False
            if marker is not None:
                if marker[0] != "collect":
                    raise _fail(fm, v.lineno, f"{marker[0]}() belongs in partitions=, "
                                f"not in inputs=",
                                'Write partitions={"dim": ' + marker[0] + '(...)}.')
                is_collect, v = True, marker[1]
            by_id = arguments.asset_ref(fm.path, _barca_attr, fm, v)
            ref = by_id if by_id is not None else _ref_text(v)
            if ref is None:
                raise _fail(fm, v.lineno, f"inputs['{k.value}'] must name an upstream function",
                            'Write inputs={"param": upstream_function} or collect(upstream).')
            node.inputs.append(InputRef(k.value, ref, is_collect, v.lineno,
                                        by_id=by_id is not None))
        node.counted_names |= set()
    elif name == "partitions":
        if not isinstance(value, ast.Dict):
            raise _fail(fm, line, "partitions= must be a dict literal",
                        'Write partitions={"dimension": partitions([...])}.')
        for k, v in zip(value.keys, value.values, strict=False):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)) or not k.value:
                raise _fail(fm, line, "partitions= keys must be dimension names as strings",
                            'Write partitions={"region": partitions(["emea", "amer"])}.')
            marker = _marker(fm, v)
            if marker is None or marker[0] == "collect":
                raise _fail(fm, v.lineno, f"partitions['{k.value}'] must be partitions([...]) "
                            "or partitions_from(upstream)",
                            'Write partitions={"' + k.value + '": partitions(["a", "b"])}.')
            if marker[0] == "partitions":
                dim = DimSpec(k.value, "list", v.lineno)
                try:
                    dim.keys = ast.literal_eval(marker[1])
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    dim.expr = (ast.get_source_segment(fm.source, marker[1])
                                or ast.unparse(marker[1]))
            else:
                ref = _ref_text(marker[1])
                if ref is None:
                    raise _fail(fm, v.lineno, "partitions_from() must name an upstream function",
                                "Write partitions_from(upstream_function).")
                dim = DimSpec(k.value, "from", v.lineno, source_ref=ref)
            node.dims.append(dim)
    elif name == "serializer":
        if isinstance(value, ast.Constant) and value.value in ("json", "pickle", "parquet", "csv"):
            node.serializer = value.value
        elif isinstance(value, ast.Constant):
            raise _fail(fm, line, f"serializer={value.value!r} is not a known format",
                        "Use serializer=\"json\", \"pickle\", \"parquet\" or \"csv\".")
        else:
            node.serializer = "expr"
        node.counted_decorator.append("serializer=" + ast.dump(value, include_attributes=False))
        node.counted_names |= _names(value)
    elif name == "freshness":
        text = ast.unparse(value)
        low = text.lower().strip("'\"")
        if low.startswith(("always", "barca.always")):
            node.freshness = "always"
        elif low.startswith(("manual", "barca.manual")):
            node.freshness = "manual"
        elif arguments.schedule_call(value):
            arguments.schedule(fm.path, node, value)
            node.freshness = "schedule"
        elif "schedule" in low:
            node.freshness = "schedule"
        else:
            raise _fail(fm, line, f"freshness={text} is not a freshness",
                        "Use Always, Manual or Schedule(\"<cron>\") from barca.")
    elif name == "env":  # a list of string literals: not a tuple, a string or a variable
        if not (isinstance(value, ast.List) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts)):
            raise _fail(fm, line, "env= must be a literal list of variable names",
                        'Write env=["API_TOKEN"].')
        node.env = sorted({str(e.value) for e in value.elts if isinstance(e, ast.Constant)})
    elif name in ("retries", "timeout_seconds", "retry_backoff"):
        try:
            num = ast.literal_eval(value)
        except ValueError:
            num = None
        if isinstance(num, bool) or not isinstance(num, (int, float)) or num < 0:
            raise _fail(fm, line, f"{name}= must be a non-negative number",
                        f"Write {name}=3.")
        if name == "retries":
            node.retries = int(num)
        elif name == "retry_backoff":  # barca 0.30 takes any value here; a typo is caught
            node.retry_backoff = float(num)
        else:
            node.timeout = float(num)
    elif name == "description":
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            node.description = value.value
    elif name == "name":
        if not (isinstance(value, ast.Constant) and isinstance(value.value, str)
                and value.value.isidentifier()):
            raise _fail(fm, line, "name= must be a string that is a valid identifier",
                        'Write name="daily_prices".')
        node.id = NodeId(f"{fm.path}:{value.value}")
