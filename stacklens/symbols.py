# stacklens/symbols.py — call sites (module, offset) to function, file and line.
"""The call-site resolver: a module's file, the build-id the hooks saw when it ran and the
offsets of its call sites give, per offset, the function, the source file and line, and
how good that answer is.

Offsets (docs/callsites.md): an offset is a *return address* minus the module's load
bias (`dlpi_addr` of `dl_iterate_phdr`, glibc's `l_addr`), so it is the file's own virtual
address of the instruction after the call, whatever ASLR chose and whether the module is
a PIE, a fixed-address executable or a shared library (for a PIE or a library, the same
as an offset from the start of its first mapping, `dladdr`'s `dli_fbase`). A
fixed-address executable's offset below its first page can only be one from its first
mapping: it is taken as such (the file address is then the offset plus the first
PT_LOAD's p_vaddr rounded down to the page). The line looked up is that of the byte
before the return address (the call instruction), never the next statement.

Quality, best first, with the reason whenever it is not `line`:
- `line`: function, file and line from the DWARF line table of the module (or of its
  separate debug file found by build-id under /usr/lib/debug/.build-id).
- `function+offset`: no line information covers the address (stripped of DWARF, or a
  part built without -g); the function from .symtab, else .dynsym, and the offset of the
  return address in it.
- `module+offset`: nothing trustworthy: the file is missing or unreadable, is not ELF,
  has no build-id, or its build-id is not the one that ran (rebuilt since), or no symbol
  covers the address. A rebuilt binary is never read for lines: its answer would be wrong.

Whose read: the collector resolves frames that users send (a frame is data: any path can
be named), as its own user. Given the job's `Owner`, a file is read only when that owner
may read it where the resolver runs (`owner_access`: search permission on every directory
of the path, symlinks followed as the kernel would, and read permission on the file, by
the mode bits, before any other access to the file); else the reason is `NOT_READABLE`,
the same sentence whether the file exists or not. Every later open checks that it opened
the file the walk checked (device and inode), so a path swapped meanwhile is never read.

Pure reading of files with pyelftools; no network, no subprocess. One `ModuleIndex` per
build-id is kept in an LRU (`resolve` uses it); callers store what they resolved.
"""

from __future__ import annotations

import bisect
import os
import pwd
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

#: Quality labels, best first.
LINE = "line"
FUNCTION_OFFSET = "function+offset"
MODULE_OFFSET = "module+offset"
#: A Python frame of an mpi4py call: file, function and line read by the hooks from the
#: interpreter (mpi_pmpi_hooks/src/pyframe.c), never from a module file.
PYTHON = "python"
#: The build-id of a Python frame begins so (wire callsite_frame): "py:" and the function's
#: qualified name; its module is the Python file and its offset the line.
PYTHON_PREFIX = "py:"
QUALITIES = (LINE, PYTHON, FUNCTION_OFFSET, MODULE_OFFSET)

#: Where separate debug files are looked up by build-id (`.build-id/xx/rest.debug`).
DEBUG_ROOTS = (Path("/usr/lib/debug"),)

#: Modules larger than this are not read (a bound on the resolver's time and memory).
MAX_MODULE_BYTES = 2 << 30

#: Symlinks followed in one path before it is given up (the kernel's own bound, ELOOP).
MAX_SYMLINKS = 40

#: Page size the loader rounds the first PT_LOAD down to (an offset from the first mapping).
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class Site:
    """One resolved call site. `function_offset` is the return address's offset in the
    function (as a backtrace prints it); `reason` says why the quality is not `line`."""

    offset: int
    quality: str
    function: str | None = None
    function_offset: int | None = None
    file: str | None = None
    line: int | None = None
    reason: str = ""

    def label(self, module: str) -> str:
        """A short human form: `solver.c:212`, `solve+0x1f`, `libfoo.so+0x1234`."""
        if self.quality == LINE and self.file and self.line:
            return f"{os.path.basename(self.file)}:{self.line}"
        if self.function is not None and self.function_offset is not None:
            return f"{self.function}+{self.function_offset:#x}"
        return f"{os.path.basename(module)}+{self.offset:#x}"


class Owner(NamedTuple):
    """A job's owner as the file permissions see it: uid and every group it is in."""

    uid: int
    groups: frozenset[int]

    @classmethod
    def of(cls, uid: int) -> Owner:
        """The owner `uid` with its groups from the system's group database (its primary
        group and `os.getgrouplist`); a uid without a passwd entry is in no group."""
        try:
            entry = pwd.getpwuid(uid)
        except KeyError:
            return cls(uid, frozenset())
        return cls(uid, frozenset(os.getgrouplist(entry.pw_name, entry.pw_gid)))


