/* Worker threads for the C kernels: one kernel call cut into pieces that the calling thread
   and these workers run at once, with no Python and no GIL on the way.

   Why not the intra-op pool (`ops/_parallel.py`): a Python thread woken while the caller
   computes starts its piece 30-180 us later on a virtual machine, as long as a whole
   convolution layer of a small network takes, so sharing such a kernel there ran slower
   than running it whole. These workers watch for the next job for a while after each one
   (`WATCH_NS`, as OpenMP's threads do, yielding the CPU while they watch) before they
   sleep, so that within a training step a job starts on them in about a microsecond.

   A job is a function `fn(args, start, stop)` over units [0, units), cut into one range
   of equal size per thread. The caller runs the first piece; the others are claimed, not
   assigned: the caller and each worker take the next unclaimed piece until none is left,
   so a worker that is slow to wake costs nothing but its wake-up (the caller runs its
   pieces). Which thread runs a piece never changes what it computes. One job runs at a time; a caller that finds the workers busy
   (another Python thread's job) runs its job whole itself. After fork() the child starts
   without workers. */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

typedef void (*fg_job)(const int64_t *args, int64_t start, int64_t stop);

#define MAX_WORKERS 63
/* How long an idle worker watches for the next job before it sleeps. */
#define WATCH_NS 2000000

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;  /* one job at a time */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int started;                   /* workers running (under run_lock) */
static atomic_int sleepers;
/* The job's number << 32 | its pieces << 16 | the next piece to claim: one word, so that a
   worker late for one job can never claim a piece of the next by an old count. */
static _Atomic uint64_t claim;
static atomic_int done_pieces;
static fg_job job_fn;
static const int64_t *job_args;
static int64_t job_units;
/* The CPU each worker keeps to, by index (-1: none), as `fg_workers_cpus` set them. */
static int64_t worker_cpu[MAX_WORKERS];
static int cpus_known;
/* Where each started worker keeps to now (-1: anywhere), its thread, and the CPUs this
   process may use (`fg_workers_cpus`), for `step_aside`. */
static int64_t worker_on[MAX_WORKERS];
static pthread_t worker_thread[MAX_WORKERS];
static int64_t allowed_cpu[MAX_WORKERS + 1];
static int allowed_known;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Claim and run pieces of job `job` until none is left (or another job has begun). */
static void claim_pieces(uint64_t job) {
    uint64_t c = atomic_load(&claim);
    for (;;) {
        const uint64_t pieces = (c >> 16) & 0xffff, i = c & 0xffff;
        if ((c >> 32) != job || i >= pieces) return;
        if (!atomic_compare_exchange_weak(&claim, &c, c + 1)) continue;
        job_fn(job_args, job_units * (int64_t)i / (int64_t)pieces,
               job_units * (int64_t)(i + 1) / (int64_t)pieces);
        atomic_fetch_add(&done_pieces, 1);
        c = atomic_load(&claim);
    }
}

static void *worker(void *unused) {
    (void)unused;
    uint64_t seen = atomic_load(&claim) >> 32;
    for (;;) {
        const int64_t until = now_ns() + WATCH_NS;
        int spins = 0;
        while (atomic_load(&claim) >> 32 == seen) {
            if (++spins % 64 == 0 && now_ns() > until) {
                pthread_mutex_lock(&sleep_lock);
                atomic_fetch_add(&sleepers, 1);
                while (atomic_load(&claim) >> 32 == seen) pthread_cond_wait(&wake, &sleep_lock);
                atomic_fetch_sub(&sleepers, 1);
                pthread_mutex_unlock(&sleep_lock);
                break;
            }
            sched_yield();  /* another thread wanting this CPU gets it */
        }
        seen = atomic_load(&claim) >> 32;
        claim_pieces(seen);
    }
    return NULL;
}

static void forget_workers(void) {  /* in a forked child: no worker exists there */
    started = 0;
    pthread_mutex_init(&run_lock, NULL);
    pthread_mutex_init(&sleep_lock, NULL);
    pthread_cond_init(&wake, NULL);
    atomic_store(&sleepers, 0);
}

#ifdef __linux__
/* Worker `w` kept to CPU `cpu` from now on (a refusal leaves it where it was). */
static void keep_to(int w, int64_t cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET((int)cpu, &one);
    if (pthread_setaffinity_np(worker_thread[w], sizeof one, &one) == 0) worker_on[w] = cpu;
}

/* A worker kept to the CPU the caller runs on moves to one no worker keeps to. The caller
   is the program's thread and goes where Linux puts it; a worker on its CPU could run
   nothing until the caller blocked, so every job ran whole on the caller: Linux moves a
   running thread to an idle CPU only after its balancing has failed a few times, and a
   watching worker keeps its own CPU from looking idle (at two threads 2 of 6 products of
   one process's first 100 ms ran at one thread's speed, and under other load the caller
   sat on the worker's CPU in 200 of 200 samples). */
static void step_aside(void) {
    const int cpu = sched_getcpu();
    if (cpu < 0) return;
    for (int w = 0; w < started; w++) {
        if (worker_on[w] != cpu) continue;
        for (int i = 0; i < allowed_known; i++) {
            const int64_t c = allowed_cpu[i];
            int taken = c == cpu;
            for (int v = 0; v < started && !taken; v++) taken = worker_on[v] == c;
            if (!taken) {
                keep_to(w, c);
                break;
            }
        }
    }
}
#endif

