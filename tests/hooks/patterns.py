"""Expected traffic of the example test programs (the formulas in their header comments)."""

from __future__ import annotations


def p2p_pattern(size: int) -> dict[tuple[int, int], tuple[int, int]]:
    """examples/p2p_pattern.c: (src, dst) -> (bytes, messages) sent.

    Rank r sends r+1 messages of 1000*(p+1)+r bytes to every other rank p.
    """
    return {
        (r, p): ((r + 1) * (1000 * (p + 1) + r), r + 1)
        for r in range(size)
        for p in range(size)
        if p != r
    }
