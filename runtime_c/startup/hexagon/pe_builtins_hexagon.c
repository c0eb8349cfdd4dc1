/*
 * pe_builtins_hexagon.c - the runtime helpers clang's Hexagon code calls when there is no
 * compiler-rt: integer division and remainder (32 and 64 bit, signed and unsigned), float and
 * double division, double multiplication (v66 has no dfmpy), float square root, and the
 * aligned memcpy variant. Pure integer C; no '/' or '%' anywhere in this file (they would
 * call these very functions).
 *
 * Semantics
 *   Integer division truncates toward zero; the remainder has the dividend's sign
 *   (a == (a / b) * b + a % b), as C requires.
 *   Division by zero (undefined in C) is defined here, as RISC-V does:
 *       unsigned: a / 0 = all ones (UINT32_MAX / UINT64_MAX), a % 0 = a
 *       signed:   a / 0 = -1,                                 a % 0 = a
 *   Signed overflow INT_MIN / -1 gives INT_MIN (remainder 0), again without trapping.
 *   Floating point: IEEE 754 binary32/binary64, round to nearest even, subnormal inputs and
 *   results handled exactly (no flushing), so results are bit-identical to a host's IEEE
 *   arithmetic. x / 0 = +-inf, 0 / 0, inf / inf, inf * 0, sqrt(negative) and any NaN input
 *   give the Hexagon default NaN (all ones, 0xFFFFFFFF / 0xFFFFFFFFFFFFFFFF), as the Hexagon
 *   FPU does in its default-NaN mode. sqrt(-0) = -0. Exception flags are not raised.
 */
#include <stddef.h>
#include <stdint.h>

void *memcpy(void *restrict dst, const void *restrict src, size_t n);

int32_t __hexagon_divsi3(int32_t a, int32_t b);
uint32_t __hexagon_udivsi3(uint32_t a, uint32_t b);
int32_t __hexagon_modsi3(int32_t a, int32_t b);
uint32_t __hexagon_umodsi3(uint32_t a, uint32_t b);
int64_t __hexagon_divdi3(int64_t a, int64_t b);
uint64_t __hexagon_udivdi3(uint64_t a, uint64_t b);
int64_t __hexagon_moddi3(int64_t a, int64_t b);
uint64_t __hexagon_umoddi3(uint64_t a, uint64_t b);
float __hexagon_divsf3(float a, float b);
double __hexagon_divdf3(double a, double b);
double __hexagon_muldf3(double a, double b);
float __hexagon_sqrtf(float a);
void *__hexagon_memcpy_likely_aligned_min32bytes_mult8bytes(void *dst, const void *src,
                                                             size_t n);

/* ---- integers ------------------------------------------------------------------------ */

/* n / d and n % d for d != 0: shift-subtract from the divisor aligned under the dividend's
 * top bit (at most 64 steps). */
static uint64_t udivmod64(uint64_t n, uint64_t d, uint64_t *rem)
{
    uint64_t q = 0;
    int shift;
    if (d > n) {
        *rem = n;
        return 0;
    }
    shift = __builtin_clzll(d) - __builtin_clzll(n);
    d <<= shift;
    for (; shift >= 0; shift--) {
        q <<= 1;
        if (n >= d) {
            n -= d;
            q |= 1u;
        }
        d >>= 1;
    }
    *rem = n;
    return q;
}

static uint32_t udivmod32(uint32_t n, uint32_t d, uint32_t *rem)
{
    uint32_t q = 0;
    int shift;
    if (d > n) {
        *rem = n;
        return 0;
    }
    shift = __builtin_clz(d) - __builtin_clz(n);
    d <<= shift;
    for (; shift >= 0; shift--) {
        q <<= 1;
        if (n >= d) {
            n -= d;
            q |= 1u;
        }
        d >>= 1;
    }
    *rem = n;
    return q;
}

/* magnitude of a signed value as unsigned (INT_MIN included) */
static uint32_t mag32(int32_t v)
{
    return v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
}

static uint64_t mag64(int64_t v)
{
    return v < 0 ? 0u - (uint64_t)v : (uint64_t)v;
}

/* two's complement reinterpretation without implementation-defined conversions */
static int32_t as_i32(uint32_t u)
{
    return u <= 0x7FFFFFFFu ? (int32_t)u : -(int32_t)(0xFFFFFFFFu - u) - 1;
}

static int64_t as_i64(uint64_t u)
{
    return u <= 0x7FFFFFFFFFFFFFFFull ? (int64_t)u
                                      : -(int64_t)(0xFFFFFFFFFFFFFFFFull - u) - 1;
}

