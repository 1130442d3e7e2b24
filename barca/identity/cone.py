"""The dependency cone of a step: every definition it uses, followed statically (``ast``; user
code is never imported) through the project's own modules, as part name -> short digest.

Parts are ``helper:<file>:<name>`` (one module-level name: every statement that binds or
changes it, see barca.identity.effects), ``module:<file>`` (a whole module, where static
analysis cannot tell), ``path:<folder>`` (a folder the pipeline puts on ``sys.path``) and
``untracked:<module>`` (an import that resolves nowhere barca can see). Resolution
follows Python's import system as a worker sees it: ``sys.path`` starts with the pipeline
file's directory, then the project root. Anything found elsewhere (the standard library,
installed packages, ``PYTHONPATH``) is not the project's and is never followed.
"""
from __future__ import annotations

import ast
import builtins
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from barca.identity.digests import digest, in_project
from barca.identity.moduleindex import (
    Chain,
    Import,
    Module,
    Uses,
    analyse,
    dump,
    local_name,
)

_BUILTINS = frozenset(dir(builtins))
# Names every module has without binding them: using them never means "look elsewhere".
_IMPLICIT = frozenset({"__file__", "__name__", "__doc__", "__spec__", "__loader__",
                       "__package__", "__path__", "__cached__", "__builtins__",
                       "__annotations__", "__dict__", "__module__", "__qualname__",
                       "__class__"})
_NEVER_FOLLOW = frozenset({"barca"})     # barca itself is not the user's code


# ----------------------------------------------------------------------------- the project

