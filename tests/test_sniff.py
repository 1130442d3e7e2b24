"""barca.model.sniff (#31 item 2): which files import barca, decided without ``re``, exactly as
discovery's pattern decides it."""
from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barca.model.discovery import _IMPORTS_BARCA
from barca.model.sniff import imports_barca

TOKENS = ["from", "import", "barca", "barcas", "barca_x", "barca1", "barcaé", " ", "  ", "\t",
          "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2028", "\u3000", ".",
          "_", "x", "é", "#", "(", "1", "fromx", "ximport", "from barca", "import barca",
          "\nfrom barca.model import x\n", "    import barca as b", "\\", '"']


def regex(text: str) -> bool:
    return re.search(_IMPORTS_BARCA, text, re.M) is not None


def test_the_same_answer_as_the_pattern() -> None:
    cases = ["", "barca", "import barca", "import barca\n", "import  barca.x", "import barcax",
             "from barca import asset", "from barca", "from barca.", "from\nbarca ",
             "x\nfrom barca ",
             "x from barca ", "\n\n  \t from   barca\n", "# import barca", "importbarca",
             "from barca_x import y", "import barca_x", "import barca1", "import barcaé",
             "import barca\u00e9", "\u2028import barca", "\rimport barca", "\x1cimport barca",
             "y = 1\nimport os, barca", "import os\nimport barca as b", "from .barca import x",
             "\xa0from\xa0barca\xa0", "from barca\x85", "import barca\u3000"]
    rnd = random.Random(31)
    cases += ["".join(rnd.choice(TOKENS) for _ in range(rnd.randrange(12))) for _ in range(20000)]
    for text in cases:
        assert imports_barca(text) == regex(text), repr(text)


# generated texts: CI's full run (the 23,000 listed texts above are the fast subset's)
@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS) | st.text(max_size=3), max_size=15))
def test_any_text(parts: list[str]) -> None:
    text = "".join(parts)
    assert imports_barca(text) == regex(text), repr(text)