#: The reason of a file the job's owner may not read (or a path swapped while checked): the
#: same whether the file exists or not, so it tells the owner nothing they could not see.
NOT_READABLE = "{path} is not readable by the job's owner where the collector runs"

#: Mode bits granting search (directories) and read (files) to owner, group, other.
_SEARCH = (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)
_READ = (stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH)


def _grants(st: os.stat_result, owner: Owner, bits: tuple[int, int, int]) -> bool:
    """Whether the mode bits of `st` grant `owner` the permission of `bits` (the file's
    user class, else its group class, else other: the first class that matches decides,
    as the kernel does without ACLs); uid 0 is granted everything."""
    if owner.uid == 0:
        return True
    if st.st_uid == owner.uid:
        return bool(st.st_mode & bits[0])
    if st.st_gid in owner.groups:
        return bool(st.st_mode & bits[1])
    return bool(st.st_mode & bits[2])


@dataclass(frozen=True)
class Access:
    """What `owner_access` found: `reason` ("" when the owner may read the file), the
    file's path with every symlink resolved and its status (when it may)."""

    reason: str
    real: str = ""
    status: os.stat_result | None = None


def owner_access(path: str, owner: Owner) -> Access:
    """Whether `owner` may read the file at `path` by the mode bits: search permission on
    every directory the path walks through (symlinks followed as the kernel does, their
    own directories checked too) and read permission on the file. Nothing is looked up in
    a directory before the owner's search permission on it is checked, and the walk holds
    each directory open (O_PATH) while it looks into it, so a directory swapped for a
    symlink meanwhile is never walked through. ACLs are not consulted (docs/callsites.md).

    A name missing from a directory the owner may search says "is not here" and a file
    that is not regular says so (the owner can see both); everything else the owner may
    not see is `NOT_READABLE`, whether the file exists or not."""
    denied = Access(NOT_READABLE.format(path=path))
    if not os.path.isabs(path):
        return denied  # relative to the collector's directory: no owner's path
    todo = [c for c in path.split("/") if c and c != "."][::-1]  # next component last
    parts: list[str] = []  # the directories walked, symlinks resolved
    links = 0
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY)
    try:
        while todo:
            name = todo.pop()
            if not _grants(os.fstat(fd), owner, _SEARCH):
                return denied
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return Access(f"{path} is not here")
            except OSError:
                return denied
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > MAX_SYMLINKS:
                    return denied
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    os.close(fd)
                    fd = os.open("/", os.O_PATH | os.O_DIRECTORY)
                    parts = []
                todo.extend(c for c in target.split("/")[::-1] if c and c != ".")
                continue
            if not todo:  # the file itself
                if not stat.S_ISREG(st.st_mode):
                    return Access(f"{path} is not a regular file")
                if not _grants(st, owner, _READ):
                    return denied
                return Access("", "/" + "/".join([*parts, name]), st)
            if not stat.S_ISDIR(st.st_mode):
                return Access(f"{path} is not here")  # ENOTDIR: as the owner would see it
            try:
                sub = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                return denied  # swapped since its stat
            if name == "..":
                parts = parts[:-1]
            else:
                parts.append(name)
            os.close(fd)
            fd = sub
        return Access(f"{path} is not a regular file")  # the path names a directory
    finally:
        os.close(fd)


class FileChangedError(OSError):
    """The file opened is not the one whose permissions were checked."""


def open_checked(path: str | Path, identity: tuple[int, int] | None = None) -> BinaryIO:
    """The file at `path` opened for reading; with `identity` (device, inode: the file
    `owner_access` checked) it must be that file (OSError otherwise: a path swapped since
    the check is never read) and is opened without following a final symlink or blocking
    on a FIFO."""
    if identity is None:
        return open(path, "rb")  # noqa: SIM115 — the caller closes it
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != identity or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise FileChangedError(f"{path} changed since its permissions were checked")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def build_id(elf: ELFFile) -> str | None:
    """The GNU build-id of an ELF file as lowercase hex, or None when it has none."""
    for seg in elf.iter_segments():
        if seg["p_type"] == "PT_NOTE":
            for note in seg.iter_notes():  # type: ignore[attr-defined]
                if note["n_type"] == "NT_GNU_BUILD_ID":
                    return str(note["n_desc"]).lower()
    for sec in elf.iter_sections():
        if sec["sh_type"] == "SHT_NOTE":
            for note in sec.iter_notes():  # type: ignore[attr-defined]
                if note["n_type"] == "NT_GNU_BUILD_ID":
                    return str(note["n_desc"]).lower()
    return None


