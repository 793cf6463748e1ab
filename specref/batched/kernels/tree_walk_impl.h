/* One instantiation of the tree walk (tree_walk.c): T the arithmetic (double or float), LOAD the input's load,
 * EXACT 1 for the reference's IEEE operations (double), SUFFIX the names' suffix. Included once per input dtype. */

#define GET_W(j) (w[j])
#define GET_P(j) ((T)LOAD(p, j))

/* A draw from the weights w [V] or from the input row p [V]; -1 when they are all zero. */
static int64_t CAT(draw_w, SUFFIX)(const T *w, int64_t V, double u, double *sums) {
    int64_t token = -2;
    if (!EXACT) BLOCKED_DRAW(GET_W, V, u, sums, token);
    if (token == -2) EXACT_SCAN(GET_W, V, u, token);
    return token;
}

/* draw_w when sums already holds w's block sums (the residual pass wrote them): no pass over w but one block */
static int64_t CAT(draw_w_summed, SUFFIX)(const T *w, int64_t V, double u, double *sums) {
    int64_t token = -2;
    if (!EXACT) BLOCKED_DRAW_SUMMED(GET_W, V, u, sums, token);
    if (token == -2) EXACT_SCAN(GET_W, V, u, token);
    return token;
}

static int64_t CAT(draw_p, SUFFIX)(const void *p, int64_t V, double u, double *sums) {
    int64_t token = -2;
    if (!EXACT) BLOCKED_DRAW(GET_P, V, u, sums, token);
    if (token == -2) EXACT_SCAN(GET_P, V, u, token);
    return token;
}

/* A draw from p without the tokens marked in mask (target_only where a row stops), as draw_w on a copy of p with
 * them zeroed: one pass over p for the block sums, then the blocks holding a marked token summed again, masked,
 * from cache. */
#define GET_P_MASKED(j) (mask[j] ? (T)0 : (T)LOAD(p, j))
static int64_t CAT(draw_p_masked, SUFFIX)(const void *p, const uint8_t *mask, const int64_t *marked,
                                          int64_t num_marked, int64_t V, double u, double *sums) {
    int64_t token = -2;
    (void)marked, (void)num_marked, (void)sums;
#if !EXACT
    const int64_t blocks = (V + DRAW_BLOCK - 1) / DRAW_BLOCK;
    for (int64_t m = 0; m < blocks; m++) BLOCK_SUM(GET_P, m, V, sums[m]);
    for (int64_t t = 0; t < num_marked; t++) {
        const int64_t m = marked[t] / DRAW_BLOCK;
        BLOCK_SUM(GET_P_MASKED, m, V, sums[m]);
    }
    BLOCKED_DRAW_SUMMED(GET_P_MASKED, V, u, sums, token);
#endif
    if (token == -2) EXACT_SCAN(GET_P_MASKED, V, u, token);
    return token;
}
#undef GET_P_MASKED

/* sum(w) (left to right when EXACT) */
static T CAT(total, SUFFIX)(const T *w, int64_t V) {
    if (EXACT) {
        double total = 0.0;
        for (int64_t j = 0; j < V; j++) total += w[j];
        return (T)total;
    }
    double lane[WALK_LANES] = {0}, total = 0.0;
    int64_t j = 0;
    for (; j + WALK_LANES <= V; j += WALK_LANES)
        for (int k = 0; k < WALK_LANES; k++) lane[k] += w[j + k];
    for (; j < V; j++) lane[0] += w[j];
    for (int k = 0; k < WALK_LANES; k++) total += lane[k];
    return (T)total;
}

/* The residual after a rejection: w = (src / mass - q_k)_+ with src = p (the node's first rejection: w is not yet
 * written, and p / 1 is p) or w; returns its mass. q_k is the draft row q, or the point mass at x without a row;
 * for rsd after the first sibling (mask), q without the tried tokens divided by qmass. */
