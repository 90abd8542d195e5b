/* Which launcher a launch names, for kernel_owner.c (included there after walked_owner):
 * a driver launch's CUfunction is walked once and then at random launches, cached
 * direct-mapped; and the kernel a launch's CUPTI parameters name (the runtime's host stub or
 * the driver's CUfunction). Its statics are kernel_owner.c's. */
#ifndef GK_KERNEL_OWNER_LAUNCHES_H
#define GK_KERNEL_OWNER_LAUNCHES_H

/* CUfunction -> launcher, direct-mapped; `mixed`: seen launched from two places, walk always. */
#define FUNC_SLOTS 8192
static uintptr_t func_tag[FUNC_SLOTS];
static int16_t func_owner[FUNC_SLOTS];
static uint8_t func_mixed[FUNC_SLOTS];
static __thread uint64_t sample_state;
static uint64_t sample_seed;

static int sampled(void) {
    if (!sample_state) sample_state = sample_seed ^ (uint64_t)(uintptr_t)&sample_state;
    sample_state ^= sample_state << 13;
    sample_state ^= sample_state >> 7;
    sample_state ^= sample_state << 17;
    return (sample_state & 15) == 0;
}

/* A driver launch of `f`: the cached launcher, walked again at random launches. */
static int function_owner(const void *f) {
#ifdef GK_WALK_EVERY_LAUNCH
    (void)f;
    return walked_owner();
#else
    if (!f) return walked_owner();
    uint32_t slot = (uint32_t)((uintptr_t)f * 0x9E3779B97F4A7C15ull >> 40) & (FUNC_SLOTS - 1);
    pthread_mutex_lock(&lock);
    int cached = func_tag[slot] == (uintptr_t)f ? func_owner[slot] - 1 : -1;
    int mixed = cached >= 0 && func_mixed[slot];
    pthread_mutex_unlock(&lock);
    if (cached >= 0 && !mixed && !sampled()) return cached;
    int owner = walked_owner();
    pthread_mutex_lock(&lock);
    if (cached >= 0 && owner != cached && func_tag[slot] == (uintptr_t)f) func_mixed[slot] = 1;
    if (cached < 0) {
        func_tag[slot] = (uintptr_t)f;
        func_owner[slot] = (int16_t)(owner + 1);
        func_mixed[slot] = 0;
    }
    pthread_mutex_unlock(&lock);
    return owner;
#endif
}

/* The kernel a launch names: the host stub (runtime) or the CUfunction (driver); NULL for a graph. */
static const void *launched_kernel(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *params) {
    if (!params) return NULL;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        switch (cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
            return ((const struct { const void *func; } *)params)->func;
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
            return ((const struct { const void *config; const void *func; } *)params)->func;
        default:
            return NULL;
        }
    }
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
        return ((const struct { const void *f; } *)params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
        return ((const struct { const void *config; const void *f; } *)params)->f;
    default:
        return NULL;
    }
}

static void remember_corr(uint32_t corr, int owner) {
    uint32_t slot = corr & (CORR_SLOTS - 1);
    corr_tag[slot] = corr;
    corr_owner[slot] = (int16_t)(owner + 1);
}

static int owner_of_corr(uint32_t corr) {
    uint32_t slot = corr & (CORR_SLOTS - 1);
    return corr_tag[slot] == corr ? corr_owner[slot] - 1 : -1;
}

static void remember_node(uint64_t node, int owner) {
    uint32_t slot = (uint32_t)(node * 0x9E3779B97F4A7C15ull >> 50) & (NODE_SLOTS - 1);
    node_tag[slot] = node;
    node_owner[slot] = (int16_t)(owner + 1);
}

static int owner_of_node(uint64_t node) {
    uint32_t slot = (uint32_t)(node * 0x9E3779B97F4A7C15ull >> 50) & (NODE_SLOTS - 1);
    return node_tag[slot] == node ? node_owner[slot] - 1 : -1;
}

#endif
