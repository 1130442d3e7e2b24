"""The definition parts of a node defined in notebook cells, read from the objects that run.

A notebook node runs as the function object the kernel holds, shipped by value (cloudpickle)
with the globals it reads. So its hash is made of those same objects, never of text that may
have moved on since they were made (hash what runs, run what is hashed):

- a function is its source when compiling that source gives the function's own code, else
  its code object (a ``%run`` script edited after it ran, a ``%%time`` cell, a closure); plus
  its default arguments (bound when its ``def`` ran), its closure's cell contents, and the
  globals it reads, looked up in its own globals;
- a class is its bases and its members (methods as functions, so the globals they read count);
- any other value is its stable pickle, with every notebook function or class inside it (a
  ``functools.partial``'s function, an ``np.vectorize``'s, a callable instance's class) standing
  for what it does, and a project module's function or class adding that module.

Nothing of the notebook's name is in a part: renaming the notebook keeps every definition hash.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import os
import sys
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from barca.identity.hashing import canonical_json, digest, in_project, sha, stable_pickle
from barca.identity.moduleindex import name_chains
from barca.model.scope import global_names, globals_reads

STEMLESS = "__notebook__"  # the stem a definition hash names, whatever the notebook is called

_PLAIN = frozenset({int, float, str, bytes, bool, type(None), complex, list, tuple, dict})
_SKIP_MEMBERS = frozenset({"__dict__", "__weakref__", "__module__", "__qualname__",
                           "__firstlineno__", "__static_attributes__"})


def json_map(value: Any, fn: Callable[[Any], Any]) -> Any:
    """``value`` (lists and dicts of plain values) with ``fn`` applied to every leaf."""
    if isinstance(value, dict):
        return {k: json_map(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_map(v, fn) for v in value]
    return fn(value)


def parts(root: Path, node: Any, decorator_shape: Any, fn: Callable[..., Any] | None,
          namespace: dict[str, Any]) -> dict[str, str]:
    """The definition parts of a notebook node: code, counted decorator arguments, what its
    function object carries (defaults, closure), and the cone of what it reads."""
    from barca.identity.hashing import _strip_decorators
    code = _strip_decorators(node.fn)
    own = f"{node.file}:"
    shape = json_map(decorator_shape, lambda v: STEMLESS + v[len(own) - 1:]
                     if isinstance(v, str) and v.startswith(own) else v)
    out = {
        "code": digest(ast.dump(code, include_attributes=False)),
        "decorator": digest(canonical_json(shape), *node.counted_decorator),
    }
    cone = Cone(root, namespace, out)
    names = global_names(code) | set(node.counted_names) | dynamic_reads(code, node.function)
    scope = namespace
    if isinstance(fn, types.FunctionType):
        scope = fn.__globals__
        if not _same_code(code, fn):  # its source moved on (a %run script edited since)
            out["code-object"], read = cone.function(fn)
            names = set(node.counted_names)
        elif fn.__defaults__ or fn.__kwdefaults__ or fn.__closure__:
            out["bound"] = _bound_digest(cone, fn)  # ``k=K`` is K as the def ran
    cone.names(sorted(names - {node.function}), scope, code if "code-object" not in out else None)
    from barca.core import dotenv
    for name in node.env:  # the process's value, else the project's .env; keyed
        out[f"env:{name}"] = dotenv.digest(name, dotenv.value(name, root), root)
    return out


class Cone:
    """One node's walk over the live objects it reads; each part added once."""

    def __init__(self, root: Path, namespace: dict[str, Any], out: dict[str, str]) -> None:
        self.root = root.resolve()
        self.ns = namespace
        self.out = out
        self.seen: set[tuple[int, str]] = set()
        self.tokens: dict[int, str] = {}   # id(function or class) -> its digest
        self.keep: list[Any] = []          # what the ids above point to, kept alive
        self.project: Any = None           # the file cone's view of project modules
        self.followed: set[tuple[Any, ...]] = set()

    # ------------------------------------------------------------ names
    def names(self, names: list[str], scope: dict[str, Any], tree: ast.AST | None = None
              ) -> None:
        """Globals read by a definition (``tree``, when its source is what runs: the
        attributes read off a module then say which of its definitions count)."""
        chains = name_chains(tree, set(names)) if tree is not None else {}
        for name in names:
            if name not in scope:
                continue  # a builtin, or not defined (yet): the worker says so
            value = scope[name]
            if inspect.ismodule(value):  # each chain read off it counts, seen or not
                self.project_module(value, chains.get(name) or {()})
                continue
            if (id(scope), name) in self.seen:
                continue
            self.seen.add((id(scope), name))
            label = f"helper:{STEMLESS}:{name}"
            if scope is not self.ns:  # the globals of a %run script: another namespace
                where = Path(str(scope.get("__file__", "%run"))).name
                label = f"helper:{STEMLESS}:{where}:{name}"
            got = self.value(value)
            if got is not None:
                self.out[label] = got

    def value(self, value: Any) -> str | None:
        """A value's digest, or None when it is not the project's (an installed package's
        function, class or module is not followed)."""
        if inspect.ismodule(value):
            self.project_module(value, {()})
            return None
        if isinstance(value, (types.FunctionType, type)) and not self._ours(value):
            self.module_of(value)
            return None
        if type(value) in _PLAIN:
            try:
                return digest("json", canonical_json(value))
            except (TypeError, ValueError):
                pass
        try:
            return digest("pickle", stable_pickle(value, self.hook))
        except Exception:  # hash more, never less: an unpicklable value changes every run
            return digest("unpicklable", repr(type(value)), str(id(value)))

    def hook(self, obj: Any) -> Any:
        """Inside a pickled value: a notebook function or class stands for what it does."""
        t = type(obj)
        if t in _PLAIN:
            return None
        if t is types.FunctionType or isinstance(obj, type):
            if self._ours(obj):
                return ("barca-def", self.function(obj)[0] if t is types.FunctionType
                        else self.klass(obj))
            self.module_of(obj)
            return None
        if t is not types.FunctionType and callable(obj) and _wraps_function(obj):
            # an lru_cache (or similar C) wrapper of a notebook function: pickle would save it
            # by name; it is the function it wraps, and how it wraps it
            params = obj.cache_parameters() if hasattr(obj, "cache_parameters") else None
            return ("barca-wrapped", type(obj).__qualname__, self.function(obj.__wrapped__)[0],
                    repr(params))
        if t is types.ModuleType:
            self.project_module(obj, {()})
            return ("barca-module", obj.__name__)
        return None

    # ------------------------------------------------------------ definitions
    def function(self, fn: types.FunctionType) -> tuple[str, set[str]]:
        """A notebook function's digest and the global names it reads (walked too)."""
        key = id(fn)
        if key in self.tokens:
            return self.tokens[key], set()
        self.tokens[key] = digest("recursive", fn.__qualname__)  # while it is being made
        self.keep.append(fn)
        tree = _source_tree(fn)
        if tree is not None and _same_code(tree, fn):
            text = ast.dump(tree, include_attributes=False)
            read = global_names(tree) | dynamic_reads(tree, fn.__qualname__)
        else:
            if tree is not None and "<locals>" not in fn.__qualname__ and \
                    os.path.isfile(fn.__code__.co_filename):
                where = _shown(Path(fn.__code__.co_filename))
                _say(f"'{fn.__qualname__}' in this kernel is not {where} as it is now: steps run "
                     f"the kernel's '{fn.__qualname__}' (and are hashed by it). Run the file "
                     f"again (%run {where}) to use the edit.")
            text, read, tree = "code:" + code_digest(fn.__code__), code_names(fn.__code__), None
        token = digest(text, _bound_digest(self, fn))
        self.tokens[key] = token
        self.names(sorted(read), fn.__globals__, tree)
        return token, read

    def klass(self, cls: type) -> str:
        """A notebook class: its bases and its members, in definition order."""
        key = id(cls)
        if key in self.tokens:
            return self.tokens[key]
        self.tokens[key] = digest("recursive", cls.__qualname__)
        self.keep.append(cls)
        texts = [cls.__qualname__]
        for base in cls.__bases__:
            texts.append(self.klass(base) if self._ours(base)
                         else f"{base.__module__}.{base.__qualname__}")
            if not self._ours(base):
                self.module_of(base)
        for name, member in vars(cls).items():
            if name in _SKIP_MEMBERS:
                continue
            texts.append(f"{name}={self.member(member)}")
        self.tokens[key] = digest(*texts)
        return self.tokens[key]

    def member(self, member: Any) -> str:
        if isinstance(member, (types.MemberDescriptorType, types.GetSetDescriptorType)):
            kind: type = type(member)  # a slot: its name is in __slots__
            return kind.__name__
        if isinstance(member, (staticmethod, classmethod)):
            return "static:" + self.member(member.__func__)
        if isinstance(member, property):
            return "property:" + ",".join(self.member(f) if f is not None else "-"
                                          for f in (member.fget, member.fset, member.fdel))
        if isinstance(member, types.FunctionType):
            return self.function(member)[0] if self._ours(member) else \
                f"{member.__module__}.{member.__qualname__}"
        return self.value(member) or "external"

    # ------------------------------------------------------------ where things live
    def _ours(self, obj: Any) -> bool:
        """Defined in the kernel (cells, ``%run``), not importable by a worker from a file."""
        module = getattr(obj, "__module__", None)
        return module == "__main__" or module is None

    def module_of(self, obj: Any) -> None:
        """A function or class of a project module: its definition's cone, as a pipeline
        file's step would have it (the module's other definitions do not count)."""
        mod = sys.modules.get(getattr(obj, "__module__", None) or "")
        name = getattr(obj, "__name__", "")
        if mod is not None and getattr(mod, name, None) is obj:
            self.project_module(mod, {(name,)})
        elif mod is not None:  # not bound under its own name there: all of the module
            self.project_module(mod, {()})

    def project_module(self, mod: types.ModuleType, chains: set[tuple[str, ...]]) -> None:
        """What a step reads of a project module (under the root, not installed): each chain
        read off it (``h.scale`` -> ``scale`` and its cone, followed into the modules it
        imports), all of it when it is used as a value."""
        file = getattr(mod, "__file__", None)
        if not file:
            return
        try:
            path = Path(file).resolve()
        except OSError:
            return
        if not path.is_file():
            return
        if not in_project(self.root, path):
            if _outside(self.root, path):
                _say(f"{mod.__name__} ({_shown(path)}) is outside the project root {self.root}: "
                     "barca does not track it, and an edit there re-runs nothing. Put a "
                     "barca.toml in the folder above both (the notebook's sys.path entry keeps "
                     "working in the steps).")
            return
        from barca.identity.cone import Project
        from barca.identity.moduleindex import Uses
        if self.project is None:
            self.project = Project(self.root)
        names = sorted({(c[0], tuple(c[1:])) for c in chains if c})
        dynamic = [mod.__name__] if () in chains else []
        key = (str(path), tuple(names), tuple(dynamic))
        if key in self.followed:
            return
        self.followed.add(key)
        got = self.project.cone(str(path), Uses(names=names, imports=[], dynamic=dynamic),
                                exclude="")
        self.out.update(got)
        self.kernel_changes(mod, path, got)

    def kernel_changes(self, mod: types.ModuleType, path: Path, got: dict[str, str]) -> None:
        """Warn of a project module's constant changed in this kernel (``mycfg.K = 3``): the
        kernel's functions see it, a step never does (its worker imports the file)."""
        m = self.project.module_at(path)
        if m is None or m.tree is None:
            return
        used = {label.split(":", 2)[2] for label in got if label.startswith(f"helper:{m.rel}:")}
        literal: dict[str, Any] = {}
        once: dict[str, int] = {}
        for st in m.tree.body:
            for t in getattr(st, "targets", ()) or [getattr(st, "target", None)]:
                if isinstance(t, ast.Name):
                    once[t.id] = once.get(t.id, 0) + 1
                    if isinstance(st, ast.Assign):
                        with contextlib.suppress(ValueError, TypeError, SyntaxError,
                                                 RecursionError):
                            literal[t.id] = ast.literal_eval(st.value)
        for name in sorted(used):
            if once.get(name) != 1 or name not in literal or not hasattr(mod, name):
                continue
            live, file_value = getattr(mod, name), literal[name]
            try:
                same = type(live) is type(file_value) and bool(live == file_value)
            except Exception:
                same = True  # cannot tell: say nothing rather than something wrong
            if not same:
                _say(f"{mod.__name__}.{name} is {live!r} in this kernel but {file_value!r} in "
                     f"{m.rel}: steps run in worker processes, which import {m.rel} as the "
                     f"file says. Change it in {m.rel}, or define it in the notebook.")


