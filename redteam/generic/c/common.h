/* ==== gadfly red team: a wrapper for each exported function ====
 * The candidate's functions were renamed rt_real_<name>; each is called
 * through a wrapper of its own signature (generated per function below).
 * A call's key is the bytes of its arguments: an address for each one
 * passed by address (identity), the value of each one passed by value. */
#include <string.h>
#include <time.h>

typedef struct {
    unsigned char bytes[512];
    size_t len;
} rt_key;

static inline void rt_key_add(rt_key *k, const void *p, size_t n)
{
    if (n > sizeof(k->bytes) - k->len)
        n = sizeof(k->bytes) - k->len;
    memcpy(k->bytes + k->len, p, n);
    k->len += n;
}

static inline int rt_key_same(const rt_key *a, const rt_key *b)
{
    return a->len == b->len && !memcmp(a->bytes, b->bytes, a->len);
}

static inline double rt_now(void)
{
    struct timespec t;
    timespec_get(&t, TIME_UTC); /* C11 and C++17: no POSIX feature macro needed */
    return t.tv_sec + t.tv_nsec * 1e-9;
}
