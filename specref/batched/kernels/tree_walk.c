/* The tree walk of specref.batched.tree on CPU: every rule of `specref.reference.tree`, one batch row at a time,
 * rows split across threads (see specref/batched/kernels/__init__.py).
 *
 * Each row walks from the root as the reference does and consumes the uniforms in its order (u_0, u_1, ... for the
 * accept tests, u_N for the final draw; sample_match: u_d at depth d). The residual of mss and rsd lives in a
 * per-thread [V] buffer w with its mass (r = w / mass entry by entry, as the reference divides), so that at a node
 * each input row is read once: p, then the draft row of each rejected sibling (one fused pass: w = (w / mass - q)_+
 * and its sum). target_only reads p at the children's tokens and p once where the row stops; sample_match reads p
 * once per node (its draw). A node whose first child is accepted reads no full row at all.
 *
 * Two arithmetics (tree_walk_impl.h, included once per input dtype):
 *   - double (float64 inputs): the reference's IEEE operations, sums left to right, the draw by a sequential
 *     partial sum: token for token the reference (no -ffast-math: nothing is contracted or reassociated);
 *   - float (fp32, bf16, fp16 inputs widened to fp32): residuals in fp32, sums in double, the draw by the
 *     two-level inverse CDF of `specref.batched.draw` (rows it leaves undecided by the exact scan).
 * rows_read[b] counts the full V-rows row b read from its inputs (the benchmark's floor). */

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loads.h"

enum { WALK_F32 = 0, WALK_BF16 = 1, WALK_F16 = 2, WALK_F64 = 3 };
enum { MSS = 0, RSD = 1, TARGET_ONLY = 2, SAMPLE_MATCH = 3 };
enum { WALK_MAX_THREADS = 64, WALK_LANES = 8, DRAW_BLOCK = 256 };

typedef struct {
    const char *target, *draft;      /* [B, N+1, V], [B, N, V] (NULL: point masses at the tokens) */
    const int64_t *tokens, *parents; /* [B, N], [B, N] (-1: padding; parents come before their children) */
    const double *uniforms;          /* [B, N+1], values of the compute dtype */
    int64_t nodes, vocab, item;
    int rule;
    /* [B, N+1], [B, N], [B], [B]: tokens and nodes prefilled with -1; the deepest real node of each row */
    int64_t *out_tokens, *out_nodes, *rows_read, *max_depth;
    int64_t begin, end;
} Walk;

typedef struct {
    const char *target, *draft;                /* [B, g+1, V], [B, g, V] (NULL: point masses at the tokens) */
    const int64_t *tokens, *num_draft;         /* [B, g], [B] */
    const double *uniforms;                    /* [B, g+1] */
    int64_t gamma, vocab, item;
    int64_t *out_tokens, *rows_read;           /* [B, g+1] prefilled with -1, [B] */
} Block;

typedef struct {
    void *w;                       /* [V] residual weights, of the arithmetic's type */
    uint8_t *mask;                 /* [V] tried tokens of rsd, zero between nodes */
    double *sums;                  /* [ceil(V / DRAW_BLOCK)] block sums of the two-level draw */
    int64_t *tried;                /* [N] */
    int64_t *first, *next, *depth; /* [N+1] first child, next sibling, depth */
    float *saved;                  /* [N] weights at the tried tokens (rsd, fp32) */
} Scratch;

#define LOAD_F64(row, j) (((const double *)(row))[j])

/* The draw convention of `specref.randomness.inverse_cdf` by one exact scan in double: threshold u * (sum left to
 * right), the first j with w_j > 0 whose partial sum exceeds it, else the last positive j, else -1. */
#define EXACT_SCAN(GET, V, U, RESULT)                                                                                \
    do {                                                                                                             \
        double total_ = 0.0, partial_ = 0.0;                                                                         \
        for (int64_t j_ = 0; j_ < (V); j_++) total_ += (double)GET(j_);                                              \
        double threshold_ = (U) * total_;                                                                            \
        int64_t last_ = -1;                                                                                          \
        (RESULT) = -2;                                                                                               \
        for (int64_t j_ = 0; j_ < (V); j_++) {                                                                       \
            double x_ = (double)GET(j_);                                                                             \
            partial_ += x_;                                                                                          \
            if (x_ > 0) {                                                                                            \
                last_ = j_;                                                                                          \
                if (partial_ > threshold_) {                                                                         \
                    (RESULT) = j_;                                                                                   \
                    break;                                                                                           \
                }                                                                                                    \
            }                                                                                                        \
        }                                                                                                            \
        if ((RESULT) == -2) (RESULT) = last_;                                                                        \
    } while (0)

/* A hint: target_only's children's entries of p fetched together, and the next row's root tests during this row's
 * pass, not one cold miss after another (together ~12% of target_only's call) */