uint32_t __hexagon_udivsi3(uint32_t a, uint32_t b)
{
    uint32_t r;
    return b == 0u ? 0xFFFFFFFFu : udivmod32(a, b, &r);
}

uint32_t __hexagon_umodsi3(uint32_t a, uint32_t b)
{
    uint32_t r;
    if (b == 0u) {
        return a;
    }
    (void)udivmod32(a, b, &r);
    return r;
}

int32_t __hexagon_divsi3(int32_t a, int32_t b)
{
    uint32_t r;
    uint32_t q;
    if (b == 0) {
        return -1;
    }
    q = udivmod32(mag32(a), mag32(b), &r);
    return as_i32((a < 0) != (b < 0) ? 0u - q : q); /* INT_MIN / -1 wraps to INT_MIN */
}

int32_t __hexagon_modsi3(int32_t a, int32_t b)
{
    uint32_t r;
    if (b == 0) {
        return a;
    }
    (void)udivmod32(mag32(a), mag32(b), &r);
    return as_i32(a < 0 ? 0u - r : r);
}

uint64_t __hexagon_udivdi3(uint64_t a, uint64_t b)
{
    uint64_t r;
    return b == 0u ? 0xFFFFFFFFFFFFFFFFull : udivmod64(a, b, &r);
}

uint64_t __hexagon_umoddi3(uint64_t a, uint64_t b)
{
    uint64_t r;
    if (b == 0u) {
        return a;
    }
    (void)udivmod64(a, b, &r);
    return r;
}

int64_t __hexagon_divdi3(int64_t a, int64_t b)
{
    uint64_t r;
    uint64_t q;
    if (b == 0) {
        return -1;
    }
    q = udivmod64(mag64(a), mag64(b), &r);
    return as_i64((a < 0) != (b < 0) ? 0u - q : q);
}

int64_t __hexagon_moddi3(int64_t a, int64_t b)
{
    uint64_t r;
    if (b == 0) {
        return a;
    }
    (void)udivmod64(mag64(a), mag64(b), &r);
    return as_i64(a < 0 ? 0u - r : r);
}

/* ---- binary32 -------------------------------------------------------------------------- */

typedef union {
    float f;
    uint32_t u;
} pe_f32;

typedef union {
    double f;
    uint64_t u;
} pe_f64;

#define F32_NAN 0xFFFFFFFFu
#define F32_INF 0x7F800000u
#define F64_NAN 0xFFFFFFFFFFFFFFFFull
#define F64_INF 0x7FF0000000000000ull

static float f32_from(uint32_t u)
{
    pe_f32 v;
    v.u = u;
    return v.f;
}

static uint32_t f32_bits(float f)
{
    pe_f32 v;
    v.f = f;
    return v.u;
}

/* Round and pack. sig has the leading (hidden) bit at bit 28 and 5 bits of round/sticky
 * below the 24-bit significand (bit 0 may hold a sticky 1); exp is the biased exponent of
 * that leading bit, possibly <= 0 (subnormal result) or >= 255 (overflow). */
static uint32_t f32_round_pack(uint32_t sign, int32_t exp, uint32_t sig)
{
    uint32_t mant;
    uint32_t rest;
    if (exp >= 255) {
        return sign | F32_INF;
    }
    if (exp <= 0) {
        int32_t sh = 1 - exp;
        sig = sh >= 31 ? (uint32_t)(sig != 0u)
                       : (sig >> sh) | (uint32_t)((sig & ((1u << sh) - 1u)) != 0u);
        exp = 1;
    }
    mant = sig >> 5;
    rest = sig & 31u;
    if (rest > 16u || (rest == 16u && (mant & 1u) != 0u)) {
        mant++;
    }
    /* mant carries the hidden bit: adding it to (exp - 1) << 23 sets the exponent field;
     * a subnormal has no hidden bit (exponent field 0) unless rounding produced one */
    return sign | (((uint32_t)(exp - 1) << 23) + mant);
}

/* Unpack a finite nonzero float into (biased exponent, significand with hidden bit at 23). */
static int32_t f32_unpack(uint32_t u, uint32_t *sig)
{
    int32_t exp = (int32_t)((u >> 23) & 0xFFu);
    uint32_t m = u & 0x7FFFFFu;
    if (exp == 0) { /* subnormal: normalise */
        int sh = __builtin_clz(m) - 8;
        m <<= sh;
        exp = 1 - sh;
    } else {
        m |= 0x800000u;
    }
    *sig = m;
    return exp;
}

