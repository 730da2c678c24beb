#!/usr/bin/env python3
"""generate.py — emits the MPI and the libc file I/O wrapper layers of libstacklens.

Reads contract/mpi_functions.spec (--spec) and contract/io_functions.spec (--io-spec;
formats documented at the top of each file) and writes into the output directory:

  sl_ops.h            enum of op ids in spec order, SL_OP_COUNT, names array,
                      the RMA slot enum (one slot per class=rma entry)
  sl_mpi_wrappers.c   one MPI_* wrapper per entry, from the body template
                      contract/templates/wrapper_<class>.c.in of its class, plus the
                      Fortran entry points (mpi_send_, mpi_send__, MPI_SEND,
                      mpi_send, and mpi_send_f08_ / mpi_send_f08ts_ of
                      `use mpi_f08`) of every entry whose class has a
                      contract/templates/fortran_<class>.c.in
  sl_io_wrappers.c    one libc wrapper per I/O spec entry, from
                      contract/templates/io_<class>.c.in (values listed in the I/O spec)
  sl_io_wrappers.h    the wrappers that may make their system call directly

Templates are string.Template files. A wrapper template may use ${name},
${ret}, ${params}, ${args}, ${bytes} (the C expression of the entry's bytes=
mode, from bytes_modes.in), ${messages} (the C expression that counts the
call's messages in the size histogram for that mode, from messages_modes.in),
${role_<role>} (the name of the argument with that role) and ${new_request} (the
statement that forgets a returned request handle stacklens does not count at
completion, "" for calls without one); the roles a template uses are the roles its
class requires.
A Fortran template sees the Fortran parameters (every argument by reference,
argc/argv dropped, MPI_Fint *ierr appended, then the hidden length <name>_len of
each string argument): ${fparams}, ${fargs}, ${arg_<role>} (the parameter),
${len_<role>} (a string's length) and ${role_<role>} (its C value: handles through
PMPI_*_f2c, see FORTRAN_VALUE); its C code may read `form`, the kind of entry
point it runs for (enum sl_f_form). ${fortran} is 1 there and 0 in C wrappers (the
bytes= modes read datatype arrays by it). contract/templates/fortran_entry.c.in
wraps the body into the entry points of `mpif.h`/`use mpi` (four manglings) and
`use mpi_f08` (see mpi_pmpi_hooks/src/fortran.h).

Python 3.11 standard library only. Usage (either spec, or both):
    python -m contract.generate [--spec SPEC] [--io-spec IO_SPEC] --out DIR [--templates DIR]
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
        "counts",
        "datatypes",
        "recvcount",
        "recvtype",
        "source",
        "newcomm",
        "requests",
        "statuses",
        "index",
        "flag",
        "outcount",
        "indices",
        "message",
        "win",
        "file",
        "filename",
        "offset",
        "argc",
        "argv",
        "errorcode",
        "color",
        "rankkey",
        "ndims",
        "dims",
        "name",
    }
)
# Keys of an entry after its prototype.
KEYS = frozenset({"class", "mpi", "bytes", "fortran", "traffic", "waits"})
# What a blocking call waits for (the waits= key): its point-to-point partner, the other
# members of a collective (or of a communicator or window being made), its requests,
# an RMA epoch or lock, MPI-IO. A call that returns a request never waits.
WAITS = ("p2p", "coll", "completion", "rma", "io")
# The classes that complete requests: they wait although they take one.
COMPLETION_CLASSES = frozenset({"wait", "waitall", "waitany", "waitsome"})
# Roles that the Fortran bindings do not have.
FORTRAN_DROPPED = frozenset({"argc", "argv"})
# C type of an argument (declaration without its name) -> C value of the Fortran
# parameter p that carries it (handles through PMPI_*_f2c; a pointer to a handle gives
# the handle it holds where the template reads it); arrays of handles and statuses
# stay Fortran arrays (MPI_Fint *), which the templates convert element by element.
# Types not listed give the entry no Fortran entry points.
FORTRAN_VALUE = {
    "int": Template("(int)*${p}"),
    "MPI_Comm": Template("PMPI_Comm_f2c(*${p})"),
    "MPI_Datatype": Template("PMPI_Type_f2c(*${p})"),
    "MPI_Op": Template("PMPI_Op_f2c(*${p})"),
    "MPI_Win": Template("PMPI_Win_f2c(*${p})"),
    "MPI_File": Template("PMPI_File_f2c(*${p})"),
    "MPI_Aint": Template("*${p}"),
    "MPI_Offset": Template("*${p}"),
    "const void *": Template("${p}"),
    "void *": Template("${p}"),
    "int *": Template("${p}"),
    "const int *": Template("${p}"),
    "const int[]": Template("(const int *)${p}"),
    "int[]": Template("(int *)${p}"),
    "const char *": Template("${p}"),
    "char *": Template("${p}"),
    "MPI_Status *": Template("${p}"),
    "MPI_Request *": Template("PMPI_Request_f2c(*${p})"),
    "MPI_Message *": Template("PMPI_Message_f2c(*${p})"),
    "MPI_Comm *": Template("PMPI_Comm_f2c(*${p})"),
    "MPI_Win *": Template("PMPI_Win_f2c(*${p})"),
    "MPI_File *": Template("PMPI_File_f2c(*${p})"),
    "MPI_Group *": Template("${p}"),
    "MPI_Info": Template("${p}"),
    "MPI_Group": Template("${p}"),
    "MPI_Info *": Template("${p}"),
    "MPI_Session": Template("${p}"),
    "MPI_Session *": Template("${p}"),
    "MPI_Errhandler": Template("${p}"),
    "MPI_Aint *": Template("${p}"),
    "const MPI_Aint[]": Template("${p}"),
    "MPI_Request[]": Template("${p}"),
    "MPI_Status[]": Template("${p}"),
    "const MPI_Datatype[]": Template("${p}"),
}
# Fortran parameter type of each C argument type (by reference); MPI_Fint * if not listed.
FORTRAN_PARAM = {
    "const void *": "void *",
    "void *": "void *",
    "const char *": "char *",
    "char *": "char *",
    "MPI_Aint": "MPI_Aint *",
    "MPI_Offset": "MPI_Offset *",
    "MPI_Aint *": "MPI_Aint *",
    "const MPI_Aint[]": "MPI_Aint *",
}
# Fortran strings (given or returned) carry their length in a hidden argument after all
# the others.
FORTRAN_STRINGS = ("const char *", "char *")

ENTRY_RE = re.compile(
    r"^(?P<ret>[A-Za-z_][\w \t*]*?)\s*\b(?P<name>MPIX?_\w+)\s*"
    r"\((?P<args>[^()]*)\)\s*(?P<attrs>.*)$"
)
ARG_RE = re.compile(r"^(?P<decl>.*?)\s*(?:@(?P<role>\w+))?$")
ARG_NAME_RE = re.compile(r"(?P<name>[A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$")
VERSION_RE = re.compile(r"^(\d+)\.(\d+)$")

ENUM_LINE = Template("    SL_OP_${name} = ${index},")
NAME_LINE = Template('    "${name}",')
RMA_LINE = Template("    SL_RMA_${name} = ${index},")
RMA_OP_LINE = Template("    SL_OP_${name},")
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

    def ctype(self) -> str:
        """The declaration without the argument name, arrays as "T[]" ("const int[]")."""
        m = ARG_NAME_RE.search(self.decl)
        assert m is not None, "parse_arg accepts only declarations with a name"
        base = self.decl[: m.start()].strip()
        if "[" in self.decl[m.start() :]:
            return base + "[]"
        return base.replace(" *", " *").strip()


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
    bytes_mode: str | None = None
    fortran: bool = True
    traffic: str | None = None  # traffic= key: the op's traffic category, if not its class's
    waits: str | None = None  # waits= key: what the call blocks on (WAITS); None: it does not

    def roles(self) -> dict[str, str]:
        """Maps each role to the name of the argument that has it."""
        return {a.role: a.name for a in self.args if a.role}


def parse_arg(text: str, where: str, roles: frozenset[str] = ROLES) -> Arg:
    """Parses "<declaration> [@role]"; role must be one of roles."""
    m = ARG_RE.match(text.strip())
    assert m is not None, "ARG_RE matches any text"
    decl, role = m.group("decl"), m.group("role")
    name = ARG_NAME_RE.search(decl)
    if not decl or name is None or name.start() == 0:
        raise SpecError(f"{where}: argument '{text.strip()}' needs a type and a name")
    if role is not None and role not in roles:
        raise SpecError(f"{where}: unknown role @{role} (known: {', '.join(sorted(roles))})")
    return Arg(decl=decl, name=name.group("name"), role=role)


def parse_entry(text: str, index: int, line: int, where: str) -> Entry:
    """Parses one spec line into an Entry with op id index."""
    m = ENTRY_RE.match(text)
    if m is None:
        raise SpecError(f"{where}: expected '<type> MPI_<name>(<args>) class=<class> ...'")
    raw_args = m.group("args").strip()
    args: tuple[Arg, ...] = ()
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
    if attrs.get("fortran", "yes") not in ("yes", "no"):
        raise SpecError(f"{where}: fortran= wants yes or no")
    waits = attrs.get("waits")
    if waits is not None and waits not in WAITS:
        raise SpecError(f"{where}: waits= wants one of {', '.join(WAITS)}, got '{waits}'")
    if waits and {"request", "requests"} & set(roles) and attrs["class"] not in COMPLETION_CLASSES:
        raise SpecError(f"{where}: a call that makes or starts a request does not wait (waits=)")
    return Entry(
        index=index,
        ret=m.group("ret").strip(),
        name=m.group("name"),
        args=args,
        cls=attrs["class"],
        mpi=mpi,
        line=line,
        bytes_mode=attrs.get("bytes"),
        fortran=attrs.get("fortran", "no" if mpi else "yes") == "yes",
        traffic=attrs.get("traffic"),
        waits=waits,
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


def load_modes(templates: Path, name: str) -> dict[str, Template]:
    """Reads a modes file (bytes_modes.in, messages_modes.in): "<mode> = <C expression
    template>" per line."""
    modes: dict[str, Template] = {}
    for raw in (templates / name).read_text(encoding="utf-8").splitlines():
        text = raw.split("#", 1)[0].strip()
        if text:
            mode, _, expr = text.partition("=")
            modes[mode.strip()] = Template(expr.strip())
    return modes