class Project:
    """The project's modules, parsed once each (memoised for one command), and the cone walk."""

    def __init__(self, root: Path, trees: dict[str, tuple[str, ast.Module]] | None = None
                 ) -> None:
        self.root = Path(root).resolve()
        self._trees = dict(trees or {})           # abspath -> (source, tree) already parsed
        self._modules: dict[str, Module | None] = {}
        self._find: dict[tuple[Any, ...], Module | None] = {}
        self._uses: dict[tuple[int, int], Uses] = {}
        self._stmt_digest: dict[tuple[int, str], str] = {}
        self._pipelines: dict[str, tuple[Module | None, tuple[tuple[Path, ...], ...]]] = {}
        self.path_dirs: dict[str, list[Path]] = {}   # pipeline -> folders it puts on sys.path
        self._foreign: Any = None
        self._external: dict[str, bool] = {}

    # ------------------------------------------------------------ modules
    def _allowed(self, path: Path) -> bool:
        return in_project(self.root, path)

    def module_at(self, file: Path, pipeline: bool = False) -> Module | None:
        """The module whose source is ``file`` (a project file, or the pipeline file itself
        wherever it is), parsed once."""
        try:
            path = file.resolve()
        except OSError:
            return None
        key = str(path)
        if key in self._modules:
            return self._modules[key]
        mod = None
        if (pipeline or self._allowed(path)) and path.is_file():
            from barca.model.discovery import relative_id
            rel = relative_id(path, self.root)
            source, tree = self._trees.get(key) or self._parse(path, rel)
            dirs = (path.parent,) if path.name == "__init__.py" else ()
            mod = Module(rel, path, tree, dirs, source)
        self._modules[key] = mod
        return mod

    def _parse(self, path: Path, rel: str) -> tuple[str, ast.Module]:
        from barca.core.errors import UsageError
        from barca.model.discovery import syntax_error
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{rel}: cannot read it ({exc})",
                             f"Fix or remove {rel}; nothing was run and the cache is kept.",
                             file=rel) from None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return source, ast.parse(source, filename=rel)
        except SyntaxError as exc:
            raise syntax_error(rel, exc) from None

    def _namespace(self, dirs: list[Path]) -> Module:
        """A namespace package (kept, so that memo keys by ``id`` stay valid)."""
        key = ("ns", tuple(dirs))
        mod = self._find.get(key)
        if mod is None:
            from barca.model.discovery import relative_id
            mod = self._find[key] = Module(relative_id(dirs[0], self.root), None, None,
                                           tuple(dirs))
        return mod

    def _entry(self, dirs: Iterable[Path], name: str) -> Module | None:
        """``name`` looked up in each directory in turn, as Python's path finder does: a
        package, then a module file; directories without ``__init__`` make a namespace
        package only when no regular one is found."""
        portions: list[Path] = []
        for d in dirs:
            pkg = d / name
            if (pkg / "__init__.py").is_file():
                return self.module_at(pkg / "__init__.py")
            if (d / f"{name}.py").is_file():
                return self.module_at(d / f"{name}.py")
            if pkg.is_dir() and self._allowed(pkg.resolve()):
                portions.append(pkg.resolve())
        return self._namespace(portions) if portions else None

    def submodule(self, pkg: Module, name: str) -> Module | None:
        if not pkg.dirs or not name.isidentifier():
            return None
        key = ("sub", id(pkg), name)
        if key not in self._find:
            self._find[key] = self._entry(pkg.dirs, name)
        return self._find[key]

    def find(self, dotted: str, search: tuple[Path, ...]) -> Module | None:
        """An absolute import, resolved against the worker's ``sys.path`` head."""
        key = ("abs", dotted, search)
        if key in self._find:
            return self._find[key]
        parts = dotted.split(".")
        mod = None
        if parts[0] not in _NEVER_FOLLOW and all(p.isidentifier() for p in parts):
            mod = self._entry(search, parts[0]) or self._elsewhere(parts[0])
            for p in parts[1:]:
                if mod is None:
                    break
                mod = self.submodule(mod, p)
        self._find[key] = mod
        return mod

    def _elsewhere(self, name: str) -> Module | None:
        """A top-level module found past the worker's first entries (PYTHONPATH, a ``.pth``,
        an editable install): followed only when it lives in the project. Asks the import
        system's finders, which locate a top-level module without running any of it."""
        key = ("else", name)
        if key not in self._find:
            import importlib.util
            mod = None
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError, AttributeError):
                spec = None
            if spec is not None and spec.origin and spec.origin.endswith(".py"):
                mod = self.module_at(Path(spec.origin))
            elif spec is not None and spec.origin in (None, "namespace") and \
                    spec.submodule_search_locations:
                dirs = [Path(d).resolve() for d in spec.submodule_search_locations]
                dirs = [d for d in dirs if self._allowed(d)]
                mod = self._namespace(dirs) if dirs else None
            self._find[key] = mod
        return self._find[key]

    def import_source(self, ctx: Module, stmt: ast.ImportFrom, search: tuple[Path, ...]
                      ) -> Module | None:
        """The module ``from <module> import ...`` reads from, absolute or relative."""
        if stmt.level == 0:
            return self.find(stmt.module or "", search) if stmt.module else None
        if ctx.path is None:
            return None
        base = ctx.path.parent
        for _ in range(stmt.level - 1):
            base = base.parent
        if not self._allowed(base):
            return None
        mod = (self.module_at(base / "__init__.py") if (base / "__init__.py").is_file()
               else self._namespace([base]))
        for p in (stmt.module or "").split(".") if stmt.module else []:
            if mod is None:
                break
            mod = self.submodule(mod, p)
        return mod

    # ------------------------------------------------------------ memoised per definition
    def uses(self, mod: Module, stmt: ast.stmt) -> Uses:
        key = (id(mod), id(stmt))
        if key not in self._uses:
            self._uses[key] = analyse(stmt, lines=mod.lines)
        return self._uses[key]

    def binding_digest(self, mod: Module, name: str, stmts: list[ast.stmt]) -> str:
        key = (id(mod), name)
        if key not in self._stmt_digest:
            texts: list[str] = []
            for st in stmts:
                if isinstance(st, (ast.Import, ast.ImportFrom)):
                    # only the alias that binds this name: adding another import to the same
                    # line does not change what this name is
                    for a in st.names:
                        if local_name(st, a) == name:
                            texts.append(dump(ast.ImportFrom(st.module, [a], st.level))
                                         if isinstance(st, ast.ImportFrom)
                                         else dump(ast.Import([a])))
                else:
                    texts.append(dump(st))
            self._stmt_digest[key] = digest(*texts)
        return self._stmt_digest[key]

    # ------------------------------------------------------------ the cone of one step
    def lines(self, file: str) -> list[str] | None:
        """The source lines of a pipeline file (for ``analyse``)."""
        mod = self._pipeline(file)[0]
        return mod.lines if mod is not None else None

    def check_imports(self, file: str) -> None:
        """Parse every project module a pipeline file imports, transitively (any import, at
        any depth): one that does not parse stops the command before any step runs
        (``UsageError``, exit 2), as its worker could not import it."""
        mod, searches = self._pipeline(file)
        walk = _ConeSearch(self, searches)
        todo = [mod] if mod is not None else []
        seen: set[int] = set()
        while todo:
            m = todo.pop()
            if id(m) in seen or m.tree is None:
                continue
            seen.add(id(m))
            m.bindings  # noqa: B018 - scans the imports
            found: list[Module] = []
            for stmt in m.imports:
                if isinstance(stmt, ast.Import):
                    for a in stmt.names:
                        found += walk._find(a.name)
                    continue
                for src in walk._source(m, stmt):
                    found.append(src)
                    for a in stmt.names:
                        sub = self.submodule(src, a.name)
                        if sub is not None:
                            found.append(sub)
            for dotted in m.dynamic_imports:
                found += walk._find(dotted)
            todo += [f for f in found if id(f) not in seen]

    def _pipeline(self, file: str) -> tuple[Module | None, tuple[tuple[Path, ...], ...]]:
        key = file
        if key not in self._pipelines:
            real = Path(file).resolve()
            # A worker's sys.path starts with the pipeline's folder, then the root. A pipeline
            # inside a package is also resolved from the root alone (as `python -m pkg.mod`
            # would): where the two differ, both are followed.
            mod = self.module_at(real, pipeline=True)
            front: list[Path] = []
            back: list[Path] = []
            if (mod is not None and mod.tree is not None and mod.source is not None
                    and "sys.path" in mod.source):
                # a project folder the pipeline puts on sys.path is searched as the worker
                # will (one outside the project is not the project's: never followed)
                from barca.identity.syspath import sys_path_dirs
                front, back = (
                    [d for d in ds if self._allowed(d) and d.is_dir()]
                    for ds in sys_path_dirs(mod.tree, real, self.root))
            self.path_dirs[key] = [*front, *back]
            searches = [tuple(dict.fromkeys([*front, real.parent, self.root, *back]))]
            if (real.parent / "__init__.py").is_file() and real.parent != self.root:
                searches.append(tuple(dict.fromkeys([*front, self.root, *back])))
            self._pipelines[key] = (mod, tuple(searches))
        return self._pipelines[key]

    def cone(self, file: str, uses: Uses, exclude: str) -> dict[str, str]:
        mod, searches = self._pipeline(file)
        if mod is None:  # pragma: no cover - a pipeline file exists
            return {}
        walk = _ConeSearch(self, searches)
        walk.exclude = (id(mod), exclude)
        walk.add_uses(mod, uses)
        out = walk.run()
        for d in self.path_dirs.get(file, ()):
            # where imports resolve depends on these folders' listings (the definition
            # cache records them): a part names each
            out[f"path:{d.relative_to(self.root).as_posix()}"] = digest("sys.path")
        for dotted in walk.untracked:
            out[f"untracked:{dotted}"] = digest("untracked")
        return out

    def foreign(self, key: tuple[Any, str]) -> list[tuple[Module, str, Chain]]:
        """The names of other modules whose statements change ``key`` (barca.identity.foreign),
        over every module the pipelines import (``check_imports`` has parsed them all)."""
        if self._foreign is None:
            from barca.identity.foreign import foreign_index
            searches = list(dict.fromkeys(s for _, ss in self._pipelines.values() for s in ss))
            self._foreign = foreign_index(
                self, [m for m in self._modules.values() if m is not None], searches)
        return self._foreign.get(key, [])

    def parsed(self) -> list[str]:
        """Every project module parsed (the pipelines' import closure): a module among them
        may change a name of another when imported."""
        return sorted(m.rel for m in self._modules.values() if m is not None and m.path)

    def external(self, name: str) -> bool:
        """Whether a top-level module is found outside the project by this process's import
        system (the standard library, an installed package): not followed, not a warning."""
        if name not in self._external:
            import importlib.util
            try:
                self._external[name] = importlib.util.find_spec(name) is not None
            except (ImportError, ValueError, AttributeError):
                self._external[name] = True  # found, but not loadable here: not ours either
        return self._external[name]