#if defined(__GNUC__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)0)
#endif

/* One block's sum of the two-level draw (float weights): fp32 lanes combined in double. */
#define BLOCK_SUM(GET, M, V, RESULT)                                                                                 \
    do {                                                                                                             \
        int64_t start_ = (M) * DRAW_BLOCK, stop_ = start_ + DRAW_BLOCK < (V) ? start_ + DRAW_BLOCK : (V), j_;        \
        float lane_[WALK_LANES] = {0};                                                                               \
        for (j_ = start_; j_ + WALK_LANES <= stop_; j_ += WALK_LANES)                                                \
            for (int k_ = 0; k_ < WALK_LANES; k_++) lane_[k_] += GET(j_ + k_);                                       \
        for (; j_ < stop_; j_++) lane_[0] += GET(j_);                                                                \
        double s_ = 0.0;                                                                                             \
        for (int k_ = 0; k_ < WALK_LANES; k_++) s_ += lane_[k_];                                                     \
        (RESULT) = s_;                                                                                               \
    } while (0)

/* The two-level draw (float weights): block sums (BLOCK_SUM), the block by float64 partial sums, the token by
 * `before + cumsum` within it; -2 where that leaves it undecided. */
#define BLOCKED_DRAW(GET, V, U, SUMS, RESULT)                                                                        \
    do {                                                                                                             \
        int64_t blocks_ = ((V) + DRAW_BLOCK - 1) / DRAW_BLOCK;                                                       \
        for (int64_t m_ = 0; m_ < blocks_; m_++) BLOCK_SUM(GET, m_, V, (SUMS)[m_]);                                  \
        BLOCKED_DRAW_SUMMED(GET, V, U, SUMS, RESULT);                                                                \
    } while (0)

/* The same, given the block sums. */
#define BLOCKED_DRAW_SUMMED(GET, V, U, SUMS, RESULT)                                                                 \
    do {                                                                                                             \
        double total_ = 0.0;                                                                                         \
        int64_t blocks_ = ((V) + DRAW_BLOCK - 1) / DRAW_BLOCK;                                                       \
        for (int64_t m_ = 0; m_ < blocks_; m_++) total_ += (SUMS)[m_];                                               \
        double threshold_ = (U) * total_, before_ = 0.0, cumulative_ = 0.0;                                         \
        int64_t m_ = 0;                                                                                              \
        for (; m_ < blocks_ - 1; m_++, before_ = cumulative_)                                                        \
            if ((cumulative_ = before_ + (SUMS)[m_]) > threshold_) break;                                            \
        double sum_ = 0.0, partial_ = before_, x_ = 0.0;                                                             \
        int64_t j_ = m_ * DRAW_BLOCK, stop_ = j_ + DRAW_BLOCK < (V) ? j_ + DRAW_BLOCK : (V);                         \
        for (; j_ < stop_; j_++) {                                                                                   \
            x_ = (double)GET(j_);                                                                                    \
            sum_ += x_;                                                                                              \
            partial_ = before_ + sum_;                                                                               \
            if (partial_ > threshold_) break;                                                                        \
        }                                                                                                            \
        if (j_ == stop_) j_ = stop_ - 1;                                                                             \
        (RESULT) = partial_ > threshold_ && x_ > 0 ? j_ : -2;                                                        \
    } while (0)

#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)

#define T double
#define LOAD LOAD_F64
#define EXACT 1
#define SUFFIX f64
#include "tree_walk_impl.h"
#include "block_impl.h"
#undef T
#undef LOAD
#undef EXACT
#undef SUFFIX

#define T float
#define EXACT 0
#define LOAD LOAD_F32
#define SUFFIX f32
#include "tree_walk_impl.h"
#include "block_impl.h"
#undef LOAD
#undef SUFFIX
#define LOAD LOAD_BF16
#define SUFFIX bf16
#include "tree_walk_impl.h"
#include "block_impl.h"
#undef LOAD
#undef SUFFIX
#define LOAD LOAD_F16
#define SUFFIX f16
#include "tree_walk_impl.h"
#include "block_impl.h"
#undef LOAD
#undef SUFFIX
#undef T
#undef EXACT

typedef void (*RowFn)(const Walk *, int64_t, Scratch *);
typedef void (*BlockFn)(const Block *, int64_t, Scratch *);

typedef struct {
    Walk walk; /* walk.begin, walk.end: the rows of this job; walk.vocab, walk.nodes: the scratch sizes */
    RowFn row;
    const Block *block;
    BlockFn block_row; /* instead of row, when block is set */
    size_t w_size;
    int failed;
} Job;