#define RESIDUAL_AT(j) (((p ? (T)LOAD(p, j) : w[j]) / mass) - Q_AT(j))
#if EXACT
static T CAT(residual, SUFFIX)(T *w, const void *p, T mass, const void *q, int64_t x, const uint8_t *mask, T qmass,
                               int64_t V, const int64_t *tried, int64_t num_tried, float *saved, double *sums) {
    (void)tried, (void)num_tried, (void)saved, (void)sums;
    double total = 0.0;
    for (int64_t j = 0; j < V; j++) {
        T q_j = q ? (T)LOAD(q, j) : (T)(j == x);
        if (mask) q_j = mask[j] ? (T)0 : q_j / qmass;
        T v = (p ? (T)LOAD(p, j) : w[j]) / mass - q_j;
        v = v > 0 ? v : 0;
        w[j] = v;
        total += v; /* left to right */
    }
    return (T)total;
}
#else
/* fp32 lanes per block of DRAW_BLOCK, blocks summed in double: a form the compiler vectorises (max for the clamp) */
#define RESIDUAL_LOOP(Q_EXPR)                                                                                        \
    for (int64_t start = 0; start < V; start += DRAW_BLOCK) {                                                        \
        int64_t stop = start + DRAW_BLOCK < V ? start + DRAW_BLOCK : V, j = start;                                   \
        float lane[WALK_LANES] = {0};                                                                                \
        if (p)                                                                                                       \
            for (; j + WALK_LANES <= stop; j += WALK_LANES)                                                          \
                for (int k = 0; k < WALK_LANES; k++) {                                                               \
                    float v = (float)LOAD(p, j + k) * inv_mass - (Q_EXPR(j + k));                                        \
                    v = v > 0.0f ? v : 0.0f;                                                                         \
                    w[j + k] = v;                                                                                    \
                    lane[k] += v;                                                                                    \
                }                                                                                                    \
        else                                                                                                         \
            for (; j + WALK_LANES <= stop; j += WALK_LANES)                                                          \
                for (int k = 0; k < WALK_LANES; k++) {                                                               \
                    float v = w[j + k] * inv_mass - (Q_EXPR(j + k));                                                     \
                    v = v > 0.0f ? v : 0.0f;                                                                         \
                    w[j + k] = v;                                                                                    \
                    lane[k] += v;                                                                                    \
                }                                                                                                    \
        for (; j < stop; j++) {                                                                                      \
            float v = (p ? (float)LOAD(p, j) : w[j]) * inv_mass - (Q_EXPR(j));                                           \
            v = v > 0.0f ? v : 0.0f;                                                                                 \
            w[j] = v;                                                                                                \
            lane[0] += v;                                                                                            \
        }                                                                                                            \
        double block_sum = 0.0;                                                                                      \
        for (int k = 0; k < WALK_LANES; k++) block_sum += lane[k];                                                   \
        sums[start / DRAW_BLOCK] = block_sum;                                                                        \
        total += block_sum;                                                                                          \
    }
#define Q_ROW(j) ((float)LOAD(q, j))
#define Q_SCALED(j) ((float)LOAD(q, j) * inv_qmass)
#define Q_POINT(j) (mask && mask[j] ? 0.0f : (float)((j) == x) / qmass)
static T CAT(residual, SUFFIX)(T *w, const void *p, T mass, const void *q, int64_t x, const uint8_t *mask, T qmass,
                               int64_t V, const int64_t *tried, int64_t num_tried, float *saved, double *sums) {
    double total = 0.0;
    const float inv_mass = 1.0f / mass, inv_qmass = 1.0f / qmass; /* fp32: multiplies (within an ulp of dividing) */
    if (q && !mask) {
        RESIDUAL_LOOP(Q_ROW)
    } else if (q) { /* q / qmass everywhere, then the tried tokens (q_k = 0 there) redone from their saved weights */
        for (int64_t t = 0; t < num_tried; t++) saved[t] = p ? (float)LOAD(p, tried[t]) : w[tried[t]];
        RESIDUAL_LOOP(Q_SCALED)
        for (int64_t t = 0; t < num_tried; t++) {
            float v = saved[t] * inv_mass;
            v = v > 0.0f ? v : 0.0f;
            total += (double)v - (double)w[tried[t]];
            sums[tried[t] / DRAW_BLOCK] += (double)v - (double)w[tried[t]];
            w[tried[t]] = v;
        }
    } else {
        RESIDUAL_LOOP(Q_POINT)
    }
    return (T)total;
}
#undef Q_ROW
#undef Q_SCALED
#undef Q_POINT
#undef RESIDUAL_LOOP
#endif
#undef RESIDUAL_AT