float __hexagon_divsf3(float a, float b)
{
    const uint32_t ua = f32_bits(a);
    const uint32_t ub = f32_bits(b);
    const uint32_t sign = (ua ^ ub) & 0x80000000u;
    const uint32_t aa = ua & 0x7FFFFFFFu;
    const uint32_t ab = ub & 0x7FFFFFFFu;
    uint32_t ma, mb, q, r;
    int32_t exp;
    int i;
    if (aa > F32_INF || ab > F32_INF) {
        return f32_from(F32_NAN);
    }
    if (aa == F32_INF) {
        return f32_from(ab == F32_INF ? F32_NAN : sign | F32_INF);
    }
    if (ab == F32_INF) {
        return f32_from(sign);
    }
    if (ab == 0u) {
        return f32_from(aa == 0u ? F32_NAN : sign | F32_INF);
    }
    if (aa == 0u) {
        return f32_from(sign);
    }
    exp = f32_unpack(aa, &ma) - f32_unpack(ab, &mb) + 127;
    if (ma < mb) { /* make the quotient's leading bit 1 */
        ma <<= 1;
        exp--;
    }
    /* 26 quotient bits: 24 significand + 2 round bits; remainder -> sticky */
    q = 0;
    r = ma;
    for (i = 0; i < 26; i++) {
        q <<= 1;
        if (r >= mb) {
            r -= mb;
            q |= 1u;
        }
        r <<= 1;
    }
    return f32_from(f32_round_pack(sign, exp, (q << 3) | (uint32_t)(r != 0u)));
}

/* Integer square root of a 64-bit value; *rem = n - root^2. */
static uint64_t isqrt64(uint64_t n, uint64_t *rem)
{
    uint64_t res = 0;
    uint64_t one = 1ull << 62;
    while (one > n) {
        one >>= 2;
    }
    while (one != 0u) {
        if (n >= res + one) {
            n -= res + one;
            res = (res >> 1) + one;
        } else {
            res >>= 1;
        }
        one >>= 2;
    }
    *rem = n;
    return res;
}

float __hexagon_sqrtf(float a)
{
    const uint32_t ua = f32_bits(a);
    uint32_t m;
    uint64_t root, rem;
    int32_t e, lead;
    if ((ua & 0x7FFFFFFFu) == 0u) {
        return a; /* +-0 */
    }
    if ((ua & 0x7FFFFFFFu) > F32_INF || (ua & 0x80000000u) != 0u) {
        return f32_from(F32_NAN);
    }
    if (ua == F32_INF) {
        return a;
    }
    /* a = m * 2^e with m in [2^23, 2^24) */
    e = f32_unpack(ua, &m) - 127 - 23;
    if ((e & 1) != 0) {
        m <<= 1; /* even exponent: m in [2^23, 2^25) */
        e -= 1;
    }
    /* sqrt(m * 2^26) = sqrt(m) * 2^13 has 25-26 bits: enough for 24 + round + sticky */
    root = isqrt64((uint64_t)m << 26, &rem);
    lead = 63 - __builtin_clzll(root);
    /* value = root * 2^(e/2 - 13); place the leading bit at bit 28 (a left shift) */
    return f32_from(f32_round_pack(0u, lead + e / 2 - 13 + 127,
                                   ((uint32_t)root << (28 - lead)) | (uint32_t)(rem != 0u)));
}

/* ---- binary64 -------------------------------------------------------------------------- */

static double f64_from(uint64_t u)
{
    pe_f64 v;
    v.u = u;
    return v.f;
}

static uint64_t f64_bits(double f)
{
    pe_f64 v;
    v.f = f;
    return v.u;
}

/* As f32_round_pack: sig's leading bit at bit 57, a 53-bit significand above 5 round bits. */
static uint64_t f64_round_pack(uint64_t sign, int32_t exp, uint64_t sig)
{
    uint64_t mant;
    uint64_t rest;
    if (exp >= 2047) {
        return sign | F64_INF;
    }
    if (exp <= 0) {
        int32_t sh = 1 - exp;
        sig = sh >= 63 ? (uint64_t)(sig != 0u)
                       : (sig >> sh) | (uint64_t)((sig & ((1ull << sh) - 1u)) != 0u);
        exp = 1;
    }
    mant = sig >> 5;
    rest = sig & 31u;
    if (rest > 16u || (rest == 16u && (mant & 1u) != 0u)) {
        mant++;
    }
    return sign | (((uint64_t)(exp - 1) << 52) + mant);
}

