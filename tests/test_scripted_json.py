"""`barca list` and `barca history` as scripts written for barca 0.30.2 read them. list:
`inputs` lists the ids a node reads, the document says `total`, `truncated` and `root`, and
`-l/--limit`, `--all` and `--fields` cut it (a table shows 100 nodes unless told otherwise, and
says so on stderr). history: each run's `steps_executed`, `steps_total` and `elapsed_seconds`
(the run document's words), its times (`YYYY-MM-DD HH:MM:SS`, UTC), and how many runs there are."""
from __future__ import annotations

import time

import pytest

from barca.core.errors import UsageError

PIPELINE = '''from barca import asset, collect, partitions, sensor


@sensor()
def feed() -> str:
    return "v1"


@asset(inputs={"f": feed}, partitions={"k": partitions(["a", "b"])}, env=["HOME"])
def per(k: str, f: str) -> str:
    return k + f


@asset(inputs={"xs": collect(per), "f": feed})
def total(xs: list, f: str) -> int:
    return len(xs)
'''


def _chain(n: int) -> str:
    parts = ["from barca import asset\n\n\n@asset()\ndef a000() -> int:\n    return 0\n"]
    parts += [f"\n\n@asset(inputs={{'x': a{i - 1:03d}}})\ndef a{i:03d}(x: int) -> int:\n"
              "    return x\n" for i in range(1, n)]
    return "".join(parts)


def _cli(*argv: str):
    """A command's result as the CLI gets it (parsed and dispatched, in this process)."""
    from barca.faces.commands import dispatch, parse
    return dispatch(parse(list(argv)), on_event=lambda e: None).result


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_inputs_are_the_ids_a_node_reads_and_the_document_counts_them(here) -> None:
    (here / "pipeline.py").write_text(PIPELINE)
    doc = _cli("list", "pipeline.py", "--json").to_json()
    assert {k: doc[k] for k in ("total", "truncated", "root")} == {
        "total": 3, "truncated": False, "root": str(here)}
    assert "hint" not in doc
    nodes = {n["id"]: n for n in doc["nodes"]}
    # sorted ids, a collect() and a plain input alike: never the parameter names
    assert nodes["pipeline.py:total"]["inputs"] == ["pipeline.py:feed", "pipeline.py:per"]
    assert nodes["pipeline.py:per"]["inputs"] == ["pipeline.py:feed"]
    assert nodes["pipeline.py:feed"]["inputs"] == []
    assert nodes["pipeline.py:per"]["env"] == ["HOME"]


def test_limit_all_and_fields(here) -> None:
    (here / "pipeline.py").write_text(_chain(120))
    doc = _cli("list", "pipeline.py", "--json").to_json()  # JSON: every node
    assert len(doc["nodes"]) == 120 and doc["truncated"] is False
    cut = _cli("list", "pipeline.py", "-l", "3", "--json").to_json()
    assert [n["id"] for n in cut["nodes"]] == ["pipeline.py:a000", "pipeline.py:a001",
                                               "pipeline.py:a002"]  # topological order
    assert cut["total"] == 120 and cut["truncated"] is True
    assert cut["hint"] == "pass --limit N for more, or --all for all 120 nodes"
    assert _cli("list", "pipeline.py", "--limit", "0", "--json").to_json()["nodes"] == []
    few = _cli("list", "pipeline.py", "--fields", "id,inputs", "--limit", "2").to_json()
    assert few["nodes"] == [{"id": "pipeline.py:a000", "inputs": []},
                            {"id": "pipeline.py:a001", "inputs": ["pipeline.py:a000"]}]
    for argv, names in ((["--fields", "id,colour"], "colour"),
                        (["--fields", "id", "--pretty"], "JSON output"),
                        (["--limit", "2", "--all"], "--all"),
                        (["--limit", "-1"], "0 or more")):
        with pytest.raises(UsageError, match=names) as got:
            _cli("list", "pipeline.py", *argv)
        assert got.value.code == 2


