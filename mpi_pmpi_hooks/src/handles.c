/*
 * handles.c — the handle cache (see handles.h): open addressing over
 * (kind, handle) keys with lock-free lookups and mutex-held updates.
 */
#include "handles.h"

#include <pthread.h>
#include <stdlib.h>

#include "core.h"

#define SL_TOMB ((uintptr_t)1) /* a removed slot; probing continues past it */

typedef struct sl_hslot {
    uintptr_t key;           /* 0 empty, SL_TOMB removed, else handle value */
    int kind;
    sl_handle_rec *rec;
} sl_hslot;

static sl_hslot *slots;
static unsigned mask;        /* slot count - 1 (a power of two) */
static unsigned max_live, live;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
unsigned sl_comm_recs_gen;

/* Mixes a handle value and kind into a slot number. */
static unsigned slot_of(uintptr_t key, int kind)
{
    uint64_t h = ((uint64_t)key ^ ((uint64_t)kind << 59)) * 0x9E3779B97F4A7C15ull;
    return (unsigned)(h >> 32) & mask;
}

/* Sizes the table at twice max_keys rounded up to a power of two. */
int sl_handles_init(unsigned max_keys)
{
    unsigned n = 16;
    while (n < 2 * max_keys)
        n *= 2;
    slots = calloc(n, sizeof *slots);
    if (slots == NULL)
        return -1;
    mask = n - 1;
    max_live = max_keys;
    live = 0;
    /* every record made before is gone (sl_core_init makes the tables again per MPI
     * initialisation): what a cache kept from them is stale */
    __atomic_fetch_add(&sl_comm_recs_gen, 1, __ATOMIC_RELEASE);
    return 0;
}

/* Frees the records and the table. */
void sl_handles_fini(void)
{
    if (slots == NULL)
        return;
    for (unsigned i = 0; i <= mask; i++) {
        if (slots[i].rec != NULL) {
            free(slots[i].rec->world);
            free(slots[i].rec);
        }
    }
    free(slots);
    slots = NULL;
}

/* Lock-free lookup of (kind, key); NULL if absent. */
static sl_handle_rec *find(int kind, uintptr_t key)
{
    if (slots == NULL)
        return NULL;
    for (unsigned i = slot_of(key, kind), n = 0; n <= mask; i = (i + 1) & mask, n++) {
        uintptr_t k = __atomic_load_n(&slots[i].key, __ATOMIC_ACQUIRE);
        if (k == 0)
            return NULL;
        if (k == key && slots[i].kind == kind)
            return __atomic_load_n(&slots[i].rec, __ATOMIC_ACQUIRE);
    }
    return NULL;
}

/* Publishes rec under (kind, key); the caller holds the lock. 0 or -1 (full). */
static int insert_locked(int kind, uintptr_t key, sl_handle_rec *rec)
{
    if (live >= max_live)
        return -1;
    for (unsigned i = slot_of(key, kind), n = 0; n <= mask; i = (i + 1) & mask, n++) {
        uintptr_t k = slots[i].key;
        if (k == 0 || k == SL_TOMB) {
            slots[i].kind = kind;
            __atomic_store_n(&slots[i].rec, rec, __ATOMIC_RELEASE);
            __atomic_store_n(&slots[i].key, key, __ATOMIC_RELEASE);
            live++;
            return 0;
        }
    }
    return -1;
}

/* FNV-1a of n 32-bit values, starting from h. */
static uint32_t fnv(uint32_t h, const int *v, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t x = (uint32_t)v[i];
        for (int b = 0; b < 4; b++) {
            h ^= (x >> (8 * b)) & 0xFFu;
            h *= 16777619u;
        }
    }
    return h;
}

