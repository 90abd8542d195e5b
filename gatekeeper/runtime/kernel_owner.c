/* Kernel ownership on a GPU (issue 22 item 3): which shared object launched each kernel.
 *
 * A CUPTI subscriber sees every kernel launch, from the runtime API (cudaLaunchKernel and
 * friends, which `<<<...>>>` becomes) and from the driver API (cuLaunchKernel: Triton,
 * CuPy, cuBLAS). The owner is the code that launched the kernel, not its name:
 *  - a runtime launch names its kernel by the host stub nvcc compiled beside it (`func`):
 *    the object holding that address is the one that defined and launched it (the
 *    submission's extension, libtorch_cuda, libcublasLt);
 *  - a driver launch names a CUfunction: the host stack is walked to the first frame outside
 *    the CUDA libraries and this library (Triton's launcher, CuPy, cuBLAS), once per
 *    CUfunction, then again at random launches (about 1 in 16); a function seen launched from
 *    two places is walked at every launch after that;
 *  - a graph launch is walked; its kernels take the launcher of their capture (graph node
 *    creation happens inside the launch call) and keep it through instantiation (clones).
 * CUPTI's activity records then give each kernel's device time, joined on the correlation id
 * or the graph node id.
 *
 * Addresses are mapped to objects through a table of the loaded objects' segments
 * (dl_iterate_phdr), rebuilt when the loader's count of loads changes. dladdr was the cost of
 * the first version (about 400 us a launch on an H100, 2026-12-05): it searches the symbol
 * table of the object, and libtorch_cuda's is huge. -DGK_WALK_EVERY_LAUNCH and -DGK_DLADDR
 * build the earlier behaviours, for bench/gpu_launcher_probe.py --part cost.
 *
 * libcupti is opened at run time (dlopen), so this library needs only CUPTI's headers to
 * build. It is built by the trusted parent and loaded into the worker before the submission's
 * first call; it stays subscribed for the whole run, so a recorded call costs what any other
 * call costs.
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define MAX_OWNERS 256
#define CORR_SLOTS (1 << 18)
#define NODE_SLOTS (1 << 14)
#define MAX_ENTRIES 2048
#define NAME_LEN 256
#define PATH_LEN 512

typedef CUptiResult (*subscribe_t)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*unsubscribe_t)(CUpti_SubscriberHandle);
typedef CUptiResult (*enable_cb_t)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
typedef CUptiResult (*enable_domain_t)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
typedef CUptiResult (*register_cb_t)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult (*act_enable_t)(CUpti_ActivityKind);
typedef CUptiResult (*next_t)(uint8_t *, size_t, CUpti_Activity **);
typedef CUptiResult (*flush_t)(uint32_t);
typedef CUptiResult (*node_id_t)(CUgraphNode, uint64_t *);

static struct {
    subscribe_t subscribe;
    unsubscribe_t unsubscribe;
    enable_cb_t enable_cb;
    enable_domain_t enable_domain;
    register_cb_t reg;
    act_enable_t act_enable;
    next_t next;
    flush_t flush;
    node_id_t node_id;
} api;

static CUpti_SubscriberHandle subscriber;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char owners[MAX_OWNERS][PATH_LEN];
static int n_owners;
static volatile int recording;
static char self_path[PATH_LEN];
static char error_text[256];

/* correlation id -> owner index + 1 (0: none); direct-mapped with the id as tag */
static uint32_t corr_tag[CORR_SLOTS];
static int16_t corr_owner[CORR_SLOTS];
static uint64_t node_tag[NODE_SLOTS];
static int16_t node_owner[NODE_SLOTS];
static __thread int current_owner = -1; /* inside a launch call on this thread */
static __thread int launch_depth;

typedef struct {
    int owner;
    char name[NAME_LEN];
    long long count, ns;
} entry_t;
static entry_t entries[MAX_ENTRIES];
static int n_entries;
static long long unowned_count, unowned_ns, dropped;

static int is_cuda_library(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libcuda.so", 10) == 0 || strncmp(base, "libcudart", 9) == 0 ||
           strncmp(base, "libcupti", 8) == 0 || strcmp(path, self_path) == 0;
}

static int intern_owner(const char *path) {
    for (int i = 0; i < n_owners; i++)
        if (strcmp(owners[i], path) == 0) return i;
    if (n_owners == MAX_OWNERS) return MAX_OWNERS - 1;
    snprintf(owners[n_owners], PATH_LEN, "%s", path);
    return n_owners++;
}

#include "kernel_owner_objects.h"

/* The first frame of the calling thread's stack outside the CUDA libraries and this one. */
static int launcher(char *out, size_t len) {
    void *frames[64];
    int n = backtrace(frames, 64);
    for (int i = 0; i < n; i++) {
        if (!object_of(frames[i], out, len)) continue;
        if (is_cuda_library(out)) continue;
        return 1;
    }
    snprintf(out, len, "%s", "?");
    return 0;
}

