/* layout: sizing a record with check's extent arithmetic and materialising its memory.
 * Invariants are stated in layout.h. */
#include "layout.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define DLC_DANGLING_RESERVE ((size_t)4 << 20)

/* Buffer pool (throughput builds only). Under ASan every buffer is its own exact-size
 * allocation (or mapping), so an overrun or a use after the deleter is reported to the byte.
 * Without ASan (T.fast, T.afl) nothing could see that anyway, so buffers come from two
 * process-wide regions mapped once: a writable one, and a read-only one followed by a
 * PROT_NONE guard page (writes and overruns still fault). A region is refilled only when
 * the (size, seed) it holds differs, so the per-input mmap/munmap, page faults and 1 MiB
 * fills of the exact-size scheme go away; a consumer that wrote into a writable export
 * may leave its bytes for a later input with the same (size, seed). Pool buffers are never
 * freed; dlc_tensor_mem_free only forgets them. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DLC_POOL 0
#endif
#endif
#if !defined(DLC_POOL) && defined(__SANITIZE_ADDRESS__)
#define DLC_POOL 0
#endif
#ifndef DLC_POOL
#define DLC_POOL 1
#endif

/* The record's metadata as a DLTensor without data (shape/strides point into r). */
static DLTensor rec_view(const dlc_record *r) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.device.device_type = (DLDeviceType)r->device_type;
  t.device.device_id = r->device_id;
  t.ndim = r->ndim;
  t.dtype.code = r->code;
  t.dtype.bits = r->bits;
  t.dtype.lanes = r->lanes;
  t.shape = (r->kind & DLC_REC_SHAPE_NULL) ? NULL : (int64_t *)r->shape;
  t.strides = (r->kind & DLC_REC_STRIDES_NULL) ? NULL : (int64_t *)r->strides;
  t.byte_offset = r->byte_offset;
  return t;
}