def check_roles(template: Template, roles: dict[str, str], entry: Entry, where: str) -> None:
    """Raises SpecError if template uses a role that entry does not have."""
    needed = {i[len("role_") :] for i in template.get_identifiers() if i.startswith("role_")}
    missing = sorted(needed - roles.keys())
    if missing:
        raise SpecError(f"{where}: class={entry.cls} needs the roles {', '.join(missing)}")


def bytes_expr(entry: Entry, modes: dict[str, Template], values: dict[str, str], where: str) -> str:
    """The C expression of the entry's bytes= mode in `modes` (bytes, or messages) over
    values ("0" without a mode)."""
    if entry.bytes_mode is None:
        return "0"
    if entry.bytes_mode not in modes:
        raise SpecError(f"{where}: unknown bytes={entry.bytes_mode} (known: {', '.join(modes)})")
    template = modes[entry.bytes_mode]
    check_roles(template, entry.roles(), entry, where)
    return template.substitute(values)


def mode_values(entry: Entry, modes: Modes, values: dict[str, str], where: str) -> dict[str, str]:
    """${bytes} and ${messages} of an entry over values."""
    return {
        "bytes": bytes_expr(entry, modes.bytes, values, where),
        "messages": bytes_expr(entry, modes.messages, values, where),
    }


