"""`stacklens config`: every STACKLENS_* setting with its effective value and where it came
from, or (`--markdown`) the README's settings table; both generated from the declaration
(contract/stacklens_settings.def via stacklens.settings_table).

stacklens config              NAME, value, source (env, file or default), read by
stacklens config --markdown   the README's table of settings
"""

from __future__ import annotations

import argparse

from stacklens.settings import Settings, config_file_path, config_file_values
from stacklens.settings_table import effective_values, markdown_table

#: Settings whose value is never printed, only whether it is set.
SECRET = {"STACKLENS_INGEST_TOKEN"}


def config_lines(settings: Settings) -> list[str]:
    """The lines `stacklens config` prints: the configuration file, then one aligned row per
    declared setting (name, value, source, readers)."""
    path = config_file_path()
    rows = [("variable", "value", "source", "read by")]
    for e in effective_values(config_file_values(), settings.model_dump()):
        value = e.value if e.declared.name not in SECRET or not e.value else "(set)"
        rows.append((e.declared.name, value or "(unset)", e.source, e.declared.readers))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return [
        f"configuration file: {path}{'' if path.exists() else ' (none)'}",
        *(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}" for a, b, c, d in rows),
    ]


def cmd_config(settings: Settings, args: argparse.Namespace) -> int:
    """Print the effective settings, or the README's settings table."""
    if args.markdown:
        print(markdown_table(), end="")
        return 0
    print("\n".join(config_lines(settings)))
    return 0
