"""A project's settings and the one rule that says which source wins: a flag, then an
environment variable, then ``barca.toml``, then the default (``barca docs config``).

A command resolves its ``Settings`` once, at its start, and passes the value down (API ->
Session -> Context -> Runner -> executors, the store, the remote store, the cache limit): no
module looks a setting up again, and nothing is written into ``os.environ``."""
from __future__ import annotations

import os
import stat

from barca.core.record import Record, _set

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any, ClassVar

# setting -> (environment variable, barca.toml section, key)
SOURCES: dict[str, tuple[str, str, str]] = {
    "env": ("BARCA_ENV", "", "default_env"),
    "remote_uri": ("BARCA_REMOTE_URI", "remote", "uri"),
    "store_key_file": ("", "remote", "key_file"),  # BARCA_STORE_KEY (the key itself) wins
    "cache_max_size": ("BARCA_CACHE_MAX_SIZE", "cache", "max_size"),
    "pool_size": ("BARCA_POOL_SIZE", "run", "pool_size"),
    "executor": ("BARCA_EXECUTOR", "run", "executor"),
    "capacity": ("BARCA_CAPACITY", "execution", "capacity"),  # the running steps' weights
    "include": ("", "discovery", "include"),
    "exclude": ("", "discovery", "exclude"),
    "output": ("BARCA_OUTPUT", "", ""),   # --json / --pretty; no barca.toml key
    "fsync": ("BARCA_FSYNC", "", ""),     # results fsync'ed before they count; no flag, no key
}

_FILES: dict[str, tuple[tuple[int, ...], dict[str, dict[str, Any]]]] = {}


