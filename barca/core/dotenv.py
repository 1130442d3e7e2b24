"""The values of the variables a step declares in ``env=``: the process environment, else the
project's ``.env`` file (``barca docs env``). Read here, never exported: a step's process sees
only its real environment. Secret-like names are shown as ``<redacted>`` wherever barca prints
a value; the value itself still counts towards the run hash."""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

FILE = ".env"
REDACTED = "<redacted>"
SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD")

_FILES: dict[Path, tuple[tuple[int, ...], dict[str, str]]] = {}
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*?)\s*$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def is_secret(name: str) -> bool:
    """``API_TOKEN``, ``db_password``, ``KEY``: a name whose value barca never prints."""
    up = name.upper()
    return up in SECRET_WORDS or any(up.endswith("_" + w) for w in SECRET_WORDS)


def shown(name: str, value: str | None) -> str | None:
    """What output says of ``name``'s value: None when unset, else the value or
    ``<redacted>``."""
    if value is None:
        return None
    return REDACTED if is_secret(name) else value


def parse(text: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``KEY=VALUE`` lines: ``export`` allowed, ``#`` comments, single quotes literal, double
    quotes with escapes, ``${VAR}``/``$VAR`` expanded from the lines above, else the process
    environment (else empty)."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}

    def expand(v: str) -> str:
        return _VAR.sub(lambda m: out.get(m.group(1) or m.group(2),
                                          env.get(m.group(1) or m.group(2), "")), v)

    for raw in text.splitlines():
        m = _LINE.match(raw)
        if m is None or raw.lstrip().startswith("#"):
            continue
        key, value = m.group(1), m.group(2)
        if value[:1] == "'":
            end = value.find("'", 1)
            value = value[1:end] if end > 0 else value[1:]
        elif value[:1] == '"':
            end = 1
            while end < len(value) and not (value[end] == '"' and value[end - 1] != "\\"):
                end += 1
            inner = value[1:end]
            inner = inner.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
            value = expand(inner)
        else:
            value = expand(re.sub(r"\s+#.*$", "", value))
        out[key] = value
    return out


def file_values(root: Path) -> dict[str, str]:
    """``root/.env``, parsed; read again when the file changes, and while it is too young for
    its stamp to vouch for it (``barca.core.root.young``): an ``env=`` asset's run hash reads
    these values."""
    from barca.core.root import stamp, young
    path = root / FILE
    now = stamp(path)
    if now is None:
        return {}
    got = _FILES.get(path)
    if got is None or got[0] != now or young(now):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return {}
        got = _FILES[path] = (now, parse(text))
    return got[1]


def value(name: str, root: Path, environ: Mapping[str, str] | None = None) -> str | None:
    """``name``'s value: the process environment wins, else ``root/.env``; None if neither."""
    env = os.environ if environ is None else environ
    if name in env:
        return env[name]
    return file_values(root).get(name)


def values(names: list[str], root: Path) -> dict[str, str | None]:
    """Each name's value as output shows it (secrets redacted, None when unset)."""
    return {n: shown(n, value(n, root)) for n in names}


def shown_text(names: list[str], root: Path) -> str:
    """``A=1 B=<unset>``: the env= values a step ran with, as output shows them."""
    return " ".join(f"{n}={'<unset>' if v is None else v}" for n, v in values(names, root).items())


SALT_FILE = "env-salt"  # under .barca/: this project's own key when there is no store key


def digest(name: str, val: str | None, root: Path) -> str:
    """What a run hash (and the record anyone with a copy of the store can read) holds of an
    ``env=`` value: a keyed digest, never a plain hash a guess could be checked against
    offline. The key: the store's (``BARCA_STORE_KEY`` or ``[remote] key_file``), so machines
    sharing a store share results; else a random salt kept in ``.barca/``, so without a
    store key such results are this project's own."""
    import hashlib
    import hmac
    message = b"unset" if val is None else b"set\0" + val.encode("utf-8", "surrogatepass")
    key = b"env\0" + _key(root)
    return hmac.new(key, name.encode() + b"\0" + message, hashlib.sha256).hexdigest()[:16]


def shared_key(root: Path) -> bool:
    """``env=`` digests are keyed with the store's key (results shared with machines that
    hold it), not with this project's own salt."""
    from barca.core.secret import store_key
    from barca.core.settings import value as setting
    return store_key(setting("store_key_file", root) or None) is not None


def _key(root: Path) -> bytes:
    from barca.core.secret import store_key
    from barca.core.settings import value as setting
    secret = store_key(setting("store_key_file", root) or None)
    if secret is not None:
        return b"store\0" + secret
    return b"salt\0" + _salt(root / ".barca" / SALT_FILE)


def _salt(path: Path) -> bytes:
    """32 random bytes made once per project (readable by its owner only), shared by every
    process: created exclusively, so two first runs at once agree on one salt."""
    try:
        return bytes.fromhex(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(os.urandom(32).hex() + "\n")
    os.chmod(tmp, 0o600)
    try:
        os.link(tmp, path)  # the first writer wins; a loser reads the winner's salt
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return bytes.fromhex(path.read_text().strip())
