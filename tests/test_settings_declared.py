"""Every STACKLENS_* setting is declared once (contract/stacklens_settings.def): the hook
library and the stacklens command read only declared ones, with the declared defaults;
the README's table and `stacklens config` are generated from the declaration."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from stacklens.paths import HOOKS_DIR, SOURCE_ROOT
from stacklens.settings import Settings
from stacklens.settings_table import DECLARED, RENAMED, markdown_table, value_text, with_table

#: Settings whose default is computed when read (per user), not a fixed text.
COMPUTED = {"state_dir", "spool_dir"}
#: The hook library's compiled-in defaults (config.c) and the setting each is the default of.
C_DEFAULTS = {
    "SL_DEFAULT_INTERVAL_MS": "STACKLENS_INTERVAL_MS",
    "SL_DEFAULT_FIN_TIMEOUT": "STACKLENS_FINALIZE_TIMEOUT_MS",
    "SL_DEFAULT_MAX_KEYS": "STACKLENS_MAX_KEYS",
    "SL_DEFAULT_SPOOL_MB": "STACKLENS_SPOOL_MAX_MB",
}
PYTHON_PACKAGES = ("stacklens", "collector", "server", "emulator", "frontend")


def undeclared_c_reads(source: str) -> list[str]:
    """What C source text reads that is not a declared hook setting: a STACKLENS_* string
    literal other than the prefix itself (every read goes through sl_env), or an
    SL_SET_<NAME> of a setting the hooks do not read."""
    bad = [f'"{m}"' for m in re.findall(r'"(STACKLENS_\w*)"', source) if m != "STACKLENS_"]
    for name in re.findall(r"\bSL_SET_(\w+)", source):
        declared = DECLARED.get(f"STACKLENS_{name}")
        if name != "COUNT" and (declared is None or not declared.hooks_read):
            bad.append(f"SL_SET_{name}")
    return bad


def undeclared_python_reads(source: str) -> list[str]:
    """STACKLENS_* variables Python source text reads from the environment (os.environ,
    os.getenv) that are not declared settings of the stacklens command."""
    read = re.findall(r"""(?:environ\.get\(|environ\[|getenv\()\s*["'](STACKLENS_\w+)""", source)
    return [n for n in read if n not in DECLARED or not DECLARED[n].stacklens_read]


def c_sources() -> dict[Path, str]:
    """The hook library's C sources and headers."""
    return {p: p.read_text() for p in sorted((HOOKS_DIR / "src").glob("*.[ch]"))}


def test_the_checks_find_an_undeclared_read():
    assert undeclared_c_reads('x = getenv("STACKLENS_NOPE"); y = sl_env(SL_SET_NOPE);') == [
        '"STACKLENS_NOPE"',
        "SL_SET_NOPE",
    ]
    assert undeclared_c_reads("sl_env(SL_SET_HTTP_PORT)") == ["SL_SET_HTTP_PORT"]  # not hooks'
    assert undeclared_python_reads('os.environ.get("STACKLENS_NOPE", "")') == ["STACKLENS_NOPE"]
    assert undeclared_python_reads("os.environ['STACKLENS_MAX_KEYS']") == ["STACKLENS_MAX_KEYS"]


def test_hook_library_reads_only_declared_settings_and_every_hook_setting():
    sources = c_sources()
    assert {str(p.name): undeclared_c_reads(text) for p, text in sources.items()} == {
        str(p.name): [] for p in sources
    }
    used = {m for text in sources.values() for m in re.findall(r"\bSL_SET_(\w+)", text)}
    hook_settings = {n.removeprefix("STACKLENS_") for n, d in DECLARED.items() if d.hooks_read}
    assert hook_settings <= used


def test_hook_library_defaults_are_the_declared_ones():
    config_c = (HOOKS_DIR / "src" / "config.c").read_text()
    defines = dict(re.findall(r"#define (SL_DEFAULT_\w+)\s+(\S+)", config_c))
    found = {name: defines[macro].strip('"u') for macro, name in C_DEFAULTS.items()}
    assert found == {name: DECLARED[name].default for name in C_DEFAULTS.values()}
    collector = f"{defines['SL_DEFAULT_HOST']}:{defines['SL_DEFAULT_PORT']}".replace('"', "")
    assert collector == DECLARED["STACKLENS_COLLECTOR"].default


def test_stacklens_reads_only_declared_settings_with_the_declared_defaults():
    fields = Settings.model_fields
    declared = {d.field: d for d in DECLARED.values() if d.stacklens_read}
    assert set(fields) == set(declared)
    for name, field in fields.items():
        if name in COMPUTED:
            assert field.default_factory is not None, name
        else:
            assert value_text(field.default) == declared[name].default, name
    reads = {}
    for package in PYTHON_PACKAGES:
        for path in sorted((SOURCE_ROOT / package).rglob("*.py")):
            if bad := undeclared_python_reads(path.read_text()):
                reads[str(path.relative_to(SOURCE_ROOT))] = bad
    assert reads == {}


def test_readme_table_is_the_generated_one():
    """(`python -m stacklens.settings_table README.md` regenerates it.)"""
    readme = (SOURCE_ROOT / "README.md").read_text()
    assert markdown_table() in readme
    assert with_table(readme) == readme


def stacklens(*args: str, env: dict[str, str]) -> list[str]:
    """The lines a stacklens subcommand prints."""
    result = subprocess.run([sys.executable, "-m", "stacklens_cli", *args], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_config_prints_effective_values_and_sources(tmp_path):
    config_file = tmp_path / "stacklens.env"
    config_file.write_text(
        "# site settings\nSTACKLENS_HTTP_PORT=8123\nSTACKLENS_INTERVAL_MS=500\n"
        "STACKLENS_MAX_KEYS=64\nSTACKLENS_HTTP_PROT=1\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(
        STACKLENS_CONFIG_FILE=str(config_file),
        STACKLENS_INTERVAL_MS="250",  # the environment wins over the file
        STACKLENS_INTERVALL_MS="5",  # a typo: said, not read
        STACKLENS_INGEST_TOKEN="s3cret-token",
        STACKLENS_STATE_DIR=str(tmp_path / "state"),
        TMPDIR=str(tmp_path),
    )
    lines = stacklens("config", env=env)
    assert lines[0] == f"configuration file: {config_file}"
    assert lines[-2:] == [
        "not a setting, ignored: STACKLENS_HTTP_PROT (file; did you mean STACKLENS_HTTP_PORT?)",
        "not a setting, ignored: STACKLENS_INTERVALL_MS (env; did you mean STACKLENS_INTERVAL_MS?)",
    ]
    rows = {row[0]: row[1:] for row in (re.split(r"  +", line) for line in lines[1:-2])}
    assert list(rows) == ["variable", *DECLARED]
    assert rows["STACKLENS_HTTP_PORT"] == ["8123", "file", "stacklens"]
    assert rows["STACKLENS_INTERVAL_MS"] == ["250", "env", "both"]
    assert rows["STACKLENS_MAX_KEYS"] == ["64", "file", "hooks"]
    assert rows["STACKLENS_INGEST_TOKEN"] == ["(set)", "env", "both"]
    assert rows["STACKLENS_SPOOL_DIR"] == [f"{tmp_path}/stacklens-spool-{os.geteuid()}",
                                           "default", "both"]  # fmt: skip
    assert rows["STACKLENS_JOB_ID"] == ["(unset)", "default", "both"]
    assert rows["STACKLENS_JOB_LOST_AFTER_S"] == ["600", "default", "stacklens"]
    assert rows["STACKLENS_CONFIG_FILE"] == [str(config_file), "env", "stacklens"]
    assert "s3cret-token" not in "\n".join(lines)
    # `stacklens env` passes the file's hook settings on to the ranks.
    exported = stacklens("env", "--mpi", "mpich", env=env)
    assert "export STACKLENS_MAX_KEYS=64" in exported
    assert "export STACKLENS_INTERVAL_MS=250" in exported
    assert stacklens("config", "--markdown", env=env) == markdown_table().splitlines()


def test_a_configuration_file_that_cannot_be_read_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env["STACKLENS_CONFIG_FILE"] = str(tmp_path)  # a directory
    result = subprocess.run([sys.executable, "-m", "stacklens_cli", "config"], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"stacklens: cannot read the configuration file {tmp_path}: [Errno 21] Is a "
        f"directory: '{tmp_path}'\n"
    )


def test_a_renamed_setting_is_read_under_its_old_name_with_one_warning(tmp_path):
    """STACKLENS_MEASURE_WIRE became STACKLENS_MONITOR_TRAFFIC (SL_RENAMED): the README
    says so, `stacklens config` shows the old name's value as the setting's and says it was
    renamed, and `stacklens env` passes it on under the new name with one warning (as every
    stacklens command says it). The new name, when set too, wins (the hook library's own
    reading: tests/hooks/test_monitored.py)."""
    assert RENAMED == {"STACKLENS_MEASURE_WIRE": "STACKLENS_MONITOR_TRAFFIC"}
    # `Settings` reads no old names: only hook settings may be renamed so far
    assert [new for new in RENAMED.values() if DECLARED[new].stacklens_read] == []
    assert "| `STACKLENS_MONITOR_TRAFFIC` | hooks | `auto` | monitored traffic: " in (
        markdown_table()
    )
    assert " (formerly `STACKLENS_MEASURE_WIRE`, still read) |\n" in markdown_table()
    config_file = tmp_path / "stacklens.env"
    config_file.write_text("STACKLENS_MEASURE_WIRE=off\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(STACKLENS_CONFIG_FILE=str(config_file), TMPDIR=str(tmp_path),
               STACKLENS_STATE_DIR=str(tmp_path / "state"))  # fmt: skip
    renamed = (
        "STACKLENS_MEASURE_WIRE is now called STACKLENS_MONITOR_TRAFFIC: read as it (rename "
        "it; the old name will go)"
    )
    lines = stacklens("config", env=env)
    rows = {row[0]: row[1:] for row in (re.split(r"  +", line) for line in lines[1:-1])}
    assert rows["STACKLENS_MONITOR_TRAFFIC"] == ["off", "file", "hooks"]
    assert lines[-1] == f"{renamed} (file)"
    result = subprocess.run([sys.executable, "-m", "stacklens_cli", "env", "--mpi", "mpich"],
                            env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "export STACKLENS_MONITOR_TRAFFIC=off" in result.stdout.splitlines()
    assert "STACKLENS_MEASURE_WIRE" not in result.stdout
    assert result.stderr == f"stacklens: {renamed} (file)\n"
    # the new name wins over the old one, which is said to be ignored
    env["STACKLENS_MONITOR_TRAFFIC"] = "on"
    lines = stacklens("config", env=env)
    assert lines[-1] == (
        "STACKLENS_MEASURE_WIRE is now called STACKLENS_MONITOR_TRAFFIC, which is set: "
        "ignored (file)"
    )
    rows = {row[0]: row[1:] for row in (re.split(r"  +", line) for line in lines[1:-1])}
    assert rows["STACKLENS_MONITOR_TRAFFIC"] == ["on", "env", "hooks"]
    result = subprocess.run([sys.executable, "-m", "stacklens_cli", "env", "--mpi", "mpich"],
                            env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "export STACKLENS_MONITOR_TRAFFIC=on" in result.stdout.splitlines()
    assert result.stderr == f"stacklens: {lines[-1]}\n"
