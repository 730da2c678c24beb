/*
 * pyframe.h — the Python line of an mpi4py call (issue #26): when the return
 * address of an MPI wrapper is inside mpi4py's extension module, the call site
 * is the calling thread's own Python frames (file, function, line), read
 * without the GIL and without calling the interpreter.
 *
 * Why this is safe: mpi4py releases the GIL around its communication calls
 * (`with nogil`), so the interpreter may not be called there (its frame API
 * also allocates frame objects). But a thread's Python frame chain is only
 * pushed and popped by that thread, and while the thread is inside a C call
 * made by the interpreter the chain is complete and every frame holds a strong
 * reference to its code object (whose file name, name and line table are
 * immutable): reading the thread's own chain then needs no lock. The reads use
 * the internal layouts of CPython 3.11, 3.12 and 3.13 (facts from their
 * headers), chosen by Py_Version and switched on only for a build whose object
 * header is the standard one; each object read is checked by type first. Any
 * other interpreter (older, newer, debug or free-threaded build, libpython not
 * in the global scope) leaves the call at its mpi4py module frame, which the
 * server labels as such.
 *
 * A Python frame is a path entry tagged SL_PY_TAG | location id; its location
 * (code object, instruction) is resolved once, at its first call, into a
 * bounded table (STACKLENS_MAX_CALLSITES locations); a full table leaves new
 * locations at the module frame: every call is still counted at one site.
 */
#ifndef SL_PYFRAME_H
#define SL_PYFRAME_H

#include <stdint.h>

#include "stacklens_wire.h"

/* Tag of a Python location in a call-site path (never a user-space address). */
#define SL_PY_TAG (1ull << 63)

/* mpi4py's extension module: its first address and length (0: not found). */
extern uintptr_t sl_py_lo, sl_py_len;

/* Whether return address pc is in mpi4py's extension module (one compare). */
static inline int sl_py_call(const void *pc)
{
    return (uintptr_t)pc - sl_py_lo < sl_py_len;
}

/* Finds mpi4py's module and a readable interpreter (dl_iterate_phdr, dlsym) and sets
 * up the location table for max_locs locations. At MPI start, once; leaves everything
 * off when either is missing. */
void sl_py_init(unsigned max_locs);

/* The calling thread's innermost Python frames, at most depth of them, as tagged
 * location ids into pc[]. Returns how many (0: none readable: use the module frame). */
unsigned sl_py_path(uint64_t *pc, unsigned depth);

/* Whether a path entry is a Python location. */
static inline int sl_py_tagged(uint64_t pc)
{
    return (pc & SL_PY_TAG) != 0;
}

/* The callsite_frame fields of tagged location pc: module = the Python file,
 * build_id = "py:" and the function's qualified name, site_offset = the line. */
void sl_py_describe(uint64_t pc, sl_rec_callsite_frame *r);

#endif /* SL_PYFRAME_H */