/* sum of q_k without the tried tokens (rsd): left to right when EXACT, else in fp32 lanes per block */
static T CAT(masked_total, SUFFIX)(const void *q, int64_t x, const uint8_t *mask, int64_t V, const int64_t *tried,
                                   int64_t num_tried) {
    (void)tried, (void)num_tried;
    double total = 0.0;
    if (EXACT || !q) {
        for (int64_t j = 0; j < V; j++)
            if (!mask[j]) total += q ? (double)(T)LOAD(q, j) : (double)(j == x);
        return (T)total;
    }
    for (int64_t start = 0; start < V; start += DRAW_BLOCK) { /* all of q, then less its tried entries */
        int64_t stop = start + DRAW_BLOCK < V ? start + DRAW_BLOCK : V, j = start;
        float lane[WALK_LANES] = {0};
        for (; j + WALK_LANES <= stop; j += WALK_LANES)
            for (int k = 0; k < WALK_LANES; k++) lane[k] += (float)LOAD(q, j + k);
        for (; j < stop; j++) lane[0] += (float)LOAD(q, j);
        for (int k = 0; k < WALK_LANES; k++) total += lane[k];
    }
    for (int64_t t = 0; t < num_tried; t++) total -= (float)LOAD(q, tried[t]);
    return (T)(total > 0 ? total : 0);
}