@dataclass(frozen=True)
class Modes:
    """The C expressions of each bytes= mode: the payload bytes, and the messages it
    counts in the size histogram."""

    bytes: dict[str, Template]
    messages: dict[str, Template]


def new_request(arg: str | None, success: str, handle: str) -> str:
    """${new_request}: the statement a call that returns a request stacklens does not
    count at completion (Isend, Ibcast, Rput, File_iwrite, ...) runs after it: the handle
    is forgotten, so a stale entry of an earlier receive whose completion stacklens did
    not see (PMPI_Wait called directly) is never counted for it. "" without a request."""
    if arg is None:
        return ""
    value = Template(handle).substitute(p=arg)
    return f"if ({success})\n        sl_req_forget({value});"


def made_args(values: dict[str, str]) -> str:
    """${made}: what a communicator-making call (class comm_make) tells of the new
    communicator: colour, key, dimension count and dimensions, 0/NULL where absent."""
    return ", ".join(
        values.get(f"role_{role}", default)
        for role, default in (("color", "0"), ("rankkey", "0"), ("ndims", "0"), ("dims", "NULL"))
    )


def render_wrapper(entry: Entry, templates: Path, spec: Path, modes: Modes) -> str:
    """Renders the wrapper of one entry (and its Fortran entry points) from its class."""
    path = templates / f"wrapper_{entry.cls}.c.in"
    where = f"{spec}:{entry.line}"
    if not path.is_file():
        raise SpecError(f"{where}: no template {path.name} for class={entry.cls}")
    template = load_template(templates, path.name)
    roles = entry.roles()
    check_roles(template, roles, entry, where)
    values = {
        "name": entry.name,
        "ret": entry.ret,
        "params": ", ".join(a.decl for a in entry.args) or "void",
        "args": ", ".join(a.name for a in entry.args),
        **{f"role_{role}": arg for role, arg in roles.items()},
    }
    values["root"] = values.get("role_root", "-1")
    values["made"] = made_args(values)
    values["large"] = "1" if entry.name.endswith("_c") else "0"
    values["fortran"] = "0"
    values["site"] = C_SITE
    values["new_request"] = new_request(roles.get("request"), "rc == MPI_SUCCESS", "*${p}")
    values.update(mode_values(entry, modes, values, where))
    body = template.substitute(values) + render_fortran(entry, templates, modes, where)
    if entry.mpi is None:
        return body
    return GUARDED.substitute(major=entry.mpi[0], minor=entry.mpi[1], body=body)


