"""How every `stacklens` subcommand presents itself in `--help`: a sentence of purpose and
examples, the same layout for all (tests/test_cli.py checks every subcommand has both)."""

from __future__ import annotations

import argparse
import textwrap

#: Width the help paragraphs are filled to.
WIDTH = 88


def subcommand(
    sub: argparse._SubParsersAction, name: str, purpose: str, examples: list[str], more: str = ""
) -> argparse.ArgumentParser:
    """Add subcommand `name` to `sub`: `purpose` (one sentence, ending with a period) is its
    line in `stacklens --help` and the start of its own help, `more` follows it, and its
    help ends with the `examples` (each `stacklens ...`, a comment after two spaces)."""
    lines = "\n".join(f"  {example}" for example in examples)
    paragraphs = [textwrap.fill(purpose, WIDTH)]
    if more:  # a paragraph, or lines laid out already (indented lines)
        paragraphs.append(more if "\n " in more else textwrap.fill(more, WIDTH))
    return sub.add_parser(
        name,
        help=purpose.rstrip("."),
        description="\n\n".join(paragraphs),
        epilog=f"examples:\n{lines}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
