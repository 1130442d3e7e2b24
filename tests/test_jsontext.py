"""barca.core.jsontext (#31 item 2): JSON text from ``_json`` alone is json's, byte for byte,
for every call form barca uses, and its errors are json's (type, message, position)."""
from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barca.core import jsontext

# the call forms barca makes (faces/cli, faces/outcome, present/display, identity/hashing,
# engine/settle, engine/adoption, engine/defcache, core/errors), and a few more
FORMS: list[dict[str, Any]] = [
    {},
    {"default": str},
    {"sort_keys": True},
    {"separators": (",", ":"), "default": str, "ensure_ascii": False},
    {"separators": (",", ":"), "ensure_ascii": False},
    {"separators": (",", ":"), "sort_keys": True, "ensure_ascii": False},
    {"ensure_ascii": False},
    {"ensure_ascii": False, "default": str},
    {"ensure_ascii": False, "indent": 2},
    {"ensure_ascii": False, "indent": 2, "default": str},
    {"indent": 2, "default": str, "ensure_ascii": False},
    {"separators": (";", "="), "sort_keys": True},
    {"ensure_ascii": False, "allow_nan": False},
    {"ensure_ascii": False, "allow_nan": False, "default": repr, "indent": 2},
    {"indent": "\t", "sort_keys": True},
]

STRINGS = ["", "a", "é", "日本語", "\U0001f600", "\ud800", "\udfff", "a\ud83dz", "\x00\x1f\x7f",
           '"\\/\b\f\n\r\t', "\u2028\u2029", "\ufeff", "ÿ" * 40, "x" * 1000]
SCALARS = [None, True, False, 0, 1, -1, 2**63, -(2**64) - 7, 10**30, 0.0, -0.0, 1.5, 1e-300,
           1e300, 5e-324, 0.1 + 0.2, 123456789.123456789, float("inf"), float("-inf"),
           float("nan"), *STRINGS]


def values() -> list[Any]:
    rnd = random.Random(2)
    out: list[Any] = list(SCALARS)
    out += [[], {}, (), [1, [2, [3, [4]]]], (1, "a", None), {"b": 1, "a": 2, "c": [1, 2]},
            {"é": {"\ud800": [float("nan")]}, "": None}, {7: "int key", 2.5: "float key",
                                                         True: "bool key", None: "none key"},
            {"z": {"y": {"x": {}}}}, [{"k": v} for v in SCALARS], dict.fromkeys(STRINGS, 1)]

    def rand(depth: int) -> Any:
        r = rnd.random()
        if depth > 3 or r < 0.4:
            return rnd.choice(SCALARS)
        if r < 0.7:
            return [rand(depth + 1) for _ in range(rnd.randrange(5))]
        return {rnd.choice(STRINGS) + str(rnd.randrange(9)): rand(depth + 1)
                for _ in range(rnd.randrange(5))}
    out += [rand(0) for _ in range(300)]
    return out


def raised(call: Any, *args: Any, **kw: Any) -> tuple[Any, ...]:
    """``call(*args, **kw)``'s value, or its error's type, message and position."""
    try:
        return ("ok", call(*args, **kw))
    except Exception as exc:  # noqa: BLE001 - the error itself is compared
        return (type(exc), str(exc), getattr(exc, "pos", None))


def test_dumps_is_json_dumps_for_every_form() -> None:
    for form in FORMS:
        for v in values():
            assert raised(jsontext.dumps, v, **form) == \
                raised(json.dumps, v, **form), (form, v)


def test_encoder_is_json_encoder_encode() -> None:
    forms = [{"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False,
              "allow_nan": False}, {"allow_nan": False}, {"default": repr}]
    for form in forms:
        mine, theirs = jsontext.encoder(**form), json.JSONEncoder(**form).encode
        for v in values():
            assert raised(mine, v) == raised(theirs, v), (form, v)


class Odd:
    pass


def test_errors_are_json_errors() -> None:
    circular: list[Any] = []
    circular.append(circular)
    loop: dict[str, Any] = {}
    loop["me"] = loop
    for v in [Odd(), [1, Odd()], {"a": {1, 2}}, {(1, 2): 3}, circular, loop, b"bytes",
              complex(1, 2)]:
        for form in [{}, {"sort_keys": True}, {"ensure_ascii": False},
                     {"separators": (",", ":"), "ensure_ascii": False}]:
            got, want = raised(jsontext.dumps, v, **form), \
                raised(json.dumps, v, **form)
            assert got == want, (v, form)
            assert got[0] in (TypeError, ValueError), got
    strict = jsontext.encoder(allow_nan=False)
    assert raised(strict, [math.inf]) == \
        raised(json.JSONEncoder(allow_nan=False).encode, [math.inf])
    assert raised(strict, [math.inf])[0] is ValueError
    # a default that gives something unserializable
    assert raised(jsontext.dumps, [Odd()], default=lambda o: o) == \
        raised(json.dumps, [Odd()], default=lambda o: o)


TEXTS = ["0", "-0", "1.5", "1e400", "-1e400", "1E5", "12345678901234567890123", "NaN",
         "Infinity", "-Infinity", "true", "false", "null", '""', '"\\ud800"', '"\\ud83d\\ude00"',
         '"é\\u00e9"', '"\\n\\t\\"\\\\\\/"', "[]", "{}", " [1, 2 ,3] ", "\t\n\r {\"a\": [1, {}]}\n",
         '{"a": 1, "a": 2}', '{"b": 1, "a": [null, true]}', "[" * 50 + "]" * 50, '"日本"',
         # errors: no value, extra data, bad tokens, a BOM, control characters, truncation
         "", " ", "[", "]", "[1,]", "{\"a\" 1}", "{'a': 1}", "1 2", "[1] x", "nul", "tru",
         "\ufeff[1]", '"a\nb"', '"\\x"', '"\\ud8"', "01", "-", "1.", ".5", "+1", "[1 2]",
         '{"a":1,}', "\x0b1", "1\x0b", "\u00a01", "{\"a\": [1, 2, {\"b\": }]}"]


