/* The intra-op pool's wait: a worker that has just finished a job watches the count of
   posted jobs for a short while (without the GIL, through ctypes) before it sleeps on the
   queue, so back-to-back parallel regions do not each pay a sleeping CPU's wake-up. */
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RELAX() _mm_pause()
#else
#define RELAX() __asm__ __volatile__("" ::: "memory")
#endif

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Wait until *word differs from seen (returns 1) or max_ns have passed (returns 0). */
int64_t wait_for_change(const volatile int64_t *word, int64_t seen, int64_t max_ns) {
    int64_t end = now_ns() + max_ns;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (*word != seen)
                return 1;
            RELAX();
        }
        if (now_ns() > end)
            return 0;
    }
}
