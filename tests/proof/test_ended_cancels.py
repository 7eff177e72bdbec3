"""PoolCore.ended_cancels: resolved cancelled nodes, by path, while referenced."""

from __future__ import annotations

import gc

from subagent._core._core import EndedCancels, Node


def _node(path: tuple[str, ...]) -> Node[int]:
    return Node(path, None, 0)


def test_a_node_is_found_while_referenced_and_not_after() -> None:
    ended: EndedCancels[int] = EndedCancels()
    node = _node(("a/0001",))
    ended[node.path] = node
    assert ended.get(("a/0001",)) is node
    assert ended.get(("b/0002",)) is None
    del node
    gc.collect()
    assert ended.get(("a/0001",)) is None


def test_a_later_node_at_the_same_path_replaces_the_earlier() -> None:
    ended: EndedCancels[int] = EndedCancels()
    first, second = _node(("a/0001",)), _node(("a/0001",))
    ended[first.path] = first
    ended[second.path] = second
    assert ended.get(("a/0001",)) is second
    assert len(ended) == 1


def test_dead_entries_are_swept_so_memory_stays_flat() -> None:
    # 10,000 cancelled nodes resolve and are dropped one after the other, while 10
    # stay referenced: the table never holds more than twice the referenced nodes
    # plus the sweep floor (64), and every referenced node is still found.
    ended: EndedCancels[int] = EndedCancels()
    kept = [_node((f"kept/{i:04d}",)) for i in range(10)]
    for node in kept:
        ended[node.path] = node
    most = 0
    for i in range(10_000):
        ended[(f"gone/{i:05d}",)] = _node((f"gone/{i:05d}",))
        most = max(most, len(ended))
    assert most <= 64
    assert all(ended.get(node.path) is node for node in kept)
    assert ended.get(("gone/09999",)) is None
