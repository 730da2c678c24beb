/*
 * pyframe.c — the Python line of an mpi4py call (see pyframe.h): mpi4py's
 * module found at MPI start, the interpreter's layout chosen by its version,
 * the calling thread's frame chain read on the call path and each new
 * (code object, instruction) resolved once into a bounded location table.
 *
 * Layout facts (offsets in bytes, x86-64 and any LP64 target) are those of
 * CPython's own headers for each version: the thread state's current frame,
 * the interpreter frame's code object, previous frame, instruction pointer and
 * owner, the code object's instructions, first traceable instruction, file
 * name, qualified name, line table and first line, and the sizes of the
 * compact string headers. Common to the three versions: ob_type at 8, ob_size
 * (code units of a code object, bytes of a bytes object) and a string's length
 * at 16, a string's state word at 32 (kind in bits 2-4, compact bit 5, ASCII
 * bit 6), a bytes object's data at 32, 2-byte code units, the generator owner 1.
 * The line table format (the same in 3.11 to 3.13) is CPython's
 * Objects/locations.md.
 */
#define _GNU_SOURCE /* dl_iterate_phdr, RTLD_DEFAULT */
#include "pyframe.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "keytab.h"

uintptr_t sl_py_lo, sl_py_len;

/* Where one CPython version keeps what is read (file comment). */
typedef struct py_layout {
    unsigned version;   /* Py_Version >> 16: major << 8 | minor */
    int ts_cframe;      /* PyThreadState.cframe, or -1: the frame is in the thread state */
    int cur_frame;      /* _PyCFrame.current_frame, or PyThreadState.current_frame */
    int fr_code, fr_prev, fr_instr, fr_owner;
    int owner_cstack;   /* owner of an entry (shim) frame, -1: none in this version */
    int co_code, co_first, co_filename, co_qualname, co_linetable, co_firstlineno;
    int str_ascii, str_compact; /* sizeof PyASCIIObject, PyCompactUnicodeObject */
} py_layout;

static const py_layout layouts[] = {
    { 0x30b, 56, 8, 32, 48, 56, 69, -1, 184, 168, 112, 128, 136, 72, 48, 72 },
    { 0x30c, 56, 0, 0, 8, 56, 70, 3, 192, 176, 112, 128, 136, 68, 40, 56 },
    { 0x30d, -1, 72, 0, 8, 56, 70, 3, 200, 184, 112, 128, 136, 68, 40, 56 },
};

enum { OWNER_GENERATOR = 1, MAX_SKIPPED = 64, FILE_MAX = 256, FUNC_MAX = 48 };

/* The layout in use (NULL: off) and the interpreter's entry points and types. */
static const py_layout *layout;
static void *(*this_thread_state)(void);
static int (*is_initialized)(void);
static const void *code_type, *unicode_type, *bytes_type;

/* A resolved location (the entry of the same index in locs_tab). */
typedef struct py_loc {
    uint32_t ready; /* 1 once filled (release store) */
    uint32_t line;
    uint32_t skip; /* the import machinery's frame (<frozen importlib...>): not a site */
    char file[FILE_MAX];
    char func[FUNC_MAX]; /* "py:" + qualified name */
} py_loc;

/* Key of a location: the code object, its file name and line table (whose addresses
 * change if the code object is freed and another takes its place), the instruction
 * and the first line. */
typedef struct py_key {
    uint64_t code, filename, linetable, lasti_first;
} py_key;

static sl_keytab locs_tab;
static py_loc *locs;
static pthread_mutex_t fill_lock = PTHREAD_MUTEX_INITIALIZER;

/* The overflow location (never filled: a full table leaves calls at the module frame). */
static void loc_overflow_key(void *key, unsigned i)
{
    (void)key;
    (void)i;
}

#define AT(p, off, type) (*(type const *)(const void *)((const char *)(p) + (off)))

/* dl_iterate_phdr callback: the executable segment of mpi4py's MPI module. */
static int find_mpi4py(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    const char *name = info->dlpi_name;
    if (name == NULL || strstr(name, "/mpi4py/MPI.") == NULL)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            sl_py_lo = info->dlpi_addr + ph->p_vaddr;
            sl_py_len = ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

/* The layout of the interpreter in the global scope, or NULL. */
static const py_layout *find_layout(void)
{
    const unsigned long *version = dlsym(RTLD_DEFAULT, "Py_Version");
    const char *none = dlsym(RTLD_DEFAULT, "_Py_NoneStruct");
    const void *none_type = dlsym(RTLD_DEFAULT, "_PyNone_Type");
    this_thread_state = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    is_initialized = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    unicode_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    bytes_type = dlsym(RTLD_DEFAULT, "PyBytes_Type");
    if (version == NULL || none == NULL || none_type == NULL || this_thread_state == NULL
        || is_initialized == NULL || code_type == NULL || unicode_type == NULL
        || bytes_type == NULL)
        return NULL;
    /* The standard object header (not a debug or free-threaded build): ob_type at 8. */
    if (AT(none, 8, const void *) != none_type)
        return NULL;
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].version == (unsigned)(*version >> 16))
            return &layouts[i];
    return NULL;
}

