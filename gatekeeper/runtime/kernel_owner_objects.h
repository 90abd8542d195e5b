/* Address -> loaded object for kernel_owner.c, without dladdr's symbol search: a sorted table of
 * the loaded objects' PT_LOAD segments (dl_iterate_phdr), rebuilt when the loader's count of
 * loads or unloads changes. Included by kernel_owner.c only (its statics are that file's). */
#ifndef GK_KERNEL_OWNER_OBJECTS_H
#define GK_KERNEL_OWNER_OBJECTS_H

/* Loaded objects' segments, sorted, for address -> object without dladdr's symbol search. */
typedef struct {
    uintptr_t lo, hi;
    int object;
} segment_t;
#define MAX_SEGMENTS 16384
#define MAX_OBJECTS 4096
static segment_t segments[MAX_SEGMENTS];
static int n_segments;
static char *objects[MAX_OBJECTS];
static int n_objects;
static unsigned long long table_adds = ~0ull, table_subs = ~0ull;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static int on_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if (n_objects == MAX_OBJECTS) return 1;
    char exe[PATH_LEN];
    const char *name = info->dlpi_name;
    if (!name || !*name) { /* the main program */
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        name = exe;
    }
    int object = n_objects;
    for (int i = 0; i < info->dlpi_phnum && n_segments < MAX_SEGMENTS; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        segments[n_segments].lo = info->dlpi_addr + ph->p_vaddr;
        segments[n_segments].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        segments[n_segments].object = object;
        n_segments++;
    }
    objects[n_objects++] = strdup(name);
    return 0;
}

static int first_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    unsigned long long *counts = (unsigned long long *)data;
    counts[0] = info->dlpi_adds;
    counts[1] = info->dlpi_subs;
    return 1;
}

static int by_start(const void *a, const void *b) {
    uintptr_t x = ((const segment_t *)a)->lo, y = ((const segment_t *)b)->lo;
    return x < y ? -1 : x > y;
}

static void rebuild_table(void) {
    for (int i = 0; i < n_objects; i++) free(objects[i]);
    n_objects = n_segments = 0;
    dl_iterate_phdr(on_object, NULL);
    qsort(segments, (size_t)n_segments, sizeof *segments, by_start);
}

static const char *find_segment(uintptr_t pc) {
    int lo = 0, hi = n_segments - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (pc < segments[mid].lo) hi = mid - 1;
        else if (pc >= segments[mid].hi) lo = mid + 1;
        else return objects[segments[mid].object];
    }
    return NULL;
}

/* The path of the object holding `address` into out; 0 when no loaded object holds it. */
static int object_of(const void *address, char *out, size_t len) {
#ifdef GK_DLADDR
    Dl_info info;
    if (!dladdr(address, &info) || !info.dli_fname) return 0;
    snprintf(out, len, "%s", info.dli_fname);
    return 1;
#else
    pthread_mutex_lock(&table_lock);
    const char *found = find_segment((uintptr_t)address);
    if (!found) { /* rebuilt only when something was loaded or unloaded since */
        unsigned long long counts[2] = {0, 0};
        dl_iterate_phdr(first_object, counts);
        if (counts[0] != table_adds || counts[1] != table_subs) {
            rebuild_table();
            table_adds = counts[0];
            table_subs = counts[1];
            found = find_segment((uintptr_t)address);
        }
    }
    if (found) snprintf(out, len, "%s", found);
    pthread_mutex_unlock(&table_lock);
    return found != NULL;
#endif
}

#endif
