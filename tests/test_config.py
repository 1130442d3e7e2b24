"""``barca.toml``: a project's settings, with one precedence for every setting: a flag, then an
environment variable, then the file, then the default. Through the CLI in subprocesses."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Project


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()
            and p.suffix == ".json"}


def test_remote_uri_from_the_file_and_the_variable_wins(seed: Project, tmp_path: Path) -> None:
    store, other = tmp_path / "store", tmp_path / "other"
    seed.write("barca.toml", f'[remote]\nuri = "file://{store}"\n')
    r = seed.barca("get", "report", "pipeline.py", "--pretty")
    assert r.code == 0, r.err
    uploaded = _files(store)
    assert any(f.startswith("artifacts/pipeline.py--report/") for f in uploaded)
    # served from the store like BARCA_REMOTE_URI: local copies gone, nothing recomputed
    for art in (seed.path / ".barca" / "artifacts").glob("pipeline.py--prices_*/*.json"):
        art.unlink()
    got = seed.barca("get", "prices", "pipeline.py", "--pretty")
    assert got.code == 0, got.err
    assert "[barca] fetched 3 cached artifacts" in got.err and "1/4 steps" in got.err
    # the variable overrides the file
    r = seed.barca("get", "report", "pipeline.py", "--refresh", "report", "--json",
                   env={"BARCA_REMOTE_URI": f"file://{other}"})
    assert r.code == 0, r.err
    assert any(f.startswith("artifacts/pipeline.py--report/") for f in _files(other))
    # BARCA_REMOTE=off: this command uses no store at all
    before = _files(store) | _files(other)
    seed.write("feed_version.txt", "v2\n")
    r = seed.barca("get", "report", "pipeline.py", "--json",  # the variable's store too
                   env={"BARCA_REMOTE": "off", "BARCA_REMOTE_URI": f"file://{other}"})
    assert r.code == 0, r.err
    assert _files(store) | _files(other) == before


@pytest.mark.parametrize("text,line,words", [
    ('[remote\nuri = "x"\n', 1, ["not valid TOML"]),
    ('\n[remote]\nurl = "file:///x"\n', 3, ["unknown key [remote] url", "Did you mean 'uri'",
                                             "[remote] uri", "[cache] max_size"]),
    ('[remotes]\nuri = "x"\n', 1, ["unknown section [remotes]", "default_env"]),
    ('[cache]\nmax_size = "12 parsecs"\n', 2, ["[cache] max_size", "not a size"]),
    ('[run]\npool_size = 0\n', 2, ["[run] pool_size"]),
    ('default_env = "../up"\n', 1, ["default_env"]),
])
def test_a_bad_file_is_exit_2_with_its_line(seed: Project, text: str, line: int,
                                            words: list[str]) -> None:
    seed.write("barca.toml", text)
    for args in (["status", "pipeline.py"], ["get", "report", "pipeline.py"]):
        r = seed.barca(*args, "--pretty")
        assert r.code == 2, r.err
        assert r.err.startswith(f"barca.toml:{line}: "), r.err
        for w in words:
            assert w in r.err, (w, r.err)
        assert "Traceback" not in r.err
    err = json.loads(seed.barca("status", "pipeline.py", "--json").err.splitlines()[-1])
    assert err["kind"] == "usage" and err["line"] == line
    assert not (seed.path / ".barca").exists()


def test_an_empty_file_is_fine_and_marks_the_root(seed: Project) -> None:
    seed.write("barca.toml", "")
    (seed.path / "sub").mkdir()
    r = Project(seed.path / "sub").barca("status", "--pretty")  # run from below the root
    assert r.code == 0, r.err
    assert "report" in r.out


def test_default_env_then_variable_then_flag(seed: Project) -> None:
    seed.write("barca.toml", 'default_env = "dev"\n')
    assert seed.barca("get", "report", "pipeline.py", "--json").code == 0
    assert (seed.path / ".barca/envs/dev/metadata.db").is_file()
    assert seed.barca("get", "report", "pipeline.py", "--json",
                      env={"BARCA_ENV": "ci"}).code == 0
    assert (seed.path / ".barca/envs/ci/metadata.db").is_file()
    assert seed.barca("get", "report", "pipeline.py", "--json", "--env", "flag",
                      env={"BARCA_ENV": "ci"}).code == 0
    assert (seed.path / ".barca/envs/flag/metadata.db").is_file()
    assert not (seed.path / ".barca/metadata.db").exists()


def test_pool_size_and_discovery(seed: Project) -> None:
    seed.write("scratch/draft.py", "from barca import asset\n\n\n@asset()\ndef draft() -> int:\n"
               "    return 1\n")
    seed.write("barca.toml", '[run]\npool_size = 3\n[discovery]\nexclude = ["scratch/*"]\n')
    plan = seed.barca("plan", "--json").json()
    assert plan["pool_size"] == 3
    assert seed.barca("plan", "--json", env={"BARCA_POOL_SIZE": "1"}).json()["pool_size"] == 1
    names = [n["id"] for n in seed.barca("list", "--json").json()["nodes"]]
    assert "scratch/draft.py:draft" not in names and "pipeline.py:report" in names
    seed.write("barca.toml", '[discovery]\ninclude = ["scratch/*.py"]\n')
    names = [n["id"] for n in seed.barca("list", "--json").json()["nodes"]]
    assert names == ["scratch/draft.py:draft"]


def test_python_api_takes_env_and_executor_and_sets_no_variable(seed: Project) -> None:
    import subprocess
    import sys
    code = """
