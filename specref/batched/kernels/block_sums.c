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
    /* the whole chain (specref_chain) */
    const int64_t *tokens, *num_draft;
    const float *uniforms;
    int64_t gamma;
    float (*load)(const void *, int64_t);
    int64_t batch, *rows_out, *emitted;
} Job;

static float load_f32(const void *row, int64_t j) { return LOAD_F32(row, j); }
static float load_bf16(const void *row, int64_t j) { return LOAD_BF16(row, j); }
static float load_f16(const void *row, int64_t j) { return LOAD_F16(row, j); }

/* Row b's block sums, and with u (its uniform) its draw: token[b] and ok[b]. */
static void draw_row(const Job *job, int64_t b, const char *p, const char *q, int64_t removed, const double *u) {
    double *sums = job->out + b * job->num_blocks;
    job->row(p, q, removed, job->vocab, job->block, sums);
    if (!u) return;
    /* The block: float64 partial sums of the block sums (torch's sequential cumsum), the first above u * total
     * (searchsorted, right=True, clamped to the last block); `before` is the partial sum ahead of it. */
    double total = 0.0, before = 0.0, cumulative = 0.0;
    for (int64_t m = 0; m < job->num_blocks; m++) total += sums[m];
    double threshold = *u * total;
    int64_t m = 0;
    for (; m < job->num_blocks - 1; m++, before = cumulative) /* the same additions again */
        if ((cumulative = before + sums[m]) > threshold) break;
    int ok;
    job->token[b] = job->pick(p, q, removed, job->vocab, m * job->block, job->block, before, threshold, &ok);
    job->ok[b] = (uint8_t)ok;
}

static void *run(void *arg) {
    const Job *job = arg;
    int64_t row_bytes = job->vocab * job->item_size;
    for (int64_t b = job->begin; b < job->end; b++) {
        const char *p = job->target + job->target_row[b] * row_bytes;
        const char *q = job->draft && job->draft_row[b] >= 0 ? job->draft + job->draft_row[b] * row_bytes : NULL;
        draw_row(job, b, p, q, job->removed ? job->removed[b] : -1, job->u ? job->u + b : NULL);
    }
    return NULL;
}

/* Returns 0, or -1 for an unknown dtype. `draft` and `removed` may be NULL; out is [batch, ceil(vocab / block)].
 * With u (float64 [batch]) it also draws: token [batch] and ok [batch] as `specref.batched.draw` documents. */
/* The accept tests of `specref.batched.chain.verify` for row b, in fp32 as torch computes them: draft k is
 * accepted when u_k < p_k(d_k) / q_k(d_k) (p_k(d_k) for point masses), strictly; then the final draw from the first
 * rejected row's residual (or p without the rejected token, or the bonus row), and the emitted tokens. */
static void *run_chain(void *arg) {
    const Job *job = arg;
    int64_t g = job->gamma, row_bytes = job->vocab * job->item_size, batch = job->batch;
    for (int64_t b = job->begin; b < job->end; b++) {
        const int64_t *d = job->tokens + b * g;
        const char *p_rows = job->target + b * (g + 1) * row_bytes;
        const char *q_rows = job->draft ? job->draft + b * g * row_bytes : NULL;
        int64_t n = job->num_draft ? job->num_draft[b] : g, k = 0;
        if (b + 1 < job->end) { /* the next row's tested entries, fetched while this row streams */
            int64_t next = job->num_draft ? job->num_draft[b + 1] : g;
            for (int64_t i = 0; i < next; i++) {
                int64_t at = (i * row_bytes) + d[g + i] * job->item_size;
                __builtin_prefetch(p_rows + (g + 1) * row_bytes + at);
                if (q_rows) __builtin_prefetch(q_rows + g * row_bytes + at);
            }
        }
        const float *u = job->uniforms + b * (g + 1);
        for (; k < n; k++) {
            float ratio = job->load(p_rows + k * row_bytes, d[k]);
            if (q_rows) ratio = ratio / job->load(q_rows + k * row_bytes, d[k]);
            if (!(u[k] < ratio)) break; /* NaN never accepts */
        }
        int rejected = k < n;
        const char *q = q_rows && rejected ? q_rows + k * row_bytes : NULL;
        int64_t removed = !q_rows && rejected ? d[k] : -1;
        job->rows_out[b] = k, job->rows_out[batch + b] = q ? k : -1, job->rows_out[2 * batch + b] = removed;
        double final_u = u[g];
        draw_row(job, b, p_rows + k * row_bytes, q, removed, &final_u);
        int64_t *out = job->emitted + b * (g + 1);
        for (int64_t i = 0; i <= g; i++) out[i] = i < k ? d[i] : i == k ? job->token[b] : -1;
    }
    return NULL;
}

