/* tests/symbols/record.c — a stand-in for the hooks' call-site capture, for resolver tests.
 * sl_record(line) prints, for its caller's return address: the line the caller passed,
 * the module's path, its build-id-independent offsets from the load bias (dlpi_addr) and
 * from the first mapping (dladdr's dli_fbase), and the absolute address (ASLR check). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

struct find { uintptr_t addr; uintptr_t bias; const char *name; int found; };

static int visit(struct dl_phdr_info *info, size_t size, void *data)
{
    struct find *f = data;
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && f->addr >= lo && f->addr < lo + ph->p_memsz) {
            f->bias = info->dlpi_addr;
            f->name = info->dlpi_name;
            f->found = 1;
            return 1;
        }
    }
    return 0;
}

__attribute__((noinline)) void sl_record(int line)
{
    uintptr_t ret = (uintptr_t)__builtin_return_address(0);
    struct find f = { ret, 0, NULL, 0 };
    Dl_info dl;
    char exe[4096];
    dl_iterate_phdr(visit, &f);
    if (!f.found || !dladdr((void *)ret, &dl))
        return;
    const char *path = f.name;
    if (!path || !*path) {  /* the main program: dlpi_name is empty */
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        path = exe;
    }
    printf("site %d %s %#lx %#lx %#lx\n", line, path, (unsigned long)(ret - f.bias),
           (unsigned long)(ret - (uintptr_t)dl.dli_fbase), (unsigned long)ret);
}
