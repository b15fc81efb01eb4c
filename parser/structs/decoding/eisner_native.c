/* Best projective tree of each sentence of a batch, in C: Eisner's (1996) O(n^3) chart, the
 * compiled twin of parser/structs/projective/eisner.py, which stays the reference: the same sums
 * in the same order and ties to the lowest split point and the lowest root word, so the same
 * trees (tests/structs/decoding compare the two tree for tree). Built and loaded with the maximum
 * spanning tree decoder by parser/structs/decoding/native.py.
 *
 * scores: [batch][size][size] doubles, row = dependent, column = head, index 0 = ROOT, -inf a
 * forbidden arc; lengths: int64 words per sentence (0..size - 1, checked before anything is
 * written). heads: [batch][size] int64, written for words 1..length (0 elsewhere). Single root:
 * ROOT heads exactly one word. Returns the number of sentences without a projective tree of
 * finite score (their heads are left 0; the caller raises), or NATIVE_BAD_INPUT (a length out of
 * range) or NATIVE_NO_MEMORY (nothing is leaked).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

enum { LEFT = 0, RIGHT = 1 };
enum { NATIVE_NO_MEMORY = -1, NATIVE_BAD_INPUT = -2 };

/* Tables over spans [i, j] of m = n + 1 positions, side last: index ((i * m) + j) * 2 + side. */
#define AT(i, j, side) ((((i) * m) + (j)) * 2 + (side))

/* One sentence: w is [size][size] (row dependent), n its words; head gets n + 1 entries.
 * 0, 1 without a finite tree, or NATIVE_NO_MEMORY. */
static int eisner_one(const double *w, int size, int n, int single_root, int64_t *head) {
    int m = n + 1;
    double *complete = malloc(sizeof(double) * m * m * 2);
    double *incomplete = malloc(sizeof(double) * m * m * 2);
    int *split_complete = malloc(sizeof(int) * m * m * 2);
    int *split_incomplete = malloc(sizeof(int) * m * m * 2);
    /* backtracking: (i, j, side, complete) entries; spans nest at most 2m + 2 deep */
    int *stack = malloc(sizeof(int) * 4 * (8 * m + 8));
    int status = 0;
    if (!complete || !incomplete || !split_complete || !split_incomplete || !stack) {
        status = NATIVE_NO_MEMORY;
        goto done;
    }
#define ARC(h, d) (((d) == 0 || (h) == (d) || (single_root && (h) == 0)) ? -INFINITY : w[(d) * size + (h)])
    for (int i = 0; i < m; i++) {
        complete[AT(i, i, LEFT)] = complete[AT(i, i, RIGHT)] = 0.0;
        incomplete[AT(i, i, LEFT)] = incomplete[AT(i, i, RIGHT)] = -INFINITY;
    }
    for (int width = 1; width < m; width++) {
        for (int i = 0; i + width < m; i++) {
            int j = i + width;
            /* incomplete: [i, i + k] headed by i and [i + k + 1, j] headed by j, then the arc */
            double between = -INFINITY;
            int where = 0;
            for (int k = 0; k < width; k++) {
                double value = complete[AT(i, i + k, RIGHT)] + complete[AT(i + k + 1, j, LEFT)];
                if (k == 0 || value > between) { between = value; where = k; }
            }
            incomplete[AT(i, j, RIGHT)] = between + ARC(i, j);
            incomplete[AT(i, j, LEFT)] = between + ARC(j, i);
            split_incomplete[AT(i, j, RIGHT)] = split_incomplete[AT(i, j, LEFT)] = i + where;
            /* complete headed by j: [i, i + k] complete + [i + k, j] incomplete, k in [0, width) */
            double best = -INFINITY;
            where = 0;
            for (int k = 0; k < width; k++) {
                double value = complete[AT(i, i + k, LEFT)] + incomplete[AT(i + k, j, LEFT)];
                if (k == 0 || value > best) { best = value; where = k; }
            }
            complete[AT(i, j, LEFT)] = best;
            split_complete[AT(i, j, LEFT)] = i + where;
            /* complete headed by i: [i, i + k] incomplete + [i + k, j] complete, k in (0, width] */
            best = -INFINITY;
            where = 1;
            for (int k = 1; k <= width; k++) {
                double value = incomplete[AT(i, i + k, RIGHT)] + complete[AT(i + k, j, RIGHT)];
                if (k == 1 || value > best) { best = value; where = k; }
            }
            complete[AT(i, j, RIGHT)] = best;
            split_complete[AT(i, j, RIGHT)] = i + where;
        }
    }
    int top = 0;
    for (int i = 0; i < m; i++) head[i] = 0;
    if (single_root) {
        double best = -INFINITY;
        int root = 1;
        for (int r = 1; r <= n; r++) {
            double total = complete[AT(1, r, LEFT)] + complete[AT(r, n, RIGHT)] + w[r * size];
            if (r == 1 || total > best) { best = total; root = r; }
        }
        if (!isfinite(best)) { status = 1; goto done; }
        head[root] = 0;
        if (root > 1) { stack[top++] = 1; stack[top++] = root; stack[top++] = LEFT; stack[top++] = 1; }
        stack[top++] = root; stack[top++] = n; stack[top++] = RIGHT; stack[top++] = 1;
    } else {
        if (!isfinite(complete[AT(0, n, RIGHT)])) { status = 1; goto done; }
        stack[top++] = 0; stack[top++] = n; stack[top++] = RIGHT; stack[top++] = 1;
    }
    while (top > 0) {
        int is_complete = stack[--top], side = stack[--top], j = stack[--top], i = stack[--top];
        if (i == j) continue;
        if (is_complete) {
            int r = split_complete[AT(i, j, side)];
            if (side == LEFT) {
                stack[top++] = i; stack[top++] = r; stack[top++] = LEFT; stack[top++] = 1;
                stack[top++] = r; stack[top++] = j; stack[top++] = LEFT; stack[top++] = 0;
            } else {
                stack[top++] = i; stack[top++] = r; stack[top++] = RIGHT; stack[top++] = 0;
                stack[top++] = r; stack[top++] = j; stack[top++] = RIGHT; stack[top++] = 1;
            }
        } else {
            int r = split_incomplete[AT(i, j, side)];
            if (side == LEFT) head[i] = j; else head[j] = i;
            stack[top++] = i; stack[top++] = r; stack[top++] = RIGHT; stack[top++] = 1;
            stack[top++] = r + 1; stack[top++] = j; stack[top++] = LEFT; stack[top++] = 1;
        }
    }
done:
#undef ARC
    free(complete); free(incomplete); free(split_complete); free(split_incomplete); free(stack);
    return status;
}

int eisner_batch(const double *scores, const int64_t *lengths, int batch, int size,
                 int single_root, int64_t *heads) {
    if (batch < 0 || size < 1) return NATIVE_BAD_INPUT;
    for (int b = 0; b < batch; b++)
        if (lengths[b] < 0 || lengths[b] > size - 1) return NATIVE_BAD_INPUT;
    int failed = 0;
    for (int b = 0; b < batch; b++) {
        int64_t *head = heads + (size_t)b * size;
        for (int i = 0; i < size; i++) head[i] = 0;
        int n = (int)lengths[b];
        if (n == 0) continue;
        int status = eisner_one(scores + (size_t)b * size * size, size, n, single_root, head);
        if (status == NATIVE_NO_MEMORY) return NATIVE_NO_MEMORY;
        if (status) {
            for (int i = 0; i < size; i++) head[i] = 0;
            failed++;
        }
    }
    return failed;
}