def file_build_id(path: str | Path, identity: tuple[int, int] | None = None) -> str | None:
    """The build-id of the ELF file at `path` (None: no build-id; raises OSError/ELFError);
    with `identity`, of that file only (`open_checked`)."""
    with open_checked(path, identity) as f:
        return build_id(ELFFile(f))


class _Functions:
    """The function symbols of one symbol table, sorted by address, for lookups."""

    def __init__(self, elf: ELFFile, section: str) -> None:
        starts: dict[int, tuple[int, str]] = {}
        sec = elf.get_section_by_name(section)
        if sec is not None and hasattr(sec, "iter_symbols"):
            for sym in sec.iter_symbols():
                if (
                    sym["st_info"]["type"] in ("STT_FUNC", "STT_GNU_IFUNC")
                    and sym["st_value"]
                    and sym["st_shndx"] != "SHN_UNDEF"
                    and sym.name
                ):
                    size, name = starts.get(sym["st_value"], (0, ""))
                    # several names at one address: keep the global, sized one
                    if not name or (sym["st_info"]["bind"] == "STB_GLOBAL" and sym["st_size"]):
                        starts[sym["st_value"]] = (max(size, sym["st_size"]), sym.name)
        self.addresses = sorted(starts)
        self.entries = [starts[a] for a in self.addresses]

    def __bool__(self) -> bool:
        return bool(self.addresses)

    def find(self, address: int) -> tuple[str, int] | None:
        """The function covering `address` and its start, or None."""
        i = bisect.bisect_right(self.addresses, address) - 1
        if i < 0:
            return None
        start = self.addresses[i]
        size, name = self.entries[i]
        end = (
            start + size
            if size
            else (self.addresses[i + 1] if i + 1 < len(self.addresses) else start)
        )
        return (name, start) if address < end else None


class _Lines:
    """The DWARF line tables of one ELF file, read per compilation unit on demand."""

    def __init__(self, elf: ELFFile, max_units: int = 4096) -> None:
        self.dwarf = elf.get_dwarf_info() if elf.has_dwarf_info() else None
        self._cu_ranges: list[tuple[int, int, int]] | None = None  # (low, high, cu offset)
        # decoded units, least recently used first; at most max_units kept (memory bound)
        self._tables: OrderedDict[int, tuple[list[int], list[tuple[str, int] | None]]] = (
            OrderedDict()
        )
        self.max_units = max(1, max_units)

    def __bool__(self) -> bool:
        return self.dwarf is not None and self.dwarf.debug_line_sec is not None

    def _ranges(self) -> list[tuple[int, int, int]]:
        """Every CU's address ranges: from .debug_aranges (GCC writes it), else from the
        sequences of every CU's line program (read once, all of them)."""
        if self._cu_ranges is not None:
            return self._cu_ranges
        assert self.dwarf is not None
        found: list[tuple[int, int, int]] = []
        aranges = self.dwarf.get_aranges()
        covered: set[int] = set()
        if aranges is not None:
            for entry in aranges.entries:
                found.append((entry.begin_addr, entry.begin_addr + entry.length, entry.info_offset))
                covered.add(entry.info_offset)
        for cu in self.dwarf.iter_CUs():
            if cu.cu_offset in covered:
                continue
            addresses, values = self._table(cu.cu_offset)
            start = None
            for address, value in zip(addresses, values, strict=True):
                if value is None and start is not None:
                    found.append((start, address, cu.cu_offset))
                    start = None
                elif value is not None and start is None:
                    start = address
        self._cu_ranges = sorted(found)
        return self._cu_ranges

    def _table(self, cu_offset: int) -> tuple[list[int], list[tuple[str, int] | None]]:
        """A CU's line rows as sorted row addresses and (file, line) per row; None marks
        the end of a sequence (an address past it has no line)."""
        if cu_offset in self._tables:
            self._tables.move_to_end(cu_offset)
            return self._tables[cu_offset]
        assert self.dwarf is not None
        cu = self.dwarf.get_CU_at(cu_offset)
        program = self.dwarf.line_program_for_CU(cu)
        rows: list[tuple[int, int, tuple[str, int] | None]] = []
        if program is not None:
            header = program.header
            version = header["version"]
            files = header["file_entry"]
            dirs = header["include_directory"]
            comp_dir = _text(cu.get_top_DIE().attributes.get("DW_AT_comp_dir"))
            names: dict[int, str] = {}

            def file_name(index: int) -> str:
                if index not in names:
                    entry = files[index if version >= 5 else index - 1]
                    name = _decode(entry.name)
                    d = entry.dir_index
                    if version >= 5:
                        folder = _decode(dirs[d]) if d < len(dirs) else ""
                    else:
                        folder = _decode(dirs[d - 1]) if 0 < d <= len(dirs) else ""
                    path = os.path.join(folder, name) if folder else name
                    if not os.path.isabs(path) and comp_dir:
                        path = os.path.join(comp_dir, path)
                    names[index] = os.path.normpath(path)
                return names[index]

            for n, entry in enumerate(program.get_entries()):
                state = entry.state
                if state is None:
                    continue
                if state.end_sequence:
                    rows.append((state.address, n, None))
                else:
                    rows.append((state.address, n, (file_name(state.file), state.line)))
        # at one address, the last row wins (as addr2line), but an end of sequence ends
        # the previous sequence only: sort by address, then end marks first
        rows.sort(key=lambda r: (r[0], r[2] is not None, r[1]))
        addresses = [r[0] for r in rows]
        values = [r[2] for r in rows]
        self._tables[cu_offset] = (addresses, values)
        while len(self._tables) > self.max_units:
            self._tables.popitem(last=False)
        return addresses, values

    def find(self, address: int) -> tuple[str, int] | None:
        """The (file, line) of the instruction at `address`, or None."""
        if not self:
            return None
        for low, high, cu in self._ranges():
            if low > address:
                break
            if address < high:
                addresses, values = self._table(cu)
                i = bisect.bisect_right(addresses, address) - 1
                if i >= 0 and values[i] is not None and values[i][1] > 0:  # type: ignore[index]
                    return values[i]
        return None