void dlc_rec_plan(const dlc_record *r, uint64_t cap, dlc_plan *out) {
  memset(out, 0, sizeof *out);
  DLTensor t = rec_view(r);
  out->ext = dlc_extent_of(&t);
  out->readonly = (r->kind & DLC_REC_VERSIONED) && (r->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
  dlc_data_mode unsized = (r->kind & DLC_REC_DANGLING) ? DLC_DATA_DANGLING : DLC_DATA_NULL;
  if (r->kind & DLC_REC_DATA_NULL) {
    out->mode = DLC_DATA_NULL;
    out->why = "asked";
    return;
  }
  if (out->ext.status != DLC_EXTENT_OK) {
    out->mode = unsized;
    out->why = "extent";
    return;
  }
  /* lo <= 0 < hi, or lo == hi == 0 for zero-size (check.h); all terms below are >= 0. */
  unsigned __int128 neg_lo = (unsigned __int128)(-(__int128)out->ext.lo);
  unsigned __int128 off = r->byte_offset;
  unsigned __int128 pad = neg_lo > off ? neg_lo - off : 0;
  unsigned __int128 size = pad + off + (unsigned __int128)out->ext.hi;
  if (size == 0) size = 1;
  if (size > cap) {
    out->mode = unsized;
    out->why = "cap";
    return;
  }
  out->mode = DLC_DATA_BUFFER;
  out->pad = (uint64_t)pad;
  out->size = (uint64_t)size;
}

static void *dangling_base;

void *dlc_dangling_pointer(void) {
  if (dangling_base == NULL) {
    void *p = mmap(NULL, DLC_DANGLING_RESERVE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) abort();
    dangling_base = p;
  }
  return (uint8_t *)dangling_base + DLC_DANGLING_RESERVE / 2;
}

static void fill(uint8_t *buf, uint64_t size, uint8_t seed) {
  for (uint64_t i = 0; i < size; ++i) buf[i] = (uint8_t)(i * 131u + seed);
}

/* Read-only buffer: [map_base, +rounded) PROT_READ, then one PROT_NONE guard page. The
 * buffer ends within 63 bytes of the guard (64-byte aligned start). */
static int alloc_guarded(dlc_tensor_mem *m, uint64_t size, uint8_t seed) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t aligned = ((size_t)size + 63u) & ~(size_t)63u;
  size_t rounded = (aligned + page - 1) / page * page;
  uint8_t *base = mmap(NULL, rounded + page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return -1;
  m->map_base = base;
  m->map_size = rounded + page;
  m->buffer = base + (rounded - aligned);
  fill(m->buffer, size, seed);
  if (mprotect(base, rounded, PROT_READ) != 0 || mprotect(base + rounded, page, PROT_NONE) != 0)
    return -1;
  return 0;
}

#if DLC_POOL
typedef struct {
  uint8_t *base;   /* mapping: [base, base + span) data, then (read-only pool) a guard page */
  size_t span;
  uint64_t size;   /* the buffer the region holds now, at its end: (size, seed) */
  int seed;        /* -1: nothing filled yet */
} dlc_pool;

static dlc_pool pools[2]; /* [0] writable, [1] read-only */

/* A buffer of size bytes holding the fill pattern, ending within 63 bytes of the region's
 * end (as alloc_guarded does); NULL when the region cannot be set up. */
static uint8_t *pool_buffer(int readonly, uint64_t size, uint8_t seed) {
  dlc_pool *p = &pools[readonly];
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (p->base == NULL) {
    p->span = ((size_t)DLC_REC_BUFFER_CAP + 64 + page - 1) / page * page;
    void *b = mmap(NULL, p->span + page, readonly ? PROT_READ : PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b == MAP_FAILED) return NULL;
    if (mprotect((uint8_t *)b + p->span, page, PROT_NONE) != 0) return NULL;
    p->base = b;
    p->seed = -1;
  }
  size_t aligned = ((size_t)size + 63u) & ~(size_t)63u;
  uint8_t *buf = p->base + (p->span - aligned);
  if (p->seed != seed || p->size != size) {
    /* only the pages under the buffer change protection (mprotect of the whole 1 MiB span
     * cost a third of the consumer target's time) */
    uint8_t *lo = p->base + ((size_t)(buf - p->base) / page) * page;
    size_t len = (size_t)(p->base + p->span - lo);
    if (readonly && mprotect(lo, len, PROT_READ | PROT_WRITE) != 0) return NULL;
    fill(buf, size, seed);
    if (readonly && mprotect(lo, len, PROT_READ) != 0) return NULL;
    p->seed = seed;
    p->size = size;
  }
  return buf;
}
#endif

int dlc_rec_materialize(const dlc_record *r, uint64_t cap, dlc_tensor_mem *m) {
  memset(m, 0, sizeof *m);
  dlc_rec_plan(r, cap, &m->plan);
  DLTensor t = rec_view(r);
  size_t n = (size_t)dlc_rec_dims(r);
  size_t entries = n > 0 ? n : 1;
  if (t.shape != NULL) {
    m->shape = malloc(entries * sizeof(int64_t));
    if (m->shape == NULL) goto fail;
    memcpy(m->shape, r->shape, entries * sizeof(int64_t));
    t.shape = m->shape;
  }
  if (t.strides != NULL) {
    m->strides = malloc(entries * sizeof(int64_t));
    if (m->strides == NULL) goto fail;
    memcpy(m->strides, r->strides, entries * sizeof(int64_t));
    t.strides = m->strides;
  }
  switch (m->plan.mode) {
    case DLC_DATA_BUFFER:
#if DLC_POOL
      if (m->plan.size <= DLC_REC_BUFFER_CAP) {
        m->buffer = pool_buffer(m->plan.readonly, m->plan.size, r->fill_seed);
        if (m->buffer == NULL) goto fail;
        m->pooled = 1;
        t.data = m->buffer + m->plan.pad;
        break;
      }
#endif
      if (m->plan.readonly) {
        if (alloc_guarded(m, m->plan.size, r->fill_seed) != 0) goto fail;
      } else {
        m->buffer = malloc((size_t)m->plan.size);
        if (m->buffer == NULL) goto fail;
        fill(m->buffer, m->plan.size, r->fill_seed);
      }
      t.data = m->buffer + m->plan.pad;
      break;
    case DLC_DATA_DANGLING:
      t.data = dlc_dangling_pointer();
      break;
    case DLC_DATA_NULL:
      t.data = NULL;
      break;
  }
  m->t = t;
  return 0;
fail:
  dlc_tensor_mem_free(m);
  return -1;
}

void dlc_tensor_mem_free(dlc_tensor_mem *m) {
  free(m->shape);
  free(m->strides);
  if (m->pooled) {
    /* a pool buffer stays mapped (see DLC_POOL) */
  } else if (m->map_base != NULL) {
    munmap(m->map_base, m->map_size);
  } else {
    free(m->buffer);
  }
  m->pooled = 0;
  m->shape = m->strides = NULL;
  m->buffer = NULL;
  m->map_base = NULL;
  m->map_size = 0;
}

int dlc_rec_row_major(dlc_record *r) {
  int64_t tmp[DLC_REC_MAX_NDIM];
  if (dlc_row_major_strides(r->ndim, r->shape, tmp) != 0) return -1;
  memcpy(r->strides, tmp, sizeof(int64_t) * (size_t)dlc_rec_dims(r));
  return 0;
}
