"""Where a key is in a node's keys (engine.keyindex.KeyIndex), found in the keys joined by NUL
when they are at hand: always the position a scan of the list finds, for the first and the
last key, an empty key, keys that begin or end another, keys that are not there, and keys
holding a NUL (the joined text is not used then). In process."""
from __future__ import annotations

from barca.engine.keyindex import KeyIndex
from barca.engine.states import NodeState


def _positions(keys: list[str], asked: list[str]) -> None:
    for joined in ("\x00".join(keys), None):
        index = KeyIndex(keys, joined)
        for key in asked + asked:  # asked twice: the second answer is remembered
            want = keys.index(key) if key in keys else None
            assert index.get(key) == want, (keys, key, joined)


def test_a_key_found_in_the_joined_text_is_where_a_scan_finds_it() -> None:
    keys = ["k1", "k10", "", "x=k1", "k1=x", "k100", "1", "k"]
    others = ["k1\x00k10", "k1\x00", "\x00k1", "k2", "0", "k10\x00", "=", "k1\x00k10\x00"]
    _positions(keys, keys + others)
    _positions(["only"], ["only", "", "onl", "nly", "only\x00"])
    _positions([""], ["", "x", "\x00"])
    _positions(["a", ""], ["", "a", "\x00"])
    _positions([], ["", "a"])
    # a key holding a NUL: the joined text would put every later key one place too far
    _positions(["a", "b\x00c", "d"], ["a", "b", "c", "d", "b\x00c"])


def test_many_keys_asked_turn_into_one_dict_and_a_node_shares_its_index() -> None:
    keys = [f"key=k{i:05d}" for i in range(300)]
    index = KeyIndex(keys, "\x00".join(keys))
    for i in range(0, 300, 7):  # past 16 searches, a dict of every key
        assert index.get(keys[i]) == i
    assert index.get("key=k99999") is None
    ns = NodeState("n", keys)  # type: ignore[arg-type]
    assert ns.index() is ns.index()
    ns.keys = list(keys)  # keys replaced: an index of the new list
    assert ns.index().keys is ns.keys