static void *run_walk(void *arg) {
    Job *job = arg;
    size_t vocab = (size_t)job->walk.vocab, nodes = (size_t)job->walk.nodes + 1;
    Scratch scratch = {malloc(vocab * job->w_size), calloc(vocab, 1),
                       malloc(sizeof(double) * (vocab / DRAW_BLOCK + 1)), malloc(sizeof(int64_t) * nodes),
                       malloc(sizeof(int64_t) * nodes), malloc(sizeof(int64_t) * nodes), malloc(sizeof(int64_t) * nodes),
                       malloc(sizeof(float) * nodes)};
    if (!scratch.w || !scratch.mask || !scratch.sums || !scratch.tried || !scratch.first || !scratch.next ||
        !scratch.depth || !scratch.saved)
        job->failed = 1;
    else
        for (int64_t b = job->walk.begin; b < job->walk.end; b++)
            if (job->block)
                job->block_row(job->block, b, &scratch);
            else
                job->row(&job->walk, b, &scratch);
    free(scratch.w), free(scratch.mask), free(scratch.sums), free(scratch.tried);
    free(scratch.first), free(scratch.next), free(scratch.depth), free(scratch.saved);
    return NULL;
}

static int run_jobs(const Job *job, int64_t batch, int num_threads) {
    int threads = num_threads < WALK_MAX_THREADS ? num_threads : WALK_MAX_THREADS;
    if (threads > batch) threads = (int)batch;
    Job jobs[WALK_MAX_THREADS];
    if (threads <= 1) {
        jobs[0] = *job;
        run_walk(&jobs[0]);
        return jobs[0].failed ? -2 : 0;
    }
    pthread_t handles[WALK_MAX_THREADS];
    int created[WALK_MAX_THREADS] = {0}, failed = 0;
    for (int t = 0; t < threads; t++) {
        jobs[t] = *job;
        jobs[t].walk.begin = batch * t / threads;
        jobs[t].walk.end = batch * (t + 1) / threads;
    }
    for (int t = 1; t < threads; t++) created[t] = pthread_create(&handles[t], NULL, run_walk, &jobs[t]) == 0;
    run_walk(&jobs[0]);
    for (int t = 0; t < threads; t++) {
        if (t > 0 && created[t])
            pthread_join(handles[t], NULL);
        else if (t > 0)
            run_walk(&jobs[t]);
        failed |= jobs[t].failed;
    }
    return failed ? -2 : 0;
}

/* Returns 0; -1 for an unknown dtype or rule; -2 when scratch memory could not be had. */
int specref_tree_walk(const void *target, const void *draft, int dtype, int rule, const int64_t *tokens,
                      const int64_t *parents, const double *uniforms, int64_t batch, int64_t nodes, int64_t vocab,
                      int64_t *out_tokens, int64_t *out_nodes, int64_t *rows_read, int64_t *max_depth,
                      int num_threads) {
    Job job = {{target, draft, tokens, parents, uniforms, nodes, vocab, 0, rule, out_tokens, out_nodes, rows_read,
                max_depth, 0, batch},
               NULL, NULL, NULL, 0, 0};
    switch (dtype) {
        case WALK_F64: job.row = walk_row_f64, job.walk.item = 8, job.w_size = sizeof(double); break;
        case WALK_F32: job.row = walk_row_f32, job.walk.item = 4, job.w_size = sizeof(float); break;
        case WALK_BF16: job.row = walk_row_bf16, job.walk.item = 2, job.w_size = sizeof(float); break;
        case WALK_F16: job.row = walk_row_f16, job.walk.item = 2, job.w_size = sizeof(float); break;
        default: return -1;
    }
    if (rule < MSS || rule > SAMPLE_MATCH) return -1;
    return run_jobs(&job, batch, num_threads);
}

/* Block verification of B chains (`specref.batched.block`); returns 0, -1 for an unknown dtype, -2 without memory. */
int specref_block_verify(const void *target, const void *draft, int dtype, const int64_t *tokens,
                         const int64_t *num_draft, const double *uniforms, int64_t batch, int64_t gamma, int64_t vocab,
                         int64_t *out_tokens, int64_t *rows_read, int num_threads) {
    Block block = {target, draft, tokens, num_draft, uniforms, gamma, vocab, 0, out_tokens, rows_read};
    Job job = {{0}, NULL, &block, NULL, 0, 0};
    job.walk.vocab = vocab, job.walk.nodes = gamma, job.walk.end = batch;
    switch (dtype) {
        case WALK_F64: job.block_row = block_row_f64, block.item = 8, job.w_size = sizeof(double); break;
        case WALK_F32: job.block_row = block_row_f32, block.item = 4, job.w_size = sizeof(float); break;
        case WALK_BF16: job.block_row = block_row_bf16, block.item = 2, job.w_size = sizeof(float); break;
        case WALK_F16: job.block_row = block_row_f16, block.item = 2, job.w_size = sizeof(float); break;
        default: return -1;
    }
    return run_jobs(&job, batch, num_threads);
}