def render_fortran(entry: Entry, templates: Path, modes: Modes, where: str) -> str:
    """The Fortran entry points of entry, or "" if it has none (see FORTRAN_VALUE)."""
    path = templates / f"fortran_{entry.cls}.c.in"
    if not entry.fortran or not path.is_file():
        return ""
    args = [a for a in entry.args if a.role not in FORTRAN_DROPPED]
    if any(a.ctype() not in FORTRAN_VALUE for a in args):
        return ""
    strings = [a for a in args if a.ctype() in FORTRAN_STRINGS]
    fparams = [f"{FORTRAN_PARAM.get(a.ctype(), 'MPI_Fint *')}{a.name}" for a in args]
    fparams.append("MPI_Fint *ierr")
    fparams += [f"size_t {a.name}_len" for a in strings]
    names = [a.name for a in args]
    lengths = [f"{a.name}_len" for a in strings]
    values = {
        "name": entry.name,
        "lower": entry.name.lower(),
        "upper": entry.name.upper(),
        "fparams": ", ".join(fparams),
        "fargs": ", ".join(names + ["ierr"] + lengths),
        "fargs_own_ierr": ", ".join(names + ["&sl_ierr"] + lengths),
        **{f"arg_{a.role}": a.name for a in args if a.role},
        **{f"len_{a.role}": f"{a.name}_len" for a in strings if a.role},
        **{f"role_{a.role}": FORTRAN_VALUE[a.ctype()].substitute(p=a.name) for a in args if a.role},
    }
    values["root"] = values.get("role_root", "-1")
    values["made"] = made_args(values)
    values["large"] = "0"
    values["fortran"] = "1"
    values["site"] = "site"  # the entry point's return address, passed to the body
    values["new_request"] = new_request(
        values.get("arg_request"), "*ierr == MPI_SUCCESS", "PMPI_Request_f2c(*${p})"
    )
    values.update(mode_values(entry, modes, values, where))
    body = load_template(templates, path.name)
    check_roles(body, {a.role: a.name for a in args if a.role}, entry, where)
    values["body"] = body.substitute(values)
    return load_template(templates, "fortran_entry.c.in").substitute(values)


# ---- libc file I/O wrappers (contract/io_functions.spec) -------------------------------

