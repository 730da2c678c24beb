"""The contract read by C and Python alike: the wire format, the MPI function spec and the
wrapper generator.

Everything here is data or standard-library Python, shipped as package data, so an
installed (not editable) stacklens finds it too:

* `stacklens_wire.def` — connection start (hello, welcome: proven senders), frame header,
  acknowledgement, statuses and counter tables
  (X-macros); expanded for C by `stacklens_wire.h` (the hook library and the collector's
  codec include it) and parsed by `stacklens.wire`.
* `stacklens_settings.def` — every STACKLENS_* setting once (name, readers, default,
  meaning); the hook library reads its variables through it (`config.h`), and
  `stacklens.settings_table` parses it for the README table and `stacklens config`.
* `port_counters.def` — the InfiniBand port counters once (name, kind, widths, unit, the
  field of each source: MAD, sysfs, the simulator); X-macros for libslfabric and the hooks,
  parsed by `stacklens.port_counters`.
* `mpi_functions.spec` — every wrapped MPI function with its argument roles; op id n is
  its n-th entry.
* `io_functions.spec` — every wrapped POSIX/stdio function with its class (its header
  documents the format); the I/O layers themselves are `SL_IO_LAYER` lines of the wire .def.
* `generate.py` + `templates/` — specs → the hook library's `sl_ops.h`, MPI wrappers and
  libc file I/O wrappers (`python -m contract.generate`); its parser is also what
  `stacklens.mpi_ops` reads the MPI spec with.
"""

from __future__ import annotations

from pathlib import Path

#: This folder: `-I` path of the C builds.
CONTRACT_DIR = Path(__file__).resolve().parent

#: The X-macro file that defines the wire format and counter tables for C and Python.
WIRE_DEF = CONTRACT_DIR / "stacklens_wire.def"

#: The MPI function spec the wrappers are generated from (op ids are its entry order).
MPI_SPEC = CONTRACT_DIR / "mpi_functions.spec"

#: The libc file I/O function spec (call-site I/O function ids are its entry order).
IO_SPEC = CONTRACT_DIR / "io_functions.spec"

#: The X-macro file of the InfiniBand port counters (name, kind, widths, each source's field).
PORT_COUNTERS_DEF = CONTRACT_DIR / "port_counters.def"

#: The X-macro file that declares every STACKLENS_* setting (hook library and stacklens).
SETTINGS_DEF = CONTRACT_DIR / "stacklens_settings.def"