def project_file(root: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """``root/barca.toml``, checked; read again only when the file changes (its inode, size,
    mtime or ctime: an edit that keeps the mtime still moves the ctime), and while it is
    younger than ``RACY_NS``."""
    from barca.core.root import stamp, young
    root = os.fspath(root)
    now = stamp(os.path.join(root, "barca.toml"))  # config.FILE: config loads when there is one
    if now is None:
        return {}
    got = _FILES.get(root)
    if got is None or got[0] != now or young(now):
        from pathlib import Path

        from barca.core.config import load
        got = _FILES[root] = (now, load(Path(root)))
    return got[1]


def value(name: str, root: str | os.PathLike[str] | None = None, flag: Any = None,
          environ: Mapping[str, str] | None = None) -> Any:
    """The setting ``name``: ``flag`` if given, else its environment variable (if set and not
    empty), else ``barca.toml`` at ``root`` (the project root), else None."""
    env = os.environ if environ is None else environ
    return _winner(name, flag, env, lambda: project_file(root or _root()))[0]


def _root() -> str:
    from barca.core.root import root_dir
    return root_dir()


def _winner(name: str, flag: Any, env: Mapping[str, str],
            file: Any) -> tuple[Any, str | None]:
    """The one precedence rule, and where the winner came from: a flag, else the environment
    variable (``BARCA_REMOTE=off`` switches the remote store off, wherever it is set), else
    ``barca.toml`` (``file()``, read only when asked), else (None, None)."""
    if flag is not None:
        return flag, "flag"
    var, section, key = SOURCES[name]
    if name == "remote_uri" and remote_off(env):
        return None, "BARCA_REMOTE=off"
    if var and env.get(var, "").strip():
        return env[var].strip(), var
    if key:
        got = file().get(section, {})
        if key in got:
            return got[key], (f"[{section}] {key}" if section else key)
    return None, None


class Settings(Record):
    """Every setting of one command, each the winner of its sources (``value``): frozen, and a
    ``Record`` rather than a dataclass, which would import ``inspect`` on the cached path.
    Values are as written; what checks them (``--env`` a folder name, a pool size a number, an
    executor known) does so where the value is used, naming the source it came from
    (``where``), so a bad setting fails only the commands that use it."""

    __slots__ = ("root_dir", "env", "executor", "pool_size", "remote_uri", "store_key_file",
                 "output", "cache_max_size", "fsync", "include", "exclude", "capacity",
                 "_origin")
    _defaults: ClassVar[dict[str, Any]] = {
        "env": None, "executor": None, "pool_size": None, "remote_uri": None,
        "store_key_file": None, "output": None, "cache_max_size": None, "fsync": False,
        "include": (), "exclude": (), "capacity": None, "_origin": {}}
    root_dir: str               # the project root (``root``: as a Path)
    env: str | None             # a named environment's store; None: .barca
    executor: str | None        # local, dask or a scheduler address; None: local
    pool_size: str | int | None  # None: one worker per core
    remote_uri: str | None      # the remote store; None: none (or BARCA_REMOTE=off)
    store_key_file: str | None  # BARCA_STORE_KEY (the key itself) wins; see manifest
    output: str | None          # json, pretty; None: pretty on a terminal, else json
    cache_max_size: str | int | None  # None: 10% of the filesystem
    fsync: bool
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    capacity: str | int | None  # None: the pool size
    _origin: Mapping[str, str]  # setting -> where its value came from (see ``where``)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "root" in kwargs:  # the root's old name, and the Path form of it (``root``)
            kwargs["root_dir"] = kwargs.pop("root")
        super().__init__(*args, **kwargs)
        _set(self, "root_dir", os.fspath(self.root_dir))

    @property
    def root(self) -> Path:
        """The project root as a Path (made when asked: pathlib is not loaded by a cached
        command, which works on ``root_dir``)."""
        from pathlib import Path
        return Path(self.root_dir)

    def __hash__(self) -> int:
        return hash(self.values())

    def values(self) -> tuple[Any, ...]:
        """Every setting's value, without where each came from: what a memo of a command's
        outcome is keyed on (barca.engine.settle, barca.api.warm)."""
        return self._values()[:-1]

    @classmethod
    def resolve(cls, root: str | os.PathLike[str] | None = None,
                environ: Mapping[str, str] | None = None, project: bool = True,
                **flags: Any) -> Settings:
        """The settings of a command run at ``root`` (default: the project root found from the
        working directory) with these flags (``env="dev"``, ``executor="dask"``, ...; None
        is no flag). ``barca.toml`` is read once here; ``project=False`` reads no file."""
        unknown = set(flags) - set(SOURCES)
        if unknown:
            raise TypeError(f"unknown setting(s): {', '.join(sorted(unknown))} "
                            f"(settings: {', '.join(SOURCES)})")
        if root is None and environ is None:
            return _resolved(cls, project, flags)
        return cls._resolve(root, environ, project, flags)

    @classmethod
    def _resolve(cls, root: str | os.PathLike[str] | None, environ: Mapping[str, str] | None,
                 project: bool, flags: dict[str, Any]) -> Settings:
        env = os.environ if environ is None else environ
        if root is None:
            from barca.core.root import root_dir
            root = root_dir()
        file = project_file(root) if project else {}
        got: dict[str, Any] = {}
        origin: dict[str, str] = {}
        for name in SOURCES:
            got[name], src = _winner(name, flags.get(name), env, lambda: file)
            if src is not None:
                origin[name] = src
        for name in ("include", "exclude"):
            got[name] = tuple(got.get(name) or ())
        fsync = got.pop("fsync", None)
        got["fsync"] = fsync not in (None, "", "0", False)
        for name in ("env", "executor", "remote_uri", "output"):
            if isinstance(got.get(name), str):
                got[name] = got[name].strip() or None
        return cls(root_dir=root, _origin=origin, **got)

    def where(self, name: str, default: str = "") -> str:
        """Where ``name``'s value came from, for an error message: ``--FLAG``, the environment
        variable, or the barca.toml key (``default`` when none set it)."""
        src = self._origin.get(name)
        if src == "flag":
            return "--" + name.replace("_", "-")
        return src or default or (SOURCES[name][0] or name)

    @property
    def store_prefix(self) -> str:
        """The store's folder under the root: ``.barca`` or ``.barca/envs/<env>``."""
        from barca.core.root import store_prefix
        return store_prefix(self.env or "")

    def replace(self, **flags: Any) -> Settings:
        """These settings with ``flags`` (those not None) put on top, as flags."""
        given = {k: v for k, v in flags.items() if v is not None}
        if not given:
            return self
        unknown = set(given) - set(SOURCES)
        if unknown:
            raise TypeError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        if "include" in given or "exclude" in given:
            given.update({k: tuple(given[k]) for k in ("include", "exclude") if k in given})
        fields = {f: getattr(self, f) for f in self.__slots__}
        fields.update(given, _origin={**self._origin, **dict.fromkeys(given, "flag")})
        return Settings(**fields)


_VARS = tuple(sorted({v for v, _, _ in SOURCES.values() if v} | {"BARCA_REMOTE"}))
_VARS_B = tuple(v.encode() for v in _VARS)
_RESOLVED: dict[Any, tuple[Settings, tuple[tuple[str, Any], ...]]] = {}


def _resolved(cls: type[Settings], project: bool, flags: dict[str, Any]) -> Settings:
    """``Settings.resolve()`` from the working folder and ``os.environ``, remembered per process
    (a kernel resolves the same settings at every cell). The answer is a function of the
    working folder, the variables of ``SOURCES``, the flags and the ``barca.toml`` files the
    root search looks at, so it is kept under the first three and given again only while each
    of those files has the stamp it had (absent stays absent): the same syscalls as the
    search itself, none of the work after them."""
    try:
        key = _ask(project, flags)
        got = _RESOLVED.get(key)
    except TypeError:  # a flag that is a list (include=[...]): not kept
        return cls._resolve(None, None, project, flags)
    here = key[0]
    if got is not None and all(_toml_stamp(p) == s for p, s in got[1]):
        return got[0]
    checks: list[tuple[str, Any]] = []
    d = here
    while True:  # the files the root search stats, stamped before they are read
        p = os.path.join(d, "barca.toml")
        checks.append((p, _toml_stamp(p)))
        up = os.path.dirname(d)
        if checks[-1][1] is not None or up == d:
            break
        d = up
    settings = cls._resolve(None, None, project, flags)
    found = d if checks[-1][1] is not None else here
    from barca.core.root import young
    fresh = checks[-1][1] is not None and young(checks[-1][1])
    if (os.name == "posix" and settings.root_dir == found and not fresh
            and _ask(project, flags) == key):  # else (or changed meanwhile): asked again
        if len(_RESOLVED) > 64:
            _RESOLVED.clear()
        _RESOLVED[key] = (settings, tuple(checks))
    return settings


def _ask(project: bool, flags: dict[str, Any]) -> tuple[Any, ...]:
    """What a resolve from the working folder is a function of, but for the files it reads."""
    here = os.getcwd()  # POSIX: the physical path already (no symlink, normalized)
    raw = getattr(os.environ, "_data", None)  # os.environ's own bytes: read 9 times per call
    envs = (tuple(map(raw.get, _VARS_B)) if os.name == "posix" and isinstance(raw, dict)
            else tuple(map(os.environ.get, _VARS)))
    key = (here, project, envs, tuple(sorted(flags.items())))
    hash(key)  # TypeError for a flag that is a list
    return key


def _toml_stamp(path: str) -> tuple[int, ...] | None:
    """A ``barca.toml`` as the root search and ``project_file`` see it: None unless a file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def settings_of(settings: Settings | None = None, **flags: Any) -> Settings:
    """The API's front door: the ``settings`` a caller resolved, else the ones resolved now;
    keyword flags (``env="dev"``) on top either way."""
    if settings is None:
        return Settings.resolve(**{k: v for k, v in flags.items() if v is not None})
    return settings.replace(**flags)


def remote_off(environ: Mapping[str, str] | None = None) -> bool:
    """``BARCA_REMOTE=off``: the configured store is not used by this command."""
    env = os.environ if environ is None else environ
    return env.get("BARCA_REMOTE", "").strip().lower() == "off"
