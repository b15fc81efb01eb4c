/* Projective attachment of punctuation, in C: the compiled twin of
 * parser/structs/decoding/punct_attachment.py (the reference; its docstring states the two
 * conditions), built and loaded by parser/structs/decoding/native.py and compared mark for mark
 * in tests/structs/test_punct_attachment.py. O(marks * n^2) per sentence where the torch version
 * runs a dozen [B, n, n] tensor operations per mark.
 *
 * heads: [batch][size] int64 decoded trees (a word's head in 0..size - 1); lengths: int64 words
 * per sentence (0..size - 1); marked: [batch][size] bytes; scores: [batch][size][size] doubles
 * (row = dependent, column = head). out: [batch][size] the new heads (a copy of heads where
 * nothing changes); stuck: [batch] bytes, 1 where some mark had no allowed head (it keeps its
 * decoded head). Returns 0, NATIVE_BAD_INPUT (a length or a word's head out of range, checked
 * before anything is written) or NATIVE_NO_MEMORY.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { NATIVE_NO_MEMORY = -1, NATIVE_BAD_INPUT = -2 };

static void attach_one(const int64_t *heads, int n, const uint8_t *marked_in, const double *scores,
                       int size, int64_t *tree, uint8_t *stuck, uint8_t *marked, uint8_t *content,
                       uint8_t *placed, uint8_t *below, int *over) {
    memcpy(tree, heads, sizeof(int64_t) * size);
    *stuck = 0;
    int any_content = 0, root_word = 0;
    for (int x = 0; x < size; x++) {
        int word = x >= 1 && x <= n;
        marked[x] = word && marked_in[x];
        content[x] = word && !marked[x];
        any_content |= content[x];
        if (word && heads[x] == 0) root_word = x; /* the last one, as the reference's amax */
    }
    if (marked[root_word] || !any_content) return; /* left as decoded */
    /* the other words' tree: a word whose head is a mark climbs to its nearest unmarked ancestor */
    for (int x = 1; x <= n; x++) {
        int64_t h = heads[x];
        for (int steps = 0; h > 0 && h < size && marked[h] && steps < size; steps++) h = heads[h];
        tree[x] = h;
    }
    /* below[x * size + y]: x is y or descends from y through content words */
    memset(below, 0, (size_t)size * size);
    for (int x = 0; x < size; x++) {
        below[x * size + x] = 1;
        if (!content[x]) continue;
        int64_t y = tree[x];
        for (int steps = 0; steps < size && y >= 0 && y < size; steps++) {
            below[x * size + y] = 1;
            if (!content[y]) break;
            y = tree[y];
        }
    }
    memcpy(placed, content, size);
    for (int p = 1; p <= n; p++) { /* marks left to right */
        if (!marked[p]) continue;
        int n_over = 0; /* placed arcs over p */
        for (int x = 0; x < size; x++) {
            if (!placed[x]) continue;
            int64_t lo = tree[x] < x ? tree[x] : x, hi = tree[x] > x ? tree[x] : x;
            if (lo < p && p < hi) over[n_over++] = x;
        }
        int best = 0, found = 0;
        double top = -INFINITY;
        int first = 1;
        for (int h = 0; h < size; h++) {
            int allowed = content[h];
            if (allowed) { /* 1. placed words strictly between h and p descend from h */
                int lo = h < p ? h : p, hi = h > p ? h : p;
                for (int x = lo + 1; x < hi && allowed; x++)
                    if (placed[x] && !below[x * size + h]) allowed = 0;
            }
            for (int i = 0; i < n_over && allowed; i++) { /* 2. h descends from the arcs' heads */
                int64_t head = tree[over[i]];
                if (head != 0 && !below[h * size + (head < 0 ? 0 : head)]) allowed = 0;
            }
            double value = allowed ? scores[(size_t)p * size + h] : -INFINITY;
            found |= allowed;
            if (first || value > top) { top = value; best = h; first = 0; } /* argmax: first max */
        }
        int64_t head = found ? best : heads[p];
        if (!found) *stuck = 1;
        tree[p] = head;
        placed[p] = 1;
        for (int y = 0; y < size; y++) below[p * size + y] = below[head * size + y] || y == p;
    }
}

int punct_batch(const int64_t *heads, const int64_t *lengths, const uint8_t *marked,
                const double *scores, int batch, int size, int64_t *out, uint8_t *stuck) {
    if (batch < 0 || size < 1) return NATIVE_BAD_INPUT;
    for (int b = 0; b < batch; b++) {
        if (lengths[b] < 0 || lengths[b] > size - 1) return NATIVE_BAD_INPUT;
        for (int64_t x = 1; x <= lengths[b]; x++) {
            int64_t h = heads[(size_t)b * size + x];
            if (h < 0 || h > size - 1) return NATIVE_BAD_INPUT;
        }
    }
    uint8_t *work = malloc((size_t)size * 3 + (size_t)size * size);
    int *over = malloc(sizeof(int) * size);
    if (!work || !over) { free(work); free(over); return NATIVE_NO_MEMORY; }
    for (int b = 0; b < batch; b++)
        attach_one(heads + (size_t)b * size, (int)lengths[b], marked + (size_t)b * size,
                   scores + (size_t)b * size * size, size, out + (size_t)b * size, stuck + b,
                   work, work + size, work + 2 * size, work + 3 * size, over);
    free(work);
    free(over);
    return 0;
}
