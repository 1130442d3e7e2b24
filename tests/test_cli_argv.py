"""The plain reader of everyday command lines (barca.faces.argv, #31 item 2) reads every line it
takes exactly as the argparse grammar does, and leaves every other line to the grammar."""
from __future__ import annotations

import itertools

import pytest

from barca.core.errors import UsageError
from barca.faces import argv, grammar
from barca.faces.commands import parse


def _grammar(line: list[str]) -> dict[str, object]:
    return dict(vars(grammar.read(line)))


@pytest.mark.parametrize("command", sorted(argv.FAST))
def test_the_plain_defaults_are_the_grammars(command: str) -> None:
    """Every flag of the grammar has its default here, in the grammar's order; every flag read
    here is an on/off flag of the grammar (a flag added to one and not the other fails)."""
    defaults, flags = argv.FAST[command]
    assert list(_grammar([command])) == [*defaults, "args", "command"]
    assert _grammar([command]) == {**defaults, "args": [], "command": command}
    sub = grammar.parser(command)._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    for flag in flags:
        action = next(a for a in sub._actions if flag in a.option_strings)
        assert action.nargs == 0 and action.const is True, flag


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(argv.FAST))
def test_the_plain_reader_reads_as_the_grammar(command: str) -> None:
    flags = argv.FAST[command][1]
    words = ["a099", "pipeline.py", "x,y", "sub/p.py", ""]
    lines = 0
    for n in range(4):
        for chosen in itertools.permutations([*flags, *words[:3]], n):
            line = [command, *chosen]
            plain = argv.read(line)
            if "--json" in chosen and "--pretty" in chosen:
                assert plain is None
                with pytest.raises(UsageError, match="not allowed with"):
                    grammar.read(line)
                continue
            assert plain is not None, line
            assert vars(plain) == _grammar(line), line
            assert list(vars(plain)) == list(_grammar(line)), line
            lines += 1
    assert lines > 100
    assert vars(argv.read([command, ""])) == _grammar([command, ""])


@pytest.mark.parametrize("line", [
    [], ["--help"], ["get", "--help"], ["get", "-h"], ["get", "--js"], ["get", "--json", "--json"],
    ["get", "--env", "dev"], ["get", "--env=dev"], ["get", "-o", "value"], ["get", "--"],
    ["get", "-"], ["get", "--refresh", "a"], ["status", "--limit", "3"], ["pipeline.py"],
    ["list"], ["get", "--bogus"], ["status", "--agent"], ["stauts"], ["--version"],
])
def test_other_lines_go_to_the_grammar(line: list[str]) -> None:
    assert argv.read(line) is None


def test_parse_gives_the_same_namespace_either_way() -> None:
    got = parse(["get", "a099", "pipeline.py", "--json"])
    slow = parse(["get", "a099", "pipeline.py", "--json", "--env", "default"])
    assert type(got) is type(slow)
    assert {**vars(slow), "env": None} == vars(got)
    got.args.append("changed")  # a copy each time: the next parse is not changed
    assert parse(["get", "a099", "pipeline.py", "--json"]).args == ["a099", "pipeline.py"]
    with pytest.raises(UsageError, match="Unknown option '--bogus' for `barca get`"):
        parse(["get", "--bogus"])