def _wraps_function(obj: Any) -> bool:
    """A notebook callable that stands for a function it wraps (``lru_cache``)."""
    try:
        return getattr(obj, "__module__", None) == "__main__" and \
            isinstance(getattr(obj, "__wrapped__", None), types.FunctionType)
    except Exception:  # an object whose __getattr__ fails: pickled as it is
        return False


def _say(text: str) -> None:
    """A warning in the notebook cell (once per kernel for the same text)."""
    import warnings
    warnings.warn(text, UserWarning, stacklevel=2)


def _outside(root: Path, path: Path) -> bool:
    """A module outside the root that is not installed and not the standard library: the
    user's own code, which barca cannot see."""
    import sysconfig
    if {"site-packages", "dist-packages"} & set(path.parts):
        return False
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        base = sysconfig.get_paths().get(key)
        if base and path.is_relative_to(Path(base).resolve()):
            return False
    return True


def _shown(path: Path) -> str:
    """A path as the user knows it: relative to the working folder when it can be."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def dynamic_reads(tree: ast.AST, name: str) -> set[str]:
    """The globals a definition reads as ``globals()['K']``; any other ``globals()`` or
    ``vars()`` use is refused, as which names it reads cannot be told (never guessed)."""
    names, unknown = globals_reads(tree)
    if unknown:
        from barca.core.errors import UsageError
        raise UsageError(f"notebook function '{name}' reads globals() or vars() in a way barca "
                         "cannot follow: which names it uses cannot be hashed",
                         "Read each name directly (K), or as globals()['K'] with a literal name.")
    return names


def _bound_digest(cone: Cone, fn: types.FunctionType) -> str:
    """What a function object carries beyond its code: defaults, keyword defaults, the
    contents of its closure's cells."""
    cells = []
    for cell in fn.__closure__ or ():
        try:
            cells.append(cone.value(cell.cell_contents) or "external")
        except ValueError:  # an empty cell
            cells.append("empty")
    return digest(cone.value(fn.__defaults__) or "", cone.value(fn.__kwdefaults__) or "",
                  *cells)