static int owner_index(const char *path) {
    pthread_mutex_lock(&lock);
    int owner = intern_owner(path);
    pthread_mutex_unlock(&lock);
    return owner;
}

static int walked_owner(void) {
    char path[PATH_LEN];
    launcher(path, sizeof path);
    return owner_index(path);
}

/* A runtime launch: the object holding the kernel's host stub, else the walk. */
static int stub_owner(const void *func) {
    char path[PATH_LEN];
#ifndef GK_WALK_EVERY_LAUNCH
    if (func && object_of(func, path, sizeof path) && !is_cuda_library(path)) return owner_index(path);
#endif
    return walked_owner();
}

#include "kernel_owner_launches.h"

static void on_launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
    if (cb->callbackSite == CUPTI_API_ENTER) {
        if (launch_depth++ == 0) { /* the outer call: a driver call inside a runtime one has its launcher */
            const void *kernel = launched_kernel(domain, cbid, cb->functionParams);
            if (!kernel) current_owner = walked_owner(); /* a graph launch */
            else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) current_owner = stub_owner(kernel);
            else current_owner = function_owner(kernel);
        }
        /* kernels outside recorded calls keep no owner: their time is not the forward's */
        remember_corr(cb->correlationId, recording ? current_owner : -1);
    } else if (--launch_depth == 0) {
        current_owner = -1;
    }
}

static void on_graph(CUpti_CallbackId cbid, const CUpti_ResourceData *rd) {
    const CUpti_GraphData *g = (const CUpti_GraphData *)rd->resourceDescriptor;
    uint64_t id = 0, original = 0;
    if (!g || !api.node_id || api.node_id(g->node, &id) != CUPTI_SUCCESS) return;
    if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
        if (current_owner >= 0) remember_node(id, current_owner); /* captured inside a launch */
    } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
        if (api.node_id(g->originalNode, &original) == CUPTI_SUCCESS && owner_of_node(original) >= 0)
            remember_node(id, owner_of_node(original));
    }
}

static void CUPTIAPI on_callback(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
    (void)user;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API)
        on_launch(domain, cbid, (const CUpti_CallbackData *)data);
    else if (domain == CUPTI_CB_DOMAIN_RESOURCE)
        on_graph(cbid, (const CUpti_ResourceData *)data);
}

static void add_kernel(int owner, const char *name, long long ns) {
    if (owner < 0) {
        unowned_count++;
        unowned_ns += ns;
        return;
    }
    for (int i = 0; i < n_entries; i++)
        if (entries[i].owner == owner && strncmp(entries[i].name, name, NAME_LEN - 1) == 0) {
            entries[i].count++;
            entries[i].ns += ns;
            return;
        }
    if (n_entries == MAX_ENTRIES) {
        dropped++;
        return;
    }
    entries[n_entries].owner = owner;
    snprintf(entries[n_entries].name, NAME_LEN, "%s", name ? name : "?");
    entries[n_entries].count = 1;
    entries[n_entries].ns = ns;
    n_entries++;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *size = 1 << 20;
    *buffer = (uint8_t *)aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *record = NULL;
    pthread_mutex_lock(&lock);
    while (api.next(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
            continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)record;
        /* the launch (or the graph launch) decides whether it was recorded; a graph's kernel
           takes the launcher of its capture */
        int owner = owner_of_corr(k->correlationId);
        if (owner >= 0 && k->graphNodeId && owner_of_node(k->graphNodeId) >= 0) owner = owner_of_node(k->graphNodeId);
        add_kernel(owner, k->name, (long long)(k->end - k->start));
    }
    pthread_mutex_unlock(&lock);
    free(buffer);
}

#define LOAD(field, name)                                                            \
    do {                                                                             \
        void *symbol_ = dlsym(cupti, name);                                          \
        memcpy(&api.field, &symbol_, sizeof symbol_);                                \
        if (!api.field) {                                                            \
            snprintf(error_text, sizeof error_text, "libcupti lacks %s", name);      \
            return 2;                                                                \
        }                                                                            \
    } while (0)

static const CUpti_CallbackId RUNTIME_LAUNCHES[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000};
static const CUpti_CallbackId DRIVER_LAUNCHES[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz};

