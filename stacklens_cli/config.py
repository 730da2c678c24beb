"""`stacklens config`: every STACKLENS_* setting with its effective value and where it came
from, or (`--markdown`) the README's settings table; both generated from the declaration
(contract/stacklens_settings.def via stacklens.settings_table).

stacklens config              NAME, value, source (env, file or default), read by
stacklens config --markdown   the README's table of settings
"""

from __future__ import annotations

import argparse
import difflib
import os

from stacklens.settings import Settings, config_file_path, config_file_values
from stacklens.settings_table import (
    DECLARED,
    PREFIX,
    RENAMED,
    effective_values,
    markdown_table,
    renamed_line,
)

#: Settings whose value is never printed, only whether it is set.
SECRET = {"STACKLENS_INGEST_TOKEN"}


def config_lines(settings: Settings) -> list[str]:
    """The lines `stacklens config` prints: the configuration file, one aligned row per
    declared setting (name, value, source, readers), then a line for each STACKLENS_*
    variable that is no setting (an old name, still read; a typo: nothing reads it)."""
    path = config_file_path()
    rows = [("variable", "value", "source", "read by")]
    file_values = config_file_values()
    for e in effective_values(file_values, settings.model_dump()):
        value = e.value if e.declared.name not in SECRET or not e.value else "(set)"
        rows.append((e.declared.name, value or "(unset)", e.source, e.declared.readers))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return [
        f"configuration file: {path}{'' if path.exists() else ' (none)'}",
        *(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}" for a, b, c, d in rows),
        *unknown_settings(file_values),
    ]


def unknown_settings(file_values: dict[str, str]) -> list[str]:
    """One line per STACKLENS_* variable of the environment or the configuration file
    (`file_values`) that is no declared setting: an old name of a renamed one (read unless
    the new name is set too), or a typo (nothing reads it), with the declared name it is
    closest to, if one is close."""
    given = {**{n: "file" for n in file_values}, **{n: "env" for n in os.environ}}
    lines = []
    for name in sorted(n for n in given if n.startswith(PREFIX) and n not in DECLARED):
        if name in RENAMED and RENAMED[name] in given:
            lines.append(f"{name} is now called {RENAMED[name]}, which is set: ignored "
                         f"({given[name]})")  # fmt: skip
            continue
        if name in RENAMED:
            lines.append(f"{renamed_line(name)} ({given[name]})")
            continue
        close = difflib.get_close_matches(name, DECLARED, n=1, cutoff=0.8)
        hint = f"; did you mean {close[0]}?" if close else ""
        lines.append(f"not a setting, ignored: {name} ({given[name]}{hint})")
    return lines


def cmd_config(settings: Settings, args: argparse.Namespace) -> int:
    """Print the effective settings, or the README's settings table."""
    if args.markdown:
        print(markdown_table(), end="")
        return 0
    print("\n".join(config_lines(settings)))
    return 0
