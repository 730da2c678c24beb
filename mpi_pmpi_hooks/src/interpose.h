/*
 * interpose.h — what the libc interposers (posix.c, stdio.c) share: exporting a
 * wrapper from the otherwise hidden library, and finding the next (libc's)
 * definition of a wrapped function once, lazily, with dlsym(RTLD_NEXT).
 */
#ifndef SL_INTERPOSE_H
#define SL_INTERPOSE_H

#include <dlfcn.h>

/* Makes a wrapper visible to the dynamic linker (the library builds hidden). */
#define SL_EXPORT __attribute__((visibility("default")))

/* The next definition of name (libc's), looked up once into *cache. */
static inline void *sl_next_fn(void **cache, const char *name)
{
    void *fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (fn == NULL) {
        fn = dlsym(RTLD_NEXT, name);
        __atomic_store_n(cache, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

/* Declares real_<name>, libc's name, with the type of name (cached per wrapper). */
#define SL_NEXT(name) \
    static void *name##_cache; \
    __typeof__(&name) real_##name = (__typeof__(&name))sl_next_fn(&name##_cache, #name)

#endif /* SL_INTERPOSE_H */