# Argument roles the I/O spec may use (its templates name them as ${role_<role>}).
IO_ROLES = frozenset({"fd", "flags", "stream", "size", "cmd", "first", "last", "path"})
# Keys of an I/O entry after its prototype.
IO_KEYS = frozenset({"class", "dir", "syscall"})
IO_ENTRY_RE = re.compile(
    r"^(?P<ret>[A-Za-z_][\w \t*]*?)\s*\b(?P<name>[a-z_]\w*)\s*"
    r"\((?P<args>[^()]*)\)\s*(?P<attrs>.*)$"
)
VARIADIC = "..."
DIRECT_LINE = Template('    "${name}",')
IOFN_LINE = Template("    SL_IOFN_${name} = ${index},")
#: I/O classes of the stdio layer (layer 2); the others are POSIX (layer 1).
STDIO_CLASSES = frozenset({"fopen", "freopen", "fclose", "frw", "fmeta"})
#: The call site a wrapper records: its own return address, the user's call instruction.
C_SITE = "__builtin_return_address(0)"


@dataclass(frozen=True)
class IoEntry:
    """One I/O spec entry: a libc function, its arguments and keys."""

    ret: str
    name: str
    args: tuple[Arg, ...]
    variadic: bool
    cls: str
    line: int
    direction: str | None = None  # dir= key: read or write
    syscall: str | None = None  # syscall= key: the direct path's system call


def parse_io_entry(text: str, line: int, where: str) -> IoEntry:
    """Parses one I/O spec line."""
    m = IO_ENTRY_RE.match(text)
    if m is None:
        raise SpecError(f"{where}: expected '<type> <name>(<args>) class=<class> ...'")
    parts = [a.strip() for a in m.group("args").split(",") if a.strip()]
    variadic = bool(parts) and parts[-1] == VARIADIC
    if variadic:
        parts.pop()
    args = tuple(parse_arg(a, where, IO_ROLES) for a in parts if a != "void")
    attrs: dict[str, str] = {}
    for item in m.group("attrs").split():
        key, sep, value = item.partition("=")
        if not sep or key not in IO_KEYS or not value or key in attrs:
            raise SpecError(f"{where}: bad key '{item}' (known keys: {', '.join(sorted(IO_KEYS))})")
        attrs[key] = value
    if "class" not in attrs:
        raise SpecError(f"{where}: class=<class> is required")
    if attrs.get("dir", "read") not in ("read", "write"):
        raise SpecError(f"{where}: dir= wants read or write")
    if variadic and not args:
        raise SpecError(f"{where}: a variadic function needs a named argument first")
    return IoEntry(
        ret=m.group("ret").strip(),
        name=m.group("name"),
        args=args,
        variadic=variadic,
        cls=attrs["class"],
        line=line,
        direction=attrs.get("dir"),
        syscall=attrs.get("syscall"),
    )


def parse_io_spec(path: Path) -> list[IoEntry]:
    """Reads every entry of the I/O spec file, in order."""
    entries: list[IoEntry] = []
    for line_no, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        entry = parse_io_entry(text, line_no, f"{path}:{line_no}")
        if any(e.name == entry.name for e in entries):
            raise SpecError(f"{path}:{line_no}: {entry.name} is listed twice")
        entries.append(entry)
    if not entries:
        raise SpecError(f"{path}: no entries")
    return entries


def render_io_wrapper(entry: IoEntry, templates: Path, spec: Path) -> str:
    """Renders the wrapper of one I/O entry from the template of its class."""
    where = f"{spec}:{entry.line}"
    path = templates / f"io_{entry.cls}.c.in"
    if not path.is_file():
        raise SpecError(f"{where}: no template {path.name} for class={entry.cls}")
    template = load_template(templates, path.name)
    roles = {a.role: a.name for a in entry.args if a.role}
    needed = {i[len("role_") :] for i in template.get_identifiers() if i.startswith("role_")}
    missing = sorted(needed - roles.keys())
    if missing:
        raise SpecError(f"{where}: class={entry.cls} needs the roles {', '.join(missing)}")
    uses = set(template.get_identifiers())
    if "syscall" in uses and entry.syscall is None:
        raise SpecError(f"{where}: class={entry.cls} needs syscall=<SYS_name>")
    if "write" in uses and entry.direction is None:
        raise SpecError(f"{where}: class={entry.cls} needs dir=read or dir=write")
    if "last" in uses and not entry.variadic:
        raise SpecError(f"{where}: class={entry.cls} is for a variadic function (...)")
    params = [a.decl for a in entry.args] + ([VARIADIC] if entry.variadic else [])
    longs = [f"(long){a.name}" for a in entry.args] + ["0"] * (4 - len(entry.args))
    if len(longs) > 4 and entry.syscall is not None:
        raise SpecError(f"{where}: the direct path passes at most four arguments")
    return template.substitute(
        name=entry.name,
        site=C_SITE,
        ret=entry.ret,
        params=", ".join(params) or "void",
        args=", ".join(a.name for a in entry.args),
        last=entry.args[-1].name if entry.args else "",
        dir=entry.direction or "",
        write="1" if entry.direction == "write" else "0",
        syscall=entry.syscall or "",
        syscall_args=", ".join(longs[:4]),
        opened_path=roles.get("path", "NULL"),
        **{f"role_{role}": arg for role, arg in roles.items()},
    )


