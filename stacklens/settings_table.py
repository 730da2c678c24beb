"""The declared STACKLENS_* settings (contract/stacklens_settings.def), and what is made of
them: the README's settings table and the effective values `stacklens config` prints.

The declaration is the one place a setting's name, readers, default and meaning are
written; `Settings` (stacklens/settings.py) holds the types and bounds of those the
stacklens command reads, and the hook library reads its own through the same file
(mpi_pmpi_hooks/src/config.h). tests/test_settings_declared.py holds the three together.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from contract import SETTINGS_DEF

PREFIX = "STACKLENS_"
Readers = Literal["hooks", "stacklens", "both"]

_ENTRY = re.compile(r'^SL_SETTING\((\w+), (hooks|stacklens|both), "([^"]*)", "([^"]*)"\)$')


@dataclass(frozen=True)
class Declared:
    """One declared setting."""

    name: str  #: the full variable name, STACKLENS_...
    readers: Readers  #: hooks, stacklens or both
    default: str  #: its value when unset, as text ("" = unset or empty)
    meaning: str  #: what it does (Markdown)

    @property
    def field(self) -> str:
        """The `Settings` field of a setting the stacklens command reads."""
        return self.name.removeprefix(PREFIX).lower()

    @property
    def hooks_read(self) -> bool:
        """Whether the hook library reads it (so `stacklens env`/`run` pass it on)."""
        return self.readers in ("hooks", "both")

    @property
    def stacklens_read(self) -> bool:
        """Whether the stacklens command reads it (a `Settings` field)."""
        return self.readers in ("stacklens", "both")


def _parse() -> dict[str, Declared]:
    """Every SL_SETTING line of the declaration, in order."""
    declared: dict[str, Declared] = {}
    for number, line in enumerate(SETTINGS_DEF.read_text().splitlines(), 1):
        if not line.startswith("SL_SETTING"):
            continue
        match = _ENTRY.match(line)
        if match is None:
            raise ValueError(f'{SETTINGS_DEF}:{number}: not SL_SETTING(NAME, readers, "", "")')
        name, readers, default, meaning = match.groups()
        declared[PREFIX + name] = Declared(PREFIX + name, readers, default, meaning)  # type: ignore[arg-type]
    return declared


#: Every declared setting by variable name, in the declaration's order.
DECLARED: dict[str, Declared] = _parse()


def markdown_table() -> str:
    """The README's settings table (Markdown), one row per declared setting."""
    rows = ["| variable | read by | default | meaning |", "|---|---|---|---|"]
    for d in DECLARED.values():
        default = f"`{d.default}`" if d.default else "unset"
        rows.append(f"| `{d.name}` | {d.readers} | {default} | {d.meaning} |")
    return "\n".join(rows) + "\n"


#: Where `stacklens config` found a value.
Source = Literal["default", "env", "file"]


@dataclass(frozen=True)
class Effective:
    """A setting's value as the stacklens command and `stacklens run`/`env` see it."""

    declared: Declared
    value: str  #: "" = unset or empty
    source: Source


def value_text(value: object) -> str:
    """A setting's value as its variable would be written ("" for None; 600.0 as 600)."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def effective_values(
    file_values: Mapping[str, str],
    resolved: Mapping[str, object],
    env: Mapping[str, str] = os.environ,
) -> list[Effective]:
    """Each declared setting's value and where it came from: the environment, else the
    configuration file (`file_values`), else the default. `resolved` holds the values
    `Settings` made of them (computed defaults filled in, by field name); hook settings are
    shown as the text the hooks will read."""
    out = []
    for name, d in DECLARED.items():
        source: Source = "env" if name in env else "file" if name in file_values else "default"
        if d.stacklens_read and d.field in resolved:
            text = value_text(resolved[d.field])
        else:
            text = env.get(name, file_values.get(name, d.default))
        out.append(Effective(d, text, source))
    return out