def test_a_table_shows_100_nodes_and_says_what_it_left_out(here) -> None:
    (here / "pipeline.py").write_text(_chain(120))
    table = _cli("list", "pipeline.py", "--pretty")
    text = str(table)
    assert "pipeline.py:a099" in text and "pipeline.py:a100" not in text
    assert table.cut_note() == ("showing 100 of 120 nodes; pass --limit N for more, or --all "
                                "for all 120 nodes")
    every = _cli("list", "pipeline.py", "--pretty", "--all")
    assert "pipeline.py:a119" in str(every) and every.cut_note() == ""
    assert "showing 100 of 120 nodes" in table._repr_html_()  # a notebook says it too


@pytest.mark.slow
def test_the_cli_prints_the_note_on_stderr_and_the_table_alone_on_stdout(project) -> None:
    project.write("pipeline.py", _chain(120))
    r = project.barca("list", "pipeline.py", "--pretty")
    assert r.code == 0, r.err
    assert len(r.out.strip().splitlines()) == 102  # the header, its rule and 100 rows
    assert r.err.strip() == ("[barca] note: showing 100 of 120 nodes; pass --limit N for "
                             "more, or --all for all 120 nodes")
    r = project.barca("list", "pipeline.py", "--fields", "id,bogus")
    assert r.code == 2 and "bogus" in r.err and r.out == ""


