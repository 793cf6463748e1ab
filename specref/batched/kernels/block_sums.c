/* Fused gather-subtract-clamp-blocksum for specref.batched on CPU (see specref/batched/kernels/__init__.py).
 *
 * For each batch row b, with p the target row target_row[b] and q the draft row draft_row[b] (none when < 0):
 *
 *   out[b, m] = sum over j in block m of  w_j,   w_j = max(0, p_j - q_j)  (p_j without a draft row),
 *
 * and w_j = 0 at j = removed[b] (point-mass drafts; none when < 0). Each difference is the fp32 difference of the
 * inputs widened to fp32, as torch computes it; a block accumulates in 8 fp32 lanes, combined in double. NaN
 * weights count as 0 (torch's clamp would keep them; validated inputs have none). Each input row is read once and
 * nothing of size V is written: the least memory traffic a verifier can have. Rows are split across threads. */

#include <pthread.h>
#include <stdint.h>
#include <string.h>


enum { F32 = 0, BF16 = 1, F16 = 2 };
enum { MAX_THREADS = 64, LANES = 8 };

#include "loads.h"

/* One row: the block sums of w over [0, vocab), skipping index `removed`. */
#define DEFINE_ROW(NAME, LOAD)                                                                                       \
    static void NAME(const void *p, const void *q, int64_t removed, int64_t vocab, int64_t block, double *out) {     \
        for (int64_t start = 0, m = 0; start < vocab; start += block, m++) {                                         \
            int64_t stop = start + block < vocab ? start + block : vocab, j = start;                                 \
            float lane[LANES] = {0};                                                                                 \
            if (removed >= start && removed < stop) { /* the one block with a hole: plain loop */                    \
                for (; j < stop; j++) {                                                                              \
                    float w = q ? LOAD(p, j) - LOAD(q, j) : LOAD(p, j);                                              \
                    lane[0] += j == removed ? 0.0f : clamped(w);                                                     \
                }                                                                                                    \
            } else if (q) {                                                                                          \
                for (; j + LANES <= stop; j += LANES)                                                                \
                    for (int k = 0; k < LANES; k++) {                                                                \
                        float w = LOAD(p, j + k) - LOAD(q, j + k);                                                   \
                        lane[k] += clamped(w);                                                                       \
                    }                                                                                                \
                for (; j < stop; j++) {                                                                              \
                    float w = LOAD(p, j) - LOAD(q, j);                                                               \
                    lane[0] += clamped(w);                                                                           \
                }                                                                                                    \
            } else {                                                                                                 \
                for (; j + LANES <= stop; j += LANES)                                                                \
                    for (int k = 0; k < LANES; k++) lane[k] += clamped(LOAD(p, j + k));                              \
                for (; j < stop; j++) lane[0] += clamped(LOAD(p, j));                                                \
            }                                                                                                        \
            double total = 0.0;                                                                                      \
            for (int k = 0; k < LANES; k++) total += lane[k];                                                        \
            out[m] = total;                                                                                          \
        }                                                                                                            \
    }

DEFINE_ROW(row_f32, LOAD_F32)
DEFINE_ROW(row_bf16, LOAD_BF16)
DEFINE_ROW(row_f16, LOAD_F16)

/* One row's draw inside its chosen block: the weights recomputed from the inputs, widened to double, summed left
 * to right after `before` (torch's `before + cumsum(local.double())`); the first partial sum above `threshold`
 * (searchsorted, right=True, clamped to the block's last entry). ok: that sum is above and its weight positive. */
#define DEFINE_PICK(NAME, LOAD)                                                                                      \
    static int64_t NAME(const void *p, const void *q, int64_t removed, int64_t vocab, int64_t start, int64_t block,  \
                        double before, double threshold, int *ok) {                                                  \
        double sum = 0.0, partial = before, local = 0.0;                                                             \
        int64_t j = 0;                                                                                               \
        for (; j < block; j++) {                                                                                     \
            int64_t column = start + j;                                                                              \
            local = 0.0;                                                                                             \
            if (column < vocab && column != removed) {                                                               \
                float w = q ? LOAD(p, column) - LOAD(q, column) : LOAD(p, column);                                   \
                local = (double)clamped(w);                                                                          \
            }                                                                                                        \
            sum += local;                                                                                            \
            partial = before + sum;                                                                                  \
            if (partial > threshold) break;                                                                          \
        }                                                                                                            \
        if (j == block) j = block - 1;                                                                               \
        *ok = partial > threshold && local > 0.0;                                                                    \
        return start + j;                                                                                            \
    }