/* World ranks of every rank of group (size n) into a new array; NULL on failure. */
static int *translate_group(MPI_Group group, int n)
{
    int *ranks = calloc((size_t)n + 1, sizeof *ranks);
    int *world = calloc((size_t)n + 1, sizeof *world);
    if (ranks == NULL || world == NULL) {
        free(ranks);
        free(world);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        ranks[i] = i;
    if (PMPI_Group_translate_ranks(group, n, ranks, sl_core.world_group, world) != MPI_SUCCESS) {
        free(ranks);
        free(world);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (world[i] == MPI_UNDEFINED || world[i] < 0 || world[i] >= sl_core.world_size)
            world[i] = -1;
    free(ranks);
    return world;
}

/* Number of cached communicators whose group hashes to group_hash (lock held). */
static uint32_t ordinal_locked(uint32_t group_hash)
{
    uint32_t used = 0;
    for (unsigned i = 0; i <= mask; i++) {
        uintptr_t k = slots[i].key;
        if (k != 0 && k != SL_TOMB && slots[i].kind == SL_H_COMM
            && slots[i].rec->group_hash == group_hash)
            used++;
    }
    return used;
}

/* Builds the record of a communicator (lock held); NULL on failure. */
static sl_handle_rec *comm_build_locked(MPI_Comm comm)
{
    int inter = 0, n = 0;
    MPI_Group local, remote;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS
        || PMPI_Comm_group(comm, &local) != MPI_SUCCESS)
        return NULL;
    sl_handle_rec *rec = calloc(1, sizeof *rec);
    int lsize = 0;
    PMPI_Group_size(local, &lsize);
    int *lworld = rec != NULL ? translate_group(local, lsize) : NULL;
    if (lworld == NULL) {
        PMPI_Group_free(&local);
        free(rec);
        return NULL;
    }
    rec->group_hash = fnv(2166136261u, lworld, lsize);
    if (inter && PMPI_Comm_remote_group(comm, &remote) == MPI_SUCCESS) {
        PMPI_Group_size(remote, &n);
        rec->world = translate_group(remote, n);
        if (rec->world != NULL)
            rec->group_hash ^= fnv(2166136261u, rec->world, n);
        PMPI_Group_free(&remote);
        free(lworld);
    } else {
        rec->world = lworld;
        n = lsize;
    }
    PMPI_Group_free(&local);
    if (rec->world == NULL) {
        free(rec);
        return NULL;
    }
    rec->size = n;
    rec->io_index = -1;
    uint32_t ord = ordinal_locked(rec->group_hash);
    uint32_t id = fnv(rec->group_hash, (const int *)&ord, 1);
    rec->comm_id = id == 0xFFFFFFFFu ? 0xFFFFFFFEu : id;
    return rec;
}

/* Builds the record of a window from its group (lock held); NULL on failure. */
static sl_handle_rec *win_build_locked(MPI_Win win)
{
    MPI_Group group;
    int n = 0;
    if (PMPI_Win_get_group(win, &group) != MPI_SUCCESS)
        return NULL;
    PMPI_Group_size(group, &n);
    sl_handle_rec *rec = calloc(1, sizeof *rec);
    if (rec != NULL) {
        rec->world = translate_group(group, n);
        rec->size = n;
        rec->io_index = -1;
        if (rec->world == NULL) {
            free(rec);
            rec = NULL;
        }
    }
    PMPI_Group_free(&group);
    return rec;
}

/* Slow path of sl_comm_rec/sl_win_rec: build and insert under the lock. */
static const sl_handle_rec *create(int kind, uintptr_t key, MPI_Comm comm, MPI_Win win)
{
    pthread_mutex_lock(&lock);
    sl_handle_rec *rec = find(kind, key);
    if (rec == NULL) {
        rec = kind == SL_H_COMM ? comm_build_locked(comm) : win_build_locked(win);
        if (rec != NULL && insert_locked(kind, key, rec) != 0) {
            free(rec->world);
            free(rec);
            rec = NULL;
            sl_key_dropped();
        }
    }
    pthread_mutex_unlock(&lock);
    return rec;
}

/* Cached record of comm, built on first use. */
const sl_handle_rec *sl_comm_rec(MPI_Comm comm)
{
    const sl_handle_rec *rec = find(SL_H_COMM, SL_HKEY(comm));
    return rec != NULL ? rec : create(SL_H_COMM, SL_HKEY(comm), comm, MPI_WIN_NULL);
}

void sl_comm_set_id(MPI_Comm comm, uint32_t id)
{
    pthread_mutex_lock(&lock);
    sl_handle_rec *rec = find(SL_H_COMM, SL_HKEY(comm));
    if (rec != NULL) {
        __atomic_store_n(&rec->comm_id, id, __ATOMIC_RELAXED);
        __atomic_fetch_add(&sl_comm_recs_gen, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
}

/* The record's count of creating calls, moved by one. */
uint32_t sl_comm_next_made(MPI_Comm comm)
{
    if (sl_comm_rec(comm) == NULL)
        return 0;
    sl_handle_rec *rec = find(SL_H_COMM, SL_HKEY(comm));
    return rec != NULL ? __atomic_fetch_add(&rec->made, 1, __ATOMIC_RELAXED) : 0;
}

/* Cached record of win, built on first use. */
const sl_handle_rec *sl_win_rec(MPI_Win win)
{
    const sl_handle_rec *rec = find(SL_H_WIN, SL_HKEY(win));
    return rec != NULL ? rec : create(SL_H_WIN, SL_HKEY(win), MPI_COMM_NULL, win);
}

/* Inserts a file record pointing at I/O entry io_index. */
void sl_file_remember(MPI_File fh, int io_index)
{
    sl_handle_rec *rec = calloc(1, sizeof *rec);
    if (rec == NULL)
        return;
    rec->io_index = io_index;
    pthread_mutex_lock(&lock);
    if (slots == NULL || insert_locked(SL_H_FILE, SL_HKEY(fh), rec) != 0) {
        free(rec);
        if (slots != NULL)
            sl_key_dropped();
    }
    pthread_mutex_unlock(&lock);
}

/* I/O entry of an MPI-IO file handle, -1 if unknown. */
int sl_file_lookup(MPI_File fh)
{
    const sl_handle_rec *rec = find(SL_H_FILE, SL_HKEY(fh));
    return rec != NULL ? rec->io_index : -1;
}

/* Removes (kind, key) and frees its record. */
void sl_handle_forget(int kind, uintptr_t key)
{
    pthread_mutex_lock(&lock);
    for (unsigned i = slots != NULL ? slot_of(key, kind) : 0, n = 0; slots != NULL && n <= mask;
         i = (i + 1) & mask, n++) {
        uintptr_t k = slots[i].key;
        if (k == 0)
            break;
        if (k == key && slots[i].kind == kind) {
            sl_handle_rec *rec = slots[i].rec;
            __atomic_store_n(&slots[i].key, SL_TOMB, __ATOMIC_RELEASE);
            slots[i].rec = NULL;
            free(rec->world);
            free(rec);
            live--;
            if (kind == SL_H_COMM)
                __atomic_fetch_add(&sl_comm_recs_gen, 1, __ATOMIC_RELEASE);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}
