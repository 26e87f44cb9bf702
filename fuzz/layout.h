/* layout: turns a decoded record into a DLTensor whose memory really exists.
 *
 * Sizing uses check's dlc_extent_of only (no second copy of the arithmetic). Invariants of
 * a materialised tensor m (mode DLC_DATA_BUFFER):
 *   - every element byte lies in [data + byte_offset + lo, data + byte_offset + hi), and
 *     that whole range lies inside [buffer, buffer + buffer_size) (extent from check);
 *   - data = buffer + pad, pad = max(0, -lo - byte_offset), buffer_size = pad + byte_offset
 *     + hi (at least 1), at most the cap;
 *   - buffer byte i holds (uint8_t)(i * 131 + fill_seed);
 *   - a read-only record (versioned with READ_ONLY, FLG-02) gets its buffer on PROT_READ
 *     pages with a PROT_NONE page right after, so writes and overruns fault; otherwise the
 *     buffer comes from malloc, so ASan sees overruns exactly. Builds without ASan take
 *     buffers from a pool of two regions mapped once (layout.c, DLC_POOL): same placement
 *     and protection, no per-input mapping or mprotect, and a fill only for bytes the
 *     region does not already hold.
 * A record whose extent is invalid, or whose buffer would exceed the cap, gets data NULL or
 * a dangling pointer into a PROT_NONE reservation (DLC_REC_DANGLING): what a consumer must
 * refuse. shape and strides arrays are malloc'd with exactly max(ndim, 1) entries, so a
 * reader that walks past ndim is caught by ASan. */
#ifndef DLCONFORM_FUZZ_LAYOUT_H
#define DLCONFORM_FUZZ_LAYOUT_H

#include "check.h"
#include "record.h"

#define DLC_REC_BUFFER_CAP ((uint64_t)1 << 20) /* 1 MiB */

typedef enum {
  DLC_DATA_BUFFER = 0, /* a real buffer covers the extent */
  DLC_DATA_NULL,       /* data NULL (asked for, or unsizable/over cap) */
  DLC_DATA_DANGLING,   /* data points into PROT_NONE memory */
} dlc_data_mode;

typedef struct {
  dlc_extent ext;     /* dlc_extent_of of the record's metadata */
  dlc_data_mode mode;
  int readonly;       /* versioned record with READ_ONLY set */
  uint64_t pad;       /* data = buffer + pad (mode BUFFER) */
  uint64_t size;      /* buffer bytes (mode BUFFER) */
  const char *why;    /* mode != BUFFER: "asked", "extent" or "cap" */
} dlc_plan;

typedef struct {
  DLTensor t;         /* the tensor to export; points into the members below */
  int64_t *shape;     /* owned, or NULL */
  int64_t *strides;   /* owned, or NULL */
  uint8_t *buffer;    /* owned buffer base, or NULL */
  void *map_base;     /* mmap base when the buffer is guarded, else NULL */
  size_t map_size;
  int pooled;         /* buffer comes from the throughput builds' pool (layout.c, DLC_POOL) */
  dlc_plan plan;
} dlc_tensor_mem;

/* Plans the memory for r under cap bytes. Never fails. */
void dlc_rec_plan(const dlc_record *r, uint64_t cap, dlc_plan *out);

/* Allocates and fills. Returns 0, or -1 when an allocation failed (m is then freed). */
int dlc_rec_materialize(const dlc_record *r, uint64_t cap, dlc_tensor_mem *m);

/* The same, with the plan dlc_rec_plan(r, cap, plan) already made (no second planning). */
int dlc_rec_materialize_plan(const dlc_record *r, const dlc_plan *plan, dlc_tensor_mem *m);

/* Frees everything materialize allocated; safe on a zeroed or already freed m. */
void dlc_tensor_mem_free(dlc_tensor_mem *m);

/* A pointer into a process-wide PROT_NONE reservation (never NULL, never readable). */
void *dlc_dangling_pointer(void);

/* Sets r's strides to check's compact row-major strides for its shape (0), or leaves them
 * and returns -1 when the shape is invalid or the strides overflow. */
int dlc_rec_row_major(dlc_record *r);

#endif /* DLCONFORM_FUZZ_LAYOUT_H */