DEFINE_PICK(pick_f32, LOAD_F32)
DEFINE_PICK(pick_bf16, LOAD_BF16)
DEFINE_PICK(pick_f16, LOAD_F16)

typedef struct {
    const char *target, *draft;
    const int64_t *target_row, *draft_row, *removed;
    int64_t vocab, block, num_blocks, item_size, begin, end;
    void (*row)(const void *, const void *, int64_t, int64_t, int64_t, double *);
    double *out;
    /* the draw (NULL u: block sums only) */
    const double *u;
    int64_t (*pick)(const void *, const void *, int64_t, int64_t, int64_t, int64_t, double, double, int *);
    int64_t *token;
    uint8_t *ok;
} Job;

static void *run(void *arg) {
    const Job *job = arg;
    int64_t row_bytes = job->vocab * job->item_size;
    for (int64_t b = job->begin; b < job->end; b++) {
        const char *p = job->target + job->target_row[b] * row_bytes;
        const char *q = job->draft && job->draft_row[b] >= 0 ? job->draft + job->draft_row[b] * row_bytes : NULL;
        int64_t removed = job->removed ? job->removed[b] : -1;
        double *sums = job->out + b * job->num_blocks;
        job->row(p, q, removed, job->vocab, job->block, sums);
        if (!job->u) continue;
        /* The block: float64 partial sums of the block sums (torch's sequential cumsum), the first above u * total
         * (searchsorted, right=True, clamped to the last block); `before` is the partial sum ahead of it. */
        double total = 0.0, before = 0.0, cumulative = 0.0;
        for (int64_t m = 0; m < job->num_blocks; m++) total += sums[m];
        double threshold = job->u[b] * total;
        int64_t m = 0;
        for (; m < job->num_blocks - 1; m++, before = cumulative)  /* the same additions again */
            if ((cumulative = before + sums[m]) > threshold) break;
        int ok;
        job->token[b] = job->pick(p, q, removed, job->vocab, m * job->block, job->block, before, threshold, &ok);
        job->ok[b] = (uint8_t)ok;
    }
    return NULL;
}

/* Returns 0, or -1 for an unknown dtype. `draft` and `removed` may be NULL; out is [batch, ceil(vocab / block)].
 * With u (float64 [batch]) it also draws: token [batch] and ok [batch] as `specref.batched.draw` documents. */
int specref_draw(const void *target, const void *draft, int dtype, const int64_t *target_row,
                 const int64_t *draft_row, const int64_t *removed, int64_t batch, int64_t vocab, int64_t block,
                 double *out, int num_threads, const double *u, int64_t *token, uint8_t *ok) {
    Job job = {target, draft, target_row, draft_row, removed, vocab, block, (vocab + block - 1) / block, 0, 0, batch,
               NULL, out, u, NULL, token, ok};
    switch (dtype) {
        case F32: job.row = row_f32, job.pick = pick_f32, job.item_size = 4; break;
        case BF16: job.row = row_bf16, job.pick = pick_bf16, job.item_size = 2; break;
        case F16: job.row = row_f16, job.pick = pick_f16, job.item_size = 2; break;
        default: return -1;
    }
    int threads = num_threads < MAX_THREADS ? num_threads : MAX_THREADS;
    if (threads > batch) threads = (int)batch;
    if (threads <= 1) {
        run(&job);
        return 0;
    }
    pthread_t handles[MAX_THREADS];
    int created[MAX_THREADS] = {0};
    Job jobs[MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        jobs[t] = job;
        jobs[t].begin = batch * t / threads;
        jobs[t].end = batch * (t + 1) / threads;
    }
    for (int t = 1; t < threads; t++) created[t] = pthread_create(&handles[t], NULL, run, &jobs[t]) == 0;
    run(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (created[t])
            pthread_join(handles[t], NULL);
        else
            run(&jobs[t]); /* no thread to be had: do its rows here */
    }
    return 0;
}

int specref_block_sums(const void *target, const void *draft, int dtype, const int64_t *target_row,
                       const int64_t *draft_row, const int64_t *removed, int64_t batch, int64_t vocab, int64_t block,
                       double *out, int num_threads) {
    return specref_draw(target, draft, dtype, target_row, draft_row, removed, batch, vocab, block, out, num_threads,
                        NULL, NULL, NULL);
}
