/* mutate: structure-aware mutation of fuzz records, engine-independent.
 * The engine entry points (libFuzzer, AFL++) are in mutator.c. */
#ifndef DLCONFORM_FUZZ_MUTATE_H
#define DLCONFORM_FUZZ_MUTATE_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"

/* splitmix64 state; any value is a valid seed. */
typedef struct {
  uint64_t s;
} dlc_rng;

uint64_t dlc_rng_next(dlc_rng *g);

/* Applies 1..4 field mutations to r (interesting values, valid-tensor regeneration,
 * stride games, flag and kind bits, keyword arguments). Never fails. */
void dlc_mutate_record(dlc_record *r, dlc_rng *g);

/* Decodes data[0..size), mutates, re-encodes into data (capacity max_size) and returns the
 * new size (at most max_size). */
size_t dlc_mutate_bytes(uint8_t *data, size_t size, size_t max_size, dlc_rng *g);

#endif /* DLCONFORM_FUZZ_MUTATE_H */