def _decode(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _text(attr: Any) -> str:
    return _decode(attr.value) if attr is not None else ""


class ModuleIndex:
    """What one ELF file (of a known build-id) tells about addresses: its line tables
    (its own, else its separate debug file's) and its function symbols."""

    def __init__(
        self,
        path: str,
        build_id: str | None,
        debug_roots: tuple[Path, ...] = DEBUG_ROOTS,
        max_units: int = 4096,
        identity: tuple[int, int] | None = None,
    ) -> None:
        """`max_units`: decoded compilation units' line tables kept at once (memory);
        `identity`: the (device, inode) the file at `path` must be (`open_checked`)."""
        self.path = path
        self.build_id = build_id
        self.debug_roots = debug_roots
        self.max_units = max_units
        self.identity = identity
        self._files: list[Any] = []
        with open_checked(path, identity) as probe:
            elf = ELFFile(probe)
            loads = [s["p_vaddr"] for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
            self.first_page = (loads[0] if loads else 0) & ~(PAGE - 1)
            self.fixed = elf["e_type"] == "ET_EXEC"
        self.lines, self.functions, self.dynamic, self.debug_file = self._read()
        self._lock = threading.Lock()

    def _open(self, path: str, identity: tuple[int, int] | None = None) -> ELFFile:
        f = open_checked(path, identity)  # kept open: pyelftools reads it lazily
        self._files.append(f)
        return ELFFile(f)

    def _read(self) -> tuple[_Lines, _Functions, _Functions, str | None]:
        elf = self._open(self.path, self.identity)
        if self.build_id is not None and build_id(elf) != self.build_id:
            # replaced between the check and this read: never read another file's lines
            raise ValueError(f"{self.path} changed while it was read")
        lines = _Lines(elf, self.max_units)
        functions = _Functions(elf, ".symtab")
        debug_file = None
        if not lines and self.build_id:
            debug = _debug_file(self.build_id, self.debug_roots)
            if debug is not None:
                delf = self._open(str(debug))
                if build_id(delf) == self.build_id:
                    lines = _Lines(delf, self.max_units)
                    debug_file = str(debug)
                    if not functions:
                        functions = _Functions(delf, ".symtab")
        return lines, functions, _Functions(elf, ".dynsym"), debug_file

    def close(self) -> None:
        for f in self._files:
            f.close()
        self._files.clear()

    def file_address(self, offset: int) -> int:
        """The file's virtual address of an offset (see the module's doc). A fixed-address
        executable's addresses all lie at or above its first page: an offset below it can
        only be relative to the first mapping."""
        if self.fixed and offset < self.first_page:
            return offset + self.first_page
        return offset

    def site(self, offset: int) -> Site:
        """The call site whose return address is at `offset`."""
        ret = self.file_address(offset)
        call = ret - 1  # the call instruction's last byte, not the next statement
        with self._lock:
            where = self.lines.find(call)
            func = self.functions.find(call) or self.dynamic.find(call)
        name, start = func if func else (None, None)
        fn_off = ret - start if start is not None else None
        if where is not None:
            return Site(offset, LINE, name, fn_off, where[0], where[1])
        if func is not None:
            why = (
                "no line table covers this address"
                if self.lines
                else "no DWARF line information (stripped or built without -g)"
            )
            if not self.functions:
                why += "; function from the dynamic symbols"
            return Site(offset, FUNCTION_OFFSET, name, fn_off, reason=why)
        why = (
            "no line table or symbol covers this address"
            if (self.lines or self.functions or self.dynamic)
            else "the module is stripped"
        )
        return Site(offset, MODULE_OFFSET, reason=why)


def _debug_file(bid: str, roots: tuple[Path, ...]) -> Path | None:
    for root in roots:
        candidate = root / ".build-id" / bid[:2] / f"{bid[2:]}.debug"
        if candidate.is_file():
            return candidate
    return None


#: The identity of a module file as found on disk: (real path, mtime in ns, size, inode,
#: device). A file rewritten in place, replaced by a rename or touched gets another key.
FileKey = tuple[str, int, int, int, int]


@dataclass
class ResolverStats:
    """What a Resolver has read so far: build-ids read from files, module indexes built
    (symbol tables read), indexes dropped by the bound, offsets answered."""

    build_id_reads: int = 0
    index_builds: int = 0
    evictions: int = 0
    offsets: int = 0


class Resolver:
    """Resolves call sites of modules. Cached, bounded, thread-safe:

    - the build-id of a file is read once per `FileKey` (real path, mtime, size, inode,
      device: a stat per `resolve` call, never an ELF read when the key is known), in an
      LRU of `capacity * 8` keys;
    - one `ModuleIndex` (symbol tables, and line tables read per compilation unit on
      demand, at most `max_units` decoded units per index) per (FileKey, build-id) in an
      LRU of `capacity` indexes; an index dropped closes its files.

    So a module is read once whatever the number of call sites, requests or jobs, and a
    file replaced or rebuilt is read afresh (and its build-id checked again). Separate
    debug files are looked up under `debug_roots`."""

    def __init__(
        self,
        capacity: int = 32,
        debug_roots: tuple[Path, ...] = DEBUG_ROOTS,
        max_units: int = 4096,
    ) -> None:
        self.capacity = capacity
        self.debug_roots = debug_roots
        self.max_units = max_units
        self.stats = ResolverStats()
        self._indexes: OrderedDict[tuple[FileKey, str], ModuleIndex] = OrderedDict()
        self._ids: OrderedDict[FileKey, str | None] = OrderedDict()
        self._lock = threading.Lock()

    def _file_key(self, path: str) -> FileKey:
        st = os.stat(path)
        return (os.path.realpath(path), st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)

    def _build_id(self, key: FileKey, checked: bool = False) -> str | None:
        """The build-id of the file of `key`, read once per key (raises OSError/ELFError);
        `checked`: from the file of the key's device and inode only (`open_checked`)."""
        with self._lock:
            if key in self._ids:
                self._ids.move_to_end(key)
                return self._ids[key]
        found = file_build_id(key[0], (key[4], key[3]) if checked else None)
        with self._lock:
            self.stats.build_id_reads += 1
            self._ids[key] = found
            while len(self._ids) > self.capacity * 8:
                self._ids.popitem(last=False)
        return found

    def check(
        self, path: str, expected_build_id: str | None, owner: Owner | None = None
    ) -> tuple[str, FileKey | None]:
        """Why the file at `path` cannot be read for the module that ran ("" when it can),
        and its FileKey when it can (check_module's answers, the build-id cached). With an
        `owner` other than uid 0, `owner_access` first: a file that owner may not read is
        `NOT_READABLE`, and so is one swapped after its check."""
        if not expected_build_id:
            return check_module(path, expected_build_id), None
        if owner is not None and owner.uid != 0:
            return self._check_for(path, expected_build_id, owner)
        try:
            if not os.path.isfile(path):
                return check_module(path, expected_build_id), None
            key = self._file_key(path)
            if key[2] > MAX_MODULE_BYTES:
                return f"{path} is larger than {MAX_MODULE_BYTES >> 20} MiB", None
            found = self._build_id(key)
        except FileNotFoundError:
            return f"{path} is not here", None
        except PermissionError:
            return f"{path} is not readable here", None
        except (OSError, ELFError) as exc:
            return f"{path} could not be read as ELF ({exc})", None
        return _mismatch(path, found, expected_build_id), key

    def _check_for(self, path: str, expected: str, owner: Owner) -> tuple[str, FileKey | None]:
        """`check` for an owner other than uid 0: the file's key from the walk that checked
        the owner's permissions, its build-id read from that very file."""
        try:
            access = owner_access(path, owner)
        except OSError:
            return NOT_READABLE.format(path=path), None
        if access.reason or access.status is None:
            return access.reason, None
        st = access.status
        key = (access.real, st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)
        if st.st_size > MAX_MODULE_BYTES:
            return f"{path} is larger than {MAX_MODULE_BYTES >> 20} MiB", None
        try:
            found = self._build_id(key, checked=True)
        except OSError:
            return NOT_READABLE.format(path=path), None  # swapped since the walk, or gone
        except ELFError as exc:
            return f"{path} could not be read as ELF ({exc})", None
        return _mismatch(path, found, expected), key

    def _index(self, key: FileKey, expected: str, checked: bool = False) -> ModuleIndex:
        cache_key = (key, expected)
        with self._lock:
            if cache_key in self._indexes:
                self._indexes.move_to_end(cache_key)
                return self._indexes[cache_key]
        identity = (key[4], key[3]) if checked else None
        index = ModuleIndex(key[0], expected, self.debug_roots, self.max_units, identity)
        with self._lock:
            self.stats.index_builds += 1
            if cache_key in self._indexes:  # another thread built it meanwhile
                index.close()
                return self._indexes[cache_key]
            self._indexes[cache_key] = index
            while len(self._indexes) > self.capacity:
                _, old = self._indexes.popitem(last=False)
                old.close()
                self.stats.evictions += 1
        return index

    def resolve(
        self,
        path: str,
        expected_build_id: str | None,
        offsets: list[int],
        owner: Owner | None = None,
    ) -> list[Site]:
        """Each offset of the module at `path` as a `Site`, in order. The file's build-id
        must equal `expected_build_id` (what ran) for anything better than module+offset.
        With an `owner`, only a file that owner may read is read (`check`)."""
        self.stats.offsets += len(offsets)
        reason, key = self.check(path, expected_build_id, owner)
        if reason or key is None:
            return [Site(o, MODULE_OFFSET, reason=reason) for o in offsets]
        assert expected_build_id is not None
        checked = owner is not None and owner.uid != 0
        try:
            index = self._index(key, expected_build_id.lower(), checked)
            return [index.site(o) for o in offsets]
        except (OSError, ELFError, ValueError, KeyError, IndexError, AssertionError) as exc:
            why = f"the module's symbols could not be read ({type(exc).__name__}: {exc})"
            if checked and isinstance(exc, OSError):  # swapped or gone since the walk
                why = NOT_READABLE.format(path=path)
            return [Site(o, MODULE_OFFSET, reason=why) for o in offsets]

    def close(self) -> None:
        with self._lock:
            for index in self._indexes.values():
                index.close()
            self._indexes.clear()
            self._ids.clear()


def _mismatch(path: str, found: str | None, expected_build_id: str) -> str:
    """Why a file of build-id `found` is not the module that ran ("" when it is)."""
    if found is None:
        return f"{path} has no build-id now (rebuilt since the run)"
    if found != expected_build_id.lower():
        ran = expected_build_id[:12]
        return f"{path} was rebuilt since the run (build-id {found[:12]}…, ran {ran}…)"
    return ""


def check_module(path: str, expected_build_id: str | None) -> str:
    """Why the file at `path` cannot be read for the module that ran ("" when it can)."""
    if not expected_build_id:
        return "the module had no build-id when it ran, so no file can be proven to be it"
    try:
        st = os.stat(path)
        if not os.path.isfile(path):
            return f"{path} is not a regular file"
        if st.st_size > MAX_MODULE_BYTES:
            return f"{path} is larger than {MAX_MODULE_BYTES >> 20} MiB"
        found = file_build_id(path)
    except FileNotFoundError:
        return f"{path} is not here"
    except PermissionError:
        return f"{path} is not readable here"
    except (OSError, ELFError) as exc:
        return f"{path} could not be read as ELF ({exc})"
    return _mismatch(path, found, expected_build_id)