def test_history_says_a_runs_counts_and_time_in_the_run_documents_words(here) -> None:
    import barca
    (here / "pipeline.py").write_text(PIPELINE)
    barca.get("pipeline.py")                   # 4 steps: feed, per x2, total
    barca.get("total", "pipeline.py")          # feed again; the rest cached
    doc = _cli("history", "--json", "--limit", "1").to_json()
    assert doc["total"] == 2 and doc["truncated"] is True
    (run,) = doc["runs"]
    assert run["steps_executed"] == run["steps_run"] == 1
    assert run["steps_total"] == 4 and run["steps_cached"] == 3
    # its times as barca 0.30.2's history and barca's other documents write them: UTC, to
    # the second; the elapsed time keeps its fraction
    import datetime as dt
    start, end = (dt.datetime.strptime(run[k], "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC)
                  for k in ("started_at", "finished_at"))
    assert abs(start.timestamp() - time.time()) < 120
    assert 0 <= run["elapsed_seconds"] <= (end - start).total_seconds() + 1
    every = _cli("history", "--json").to_json()
    assert every["total"] == 2 and every["truncated"] is False


BROKEN = '''from barca import asset


@asset()
def good() -> int:
    return 1


@asset()
def bad() -> int:
    raise ValueError("no")
'''


def test_history_filters_as_barca_0_30_2_takes_them(here) -> None:
    import barca
    from barca.core.errors import StepFailed
    (here / "pipeline.py").write_text(BROKEN)
    barca.get("good", "pipeline.py")
    with pytest.raises(StepFailed):
        barca.get("bad", "pipeline.py")
    barca.get("good", "pipeline.py")

    def ids(*argv: str) -> list[str]:
        return [r["target"] for r in _cli("history", "--json", *argv).to_json()["runs"]]

    assert ids() == ["good", "bad", "good"]  # newest first
    assert ids("--status", "failed") == ["bad"]
    assert ids("--status", "success,failed", "--target", "good") == ["good", "good"]
    assert ids("--target", "pipeline.py:bad") == ["bad"]  # a node id names it too
    assert ids("--triggered-by", "manual") == ["good", "bad", "good"]
    assert ids("--triggered-by", "schedule") == []
    assert ids("--since", "1h") == ["good", "bad", "good"]
    assert ids("--since", "2999-01-01") == [] and ids("--since", "1970-01-02T00:00:00Z") != []
    cut = _cli("history", "--json", "--status", "success", "-l", "1").to_json()
    assert (cut["total"], cut["truncated"], len(cut["runs"])) == (2, True, 1)
    assert cut["hint"] == "pass --limit N for more, or --all for all 2 runs"
    every = _cli("history", "--json", "--all", "--fields", "target,status").to_json()
    assert every["runs"][1] == {"target": "bad", "status": "failed"}
    assert every["truncated"] is False and "hint" not in every
    table = _cli("history", "--limit", "2", "--pretty")
    assert table.cut_note() == ("showing 2 of 3 runs; pass --limit N for more, or --all for "
                                "all 3 runs")
    for argv, says in ((["--status", "done"], "done"), (["--triggered-by", "cron"], "cron"),
                       (["--since", "yesterday"], "yesterday"), (["--limit", "2", "--all"],
                                                                 "--all"),
                       (["--fields", "run_id", "--pretty"], "JSON output"),
                       (["--fields", "colour"], "colour"), (["--limit", "-1"], "0 or more")):
        with pytest.raises(UsageError, match=says) as got:
            _cli("history", *argv)
        assert got.value.code == 2


def test_history_of_one_run_shows_its_steps_and_why_one_failed(here) -> None:
    import barca
    from barca.core.errors import StepFailed
    (here / "pipeline.py").write_text(BROKEN.replace("def bad() -> int:",
                                                     "def bad() -> int:\n    print('hm')"))
    barca.get("good", "pipeline.py")
    with pytest.raises(StepFailed):
        barca.get("bad", "pipeline.py")
    (newest, oldest) = [r["run_id"] for r in _cli("history", "--json").to_json()["runs"]]
    same = next(i for i, (a, b) in enumerate(zip(newest, oldest, strict=True)) if a != b)
    for command in ("history", "logs"):  # (logs reads a run id the same way)
        with pytest.raises(UsageError, match="the start of several run ids"):
            _cli(command, newest[:same])
    doc = _cli("history", newest[:same + 1], "--json").to_json()  # a unique prefix names it
    assert doc["run"]["run_id"] == newest and doc["run"]["status"] == "failed"
    (step,) = doc["steps"]
    assert step["node_id"] == "pipeline.py:bad" and step["status"] == "failed"
    assert (step["error"], step["error_type"], step["error_message"]) == (
        "ValueError: no", "ValueError", "no")
    assert 'raise ValueError("no")' in step["error_traceback"]
    assert step["artifact_path"] is None and step["partition_key"] is None
    assert doc["steps_page"] == {"total": 1, "truncated": False}
    assert doc["hint"] == f"barca logs {newest} --step bad --stream stderr"
    ok = _cli("history", oldest, "--json").to_json()
    (good,) = ok["steps"]
    assert good["artifact_path"].startswith(".barca/artifacts/") and good["artifact_format"] \
        == "json" and good["artifact_size_bytes"] == 1 and "hint" not in ok
    text = str(_cli("history", newest, "--pretty"))
    assert text.splitlines()[0].startswith(f"run {newest}  get bad  failed  ")
    assert "pipeline.py:bad failed: ValueError: no" in text and "raise ValueError" in text
    assert str(_cli("history", oldest, "--pretty")).splitlines()[5].split() == [
        "STEP", "STATUS", "ATTEMPTS", "TIME", "RUN_HASH", "ARTIFACT"]
    cut = _cli("history", oldest, "--limit", "0", "--json").to_json()
    assert cut["steps"] == [] and cut["steps_page"] == {"total": 1, "truncated": True}
    with pytest.raises(UsageError, match="No run 'zzz'"):
        _cli("history", "zzz")
    with pytest.raises(UsageError, match="--since narrows the list of runs"):
        _cli("history", newest, "--since", "1d")


def test_get_fields_and_the_dry_runs_words(here) -> None:
    """get/run --fields keeps those keys of each step (checked before anything runs); a dry
    run's step that will run says action "run" and, one step, its run hash; an unpartitioned
    step has no partitions key, in a run's document and a dry run's alike."""
    (here / "pipeline.py").write_text(DRY)
    plan = _cli("get", "total", "pipeline.py", "--dry-run", "--json").to_json()
    steps = {s["id"]: s for s in plan["steps"]}
    assert {s["action"] for s in plan["steps"]} == {"run"}
    assert len(steps["pipeline.py:total"]["run_hash"]) == 64
    assert "partitions" not in steps["pipeline.py:total"]
    assert "run_hash" not in steps["pipeline.py:per"] and steps["pipeline.py:per"][
        "partitions"]["will_run"] == 2
    assert "will run" in str(_cli("get", "total", "pipeline.py", "--dry-run", "--pretty"))
    for argv, says in ((["--fields", "id,colour"], "colour"),
                       (["--fields", "id", "--pretty"], "--pretty"),
                       (["--fields", "id", "-o", "value"], "-o value")):
        with pytest.raises(UsageError, match=says):
            _cli("get", "total", "pipeline.py", *argv)
    assert not (here / ".barca").exists()  # refused before anything ran


DRY = '''from barca import asset, collect, partitions


@asset(partitions={"k": partitions(["a", "b"])})
def per(k: str) -> str:
    return k


@asset(inputs={"xs": collect(per)})
def total(xs: list) -> int:
    return len(xs)
'''


@pytest.mark.slow
def test_get_fields_cuts_each_step_of_the_printed_document(project) -> None:
    project.write("pipeline.py", DRY)
    r = project.barca("get", "total", "pipeline.py", "--fields", "id,status")
    assert r.code == 0, r.err
    assert r.json()["steps"][-1] == {"id": "pipeline.py:total", "status": "ran"}
    assert r.json()["final_output"] == 2
    dry = project.barca("get", "total", "pipeline.py", "--dry-run", "--fields", "id,action")
    assert dry.json()["steps"][-1] == {"id": "pipeline.py:total", "action": "cached"}


def test_docs_json_lists_topics_and_gives_one(here) -> None:
    index = _cli("docs", "--json").to_json()
    names = [t["name"] for t in index["topics"]]
    assert "cache" in names and "index" not in names
    assert all(t["summary"] for t in index["topics"])
    page = _cli("docs", "cache", "--json").to_json()
    assert set(page) == {"name", "summary", "content"} and page["name"] == "cache"
    assert page["content"].startswith("# ")
    every = _cli("docs", "--all", "--json").to_json()["topics"]
    assert [t["name"] for t in every] == names and all(t["content"] for t in every)
    text = str(_cli("docs", "--all"))
    assert text.count("<!-- barca docs: ") == len(names) and page["content"].strip() in text
    with pytest.raises(UsageError, match="takes no topic"):
        _cli("docs", "cache", "--all")


@pytest.mark.slow
def test_docs_on_a_pipe_is_the_text_and_json_only_when_asked(project) -> None:
    r = project.barca("docs", "cache")
    assert r.code == 0 and r.out.startswith("# ")  # (a pipe: still the text)
    assert project.barca("docs", "cache", "--json").json()["name"] == "cache"


def test_sql_show_tables_lists_the_views_and_barcas_tables(here) -> None:
    pytest.importorskip("duckdb")
    import barca
    (here / "pipeline.py").write_text(DRY)
    barca.get("total", "pipeline.py")
    got = _cli("sql", "show tables", "pipeline.py", "--json").to_json()
    assert [r["name"] for r in got["rows"]] == ["per", "total", "barca.materializations",
                                                "barca.nodes", "barca.runs"]
    assert got["total"] == 5 and got["columns"] == ["name"]
    assert _cli("sql", " SHOW TABLES; ", "pipeline.py", "--json").to_json()["total"] == 5


def test_status_names_the_result_as_barca_0_30_2_does_too(here) -> None:
    import barca
    (here / "pipeline.py").write_text(DRY)
    barca.get("total", "pipeline.py")
    nodes = {n["name"]: n for n in _cli("status", "pipeline.py", "--json").to_json()["nodes"]}
    lm = nodes["total"]["last_materialization"]
    assert lm["artifact"] == lm["path"] and lm["artifact"].startswith(".barca/artifacts/")
    assert lm["size_bytes"] == lm["size"] == (here / lm["path"]).stat().st_size
    import hashlib
    assert lm["content_hash"] == hashlib.sha256((here / lm["path"]).read_bytes()).hexdigest()
