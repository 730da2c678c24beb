#!/usr/bin/env python3
"""generate.py — emits the MPI wrapper layer of libstacklens from the spec.

Reads spec/mpi_functions.spec (format documented at the top of that file) and
writes into the output directory:

  sl_ops.h            enum of op ids in spec order, SL_OP_COUNT, names array
  sl_mpi_wrappers.c   one MPI_* wrapper per entry, from the body template
                      gen/templates/wrapper_<class>.c.in of its class

Templates are string.Template files. A wrapper template may use ${name},
${ret}, ${params}, ${args} and ${role_<role>} (the name of the argument with
that role); the roles a template uses are the roles its class requires.

Python 3.11 standard library only. Usage:
    generate.py --spec SPEC --out DIR [--templates DIR]
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from string import Template

HERE = Path(__file__).resolve().parent

# Argument roles the spec may use (documented in the spec's header).
ROLES = frozenset(
    {
        "buf",
        "sendbuf",
        "recvbuf",
        "count",
        "datatype",
        "peer",
        "root",
        "tag",
        "comm",
        "request",
        "status",
        "redop",
    }
)
# Keys of an entry after its prototype.
KEYS = frozenset({"class", "mpi"})

ENTRY_RE = re.compile(
    r"^(?P<ret>[A-Za-z_][\w \t*]*?)\s*\b(?P<name>MPIX?_\w+)\s*"
    r"\((?P<args>[^()]*)\)\s*(?P<attrs>.*)$"
)
ARG_RE = re.compile(r"^(?P<decl>.*?)\s*(?:@(?P<role>\w+))?$")
ARG_NAME_RE = re.compile(r"(?P<name>[A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$")
VERSION_RE = re.compile(r"^(\d+)\.(\d+)$")

ENUM_LINE = Template("    SL_OP_${name} = ${index},")
NAME_LINE = Template('    "${name}",')
GUARDED = Template(
    "\n#if MPI_VERSION > ${major} || (MPI_VERSION == ${major} && "
    "MPI_SUBVERSION >= ${minor})${body}#endif\n"
)


class SpecError(Exception):
    """A malformed spec entry; the message says where and why."""


@dataclass(frozen=True)
class Arg:
    """One argument of an MPI function: declaration, name and optional role."""

    decl: str
    name: str
    role: str | None


@dataclass(frozen=True)
class Entry:
    """One spec entry: an MPI function, its op id, arguments and keys."""

    index: int
    ret: str
    name: str
    args: tuple[Arg, ...]
    cls: str
    mpi: tuple[int, int] | None
    line: int

    def roles(self) -> dict[str, str]:
        """Maps each role to the name of the argument that has it."""
        return {a.role: a.name for a in self.args if a.role}


def parse_arg(text: str, where: str) -> Arg:
    """Parses "<declaration> [@role]"."""
    m = ARG_RE.match(text.strip())
    decl, role = m.group("decl"), m.group("role")
    name = ARG_NAME_RE.search(decl)
    if not decl or name is None or name.start() == 0:
        raise SpecError(f"{where}: argument '{text.strip()}' needs a type and a name")
    if role is not None and role not in ROLES:
        raise SpecError(f"{where}: unknown role @{role} (known: {', '.join(sorted(ROLES))})")
    return Arg(decl=decl, name=name.group("name"), role=role)


def parse_entry(text: str, index: int, line: int, where: str) -> Entry:
    """Parses one spec line into an Entry with op id index."""
    m = ENTRY_RE.match(text)
    if m is None:
        raise SpecError(f"{where}: expected '<type> MPI_<name>(<args>) class=<class> ...'")
    raw_args = m.group("args").strip()
    args = ()
    if raw_args and raw_args != "void":
        args = tuple(parse_arg(a, where) for a in raw_args.split(","))
    roles = [a.role for a in args if a.role]
    if len(roles) != len(set(roles)):
        raise SpecError(f"{where}: a role is given to more than one argument")

    attrs: dict[str, str] = {}
    for item in m.group("attrs").split():
        key, sep, value = item.partition("=")
        if not sep or key not in KEYS or not value or key in attrs:
            raise SpecError(f"{where}: bad key '{item}' (known keys: {', '.join(sorted(KEYS))})")
        attrs[key] = value
    if "class" not in attrs:
        raise SpecError(f"{where}: class=<class> is required")
    mpi = None
    if "mpi" in attrs:
        v = VERSION_RE.match(attrs["mpi"])
        if v is None:
            raise SpecError(f"{where}: mpi= wants <major>.<minor>, got '{attrs['mpi']}'")
        mpi = (int(v.group(1)), int(v.group(2)))
    return Entry(
        index=index,
        ret=m.group("ret").strip(),
        name=m.group("name"),
        args=args,
        cls=attrs["class"],
        mpi=mpi,
        line=line,
    )


def parse_spec(path: Path) -> list[Entry]:
    """Reads every entry of the spec file, in order (op id = position)."""
    entries: list[Entry] = []
    seen: set[str] = set()
    for line_no, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        where = f"{path}:{line_no}"
        entry = parse_entry(text, len(entries), line_no, where)
        if entry.name in seen:
            raise SpecError(f"{where}: {entry.name} is listed twice")
        seen.add(entry.name)
        entries.append(entry)
    if not entries:
        raise SpecError(f"{path}: no entries")
    return entries


def load_template(templates: Path, name: str) -> Template:
    """Reads the template file templates/name."""
    return Template((templates / name).read_text(encoding="utf-8"))


def render_wrapper(entry: Entry, templates: Path, spec: Path) -> str:
    """Renders the wrapper of one entry from the template of its class."""
    path = templates / f"wrapper_{entry.cls}.c.in"
    where = f"{spec}:{entry.line}"
    if not path.is_file():
        raise SpecError(f"{where}: no template {path.name} for class={entry.cls}")
    template = load_template(templates, path.name)
    roles = entry.roles()
    needed = {i[len("role_") :] for i in template.get_identifiers() if i.startswith("role_")}
    missing = sorted(needed - roles.keys())
    if missing:
        raise SpecError(f"{where}: class={entry.cls} needs the roles {', '.join(missing)}")
    values = {
        "name": entry.name,
        "ret": entry.ret,
        "params": ", ".join(a.decl for a in entry.args) or "void",
        "args": ", ".join(a.name for a in entry.args),
        **{f"role_{role}": arg for role, arg in roles.items()},
    }
    body = template.substitute(values)
    if entry.mpi is None:
        return body
    return GUARDED.substitute(major=entry.mpi[0], minor=entry.mpi[1], body=body)


def write_atomically(path: Path, text: str) -> None:
    """Writes text to path through a temporary file, so no half file is left."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def generate(spec: Path, templates: Path, out: Path) -> None:
    """Writes sl_ops.h and sl_mpi_wrappers.c for spec into out."""
    entries = parse_spec(spec)
    shown_spec = f"spec/{spec.name}"
    ops_h = load_template(templates, "sl_ops.h.in").substitute(
        spec=shown_spec,
        enum_lines="\n".join(ENUM_LINE.substitute(name=e.name, index=e.index) for e in entries),
        count=len(entries),
    )
    wrappers_c = load_template(templates, "sl_mpi_wrappers.c.in").substitute(
        spec=shown_spec,
        name_lines="\n".join(NAME_LINE.substitute(name=e.name) for e in entries),
        wrappers="".join(render_wrapper(e, templates, spec) for e in entries),
    )
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / "sl_ops.h", ops_h)
    write_atomically(out / "sl_mpi_wrappers.c", wrappers_c)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, required=True, help="the MPI function spec")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument(
        "--templates",
        type=Path,
        default=HERE / "templates",
        help="template directory (default: %(default)s)",
    )
    opts = parser.parse_args(argv)
    try:
        generate(opts.spec, opts.templates, opts.out)
    except (SpecError, OSError, KeyError, ValueError) as exc:
        print(f"generate.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