import os, barca
before = dict(os.environ)
v = barca.get("report", "pipeline.py", env="dev", executor="local")
print(v["tickers"], os.path.isfile(".barca/envs/dev/metadata.db"),
      os.path.exists(".barca/metadata.db"), dict(os.environ) == before)
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=seed.path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["3", "True", "False", "True"]


def test_no_code_in_barca_writes_the_environment() -> None:
    import re
    root = Path(__file__).resolve().parent.parent / "barca"
    writes = [f"{p.name}:{n}" for p in root.rglob("*.py")
              for n, line in enumerate(p.read_text().splitlines(), 1)
              if re.search(r"os\.environ\[.*\]\s*=|os\.environ\.(update|setdefault)\(|"
                           r"os\.putenv\(", line)]
    assert writes == []


# ---------------------------------------------------------------------------- one precedence
# Every setting, resolved by the one rule (``Settings.resolve``): flag > variable > file >
# default. A setting with no flag on the command line has one in the Python API (a keyword).
PRECEDENCE = [  # setting, variable, barca.toml text, file value, variable value, flag value
    ("env", "BARCA_ENV", 'default_env = "file"\n', "file", "var", "flag"),
    ("remote_uri", "BARCA_REMOTE_URI", '[remote]\nuri = "file:///f"\n', "file:///f",
     "file:///v", "file:///x"),
    ("pool_size", "BARCA_POOL_SIZE", "[run]\npool_size = 3\n", 3, "2", 5),
    ("executor", "BARCA_EXECUTOR", '[run]\nexecutor = "dask"\n', "dask", "local", "tcp://h:1"),
    ("cache_max_size", "BARCA_CACHE_MAX_SIZE", '[cache]\nmax_size = "1GB"\n', "1GB", "2GB",
     "off"),
    ("store_key_file", None, '[remote]\nkey_file = "k.txt"\n', "k.txt", None, "other.txt"),
    ("include", None, '[discovery]\ninclude = ["a/*.py"]\n', ("a/*.py",), None, ("b/*.py",)),
    ("exclude", None, '[discovery]\nexclude = ["c/*"]\n', ("c/*",), None, ("d/*",)),
    ("output", "BARCA_OUTPUT", None, None, "pretty", "json"),
    ("fsync", "BARCA_FSYNC", None, None, "1", True),
]


@pytest.mark.parametrize("name,var,text,in_file,in_var,flag", PRECEDENCE,
                         ids=[p[0] for p in PRECEDENCE])
