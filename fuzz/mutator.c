/* mutator: engine entry points around mutate.c.
 *   -DDLC_ENGINE_LIBFUZZER: LLVMFuzzerCustomMutator, linked into libFuzzer targets. One call
 *     in four falls back to libFuzzer's byte-level LLVMFuzzerMutate, so bytes the record
 *     ignores still change and the dictionary is used.
 *   -DDLC_ENGINE_AFL: the AFL++ custom mutator API (afl_custom_init/fuzz/deinit), built as a
 *     shared object for AFL_CUSTOM_MUTATOR_LIBRARY. AFL++'s own havoc stays on unless
 *     AFL_CUSTOM_MUTATOR_ONLY is set. */
#include <stdlib.h>
#include <string.h>

#include "mutate.h"

#if defined(DLC_ENGINE_LIBFUZZER)

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
  dlc_rng g = {seed * 0x9E3779B97F4A7C15ull + 1};
  if (dlc_rng_next(&g) % 4 == 0) return LLVMFuzzerMutate(data, size, max_size);
  return dlc_mutate_bytes(data, size, max_size, &g);
}

#elif defined(DLC_ENGINE_AFL)

typedef struct {
  dlc_rng g;
  uint8_t *out;
  size_t cap;
} dlc_afl_state;

void *afl_custom_init(void *afl, unsigned int seed);
size_t afl_custom_fuzz(void *data, uint8_t *buf, size_t buf_size, uint8_t **out_buf,
                       uint8_t *add_buf, size_t add_buf_size, size_t max_size);
void afl_custom_deinit(void *data);

void *afl_custom_init(void *afl, unsigned int seed) {
  (void)afl;
  dlc_afl_state *st = calloc(1, sizeof *st);
  if (st == NULL) return NULL;
  st->g.s = seed;
  st->cap = DLC_REC_MAX_SIZE;
  st->out = malloc(st->cap);
  if (st->out == NULL) {
    free(st);
    return NULL;
  }
  return st;
}

/* Invariant: *out_buf points at st->out, which AFL++ reads until the next call. */
size_t afl_custom_fuzz(void *data, uint8_t *buf, size_t buf_size, uint8_t **out_buf,
                       uint8_t *add_buf, size_t add_buf_size, size_t max_size) {
  dlc_afl_state *st = data;
  (void)add_buf;
  (void)add_buf_size;
  size_t n = buf_size < st->cap ? buf_size : st->cap;
  memcpy(st->out, buf, n);
  size_t limit = max_size < st->cap ? max_size : st->cap;
  *out_buf = st->out;
  return dlc_mutate_bytes(st->out, n, limit, &st->g);
}

void afl_custom_deinit(void *data) {
  dlc_afl_state *st = data;
  if (st == NULL) return;
  free(st->out);
  free(st);
}

#else
#error "define DLC_ENGINE_LIBFUZZER or DLC_ENGINE_AFL"
#endif
