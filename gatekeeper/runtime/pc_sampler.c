/* Program-counter sampling for work attribution (gatekeeper/runtime/pc_sampler.py).
 *
 * A SIGPROF timer (ITIMER_PROF: CPU time of the whole process, every thread) interrupts
 * whichever thread is running; the handler records the interrupted instruction address.
 * What was executing is then read from the addresses (dladdr, /proc/self/maps), not from
 * what the dispatcher reports, so library code called directly (MKL's sgemm_, at::cpu::*,
 * numpy) is seen for what it is. Only async-signal-safe work happens in the handler.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <ucontext.h>

#define GK_CAP 262144
static uintptr_t gk_pcs[GK_CAP];
static volatile int gk_n = 0;
static volatile int gk_signals = 0;
static volatile int gk_recording = 0;

/* Signals by receiving thread (open addressing on the tid). A process-wide CPU timer's signal
 * goes to the thread whose CPU time made it expire, unless that thread blocks it: a thread that
 * works but receives none hides its work (compared with its CPU time in pc_sampler.py). */
#define GK_TIDS 1024
static volatile int gk_tid_keys[GK_TIDS];
static volatile int gk_tid_counts[GK_TIDS];

static void gk_count_tid(void) {
    int tid = (int)syscall(SYS_gettid);
    unsigned h = (unsigned)tid * 2654435761u;
    for (int k = 0; k < GK_TIDS; ++k) {
        int slot = (int)((h + (unsigned)k) % GK_TIDS);
        int key = __atomic_load_n(&gk_tid_keys[slot], __ATOMIC_RELAXED);
        if (key == 0) {
            int expected = 0;
            if (__atomic_compare_exchange_n(&gk_tid_keys[slot], &expected, tid, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                key = tid;
            else
                key = expected;
        }
        if (key == tid) {
            __atomic_fetch_add(&gk_tid_counts[slot], 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

int gk_tid_key(int i) { return i >= 0 && i < GK_TIDS ? gk_tid_keys[i] : 0; }
int gk_tid_count(int i) { return i >= 0 && i < GK_TIDS ? gk_tid_counts[i] : 0; }
int gk_tid_slots(void) { return GK_TIDS; }

static void gk_handler(int sig, siginfo_t *info, void *context) {
    (void)sig; (void)info;
    ucontext_t *uc = (ucontext_t *)context;
    uintptr_t pc = 0;
#if defined(__x86_64__)
    pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    pc = (uintptr_t)uc->uc_mcontext.pc;
#endif
    __atomic_fetch_add(&gk_signals, 1, __ATOMIC_RELAXED);
    gk_count_tid();
    if (!gk_recording) return;
    int i = __atomic_fetch_add(&gk_n, 1, __ATOMIC_RELAXED);
    if (i < GK_CAP) gk_pcs[i] = pc;
}

/* The timer runs for a whole phase of the worker, every call alike; only the stretches
 * between gk_record(1) and gk_record(0) (the submission's forward calls) keep their samples.
 * Re-arming per call would lose every call shorter than the kernel's timer tick. */
void gk_record(int on) { __atomic_store_n(&gk_recording, on, __ATOMIC_RELAXED); }

int gk_start(int interval_us) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = gk_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPROF, &sa, NULL) != 0) return -1;
    struct itimerval it;
    it.it_interval.tv_sec = 0;
    it.it_interval.tv_usec = interval_us;
    it.it_value = it.it_interval;
    return setitimer(ITIMER_PROF, &it, NULL);
}

/* Stops the timer; returns 1 when the handler and the timer were still ours (nobody replaced
 * the SIGPROF handler or disarmed the timer while sampling), else 0. */
int gk_stop(void) {
    struct itimerval it, old;
    memset(&it, 0, sizeof it);
    setitimer(ITIMER_PROF, &it, &old);
    struct sigaction current;
    sigaction(SIGPROF, NULL, &current);
    int ours = (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == gk_handler;
    int armed = old.it_interval.tv_usec != 0 || old.it_interval.tv_sec != 0;
    return ours && armed;
}

int gk_count(void) { return gk_n < GK_CAP ? gk_n : GK_CAP; }
int gk_signals_seen(void) { return gk_signals; }
uintptr_t gk_pc(int i) { return gk_pcs[i]; }
void gk_reset(void) {
    gk_n = 0; gk_signals = 0;
    for (int i = 0; i < GK_TIDS; ++i) { gk_tid_keys[i] = 0; gk_tid_counts[i] = 0; }
}

/* Outside the handler: the object and nearest symbol of an address. */
int gk_resolve(uintptr_t pc, char *object, int object_len, char *symbol, int symbol_len) {
    Dl_info info;
    object[0] = symbol[0] = 0;
    if (!dladdr((void *)pc, &info)) return 0;
    if (info.dli_fname) { strncpy(object, info.dli_fname, object_len - 1); object[object_len - 1] = 0; }
    if (info.dli_sname) { strncpy(symbol, info.dli_sname, symbol_len - 1); symbol[symbol_len - 1] = 0; }
    return 1;
}

/* Remove this process's perf map (oneDNN's names for its JIT code) once it has been read.
   In C: the worker's audit guard refuses Python's os.remove outside its own folders, and the
   map is the trusted side's to clean up (outside bubblewrap /tmp is the host's). */
int gk_remove_jit_map(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    return unlink(path);
}