void sl_py_init(unsigned max_locs)
{
    if (layout != NULL || !dl_iterate_phdr(find_mpi4py, NULL))
        return;
    const py_layout *l = find_layout();
    size_t size = (size_t)max_locs * sizeof(py_loc);
    void *p = l != NULL ? mmap(NULL, size, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                        : MAP_FAILED;
    if (p == MAP_FAILED || sl_keytab_init(&locs_tab, max_locs, sizeof(py_key), 0, 1,
                                                loc_overflow_key) != 0) {
        if (p != MAP_FAILED)
            munmap(p, size);
        sl_py_len = 0; /* unreadable interpreter: calls stay at the module frame */
        return;
    }
    locs = p;
    __atomic_store_n(&layout, l, __ATOMIC_RELEASE);
}

/* The code object and instruction (code units) of frame f if it is a complete Python
 * frame (not an entry shim, not one whose first instruction has not run). */
static int frame_ref(const py_layout *l, const char *f, const char **code, unsigned *lasti)
{
    unsigned owner = AT(f, l->fr_owner, unsigned char);
    if ((int)owner == l->owner_cstack)
        return 0;
    const char *co = AT(f, l->fr_code, const char *);
    if (co == NULL || AT(co, 8, const void *) != code_type)
        return 0;
    const char *base = co + l->co_code;
    const char *ip = AT(f, l->fr_instr, const char *);
    int64_t units = AT(co, 16, int64_t);
    if (ip < base || ip >= base + 2 * units)
        return 0;
    *lasti = (unsigned)((ip - base) / 2);
    if (owner != OWNER_GENERATOR && *lasti < (unsigned)AT(co, l->co_first, int))
        return 0;
    *code = co;
    return 1;
}

/* One varint of the line table (6 bits a byte, bit 6: more follow); -1 past the end. */
static int64_t varint(const unsigned char **p, const unsigned char *end)
{
    int64_t v = 0;
    for (unsigned shift = 0; *p < end && shift < 32; shift += 6) {
        unsigned b = *(*p)++;
        v |= (int64_t)(b & 63) << shift;
        if (!(b & 64))
            return v;
    }
    return -1;
}

/* The line of instruction lasti of code object co (0: none or unreadable). */
static unsigned line_of(const py_layout *l, const char *co, unsigned lasti)
{
    const char *table = AT(co, l->co_linetable, const char *);
    if (table == NULL || AT(table, 8, const void *) != bytes_type)
        return 0;
    const unsigned char *p = (const unsigned char *)table + 32;
    const unsigned char *end = p + AT(table, 16, int64_t);
    int64_t line = AT(co, l->co_firstlineno, int);
    unsigned addr = 0;
    while (p < end) {
        unsigned first = *p++;
        if (!(first & 0x80))
            return 0;
        unsigned kind = (first >> 3) & 15, len = (first & 7) + 1;
        int64_t at = line;
        if (kind == 15) {
            at = 0; /* no location */
        } else if (kind == 13 || kind == 14) {
            int64_t d = varint(&p, end);
            if (d < 0)
                return 0;
            line += (d & 1) ? -(d >> 1) : d >> 1;
            at = line;
            for (int i = 0; kind == 14 && i < 3; i++)
                if (varint(&p, end) < 0)
                    return 0;
        } else if (kind >= 10) {
            line += kind - 10;
            at = line;
            p += 2;
        } else {
            p += 1;
        }
        if (lasti < addr + len)
            return at > 0 && at <= UINT32_MAX ? (unsigned)at : 0;
        addr += len;
    }
    return 0;
}

/* String object s as UTF-8 into out (cap bytes, NUL-terminated, cut at a character;
 * control characters and lone surrogates as '?'); empty if not a compact string. */
static void utf8_of(const py_layout *l, const char *s, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    if (s == NULL || AT(s, 8, const void *) != unicode_type)
        return;
    uint32_t state = AT(s, 32, uint32_t);
    unsigned kind = (state >> 2) & 7;
    if (!(state & 0x20) || (kind != 1 && kind != 2 && kind != 4))
        return;
    const unsigned char *d = (const unsigned char *)s + ((state & 0x40) ? l->str_ascii
                                                                         : l->str_compact);
    int64_t n = AT(s, 16, int64_t);
    for (int64_t i = 0; i < n; i++) {
        uint32_t c = kind == 1 ? d[i]
                   : kind == 2 ? ((const uint16_t *)(const void *)d)[i]
                               : ((const uint32_t *)(const void *)d)[i];
        if (c < 0x20 || c == 0x7f || (c >= 0xd800 && c < 0xe000) || c > 0x10ffff)
            c = '?';
        unsigned char b[4];
        size_t k = 0;
        if (c < 0x80) {
            b[k++] = (unsigned char)c;
        } else if (c < 0x800) {
            b[k++] = (unsigned char)(0xc0 | c >> 6);
            b[k++] = (unsigned char)(0x80 | (c & 63));
        } else if (c < 0x10000) {
            b[k++] = (unsigned char)(0xe0 | c >> 12);
            b[k++] = (unsigned char)(0x80 | ((c >> 6) & 63));
            b[k++] = (unsigned char)(0x80 | (c & 63));
        } else {
            b[k++] = (unsigned char)(0xf0 | c >> 18);
            b[k++] = (unsigned char)(0x80 | ((c >> 12) & 63));
            b[k++] = (unsigned char)(0x80 | ((c >> 6) & 63));
            b[k++] = (unsigned char)(0x80 | (c & 63));
        }
        if (o + k >= cap)
            break;
        memcpy(out + o, b, k);
        o += k;
    }
    out[o] = '\0';
}

/* The location id of (co, lasti), resolved at its first call; locs_tab.max_keys: the
 * table is full. */
static unsigned loc_of(const py_layout *l, const char *co, unsigned lasti)
{
    py_key k = { (uint64_t)(uintptr_t)co, (uint64_t)(uintptr_t)AT(co, l->co_filename, void *),
                 (uint64_t)(uintptr_t)AT(co, l->co_linetable, void *),
                 (uint64_t)lasti << 32 | (uint32_t)AT(co, l->co_firstlineno, int) };
    unsigned i = sl_keytab_get(&locs_tab, &k,
                               sl_hash_words2(k.code ^ k.lasti_first, k.filename ^ k.linetable), 0);
    if (i >= locs_tab.max_keys)
        return i;
    py_loc *loc = &locs[i];
    if (!__atomic_load_n(&loc->ready, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&fill_lock);
        if (!loc->ready) {
            utf8_of(l, AT(co, l->co_filename, const char *), loc->file, sizeof loc->file);
            memcpy(loc->func, "py:", 4);
            utf8_of(l, AT(co, l->co_qualname, const char *), loc->func + 3, sizeof loc->func - 3);
            loc->line = line_of(l, co, lasti);
            loc->skip = strncmp(loc->file, "<frozen importlib", 17) == 0;
            __atomic_store_n(&loc->ready, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&fill_lock);
    }
    return i;
}

unsigned sl_py_path(uint64_t *pc, unsigned depth)
{
    const py_layout *l = __atomic_load_n(&layout, __ATOMIC_ACQUIRE);
    if (l == NULL || !is_initialized())
        return 0;
    const char *ts = this_thread_state();
    if (ts == NULL)
        return 0;
    const char *f;
    if (l->ts_cframe >= 0) {
        const char *cframe = AT(ts, l->ts_cframe, const char *);
        f = cframe != NULL ? AT(cframe, l->cur_frame, const char *) : NULL;
    } else {
        f = AT(ts, l->cur_frame, const char *);
    }
    unsigned n = 0;
    for (unsigned skipped = 0; f != NULL && n < depth && skipped < MAX_SKIPPED;
         f = AT(f, l->fr_prev, const char *)) {
        const char *co;
        unsigned lasti;
        if (!frame_ref(l, f, &co, &lasti)) {
            skipped++;
            continue;
        }
        unsigned id = loc_of(l, co, lasti);
        if (id >= locs_tab.max_keys)
            break; /* table full: the frames found so far (none: the module frame) */
        if (locs[id].skip) {
            skipped++; /* mpi4py's import calls MPI_Init: the importing line is the site */
            continue;
        }
        pc[n++] = SL_PY_TAG | id;
    }
    return n;
}

void sl_py_describe(uint64_t pc, sl_rec_callsite_frame *r)
{
    unsigned id = (unsigned)(pc & ~SL_PY_TAG);
    if (locs == NULL || id >= locs_tab.max_keys
        || !__atomic_load_n(&locs[id].ready, __ATOMIC_ACQUIRE))
        return;
    const py_loc *loc = &locs[id];
    r->site_offset = loc->line;
    memcpy(r->build_id, loc->func, sizeof r->build_id < sizeof loc->func ? sizeof r->build_id
                                                                         : sizeof loc->func);
    r->build_id[sizeof r->build_id - 1] = '\0';
    snprintf(r->module, sizeof r->module, "%s", loc->file);
}