def test_loads_is_json_loads() -> None:
    rnd = random.Random(5)
    texts = list(TEXTS)
    for v in values():
        t = json.dumps(v)
        texts += [t, " " + t + "\n", json.dumps(v, ensure_ascii=False, indent=1)]
        if len(t) > 2:
            cut = rnd.randrange(1, len(t))
            texts += [t[:cut], t[:cut] + "x" + t[cut:]]
    for t in texts:
        got, want = raised(jsontext.loads, t), raised(json.loads, t)
        assert repr(got) == repr(want), t  # (repr: NaN is equal to no NaN)
        for b in (t.encode("utf-8", "surrogatepass"), t.encode("utf-16", "surrogatepass")):
            assert repr(raised(jsontext.loads, b)) == \
                repr(raised(json.loads, b)), b


def test_the_scanner_is_json_decoders() -> None:
    scan, theirs = jsontext.scanner(), json.JSONDecoder().scan_once
    for t in TEXTS + [json.dumps(v) for v in values()]:
        for i in (0, 1):
            assert repr(raised(scan, t, i)) == repr(raised(theirs, t, i)), t


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids),
                    max_leaves=20),
       st.sampled_from(FORMS))
def test_any_value_any_form(value: Any, form: dict[str, Any]) -> None:
    assert raised(jsontext.dumps, value, **form) == \
        raised(json.dumps, value, **form)
    text = json.dumps(value, ensure_ascii=form.get("ensure_ascii", True))
    assert repr(jsontext.loads(text)) == repr(json.loads(text))


@pytest.mark.slow
def test_the_module_needs_no_json() -> None:
    """Its point: writing and reading plain JSON loads neither json nor re (-S: no site, whose
    .pth files may import them)."""
    code = ("import sys; from barca.core import jsontext as j\n"
            "t = j.dumps({'a': [1, 2.5, None, 'é']}, separators=(',', ':'), ensure_ascii=False,"
            " default=str)\n"
            "assert j.loads(t) == {'a': [1, 2.5, None, 'é']}, t\n"
            "print(sorted({'json', 're', 'enum', 'functools'} & set(sys.modules)))\n")
    import barca
    root = barca.__file__.rsplit("/barca/", 1)[0]
    proc = subprocess.run([sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, "
                           f"{root!r})\n" + code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("v", [{"k": v} for v in SCALARS])
def test_the_settle_record_round_trip(v: dict[str, Any]) -> None:
    """What engine/settle writes with json and reads back with jsontext (and the reverse)."""
    assert repr(jsontext.loads(json.dumps(v, sort_keys=True))) == repr(v)
    assert repr(json.loads(jsontext.dumps(v, sort_keys=True))) == repr(v)


def test_without_the_c_half_json_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another Python (no ``_json``): json's own encoder and scanner, the same text."""
    monkeypatch.setattr(jsontext, "_C", None)
    monkeypatch.setattr(jsontext, "_ENCODERS", {})
    monkeypatch.setattr(jsontext, "_scan", [])
    for v in values()[:60]:
        for form in FORMS:
            assert raised(jsontext.dumps, v, **form) == raised(json.dumps, v, **form)
        t = json.dumps(v)
        assert repr(jsontext.loads(t)) == repr(json.loads(t))
        assert repr(jsontext.scanner()(t, 0)) == repr(json.JSONDecoder().scan_once(t, 0))


def test_a_default_made_per_call_is_not_kept() -> None:
    """A kernel or a server lives long: a ``default`` function made per call (as
    faces.outcome's) does not fill the encoders kept."""
    for i in range(100):
        def default(o: Any, i: int = i) -> Any:
            return str(o)
        assert jsontext.dumps([Odd()], default=default).startswith('["<')
    assert len(jsontext._ENCODERS) <= 16


class Word(str):
    pass


class Big(int):
    pass


class Pair(tuple):  # noqa: SLOT001 - (a tuple subclass, as a namedtuple is)
    pass


def test_indented_text_is_json_s() -> None:
    """``indent``: json's own layout (its pure-Python encoder), each scalar by the C one."""
    odd = Odd()
    extra = [odd, [odd, {"k": odd}], {1: odd, "a": []}, {}, [], [[]], [{}], {"a": {}},
             Word("w"), [Word("é")], {Word("k"): Big(7)}, Big(2**70), Pair((1, Pair(()))),
             {2.5: 1, True: 2, None: 3, "s": 4}, {(1, 2): 3}, [float("nan"), {"x": -0.0}]]
    forms = [f for f in FORMS if "indent" in f] + [
        {"indent": 0}, {"indent": -1}, {"indent": ""}, {"indent": 4, "separators": (",", ":")},
        {"indent": 1, "sort_keys": True, "default": repr},
        {"indent": 2, "ensure_ascii": False, "default": lambda o: [o.__class__.__name__]}]
    for form in forms:
        for v in values() + extra:
            assert raised(jsontext.dumps, v, **form) == raised(json.dumps, v, **form), (form, v)
