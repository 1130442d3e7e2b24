"""barca sql reads parquet results in place (#31): one DuckDB scan of the current keys' files,
pandas never imported for a query that returns rows, the digest check remembered per file state
and still refusing changed bytes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

PIPELINE = '''
import pandas as pd
from barca import asset, partitions

KEYS = [f"m{i:02d}" for i in range(N_KEYS)]

@asset(partitions={"month": partitions(KEYS)})
def trips(month: str) -> pd.DataFrame:
    i = int(month[1:])
    df = pd.DataFrame({"km": [i * 10 + j for j in range(i % 3 + 1)], "tag": [month] * (i % 3 + 1)})
    if i % 2:
        df["extra"] = 1.5          # some keys have a column the others lack
    if i % 4 == 1:
        df.index = df.index + 100  # an index pandas keeps as __index_level_0__
    return df

@asset
def one() -> pd.DataFrame:
    return pd.DataFrame({"a": [3, 1, 2]}, index=[7, 8, 9])
'''


def _expected(n_keys: int) -> list[list]:
    rows = []
    for i in range(n_keys):
        for j in range(i % 3 + 1):
            rows.append([f"month=m{i:02d}", i * 10 + j, f"m{i:02d}", 1.5 if i % 2 else None])
    return rows


def _sql(project, query: str, *extra: str):
    env = dict(os.environ)
    env.pop("BARCA_OUTPUT", None)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "barca", "sql", query,
                           "--json", "--all", *extra], cwd=project.path, capture_output=True,
                          text=True, timeout=120, env=env)
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    return proc, imported


@pytest.mark.parametrize("n_keys", [5, 70])   # a key by position in a list; by a join
def test_parquet_views_are_scanned_in_place_without_pandas(project, n_keys):
    project.write("pipeline.py", PIPELINE.replace("N_KEYS", str(n_keys)))
    r = project.barca("get", "trips", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert project.barca("get", "one", "pipeline.py", "--json").code == 0
    proc, imported = _sql(project, "select * from trips")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["columns"] == ["partition", "km", "tag", "extra"]
    rows = [[row[c] for c in out["columns"]] for row in out["rows"]]  # rows are objects (#29)
    assert rows == _expected(n_keys)   # key order, then file order; no index column
    assert "pandas" not in imported and "duckdb" in imported
    proc, imported = _sql(project, "select count(*), sum(km) from trips")
    doc = json.loads(proc.stdout)
    assert [[row[c] for c in doc["columns"]] for row in doc["rows"]] == [
        [len(_expected(n_keys)), sum(r[1] for r in _expected(n_keys))]]
    assert "pandas" not in imported
    proc, _ = _sql(project, "select * from one")
    doc = json.loads(proc.stdout)
    assert [[row[c] for c in doc["columns"]] for row in doc["rows"]] == [[3], [1], [2]]


def test_a_result_changed_after_its_check_is_still_refused(project):
    project.write("pipeline.py", PIPELINE.replace("N_KEYS", "3"))
    assert project.barca("get", "trips", "pipeline.py", "--json").code == 0
    time.sleep(2.2)   # older than the clock's tick: the check is remembered
    proc, _ = _sql(project, "select sum(km) from trips")
    assert proc.returncode == 0, proc.stderr[-2000:]
    memo = json.loads((project.path / ".barca" / "views" / ".verified.json").read_text())
    assert len(memo["files"]) == 3
    target = next((project.path / ".barca" / "artifacts").glob("*m01*/*.parquet"))
    data = bytearray(target.read_bytes())
    st = target.stat()
    data[len(data) // 2] ^= 0xFF        # same size, then the old modification time back
    target.write_bytes(bytes(data))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    proc, _ = _sql(project, "select sum(km) from trips")
    assert proc.returncode == 2 and "is not the one recorded" in proc.stderr, proc.stderr


class _ThreeSecondsOn:
    """The clock as it will read in 3 s: a file written in the last seconds is hashed each
    time (racy), and this one is past that window without the test waiting for it."""

    @staticmethod
    def time_ns() -> int:
        return time.time_ns() + 3_000_000_000


def test_the_check_memo_of_another_barca_is_ignored(tmp_path, monkeypatch):
    """A memo like the others: keyed by the one salt, and by the digest it vouched for."""
    from barca.engine import integrity
    from barca.engine.integrity import VerifiedFiles
    f = tmp_path / "r.bin"
    f.write_bytes(b"abc")
    monkeypatch.setattr(integrity, "time", _ThreeSecondsOn)
    import hashlib
    digest = hashlib.sha256(b"abc").hexdigest()
    memo = VerifiedFiles(tmp_path)
    assert memo.intact(str(f), digest) and str(f) in memo.files
    assert not memo.intact(str(f), hashlib.sha256(b"abd").hexdigest())
    memo.intact(str(f), digest)
    memo.save()
    assert str(f) in VerifiedFiles(tmp_path).files
    doc = json.loads((tmp_path / VerifiedFiles.NAME).read_text())
    doc["salt"] = "another barca"
    (tmp_path / VerifiedFiles.NAME).write_text(json.dumps(doc))
    assert VerifiedFiles(tmp_path).files == {}