def generate_io(spec: Path, templates: Path, out: Path) -> None:
    """Writes sl_io_wrappers.c and sl_io_wrappers.h for the I/O spec into out."""
    entries = parse_io_spec(spec)
    shown_spec = f"spec/{spec.name}"
    direct = [e for e in entries if e.syscall is not None]
    wrappers_c = load_template(templates, "sl_io_wrappers.c.in").substitute(
        spec=shown_spec,
        wrappers="".join(render_io_wrapper(e, templates, spec) for e in entries),
    )
    wrappers_h = load_template(templates, "sl_io_wrappers.h.in").substitute(
        spec=shown_spec,
        direct_count=len(direct),
        direct_lines="\n".join(DIRECT_LINE.substitute(name=e.name) for e in direct),
        iofn_lines="\n".join(
            IOFN_LINE.substitute(name=e.name, index=i) for i, e in enumerate(entries)
        ),
        iofn_count=len(entries),
        iofn_layers=", ".join("2" if e.cls in STDIO_CLASSES else "1" for e in entries),
    )
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / "sl_io_wrappers.h", wrappers_h)
    write_atomically(out / "sl_io_wrappers.c", wrappers_c)


def write_atomically(path: Path, text: str) -> None:
    """Writes text to path through a temporary file, so no half file is left."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def generate(spec: Path, templates: Path, out: Path) -> None:
    """Writes sl_ops.h and sl_mpi_wrappers.c for spec into out."""
    entries = parse_spec(spec)
    shown_spec = f"spec/{spec.name}"
    modes = Modes(
        load_modes(templates, "bytes_modes.in"), load_modes(templates, "messages_modes.in")
    )
    rma = [e for e in entries if e.cls == "rma"]
    ops_h = load_template(templates, "sl_ops.h.in").substitute(
        spec=shown_spec,
        enum_lines="\n".join(ENUM_LINE.substitute(name=e.name, index=e.index) for e in entries),
        count=len(entries),
        rma_lines="\n".join(RMA_LINE.substitute(name=e.name, index=i) for i, e in enumerate(rma)),
        rma_count=len(rma),
    )
    wrappers_c = load_template(templates, "sl_mpi_wrappers.c.in").substitute(
        spec=shown_spec,
        name_lines="\n".join(NAME_LINE.substitute(name=e.name) for e in entries),
        rma_op_lines="\n".join(RMA_OP_LINE.substitute(name=e.name) for e in rma),
        wrappers="".join(render_wrapper(e, templates, spec, modes) for e in entries),
    )
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / "sl_ops.h", ops_h)
    write_atomically(out / "sl_mpi_wrappers.c", wrappers_c)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, help="the MPI function spec")
    parser.add_argument("--io-spec", type=Path, help="the libc file I/O function spec")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument(
        "--templates",
        type=Path,
        default=HERE / "templates",
        help="template directory (default: %(default)s)",
    )
    opts = parser.parse_args(argv)
    if opts.spec is None and opts.io_spec is None:
        parser.error("give --spec, --io-spec or both")
    try:
        if opts.spec is not None:
            generate(opts.spec, opts.templates, opts.out)
        if opts.io_spec is not None:
            generate_io(opts.io_spec, opts.templates, opts.out)
    except (SpecError, OSError, KeyError, ValueError) as exc:
        print(f"generate.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