/* Run `fn` over units [0, units) in one piece per thread on up to `threads` threads (the
   caller one of them); returns once every piece is done. */
static void fg_workers_run(fg_job fn, const int64_t *args, int64_t units, int64_t threads) {
    if (threads > MAX_WORKERS + 1) threads = MAX_WORKERS + 1;
    const int64_t pieces = threads < units ? threads : units;
    if (threads <= 1 || pieces <= 1 || pthread_mutex_trylock(&run_lock) != 0) {
        fn(args, 0, units);
        return;
    }
    static int at_fork;
    if (!at_fork) {
        pthread_atfork(NULL, NULL, forget_workers);
        at_fork = 1;
    }
    while (started < threads - 1) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, NULL) != 0) break;
        pthread_detach(t);
        worker_thread[started] = t;
        worker_on[started] = -1;
#ifdef __linux__
        pthread_setname_np(t, "fusegrad-worker"); /* as `top -H` and /proc show it */
        if (started < cpus_known && worker_cpu[started] >= 0 && worker_cpu[started] < CPU_SETSIZE)
            keep_to(started, worker_cpu[started]);
#endif
        started++;
    }
#ifdef __linux__
    if (allowed_known) step_aside();
#endif
    job_fn = fn;
    job_args = args;
    job_units = units;
    atomic_store(&done_pieces, 0);
    const uint64_t job = ((atomic_load(&claim) >> 32) + 1) & 0xffffffffu;
    /* Piece 0 is the caller's before the workers see the job: the first piece of every job
       runs on the calling thread and (at two threads) the second on the worker, so data a
       job cuts the same way each time (a weight's rows: its product, its gradient, its
       optimizer update) stays in one core's cache. A worker that took piece 0 now and then
       left each core to fetch the other's half: a write to lines the other core has read
       costs several times the write here (an SGD update of a 784x128 weight: 10 us placed,
       25-70 us crossed). */
    atomic_store(&claim, job << 32 | (uint64_t)pieces << 16 | 1);
    if (atomic_load(&sleepers) > 0) {
        pthread_mutex_lock(&sleep_lock);
        pthread_cond_broadcast(&wake);
        pthread_mutex_unlock(&sleep_lock);
    }
    fn(args, 0, units / pieces);
    atomic_fetch_add(&done_pieces, 1);
    claim_pieces(job);
    while (atomic_load(&done_pieces) < pieces) sched_yield();
    pthread_mutex_unlock(&run_lock);
}

/* The CPUs workers started from now on keep to, by index (`_parallel.helper_cpus`: each
   worker beside the intra-op pool's thread of the same index), and the `n_allowed` CPUs
   this process may use, among which a worker on the caller's CPU moves (`step_aside`);
   `n` 0: none. */
void fg_workers_cpus(const int64_t *cpus, int64_t n, const int64_t *allowed,
                     int64_t n_allowed) {
    pthread_mutex_lock(&run_lock);
    cpus_known = n < MAX_WORKERS ? (int)n : MAX_WORKERS;
    for (int i = 0; i < cpus_known; i++) worker_cpu[i] = cpus[i];
    allowed_known = n_allowed < MAX_WORKERS + 1 ? (int)n_allowed : MAX_WORKERS + 1;
    if (!cpus_known) allowed_known = 0;
    for (int i = 0; i < allowed_known; i++) allowed_cpu[i] = allowed[i];
    pthread_mutex_unlock(&run_lock);
}

/* How many workers have been started in this process (for tests). */
int64_t fg_workers_started(void) { return started; }

/* Any kernel whose arguments are all pointers and 64-bit integers, with its unit range at
   argument `at` and `at + 1`, run by the workers: the kernel is called through a prototype
   of MAX_ARGS integers (pointers and 64-bit integers travel alike in the x86-64 and
   AArch64 calling conventions, and the caller removes what the callee does not read). */
#define MAX_ARGS 32
typedef void (*fg_kernel)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                          int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                          int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                          int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                          int64_t, int64_t, int64_t, int64_t);
struct fg_call {
    int64_t args[MAX_ARGS];
    fg_kernel fn;
    int64_t at;
};

static void call_job(const int64_t *block, int64_t start, int64_t stop) {
    const struct fg_call *c = (const struct fg_call *)block;
    int64_t v[MAX_ARGS];
    for (int i = 0; i < MAX_ARGS; i++) v[i] = c->args[i];
    v[c->at] = start;
    v[c->at + 1] = stop;
    c->fn(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12],
          v[13], v[14], v[15], v[16], v[17], v[18], v[19], v[20], v[21], v[22], v[23], v[24],
          v[25], v[26], v[27], v[28], v[29], v[30], v[31]);
}

/* How many arguments a kernel run by `fg_workers_call` may take (the caller checks). */
int64_t fg_workers_max_args(void) { return MAX_ARGS; }

/* Kernel `fn` with its `nargs` arguments `args` (the unit range at `at` left as any value)
   over units [0, units), one piece per thread on up to `threads` threads. */
void fg_workers_call(void *fn, const int64_t *args, int64_t nargs, int64_t at, int64_t units,
                     int64_t threads) {
    struct fg_call c;
    for (int i = 0; i < MAX_ARGS; i++) c.args[i] = i < nargs ? args[i] : 0;
    c.fn = (fg_kernel)fn;
    c.at = at;
    fg_workers_run(call_job, (const int64_t *)&c, units, threads);
}