static int32_t f64_unpack(uint64_t u, uint64_t *sig)
{
    int32_t exp = (int32_t)((u >> 52) & 0x7FFu);
    uint64_t m = u & 0xFFFFFFFFFFFFFull;
    if (exp == 0) {
        int sh = __builtin_clzll(m) - 11;
        m <<= sh;
        exp = 1 - sh;
    } else {
        m |= 0x10000000000000ull;
    }
    *sig = m;
    return exp;
}

double __hexagon_divdf3(double a, double b)
{
    const uint64_t ua = f64_bits(a);
    const uint64_t ub = f64_bits(b);
    const uint64_t sign = (ua ^ ub) & 0x8000000000000000ull;
    const uint64_t aa = ua & 0x7FFFFFFFFFFFFFFFull;
    const uint64_t ab = ub & 0x7FFFFFFFFFFFFFFFull;
    uint64_t ma, mb, q, r;
    int32_t exp;
    int i;
    if (aa > F64_INF || ab > F64_INF) {
        return f64_from(F64_NAN);
    }
    if (aa == F64_INF) {
        return f64_from(ab == F64_INF ? F64_NAN : sign | F64_INF);
    }
    if (ab == F64_INF) {
        return f64_from(sign);
    }
    if (ab == 0u) {
        return f64_from(aa == 0u ? F64_NAN : sign | F64_INF);
    }
    if (aa == 0u) {
        return f64_from(sign);
    }
    exp = f64_unpack(aa, &ma) - f64_unpack(ab, &mb) + 1023;
    if (ma < mb) {
        ma <<= 1;
        exp--;
    }
    q = 0;
    r = ma;
    for (i = 0; i < 55; i++) { /* 53 significand bits + 2 round bits */
        q <<= 1;
        if (r >= mb) {
            r -= mb;
            q |= 1u;
        }
        r <<= 1;
    }
    return f64_from(f64_round_pack(sign, exp, (q << 3) | (uint64_t)(r != 0u)));
}

double __hexagon_muldf3(double a, double b)
{
    const uint64_t ua = f64_bits(a);
    const uint64_t ub = f64_bits(b);
    const uint64_t sign = (ua ^ ub) & 0x8000000000000000ull;
    const uint64_t aa = ua & 0x7FFFFFFFFFFFFFFFull;
    const uint64_t ab = ub & 0x7FFFFFFFFFFFFFFFull;
    uint64_t ma, mb, a_hi, a_lo, b_hi, b_lo, lo, mid1, mid2, hi, cross, sig;
    int32_t exp, lead;
    if (aa > F64_INF || ab > F64_INF) {
        return f64_from(F64_NAN);
    }
    if (aa == F64_INF || ab == F64_INF) {
        return f64_from(aa == 0u || ab == 0u ? F64_NAN : sign | F64_INF);
    }
    if (aa == 0u || ab == 0u) {
        return f64_from(sign);
    }
    exp = f64_unpack(aa, &ma) + f64_unpack(ab, &mb) - 1023;
    /* 106-bit product of two 53-bit significands as hi:lo (64 + 64 bits) */
    a_hi = ma >> 32;
    a_lo = ma & 0xFFFFFFFFu;
    b_hi = mb >> 32;
    b_lo = mb & 0xFFFFFFFFu;
    lo = a_lo * b_lo;
    mid1 = a_hi * b_lo;
    mid2 = a_lo * b_hi;
    hi = a_hi * b_hi;
    cross = (lo >> 32) + (mid1 & 0xFFFFFFFFu) + (mid2 & 0xFFFFFFFFu);
    lo = (lo & 0xFFFFFFFFu) | (cross << 32);
    hi += (mid1 >> 32) + (mid2 >> 32) + (cross >> 32);
    /* product in [2^104, 2^106): leading bit at 104 + lead, lead = 0 or 1 */
    lead = (hi >> 41) != 0u ? 1 : 0;
    exp += lead;
    /* sig: leading bit at bit 57, i.e. product >> (47 + lead), low bits folded into sticky */
    {
        int32_t sh = 47 + lead; /* 47 or 48: the shift spans hi and lo */
        sig = (hi << (64 - sh)) | (lo >> sh);
        sig |= (uint64_t)((lo & ((1ull << sh) - 1u)) != 0u);
    }
    return f64_from(f64_round_pack(sign, exp, sig));
}

/* ---- memory ---------------------------------------------------------------------------- */

void *__hexagon_memcpy_likely_aligned_min32bytes_mult8bytes(void *dst, const void *src,
                                                             size_t n)
{
    return memcpy(dst, src, n);
}