/* 0: subscribed and tracing; otherwise gk_error() says why (another subscriber, no CUPTI). */
int gk_start(const char *libcupti) {
    /* which driver launches are walked again must not be predictable from the submission */
    if (getrandom(&sample_seed, sizeof sample_seed, 0) != (ssize_t)sizeof sample_seed)
        sample_seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
    sample_seed |= 1;
    Dl_info self;
    if (dladdr((void *)&gk_start, &self) && self.dli_fname) snprintf(self_path, sizeof self_path, "%s", self.dli_fname);
    void *cupti = libcupti && *libcupti ? dlopen(libcupti, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!cupti) {
        snprintf(error_text, sizeof error_text, "cannot open libcupti (%s): %s", libcupti ? libcupti : "", dlerror());
        return 1;
    }
    LOAD(subscribe, "cuptiSubscribe");
    LOAD(unsubscribe, "cuptiUnsubscribe");
    LOAD(enable_cb, "cuptiEnableCallback");
    LOAD(enable_domain, "cuptiEnableDomain");
    LOAD(reg, "cuptiActivityRegisterCallbacks");
    LOAD(act_enable, "cuptiActivityEnable");
    LOAD(next, "cuptiActivityGetNextRecord");
    LOAD(flush, "cuptiActivityFlushAll");
    void *node_id = dlsym(cupti, "cuptiGetGraphNodeId"); /* optional: graphs lose owners without it */
    memcpy(&api.node_id, &node_id, sizeof node_id);
    CUptiResult r = api.subscribe(&subscriber, on_callback, NULL);
    if (r != CUPTI_SUCCESS) {
        snprintf(error_text, sizeof error_text, "cuptiSubscribe failed with CUPTI error %d%s", (int)r,
                 r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? " (another CUPTI client holds the subscription)"
                                                                      : "");
        return 3;
    }
    for (size_t i = 0; i < sizeof RUNTIME_LAUNCHES / sizeof *RUNTIME_LAUNCHES; i++)
        api.enable_cb(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, RUNTIME_LAUNCHES[i]);
    for (size_t i = 0; i < sizeof DRIVER_LAUNCHES / sizeof *DRIVER_LAUNCHES; i++)
        api.enable_cb(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, DRIVER_LAUNCHES[i]);
    api.enable_cb(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
    api.enable_cb(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
    if (api.reg(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        api.act_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
        snprintf(error_text, sizeof error_text, "CUPTI kernel activity could not be enabled");
        return 4;
    }
    return 0;
}

static void CUPTIAPI on_nothing(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
    (void)user;
    (void)domain;
    (void)cbid;
    (void)data;
}

/* The timing worker: hold the one CUPTI subscription, with no callback enabled (no cost per
 * launch), so that a submission probing for a subscriber finds one there as in the checking
 * worker. 0 on success, else gk_error() says why. */
int gk_hold(const char *libcupti) {
    void *cupti = libcupti && *libcupti ? dlopen(libcupti, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!cupti) {
        snprintf(error_text, sizeof error_text, "cannot open libcupti (%s): %s", libcupti ? libcupti : "", dlerror());
        return 1;
    }
    LOAD(subscribe, "cuptiSubscribe");
    CUptiResult r = api.subscribe(&subscriber, on_nothing, NULL);
    if (r != CUPTI_SUCCESS) {
        snprintf(error_text, sizeof error_text, "cuptiSubscribe failed with CUPTI error %d", (int)r);
        return 3;
    }
    return 0;
}

const char *gk_error(void) { return error_text; }
void gk_record(int on) { recording = on; }

/* After the device is synchronised: deliver every buffered kernel record. */
int gk_flush(void) { return api.flush ? (int)api.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) : -1; }

void gk_reset(void) {
    pthread_mutex_lock(&lock);
    n_entries = 0;
    unowned_count = unowned_ns = dropped = 0;
    pthread_mutex_unlock(&lock);
}

int gk_entries(void) { return n_entries; }

/* Entry i: the launcher's path, the kernel's name, its launches and device nanoseconds. */
int gk_entry(int i, char *owner, int owner_len, char *name, int name_len, long long *count, long long *ns) {
    if (i < 0 || i >= n_entries) return 0;
    pthread_mutex_lock(&lock);
    snprintf(owner, (size_t)owner_len, "%s", owners[entries[i].owner]);
    snprintf(name, (size_t)name_len, "%s", entries[i].name);
    *count = entries[i].count;
    *ns = entries[i].ns;
    pthread_mutex_unlock(&lock);
    return 1;
}

long long gk_unowned_ns(void) { return unowned_ns; }
long long gk_dropped(void) { return dropped; }

/* The launcher as a launch from the caller's stack would see it (tests, on any machine). */
int gk_launcher_here(char *out, int len) {
    Dl_info self;
    if (!self_path[0] && dladdr((void *)&gk_launcher_here, &self) && self.dli_fname)
        snprintf(self_path, sizeof self_path, "%s", self.dli_fname);
    return launcher(out, (size_t)len);
}

/* The object holding an address, as the tracker maps it (tests, on any machine); 0 if none. */
int gk_object_of(const void *address, char *out, int len) { return object_of(address, out, (size_t)len); }
