"""Whether a file's text imports barca: what discovery (``find_files``) asks of every ``.py``
file under a project it was given no file of."""
from __future__ import annotations


def imports_barca(text: str) -> bool:
    """``re.search(r"^\\s*(from\\s+barca[\\s.]|import\\s+barca\\b)", text, re.M)``, exactly
    (tests/test_sniff.py), without ``re``: a command given no file loads neither it nor the
    ``enum`` it imports (#31 item 2). Each ``barca`` of the text is looked at from where it is:
    whitespace before it, ``from`` or ``import`` before that, then only whitespace back to a
    line's start (``\\s`` is ``str.isspace``, ``\\b`` a next character that is not
    ``str.isalnum`` nor ``_``: re's own definitions for a str)."""
    i = text.find("barca")
    while i >= 0:
        if _imported_at(text, i):
            return True
        i = text.find("barca", i + 1)
    return False


def _imported_at(text: str, i: int) -> bool:
    k = i
    while k > 0 and text[k - 1].isspace():
        k -= 1
    if k == i:  # (\s+: at least one)
        return False
    after = text[i + 5:i + 6]
    if text.endswith("from", 0, k):
        if not (after.isspace() or after == "."):  # [\s.] (none: the text's end)
            return False
        m = k - 4
    elif text.endswith("import", 0, k):
        if after and (after.isalnum() or after == "_"):  # \b
            return False
        m = k - 6
    else:
        return False
    while m > 0 and text[m - 1].isspace():  # ^\s*: back to a line's start (re.M: after \n)
        if text[m - 1] == "\n":
            return True
        m -= 1
    return m == 0