static void CAT(walk_row, SUFFIX)(const Walk *walk, int64_t b, Scratch *scratch) {
    const int64_t V = walk->vocab, N = walk->nodes, item = walk->item;
    const char *target = walk->target + b * (N + 1) * V * item;
    const char *draft = walk->draft ? walk->draft + b * N * V * item : NULL;
    const int64_t *tok = walk->tokens + b * N, *parents = walk->parents + b * N;
    const double *u = walk->uniforms + b * (N + 1);
    int64_t *first = scratch->first, *next = scratch->next, *depth_of = scratch->depth, max_depth = 0;
    /* children lists in sibling (index) order, and depths: parents come before their children */
    for (int64_t i = 0; i <= N; i++) first[i] = next[i] = -1;
    depth_of[0] = 0;
    for (int64_t i = N; i >= 1; i--)
        if (parents[i - 1] >= 0) next[i] = first[parents[i - 1]], first[parents[i - 1]] = i;
    for (int64_t i = 1; i <= N; i++)
        if (parents[i - 1] >= 0) {
            depth_of[i] = depth_of[parents[i - 1]] + 1;
            max_depth = depth_of[i] > max_depth ? depth_of[i] : max_depth;
        }
    T *w = scratch->w;
    int64_t used = 0, node = 0, reads = 0;
    for (int64_t depth = 0;; depth++) {
        const char *p = target + node * V * item;
        int64_t chosen = -1, token = -1;
        if (walk->rule == SAMPLE_MATCH) {
            token = CAT(draw_p, SUFFIX)(p, V, u[depth], scratch->sums);
            reads++;
            for (int64_t c = first[node]; c >= 0 && chosen < 0; c = next[c])
                if (tok[c - 1] == token) chosen = c;
        } else if (walk->rule == TARGET_ONLY) {
            T mass = 1;
            for (int64_t c = first[node]; c >= 0; c = next[c]) PREFETCH(p + tok[c - 1] * item); /* together */
            if (depth == 0 && b + 1 < walk->end) /* the next row's root tests, fetched during this row's pass */
                for (int64_t i = 0; i < N; i++)
                    if (parents[N + i] == 0) PREFETCH(target + (N + 1) * V * item + tok[N + i] * item);
            for (int64_t c = first[node]; c >= 0 && chosen < 0; c = next[c]) {
                int64_t x = tok[c - 1], duplicate = 0;
                for (int64_t e = first[node]; e != c; e = next[e]) duplicate |= tok[e - 1] == x;
                if (duplicate) continue; /* its token was already rejected */
                double uniform = u[used < N ? used : N];
                used++;
                T p_x = (T)LOAD(p, x), ratio = mass > 0 ? p_x / mass : (T)0;
                if (uniform < ratio)
                    chosen = c;
                else
                    mass -= p_x;
            }
            if (chosen < 0) { /* emit from p without the tried tokens */
                int64_t marked = 0;
                for (int64_t c = first[node]; c >= 0; c = next[c]) {
                    scratch->mask[tok[c - 1]] = 1;
                    scratch->tried[marked++] = tok[c - 1];
                }
                reads++;
                token = CAT(draw_p_masked, SUFFIX)(p, scratch->mask, scratch->tried, marked, V, u[N], scratch->sums);
                while (marked > 0) scratch->mask[scratch->tried[--marked]] = 0;
                if (token < 0) token = CAT(draw_p, SUFFIX)(p, V, u[N], scratch->sums);
            }
        } else { /* mss, rsd */
            T mass = 1;
            int from_p = 1, sums_valid = 0; /* w is p, not yet written; sums: w's block sums (fp32 residuals) */
            int64_t tried = 0;
            for (int64_t c = first[node], k = 0; c >= 0; c = next[c], k++) {
                int64_t x = tok[c - 1];
                const char *q = draft ? draft + (c - 1) * V * item : NULL;
                int masked = walk->rule == RSD && k > 0;
                T qmass = 1, q_x = q ? (T)LOAD(q, x) : (T)1;
                if (masked) {
                    qmass = CAT(masked_total, SUFFIX)(q, x, scratch->mask, V, scratch->tried, tried);
                    reads += q != NULL; /* the whole row, even if its child is accepted */
                    q_x = scratch->mask[x] ? (T)0 : q_x / qmass;
                }
                double uniform = u[used++];
                T r_x = (from_p ? (T)LOAD(p, x) : w[x]) / mass;
                if (uniform < r_x / q_x) {
                    chosen = c;
                    break;
                }
                reads += from_p + (q != NULL && !masked);
                mass = CAT(residual, SUFFIX)(w, from_p ? p : NULL, mass, q, x, masked ? scratch->mask : NULL, qmass, V,
                                             scratch->tried, tried, scratch->saved, scratch->sums);
                sums_valid = !EXACT && mass != 0;
                from_p = 0;
                if (mass == 0) { /* numerically empty: p, normalised */
                    for (int64_t j = 0; j < V; j++) w[j] = (T)LOAD(p, j);
                    mass = CAT(total, SUFFIX)(w, V);
                }
                if (walk->rule == RSD) {
                    scratch->mask[x] = 1;
                    scratch->tried[tried++] = x;
                }
            }
            while (tried > 0) scratch->mask[scratch->tried[--tried]] = 0;
            if (chosen < 0) {
                reads += from_p;
                token = from_p       ? CAT(draw_p, SUFFIX)(p, V, u[N], scratch->sums)
                        : sums_valid ? CAT(draw_w_summed, SUFFIX)(w, V, u[N], scratch->sums)
                                     : CAT(draw_w, SUFFIX)(w, V, u[N], scratch->sums);
                if (token < 0) token = CAT(draw_p, SUFFIX)(p, V, u[N], scratch->sums);
            }
        }
        if (chosen < 0) {
            walk->out_tokens[b * (N + 1) + depth] = token;
            break;
        }
        walk->out_tokens[b * (N + 1) + depth] = tok[chosen - 1];
        walk->out_nodes[b * N + depth] = chosen;
        node = chosen;
    }
    walk->rows_read[b] = reads;
    walk->max_depth[b] = max_depth;
}