def test_each_setting_flag_then_variable_then_file_then_default(
        tmp_path: Path, name: str, var: str | None, text: str | None, in_file: object,
        in_var: str | None, flag: object) -> None:
    from barca.core.settings import Settings
    default = Settings(tmp_path)
    got = Settings.resolve(tmp_path, environ={})
    assert getattr(got, name) == getattr(default, name)  # nothing set: the default
    if text is not None:
        (tmp_path / "barca.toml").write_text(text)
        got = Settings.resolve(tmp_path, environ={})
        assert getattr(got, name) == in_file and got.where(name) != "--" + name
    environ = {var: str(in_var)} if var else {}
    if var:
        got = Settings.resolve(tmp_path, environ=environ)
        want = True if name == "fsync" else in_var
        assert getattr(got, name) == want and got.where(name) == var
    got = Settings.resolve(tmp_path, environ=environ, **{name: flag})
    assert getattr(got, name) == flag and got.where(name) == "--" + name.replace("_", "-")
    # a resolved value takes flags on top, as the API's keywords do
    assert getattr(default.replace(**{name: flag}), name) == flag


def test_settings_read_barca_toml_once_and_remote_off_wins(tmp_path: Path) -> None:
    from barca.core.settings import Settings
    (tmp_path / "barca.toml").write_text('[remote]\nuri = "file:///f"\n')
    off = Settings.resolve(tmp_path, environ={"BARCA_REMOTE": "off",
                                              "BARCA_REMOTE_URI": "file:///v"})
    assert off.remote_uri is None and off.where("remote_uri") == "BARCA_REMOTE=off"
    with pytest.raises(TypeError, match="unknown setting"):
        Settings.resolve(tmp_path, environ={}, envv="x")
    assert Settings.resolve(tmp_path, environ={}, project=False).remote_uri is None


def test_api_keywords_choose_the_store_and_the_executor_per_call(seed: Project) -> None:
    """Two calls in one process with different environments keep to their own stores; the
    executor and pool size keywords reach the executor; a bad one names the keyword."""
    import subprocess
    import sys
    code = """
import os, barca
from barca.core.errors import UsageError
a = barca.get("report", "pipeline.py", env="a")
b = barca.get("report", "pipeline.py", env="b", executor="local", pool_size=1)
print(a["tickers"], b["tickers"], sorted(os.listdir(".barca/envs")),
      os.path.exists(".barca/metadata.db"))
print({r.name: r.state for r in barca.status("pipeline.py", env="a").rows}["report"],
      {r.name: r.state for r in barca.status("pipeline.py").rows}["report"],
      len(barca.history(env="b")), len(barca.history(env="a")))
print(barca.plan("pipeline.py", pool_size=7).pool_size)
try:
    barca.get("report", "pipeline.py", env="c", executor="nowhere")
except UsageError as exc:
    print(exc.message)
try:
    barca.status("pipeline.py", colour="red")
except TypeError as exc:
    print("TypeError", "colour" in str(exc))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=seed.path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "3 3 ['a', 'b'] False"
    assert lines[1] == "cached unknown 1 1"  # the default store saw no run
    assert lines[2] == "7"
    assert lines[3].startswith("--executor='nowhere' is not an executor")
    assert lines[4] == "TypeError True"


def test_executor_and_output_flag_then_variable_then_file(seed: Project) -> None:
    seed.write("barca.toml", '[run]\nexecutor = "bogus-file"\n')
    r = seed.barca("get", "report", "pipeline.py", "--pretty")
    assert r.code == 2 and "[run] executor='bogus-file' is not an executor" in r.err, r.err
    r = seed.barca("get", "report", "pipeline.py", "--pretty",
                   env={"BARCA_EXECUTOR": "bogus-var"})
    assert r.code == 2 and "BARCA_EXECUTOR='bogus-var'" in r.err, r.err
    r = seed.barca("get", "report", "pipeline.py", "--executor", "local",
                   env={"BARCA_EXECUTOR": "bogus-var", "BARCA_OUTPUT": "pretty"})
    assert r.code == 0, r.err
    assert "tickers" in r.out and not r.out.startswith("{")  # BARCA_OUTPUT=pretty
    r = seed.barca("status", "pipeline.py", "--json", env={"BARCA_OUTPUT": "pretty"})
    assert json.loads(r.out)  # the flag wins over the variable
