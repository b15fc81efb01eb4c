/* Maximum spanning arborescence of each sentence of a batch, in C: Chu-Liu/Edmonds by recursive
 * cycle contraction (O(n^3) per sentence), the root constraint by the reweighting of Stanojevic &
 * Cohen (2021). The compiled twin of parser/structs/decoding/mst.py, which stays the reference:
 * parser/structs/decoding/native.py builds and loads this file, tests/structs/decoding compare
 * the two tree for tree.
 *
 * scores: [batch][size][size] doubles, row = dependent, column = head, index 0 = ROOT, -inf a
 * forbidden arc; lengths: int64 words per sentence (0..size - 1, checked before anything is
 * written). heads: [batch][size] int64, written for words 1..length (0 elsewhere). Returns the
 * number of sentences without a finite tree (their heads are left 0; the caller raises), or
 * NATIVE_BAD_INPUT (a length out of range) or NATIVE_NO_MEMORY (nothing is leaked).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { NATIVE_NO_MEMORY = -1, NATIVE_BAD_INPUT = -2 };

/* w: m x m (row dependent, column head), node 0 the root; head: m entries out. 0 on success,
 * 1 without a finite tree, NATIVE_NO_MEMORY. */
static int cle(const double *w, int m, int *head) {
    int *best = malloc(sizeof(int) * m), *mark = malloc(sizeof(int) * m);
    int *in_cycle = malloc(sizeof(int) * m);
    int status = 0;
    if (!best || !mark || !in_cycle) { status = NATIVE_NO_MEMORY; goto done; }
    for (int d = 1; d < m; d++) {
        int argmax = -1;
        double top = -INFINITY;
        for (int h = 0; h < m; h++)
            if (h != d && w[d * m + h] > top) { top = w[d * m + h]; argmax = h; }
        if (argmax < 0) { status = 1; goto done; }
        best[d] = argmax;
    }
    best[0] = -1;
    /* a cycle of the best-head graph: walk up from each node, marking by the walk's start */
    int cycle_node = -1;
    for (int i = 0; i < m; i++) mark[i] = -1;
    for (int start = 1; start < m && cycle_node < 0; start++) {
        int v = start;
        while (v > 0 && mark[v] < 0) { mark[v] = start; v = best[v]; }
        if (v > 0 && mark[v] == start) cycle_node = v;
    }
    if (cycle_node < 0) {
        memcpy(head, best, sizeof(int) * m);
        head[0] = 0;
        goto done;
    }
    memset(in_cycle, 0, sizeof(int) * m);
    int v = cycle_node;
    do { in_cycle[v] = 1; v = best[v]; } while (v != cycle_node);
    /* contract: the nodes outside the cycle keep their order, the cycle becomes the last node */
    int k = 0;
    for (int i = 0; i < m; i++) k += !in_cycle[i];
    int c = k, n2 = k + 1;
    int *old_of = malloc(sizeof(int) * m);
    double *w2 = malloc(sizeof(double) * n2 * n2);
    int *enter_from = malloc(sizeof(int) * n2);  /* cycle dependent chosen per outside head */
    int *leave_to = malloc(sizeof(int) * n2);    /* cycle head chosen per outside dependent */
    int *head2 = malloc(sizeof(int) * n2);
    if (!old_of || !w2 || !enter_from || !leave_to || !head2) { status = NATIVE_NO_MEMORY; goto contracted; }
    k = 0;
    for (int i = 0; i < m; i++) if (!in_cycle[i]) old_of[k++] = i;
    for (int i = 0; i < n2 * n2; i++) w2[i] = -INFINITY;
    for (int a = 0; a < k; a++) {
        int d = old_of[a];
        for (int b = 0; b < k; b++) w2[a * n2 + b] = w[d * m + old_of[b]];
        double top = -INFINITY;
        int arg = -1;
        for (int h = 0; h < m; h++)
            if (in_cycle[h] && w[d * m + h] > top) { top = w[d * m + h]; arg = h; }
        w2[a * n2 + c] = top;
        leave_to[a] = arg;
    }
    for (int b = 0; b < k; b++) {
        int h = old_of[b];
        double top = -INFINITY;
        int arg = -1;
        for (int d = 0; d < m; d++) {
            if (!in_cycle[d]) continue;
            double gain = w[d * m + h] - w[d * m + best[d]];
            if (gain > top) { top = gain; arg = d; }
        }
        w2[c * n2 + b] = top;
        enter_from[b] = arg;
    }
    status = cle(w2, n2, head2);
    if (status == 0) {
        for (int a = 1; a < k; a++) {
            int d = old_of[a];
            head[d] = head2[a] == c ? leave_to[a] : old_of[head2[a]];
        }
        for (int i = 0; i < m; i++) if (in_cycle[i]) head[i] = best[i];
        int entry = head2[c];
        if (entry < 0 || entry >= k || enter_from[entry] < 0 || !isfinite(w2[c * n2 + entry]))
            status = 1;
        else
            head[enter_from[entry]] = old_of[entry];
        head[0] = 0;
    }
contracted:
    free(old_of); free(w2); free(enter_from); free(leave_to); free(head2);
done:
    free(best); free(mark); free(in_cycle);
    return status;
}

static int root_children(const int *head, int m) {
    int count = 0;
    for (int d = 1; d < m; d++) count += head[d] == 0;
    return count;
}

int mst_batch(const double *scores, const int64_t *lengths, int batch, int size, int single_root,
              int64_t *heads) {
    if (batch < 0 || size < 1) return NATIVE_BAD_INPUT;
    for (int b = 0; b < batch; b++)
        if (lengths[b] < 0 || lengths[b] > size - 1) return NATIVE_BAD_INPUT;
    int failed = 0;
    double *w = malloc(sizeof(double) * size * size);
    int *head = malloc(sizeof(int) * size);
    if (!w || !head) { free(w); free(head); return NATIVE_NO_MEMORY; }
    for (int b = 0; b < batch; b++) {
        const double *s = scores + (size_t)b * size * size;
        int64_t *out = heads + (size_t)b * size;
        int m = (int)lengths[b] + 1;
        for (int i = 0; i < size; i++) out[i] = 0;
        if (m < 2) continue;
        double magnitude = 0.0;
        for (int d = 0; d < m; d++)
            for (int h = 0; h < m; h++) {
                double x = d == 0 || d == h ? -INFINITY : s[d * size + h];
                w[d * m + h] = x;
                if (isfinite(x) && fabs(x) > magnitude) magnitude = fabs(x);
            }
        /* A power of two bringing the largest |score| into [0.5, 1), as mst.py's _unit_scale:
         * exact, and it keeps the root penalty finite and resolvable at extreme scales. */
        int exponent;
        frexp(magnitude, &exponent);
        double low = INFINITY, high = -INFINITY;
        for (int i = 0; i < m * m; i++) {
            w[i] = ldexp(w[i], -exponent);
            if (isfinite(w[i])) { if (w[i] < low) low = w[i]; if (w[i] > high) high = w[i]; }
        }
        int status = cle(w, m, head);
        if (status == 0 && single_root && root_children(head, m) > 1) {
            /* Every tree with one root child then beats every tree with more (Stanojevic & Cohen) */
            double penalty = (high - low) * m + 1.0;
            for (int d = 1; d < m; d++) w[d * m] -= penalty;
            status = cle(w, m, head);
        }
        if (status == NATIVE_NO_MEMORY) { failed = NATIVE_NO_MEMORY; break; }
        if (status != 0) { failed++; continue; }
        for (int d = 1; d < m; d++) out[d] = head[d];
    }
    free(w); free(head);
    return failed;
}
