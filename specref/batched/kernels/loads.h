/* Loads of fp32, bf16 and fp16 inputs widened to fp32, shared by the kernels of specref.batched (C, CPU). */
#ifndef SPECREF_LOADS_H
#define SPECREF_LOADS_H

#include <stdint.h>
#include <string.h>

static inline float from_bf16(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Branch-free (selects by masks), so that the loops vectorise: normal numbers by re-biasing the exponent,
 * subnormals as m * 2^-24, then the sign. Exact for every bit pattern (tested against torch). */
static inline float from_f16(uint16_t h) {
    uint32_t exponent = h & 0x7c00u, mantissa = h & 0x3ffu;
    uint32_t special = 0u - (uint32_t)(exponent == 0x7c00u), normal = 0u - (uint32_t)(exponent != 0u);
    uint32_t finite = ((uint32_t)(h & 0x7fffu) + (112u << 10)) << 13;
    uint32_t big = (finite & ~special) | ((0x7f800000u | (mantissa << 13)) & special), small;
    float f = (float)(int32_t)mantissa * 5.9604644775390625e-8f;
    memcpy(&small, &f, sizeof small);
    uint32_t bits = (big & normal) | (small & ~normal) | ((uint32_t)(h & 0x8000u) << 16);
    memcpy(&f, &bits, sizeof f);
    return f;
}

#define LOAD_F32(row, j) (((const float *)(row))[j])
#define LOAD_BF16(row, j) from_bf16(((const uint16_t *)(row))[j])
#define LOAD_F16(row, j) from_f16(((const uint16_t *)(row))[j])
static inline float clamped(float w) { return w > 0.0f ? w : 0.0f; } /* also NaN -> 0 */

#endif
