/* The best tag sequence of each chain of a batch (Viterbi), in C: the compiled twin of the numpy
 * recursion in parser/structs/chain/crf.py (LinearChainCRF.argmax), which stays the reference:
 * parser/structs/decoding/native.py builds and loads this file, tests/structs/chain compare the
 * two tag for tag. One function per float type, so that every sum is the one numpy and torch
 * compute in the scores' own precision; a maximum is the first one, as numpy's and torch's are.
 *
 * scores: [batch][positions][states][states] (position, previous tag, tag; position 0 reads row
 * 0), finite where they count; lengths: positions per chain (1..positions). tags: [batch]
 * [positions], written for every position (0 on padding). Returns 0, NATIVE_BAD_INPUT (a length
 * out of range, checked before anything is written) or NATIVE_NO_MEMORY.
 */
#include <stdint.h>
#include <stdlib.h>

enum { NATIVE_NO_MEMORY = -1, NATIVE_BAD_INPUT = -2 };

#define VITERBI(NAME, REAL)                                                                      \
    int NAME(const REAL *scores, const int64_t *lengths, int batch, int positions, int states,   \
             int64_t *tags) {                                                                    \
        if (batch < 0 || states < 1 || (batch > 0 && positions < 1)) return NATIVE_BAD_INPUT;    \
        if (batch == 0) return 0;                                                                \
        for (int b = 0; b < batch; b++)                                                          \
            if (lengths[b] < 1 || lengths[b] > positions) return NATIVE_BAD_INPUT;               \
        REAL *best = malloc(sizeof(REAL) * 2 * states);                                          \
        int64_t *back = malloc(sizeof(int64_t) * (size_t)positions * states);                    \
        int status = best == NULL || back == NULL ? NATIVE_NO_MEMORY : 0;                        \
        for (int b = 0; b < batch && !status; b++) {                                             \
            const REAL *s = scores + (int64_t)b * positions * states * states;                   \
            int64_t n = lengths[b], *out = tags + (int64_t)b * positions;                        \
            REAL *now = best, *next = best + states;                                             \
            for (int c = 0; c < states; c++) now[c] = s[c];                                      \
            for (int64_t i = 1; i < n; i++) {                                                    \
                const REAL *step = s + i * states * states;                                      \
                for (int c = 0; c < states; c++) {                                               \
                    int arg = 0;                                                                 \
                    REAL top = now[0] + step[c];                                                 \
                    for (int p = 1; p < states; p++) {                                           \
                        REAL value = now[p] + step[p * states + c];                              \
                        if (value > top) { top = value; arg = p; }                               \
                    }                                                                            \
                    next[c] = top;                                                               \
                    back[i * states + c] = arg;                                                  \
                }                                                                                \
                REAL *swap = now; now = next; next = swap;                                       \
            }                                                                                    \
            int64_t last = 0;                                                                    \
            for (int c = 1; c < states; c++) if (now[c] > now[last]) last = c;                   \
            for (int64_t i = n; i < positions; i++) out[i] = 0;                                  \
            out[n - 1] = last;                                                                   \
            for (int64_t i = n - 1; i > 0; i--) out[i - 1] = back[i * states + out[i]];          \
        }                                                                                        \
        free(best);                                                                              \
        free(back);                                                                              \
        return status;                                                                           \
    }

VITERBI(viterbi_float, float)
VITERBI(viterbi_double, double)