static int set_dtype(Job *job, int dtype) {
    switch (dtype) {
        case F32: job->row = row_f32, job->pick = pick_f32, job->load = load_f32, job->item_size = 4; return 0;
        case BF16: job->row = row_bf16, job->pick = pick_bf16, job->load = load_bf16, job->item_size = 2; return 0;
        case F16: job->row = row_f16, job->pick = pick_f16, job->load = load_f16, job->item_size = 2; return 0;
        default: return -1;
    }
}

/* Runs work over rows [0, batch) split across up to num_threads threads. */
static void run_rows(const Job *job, int64_t batch, int num_threads, void *(*work)(void *)) {
    int threads = num_threads < MAX_THREADS ? num_threads : MAX_THREADS;
    if (threads > batch) threads = (int)batch;
    if (threads <= 1) {
        work((void *)job);
        return;
    }
    pthread_t handles[MAX_THREADS];
    int created[MAX_THREADS] = {0};
    Job jobs[MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        jobs[t] = *job;
        jobs[t].begin = batch * t / threads;
        jobs[t].end = batch * (t + 1) / threads;
    }
    for (int t = 1; t < threads; t++) created[t] = pthread_create(&handles[t], NULL, work, &jobs[t]) == 0;
    work(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (created[t])
            pthread_join(handles[t], NULL);
        else
            work(&jobs[t]); /* no thread to be had: do its rows here */
    }
}

/* Returns 0, or -1 for an unknown dtype. `draft` and `removed` may be NULL; out is [batch, ceil(vocab / block)].
 * With u (float64 [batch]) it also draws: token [batch] and ok [batch] as `specref.batched.draw` documents. */
int specref_draw(const void *target, const void *draft, int dtype, const int64_t *target_row,
                 const int64_t *draft_row, const int64_t *removed, int64_t batch, int64_t vocab, int64_t block,
                 double *out, int num_threads, const double *u, int64_t *token, uint8_t *ok) {
    Job job = {.target = target, .draft = draft, .target_row = target_row, .draft_row = draft_row, .removed = removed,
               .vocab = vocab, .block = block, .num_blocks = (vocab + block - 1) / block, .end = batch, .out = out,
               .u = u, .token = token, .ok = ok};
    if (set_dtype(&job, dtype)) return -1;
    run_rows(&job, batch, num_threads, run);
    return 0;
}

/* The whole chain verification of B rows (target [B, g+1, V], draft [B, g, V] or NULL for point masses, tokens
 * [B, g], num_draft [B] or NULL for g, uniforms fp32 [B, g+1]): emitted [B, g+1] (-1 padded), rows_out [3, B] (the
 * final draw's target row, draft row or -1, removed token or -1), out, token and ok as specref_draw. Returns the
 * number of rows whose draw is undecided (ok 0: the caller redoes them), -1 for an unknown dtype, -2 for a
 * num_draft outside [0, g] or a tested token outside [0, V) (nothing is read then). */
int64_t specref_chain(const void *target, const void *draft, int dtype, const int64_t *tokens,
                      const int64_t *num_draft, const float *uniforms, int64_t batch, int64_t gamma, int64_t vocab,
                      int64_t block, double *out, int64_t *token, uint8_t *ok, int64_t *rows_out, int64_t *emitted,
                      int num_threads) {
    for (int64_t b = 0; b < batch; b++) {
        int64_t n = num_draft ? num_draft[b] : gamma;
        if (n < 0 || n > gamma) return -2;
        for (int64_t i = 0; i < n; i++)
            if (tokens[b * gamma + i] < 0 || tokens[b * gamma + i] >= vocab) return -2;
    }
    Job job = {.target = target, .draft = draft, .vocab = vocab, .block = block,
               .num_blocks = (vocab + block - 1) / block, .end = batch, .out = out, .token = token, .ok = ok, .tokens = tokens, .num_draft = num_draft,
               .uniforms = uniforms, .gamma = gamma, .batch = batch, .rows_out = rows_out, .emitted = emitted};
    if (set_dtype(&job, dtype)) return -1;
    run_rows(&job, batch, num_threads, run_chain);
    int64_t undecided = 0;
    for (int64_t b = 0; b < batch; b++) undecided += !ok[b];
    return undecided;
}

int specref_block_sums(const void *target, const void *draft, int dtype, const int64_t *target_row,
                       const int64_t *draft_row, const int64_t *removed, int64_t batch, int64_t vocab, int64_t block,
                       double *out, int num_threads) {
    return specref_draw(target, draft, dtype, target_row, draft_row, removed, batch, vocab, block, out, num_threads,
                        NULL, NULL, NULL);
}
