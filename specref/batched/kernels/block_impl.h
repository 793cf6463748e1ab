/* Block verification (Sun et al. 2025) of one batch row, `specref.batched.block`'s arithmetic (tree_walk.c includes
 * this after tree_walk_impl.h, once per input dtype, with its T, LOAD, EXACT and SUFFIX): the weights b_i at the
 * drafts, then h_i from the top down (h_n = b_n; below it r_i = sum (b_i p_i - q_i)_+ in one pass over p_i and q_i),
 * stopping at the first i with u_{i-1} < h_i: tau. The final draw from (b_tau p_tau - q_tau)_+ (tau < n), else p_n,
 * with u_g. Rows above tau are never read, and nothing is written but block sums: the final draw takes the last
 * pass's block sums and recomputes the residual of the one block it lands in (from cache). */

#define GET_R_ROW(j) CAT(positive, SUFFIX)(weight * (T)LOAD(p, j) - (T)LOAD(q, j))
#define GET_R_POINT(j) CAT(positive, SUFFIX)(weight * (T)LOAD(p, j) - (T)((j) == x))

static inline T CAT(positive, SUFFIX)(T v) { return v > 0 ? v : (T)0; } /* also NaN -> 0 */

/* r = sum (weight p - q)_+ (q NULL: the point mass at x): left to right when EXACT, else by blocks (BLOCK_SUM) whose
 * sums stay in `sums` for the final draw. */
static T CAT(block_mass, SUFFIX)(T weight, const void *p, const void *q, int64_t x, int64_t V, double *sums) {
    double total = 0.0;
#if EXACT
    (void)sums;
    if (q)
        for (int64_t j = 0; j < V; j++) total += GET_R_ROW(j);
    else
        for (int64_t j = 0; j < V; j++) total += GET_R_POINT(j);
#else
    const int64_t blocks = (V + DRAW_BLOCK - 1) / DRAW_BLOCK;
    for (int64_t m = 0; m < blocks; m++) {
        if (q)
            BLOCK_SUM(GET_R_ROW, m, V, sums[m]);
        else
            BLOCK_SUM(GET_R_POINT, m, V, sums[m]);
        total += sums[m];
    }
#endif
    return (T)total;
}

/* A draw from (weight p - q)_+ with u; summed: `sums` holds its block sums (block_mass ran on these rows last). */
static int64_t CAT(block_draw, SUFFIX)(T weight, const void *p, const void *q, int64_t x, int64_t V, double u,
                                       double *sums, int summed) {
    int64_t token = -2;
#if !EXACT
    if (!summed) CAT(block_mass, SUFFIX)(weight, p, q, x, V, sums);
    if (q)
        BLOCKED_DRAW_SUMMED(GET_R_ROW, V, u, sums, token);
    else
        BLOCKED_DRAW_SUMMED(GET_R_POINT, V, u, sums, token);
#else
    (void)summed, (void)sums;
#endif
    if (token == -2 && q) EXACT_SCAN(GET_R_ROW, V, u, token);
    if (token == -2 && !q) EXACT_SCAN(GET_R_POINT, V, u, token);
    return token;
}

static void CAT(block_row, SUFFIX)(const Block *block, int64_t b, Scratch *scratch) {
    const int64_t V = block->vocab, g = block->gamma, n = block->num_draft[b], item = block->item;
    const char *target = block->target + b * (g + 1) * V * item;
    const char *draft = block->draft ? block->draft + b * g * V * item : NULL;
    const int64_t *x = block->tokens + b * g;
    const double *u = block->uniforms + b * (g + 1);
    T weight[g + 1];
    int64_t reads = 0, tau = 0, last_pass = -1;
    weight[0] = 1;
    for (int64_t i = 1; i <= n; i++) {
        const char *p = target + (i - 1) * V * item;
        T q_x = draft ? (T)LOAD(draft + (i - 1) * V * item, x[i - 1]) : (T)1;
        T v = weight[i - 1] * (T)LOAD(p, x[i - 1]) / q_x;
        weight[i] = v > 1 ? (T)1 : v;
    }
    for (int64_t i = n; i >= 1 && tau == 0; i--) {
        T h = weight[i];
        if (i < n) { /* r_i, one pass over p_i and q_i */
            const char *q = draft ? draft + i * V * item : NULL;
            T r = CAT(block_mass, SUFFIX)(weight[i], target + i * V * item, q, x[i], V, scratch->sums);
            reads += 1 + (q != NULL);
            last_pass = i;
            h = r > 0 ? r / (r + 1 - weight[i]) : (T)0;
        }
        if (u[i - 1] < h) tau = i;
    }
    const char *p_tau = target + tau * V * item;
    int64_t token = -1;
    if (tau < n) {
        const char *q = draft ? draft + tau * V * item : NULL;
        reads += last_pass == tau ? 0 : 1 + (q != NULL); /* tau = 0: (p_0 - q_0)_+, not read yet */
        token = CAT(block_draw, SUFFIX)(weight[tau], p_tau, q, x[tau], V, u[g], scratch->sums, last_pass == tau);
    } else {
        reads += 1;
    }
    if (token < 0) token = CAT(draw_p, SUFFIX)(p_tau, V, u[g], scratch->sums);
    int64_t *out = block->out_tokens + b * (g + 1);
    for (int64_t i = 0; i < tau; i++) out[i] = x[i];
    out[tau] = token;
    block->rows_read[b] = reads;
}

#undef GET_R_ROW
#undef GET_R_POINT
#undef GET_W
#undef GET_P
