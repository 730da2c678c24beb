"""The libc file I/O wrappers are generated from contract/io_functions.spec: the generator
renders every class, refuses a malformed entry with the line and the reason, and the built
hook library exports exactly the spec's functions besides its MPI wrappers and the few
hand-written process wrappers (exec*, _exit, pthread_*)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from contract import CONTRACT_DIR, generate

IO_SPEC = CONTRACT_DIR / "io_functions.spec"

#: Wrappers that are not file I/O and stay hand-written (exec.c, lifecycle.c, posix.c).
PROCESS_WRAPPERS = {
    "_exit",
    "_Exit",
    "execl",
    "execle",
    "execlp",
    "execv",
    "execve",
    "execveat",
    "execvp",
    "execvpe",
    "fexecve",
    "pthread_create",
    "pthread_cancel",
}


def test_every_entry_renders_from_its_class(tmp_path):
    generate.generate_io(IO_SPEC, CONTRACT_DIR / "templates", tmp_path)
    text = (tmp_path / "sl_io_wrappers.c").read_text()
    entries = generate.parse_io_spec(IO_SPEC)
    assert len(entries) == 36
    for e in entries:
        assert f" {e.name}(" in text
        assert f"SL_NEXT({e.name});" in text
    assert (
        "ssize_t rc = sl_direct(e) ? sl_direct_call(SYS_pwrite64, (long)fd, (long)buf, "
        "(long)n, (long)off)" in text
    )
    header = (tmp_path / "sl_io_wrappers.h").read_text()
    direct = [e.name for e in entries if e.syscall]
    assert direct == ["read", "write", "pread", "pwrite", "pread64", "pwrite64", "readv", "writev"]
    assert f"#define SL_DIRECT_COUNT {len(direct)}" in header


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("int close(int fd) class=close", "class=close needs the roles fd"),
        ("int close(int fd @fd) class=nosuch", "no template io_nosuch.c.in"),
        ("ssize_t read(int fd @fd, void *b, size_t n) class=rw dir=read", "needs syscall="),
        ("ssize_t read(int fd @fd, void *b, size_t n) class=rw syscall=SYS_read", "needs dir="),
        ("int creat(const char *p, mode_t m) class=open_mode", "for a variadic function"),
        ("int close(int fd @fd) class=close dir=up", "dir= wants read or write"),
        ("int close(int fd @nope) class=close", "unknown role @nope"),
        ("int close(int fd @fd)", "class=<class> is required"),
    ],
)
def test_a_malformed_entry_is_refused_with_its_line(tmp_path, line, error):
    spec = tmp_path / "io.spec"
    spec.write_text(f"# header\n{line}\n")
    with pytest.raises(generate.SpecError) as caught:
        generate.generate_io(spec, CONTRACT_DIR / "templates", tmp_path / "out")
    assert f"{spec}:2" in str(caught.value) and error in str(caught.value)
    assert not (tmp_path / "out" / "sl_io_wrappers.c").exists()


def test_the_library_exports_the_spec_functions_and_nothing_else_of_libc(hook_library):
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(hook_library)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    exported = {s.split()[2] for s in symbols if len(s.split()) == 3 and s.split()[1] == "T"}
    libc = {s for s in exported if not s.lower().startswith(("mpi", "pmpi", "mca_"))}
    spec = {e.name for e in generate.parse_io_spec(IO_SPEC)}
    assert libc == spec | PROCESS_WRAPPERS


def test_the_generator_runs_as_a_module(tmp_path):
    root = Path(__file__).resolve().parents[1]
    subprocess.run(
        ["python3", "-m", "contract.generate", "--io-spec", str(IO_SPEC), "--out", str(tmp_path)],
        cwd=root,
        check=True,
    )
    assert (tmp_path / "sl_io_wrappers.c").is_file()
