"""A run's JSON document on one line (what ``barca get --json`` prints on a pipe): the text
``json.dumps(res.to_json(), separators=(",", ":"), default=str, ensure_ascii=False)`` makes,
byte for byte (tests/test_compact_json.py), with each step's entry written from its fields by
json's own string encoder rather than made a dict and walked by the generic encoder: the 500
entries of a wide cached get were ~9 M instructions that way."""
from __future__ import annotations

from barca.core import jsontext
from barca.core.jsontext import encode_basestring as _text  # json.dumps's, for a str, here

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any  # (a RunResult and its StepSummaries: results imports this module)


def dumps(value: Any) -> str:
    """``value`` as the one-line document writes it."""
    return jsontext.dumps(value, separators=(",", ":"), default=str, ensure_ascii=False)


def step_entry(s: Any) -> str:
    """``dumps(s.entry())``: a step of the usual six fields (and its artifact) written from
    them."""
    if s.partitions is None and not s.extra:
        h, at = s.run_hash, s.artifact
        try:  # (a field that is not a str: the general way, which says what json.dumps says)
            art = "" if at is None else ',"artifact":' + _text(at)
            return (f'{{"id":{_text(s.id)},"kind":{_text(s.kind)},"status":{_text(s.action)},'
                    f'"reason":{_text(s.reason)},"detail":{_text(s.detail)},"run_hash":'
                    f'{"null" if h is None else _text(h)}{art}}}')
        except TypeError:
            pass
    return dumps(s.entry())


def run_line(res: Any) -> str:
    """``dumps(res.to_json())``: its steps' entries written by ``step_entry``."""
    parts = []
    for key, value in res.to_json(entries=False).items():
        text = ("[" + ",".join(map(step_entry, value)) + "]" if key == "steps"
                else dumps(value))
        parts.append(f"{_text(key)}:{text}")
    return "{" + ",".join(parts) + "}"
