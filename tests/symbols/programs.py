# tests/symbols/programs.py — the call-site test programs, built and run here.
"""sites_main.c and sites_lib.c make calls from known lines; record.c, a stand-in for the
hooks' capture, prints for each call the line the caller passed, the module, its offset
from the load bias and from the first mapping, and the absolute return address."""

from __future__ import annotations

import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: What each recorded line is in: (source file, function). Lines are the sources' __LINE__.
FUNCTIONS = {("sites_main.c", 13): "main", ("sites_main.c", 16): "main",
             ("sites_main.c", 8): "halo", ("sites_lib.c", 7): "lib_exchange",
             ("sites_lib.c", 8): "lib_exchange"}  # fmt: skip
#: No sibling calls: a call in tail position would return to the caller's caller (a limit
#: of every return-address capture, mpiP's too), which is not what these tests are about.
CFLAGS = ["-O2", "-fno-optimize-sibling-calls"]


def build(out: Path, debug: list[str], pie: bool = True, extra_define: str = "") -> Path:
    """record + the library + the program in `out`; returns the program."""
    out.mkdir(parents=True, exist_ok=True)
    cc = ["gcc", *CFLAGS, *debug]
    subprocess.run([*cc, "-fPIC", "-shared", "-o", out / "librecord.so", HERE / "record.c",
                    "-ldl"], check=True)  # fmt: skip
    subprocess.run([*cc, "-fPIC", "-shared", "-o", out / "libsites.so", HERE / "sites_lib.c",
                    f"-L{out}", "-lrecord"], check=True)  # fmt: skip
    main = HERE / "sites_main.c"
    if extra_define:  # a changed source: the same program rebuilt after an edit
        edited = out / "sites_main.c"
        edited.write_text(extra_define + "\n" + main.read_text())
        main = edited
    link = ["-fPIE", "-pie"] if pie else ["-no-pie"]
    program = out / "sites"
    subprocess.run([*cc, *link, "-o", program, main, f"-L{out}", "-lsites", "-lrecord",
                    f"-Wl,-rpath,{out}"], check=True)  # fmt: skip
    return program


def run(program: Path) -> list[tuple[int, str, int, int, int]]:
    """The program's recorded calls: (line, module, bias offset, map offset, address)."""
    text = subprocess.run([program], check=True, capture_output=True, text=True).stdout
    rows = []
    for line in text.splitlines():
        _, src_line, module, bias, mapped, address = line.split()
        rows.append((int(src_line), module, int(bias, 16), int(mapped, 16), int(address, 16)))
    return rows