class _ConeSearch:
    """One step's cone: a work list of what to follow, each item followed once (modules that
    import each other end the walk instead of looping)."""

    def __init__(self, project: Project, searches: tuple[tuple[Path, ...], ...]) -> None:
        self.p = project
        self.searches = searches
        self.out: dict[str, str] = {}
        self.done: set[tuple[Any, ...]] = set()
        self.todo: list[tuple[Any, ...]] = []
        self.exclude: tuple[int, str] | None = None   # the step itself
        self.untracked: set[str] = set()   # imports that resolve nowhere barca can see

    def push(self, *item: Any) -> None:
        key = tuple(id(x) if isinstance(x, (Module, ast.AST)) else x for x in item)
        if key not in self.done:
            self.done.add(key)
            self.todo.append(item)

    def run(self) -> dict[str, str]:
        while self.todo:
            kind, *args = self.todo.pop()
            getattr(self, "_" + kind)(*args)
        return self.out

    def add_uses(self, mod: Module, uses: Uses) -> None:
        for name, chain in uses.names:
            self.push("sym", mod, name, chain)
        for (stmt, alias), chain in uses.imports:
            self.push("bind", mod, stmt, alias, chain)
        for dotted in uses.dynamic:
            for target in self._resolve(dotted):
                self.push("whole", target, True)

    def _find(self, dotted: str) -> list[Module]:
        """An absolute import: the project module it resolves to (each possible one)."""
        out: list[Module] = []
        for search in self.searches:
            mod = self.p.find(dotted, search)
            if mod is not None and mod not in out:
                out.append(mod)
        return out

    def _resolve(self, dotted: str, guarded: bool = False) -> list[Module]:
        """``_find``, for an import a step reaches: one whose top-level name is neither the
        project's nor found by the import system is an ``untracked_import`` -- unless a
        ``try: ... except ImportError`` around it expects it may be missing."""
        found = self._find(dotted)
        top = dotted.split(".")[0]
        if not found and not guarded and top not in _NEVER_FOLLOW and not any(
                self.p.find(top, s) for s in self.searches) and not self.p.external(top):
            self.untracked.add(top)
        return found

    def _source(self, ctx: Module, stmt: ast.ImportFrom, reached: bool = False
                ) -> list[Module]:
        """The project module(s) ``from <module> import ...`` in ``ctx`` reads from."""
        if stmt.level == 0:
            if not stmt.module:
                return []
            if not reached:
                return self._find(stmt.module)
            return self._resolve(stmt.module, id(stmt) in ctx.guarded_imports)
        mod = self.p.import_source(ctx, stmt, ())
        return [mod] if mod is not None else []

    def _stars(self, mod: Module) -> list[Module]:
        return [src for st in mod.index.stars for src in self._source(mod, st)]

    # ------------------------------------------------------------ items
    def _sym(self, mod: Module, name: str, chain: Chain) -> None:
        """A module-level name of ``mod``, read with ``chain`` after it."""
        if mod.tree is None:  # a namespace package: only submodules live there
            sub = self.p.submodule(mod, name)
            if sub is not None:
                self.push("mod", sub, chain)
            return
        if (id(mod), name) == self.exclude:
            return
        for other, local, _ in self.p.foreign((id(mod), name)):  # changed from elsewhere
            self.push("sym", other, local, ())
        for other, local, _ in self.p.foreign((id(mod), "*")):
            self.push("sym", other, local, (name,))
        idx = mod.index
        if name in idx.conservative:
            self.push("whole", mod, False)
            for stmt, alias in mod.bindings.get(name, ()):  # e.g. an import inside try:
                self.push("bind", mod, stmt, alias, chain)
            return
        stmts = idx.defs.get(name)
        sub = self.p.submodule(mod, name)
        if sub is not None:  # ``pkg.sub`` / ``from pkg import sub``: the submodule too
            self.push("mod", sub, chain)
        if stmts:
            self.out[f"helper:{mod.rel}:{name}"] = self.p.binding_digest(mod, name, stmts)
            nested = mod.bindings.get(name, ())
            for st in stmts:
                if isinstance(st, (ast.Import, ast.ImportFrom)):
                    for a in st.names:
                        if local_name(st, a) == name:
                            self.push("bind", mod, st, a, chain)
                    continue
                if ("def", id(mod), id(st)) not in self.done:
                    self.done.add(("def", id(mod), id(st)))
                    self.add_uses(mod, self.p.uses(mod, st))
                for imp, a in nested:  # ``try: from fast import f`` binds it too
                    if st.lineno <= imp.lineno <= (st.end_lineno or st.lineno):
                        self.push("bind", mod, imp, a, chain)
            # a star import may bind it too (before a change, or where a block binds it not)
            if idx.stars:
                self._via_stars(mod, name, chain)
            if name in idx.bound:
                return
        if sub is not None:
            return
        if self._via_stars(mod, name, chain):
            return
        if idx.dynamic or (name not in _BUILTINS and name not in _IMPLICIT):
            self.push("whole", mod, False)  # bound in a way we cannot see: hash all of it

    def _via_stars(self, mod: Module, name: str, chain: Chain) -> bool:
        """``name`` as the star imports of ``mod`` may bind it: the whole defining module
        (star imports are a conservative case), and the name itself as it defines it."""
        found = False
        for src in self._stars(mod):
            if self._may_bind(src, name, set()):
                found = True
                self.push("whole", src, False)
                self.push("sym", src, name, chain)
        return found

    def _may_bind(self, mod: Module, name: str, seen: set[int]) -> bool:
        """Whether ``from mod import *`` may bind ``name``."""
        if id(mod) in seen:
            return False
        seen.add(id(mod))
        if mod.tree is None:
            return False
        idx = mod.index
        if (name in idx.defs or name in idx.conservative or idx.dynamic
                or self.p.submodule(mod, name) is not None):
            return True
        return any(self._may_bind(s, name, seen) for s in self._stars(mod))

    def _mod(self, mod: Module, chain: Chain) -> None:
        """A module read with ``chain``: ``()`` means the module itself is used as a value."""
        if not chain:
            self.push("whole", mod, True)
        else:
            self.push("sym", mod, chain[0], tuple(chain[1:]))

    def _bind(self, ctx: Module, stmt: Import, alias: ast.alias, chain: Chain) -> None:
        """An import binding in ``ctx``, read with ``chain``."""
        if isinstance(stmt, ast.Import):
            dotted = alias.name if alias.asname else alias.name.split(".")[0]
            found = self._resolve(dotted, id(stmt) in ctx.guarded_imports)
            for target in found:
                self.push("mod", target, chain)
            if not found:  # not the project's: what other modules change of it counts
                for other, local, _ in self.p.foreign(("ext", dotted.split(".")[0])):
                    self.push("sym", other, local, ())
            return
        srcs = self._source(ctx, stmt, reached=True)
        if not srcs and not stmt.level and stmt.module:  # ``from numpy import random``
            for other, local, _ in self.p.foreign(("ext", stmt.module.split(".")[0])):
                self.push("sym", other, local, ())
        for src in srcs:
            if alias.name == "*":
                self.push("whole", src, True)
            else:
                self.push("sym", src, alias.name, chain)

    def _whole(self, mod: Module, as_value: bool) -> None:
        """All of a module: its source, and what it imports as its code reads it. Used as a
        value (``getattr(helpers, name)``), every name it imports is reachable too."""
        if mod.tree is None:
            return
        if as_value and ("whole", id(mod), False) not in self.done:
            self.done.add(("whole", id(mod), False))
        self.out[f"module:{mod.rel}"] = mod.whole
        chains = mod.chains
        for name, binds in mod.bindings.items():
            cs = set(chains.get(name, ()))
            if as_value:
                cs.add(())
            for stmt, alias in binds:
                for c in sorted(cs):
                    self.push("bind", mod, stmt, alias, c)
        for src in self._stars(mod):
            self.push("whole", src, True)
        for dotted in mod.dynamic_imports:
            for target in self._find(dotted):
                self.push("whole", target, True)