def _source_tree(fn: Any) -> ast.Module | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None


def _same_code(tree: ast.AST, fn: types.FunctionType) -> bool:
    """Whether ``tree`` (a ``def`` or a module holding one) compiles to ``fn``'s own code."""
    if not isinstance(tree, ast.Module):
        tree = ast.Module(body=[cast(ast.stmt, tree)], type_ignores=[])
    try:
        compiled = compile(tree, "<barca>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, TypeError):
        return False
    want = code_digest(fn.__code__)
    return any(isinstance(c, types.CodeType) and c.co_name == fn.__code__.co_name
               and code_digest(c) == want for c in compiled.co_consts)


def code_digest(co: types.CodeType) -> str:
    """A code object by what it does: bytecode, names, constants (nested code too); never its
    file name or line numbers, which differ for the same cell run again."""
    consts = [code_digest(c) if isinstance(c, types.CodeType) else sha(stable_pickle(c))
              for c in co.co_consts]
    return digest(co.co_name, co.co_code.hex(), repr(co.co_names), repr(co.co_varnames),
                  repr(co.co_freevars), repr(co.co_cellvars),
                  f"{co.co_argcount},{co.co_posonlyargcount},{co.co_kwonlyargcount},"
                  f"{co.co_flags}", *consts)


def code_names(co: types.CodeType) -> set[str]:
    """The global (and attribute) names a code object and its nested code may read: more than
    it reads, never less."""
    out = set(co.co_names)
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            out |= code_names(c)
    return out
