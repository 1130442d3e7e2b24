"""Safe to hand to a team (issue #35): human output never sends a control character raw, a
URL's credentials are never echoed, a symlink planted in a shared store is never written through."""
from __future__ import annotations

import json

import pytest

PIPELINE = '''
from barca import asset, partitions

@asset(partitions={"k": partitions(["ok", "evil\\x1b]52;c;aGk=\\x07", "bad\\rline"])})
def a(k: str) -> str:
    if k.startswith("bad"):
        raise ValueError(f"no {k}")
    return k
'''
RAW = ("\x1b", "\x07", "\r")


@pytest.mark.slow
def test_control_characters_in_keys_are_escaped_for_people(project) -> None:
    project.write("pipeline.py", PIPELINE)
    shown = []
    for args in (["get", "a", "pipeline.py", "--pretty"],
                 ["get", "a", "pipeline.py", "--pretty", "--agent"],
                 ["status", "pipeline.py", "--pretty"],
                 ["get", "a", "pipeline.py", "--dry-run", "--pretty"],
                 ["history", "--pretty"]):
        r = project.barca(*args)
        assert r.code in (0, 1), (args, r.err)
        text = r.out + r.err
        assert not any(c in text for c in RAW), (args, repr(text))
        shown.append(text)
    assert "bad\\x0dline" in shown[0] and "bad\\x0dline" in shown[1], shown[:2]
    doc = project.barca("get", "a", "pipeline.py", "--json").out
    assert json.loads(doc)["failed_node"] == "pipeline.py:a[k=bad\rline]"  # JSON: as written
    project.edit("pipeline.py", ', "bad\\rline"', "")
    r = project.barca("get", "a", "pipeline.py", "-o", "path", "--pretty")
    assert r.code == 0 and not any(c in r.out + r.err for c in RAW), repr(r.out + r.err)
    # the paths alone (one a line, in key order): each an existing file, whatever its key
    assert [(project.path / p).is_file() for p in r.out.splitlines()] == [True, True], r.out


@pytest.mark.slow
def test_credentials_in_a_store_url_are_never_echoed(seed) -> None:
    # a refused connection on the loopback: the store's filesystem connects when it is made
    env = {"BARCA_REMOTE_URI": "ftp://alice:hunter2@127.0.0.1:1/store"}
    for args in (["doctor", "--json"], ["doctor", "--pretty"],
                 ["get", "report", "pipeline.py", "--json"],
                 ["get", "report", "pipeline.py", "--pretty"]):
        r = seed.barca(*args, env=env, timeout=60)
        text = r.out + r.err
        assert "hunter2" not in text and "alice" not in text, (args, text)
        assert "ftp://***@127.0.0.1:1/store" in text, (args, text)
        if args[0] == "get":   # the store cannot be reached: infrastructure, not a barca bug
            assert r.code == 3 and "internal error" not in text, (args, text)


def test_redact_hides_user_and_password_of_every_url() -> None:
    from barca.core.errors import UsageError, redact
    assert (redact("s3://AKIA:secret@bucket/x and tcp://u@h:1")
            == "s3://***@bucket/x and tcp://***@h:1")
    assert redact("file:///home/me/store") == "file:///home/me/store"
    assert "secret" not in str(UsageError("BARCA_REMOTE_URI='gs://k:secret@b' is bad", "fix"))


@pytest.mark.slow
def test_a_symlink_in_a_folder_store_is_never_written_through(seed, tmp_path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (store / ".barca-store").symlink_to(victim)
    r = seed.barca("get", "report", "pipeline.py", "--json",
                   env={"BARCA_REMOTE_URI": store.as_uri()})
    assert r.code == 0, r.err
    assert victim.read_text() == "precious\n"
    assert not (store / ".barca-store").is_symlink()


def test_two_keys_never_share_a_folder_or_a_sink_file() -> None:
    from barca.store.artifacts import node_dir
    from barca.store.sinks import targets
    pairs = [("c=ACME Corp", "c=ACME_Corp-27de7f2960"),       # cleaned+tagged vs kept as is
             ("c=ACME Corp", "c=ACME_Corp"),
             ("region=eu_year_2024,year=x", "region=eu,year=2024_year_x"),
             ("c=a~b", "c=a_b"), ("c=.", "c=_")]
    for a, b in pairs:
        assert node_dir("p.py:f", a) != node_dir("p.py:f", b), (a, b)
        assert targets("out.json", a) != targets("out.json", b), (a, b)
        assert targets("out/", a) != targets("out/", b), (a, b)
    # plain keys keep the seed page's names
    assert node_dir("pipeline.py:prices", "ticker=AAPL") == "pipeline.py--prices_ticker_AAPL"
    assert node_dir("p.py:f", "region=eu_west") == "p.py--f_region_eu_west"


@pytest.mark.slow
def test_keys_that_differ_only_in_case_are_a_usage_error(project) -> None:
    project.write("pipeline.py", '''
from barca import asset, partitions

@asset(partitions={"t": partitions(["AAPL", "MSFT", "aapl"])})
def prices(t: str) -> str:
    return t
''')
    r = project.barca("get", "prices", "pipeline.py", "--json")
    assert r.code == 2, r.err
    assert "'aapl' (duplicate of 'AAPL')" in r.err, r.err
    assert not (project.path / ".barca" / "artifacts").exists()
