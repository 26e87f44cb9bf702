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
 * Without ASan (T.fast, T.afl) nothing could see that anyway, so buffers come from regions
 * mapped once, writable ones and read-only ones, each of the cap's size and followed by a
 * PROT_NONE guard page (writes to read-only buffers and overruns still fault). Pool buffers
 * are never freed; dlc_tensor_mem_free only forgets them. Per input, nothing is mapped or
 * protected:
 *   - A read-only region is a memfd mapped twice: PROT_READ where buffers are exported,
 *     and read-write elsewhere, where the harness fills them. Protection never changes
 *     (an mprotect pair per refill cost a fifth of the consumer target's time).
 *   - A buffer ends within 63 bytes of its region's end, so where it starts depends on its
 *     size. Its byte i, (i * 131 + seed) mod 256, is the byte at region offset o = start + i
 *     of the periodic pattern (o * 131 + phase) mod 256 with phase = seed - start * 131: a
 *     region keeps one phase from some offset `from` to its end, and a buffer with that
 *     phase that starts at or after `from` is already in place. Only other phases, or the
 *     bytes below `from`, are written, and by memcpy of the 256-byte period.
 *   - Buffers up to DLC_POOL_SMALL bytes share one region per protection (a refill is
 *     cheap). Larger ones (about 1 in 100 inputs, up to the 1 MiB cap, and most of the
 *     bytes filled) take the region already holding their phase among DLC_POOL_BIG, else
 *     the least recently used one, so a corpus entry's big buffer is rarely refilled.
 *   - A read-only region's (phase, from, last use) lives in its memfd too: AFL++ forks its
 *     children from a process that may already hold the pool, and they all share the memfd.
 * At most (1 + DLC_POOL_BIG) MiB per protection is touched. A consumer that wrote into a
 * writable export may leave its bytes for later inputs of the same phase (nothing the
 * consumer target checks reads them back). */
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
#include <sys/syscall.h>

#define DLC_POOL_SMALL 4096u /* buffers up to this size share one region */
#define DLC_POOL_BIG 16      /* regions for larger buffers, by phase, least recently used */

typedef struct {
  int valid;                /* 0: the region holds no known pattern (also while a fill runs) */
  unsigned phase;           /* pattern (o * 131 + phase) mod 256 at region offset o ... */
  size_t from;              /* ... for o in [from, span) */
  unsigned long long used;  /* last use, for the least recently used choice */
} dlc_pool_state;

typedef struct {
  uint8_t *base;      /* exported: [base, base + span), then a PROT_NONE guard page */
  uint8_t *fill;      /* where the harness writes the same bytes (base, or the alias) */
  dlc_pool_state *st; /* a writable region's in .bss, a read-only one's in its memfd */
  dlc_pool_state own;
} dlc_region;

static dlc_region regions[2][1 + DLC_POOL_BIG]; /* [readonly][0 small, 1.. big] */
static size_t pool_span;

/* Writes the pattern of phase into [a, b) of the region's fill view: one period by hand,
 * then doubling copies (offsets 256 apart hold the same byte). */
static void fill_phase(uint8_t *fill, size_t a, size_t b, unsigned phase) {
  size_t total = b - a, done = total < 256 ? total : 256;
  uint8_t *dst = fill + a;
  for (size_t i = 0; i < done; ++i) dst[i] = (uint8_t)((a + i) * 131u + phase);
  while (done < total) {
    size_t c = total - done < done ? total - done : done;
    memcpy(dst + done, dst, c);
    done += c;
  }
}

/* Maps a region: [base, base + span) and a PROT_NONE page after it; read-only as a memfd
 * viewed twice (see above), its first page holding the shared state. 0, or -1. */
static int map_region(dlc_region *g, int readonly, size_t page) {
  size_t span = pool_span;
  uint8_t *ro = mmap(NULL, span + page, readonly ? PROT_NONE : PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (ro == MAP_FAILED) return -1;
  if (!readonly) {
    if (mprotect(ro + span, page, PROT_NONE) != 0) return -1;
    g->base = g->fill = ro;
    g->st = &g->own;
    return 0;
  }
  int fd = (int)syscall(SYS_memfd_create, "dlconform-pool", 1u /* MFD_CLOEXEC */);
  if (fd < 0) return -1;
  int ok = ftruncate(fd, (off_t)(page + span)) == 0;
  uint8_t *rw = ok ? mmap(NULL, page + span, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                   : MAP_FAILED;
  if (rw != MAP_FAILED &&
      mmap(ro, span, PROT_READ, MAP_SHARED | MAP_FIXED, fd, (off_t)page) == ro) {
    close(fd);
    g->base = ro;
    g->fill = rw + page;
    g->st = (dlc_pool_state *)rw;
    return 0;
  }
  if (rw != MAP_FAILED) munmap(rw, page + span);
  munmap(ro, span + page);
  close(fd);
  return -1;
}

/* A buffer of size bytes holding the fill pattern, ending within 63 bytes of its region's
 * end (as alloc_guarded does); NULL when a region cannot be set up. */
static uint8_t *pool_buffer(int readonly, uint64_t size, uint8_t seed) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (pool_span == 0) pool_span = ((size_t)DLC_REC_BUFFER_CAP + 64 + page - 1) / page * page;
  size_t aligned = ((size_t)size + 63u) & ~(size_t)63u;
  size_t start = pool_span - aligned;
  unsigned phase = (uint8_t)(seed - (uint8_t)(start * 131u));
  dlc_region *set = regions[readonly], *g = &set[0];
  if (size > DLC_POOL_SMALL) {
    /* the big region holding this phase, else the least recently used (unmapped first) */
    unsigned long long now = 0;
    g = NULL;
    for (int i = 1; i <= DLC_POOL_BIG; ++i) {
      dlc_region *c = &set[i];
      if (c->st != NULL && c->st->used > now) now = c->st->used;
      if (c->st != NULL && c->st->valid && c->st->phase == phase) g = c;
    }
    for (int i = 1; i <= DLC_POOL_BIG && g == NULL; ++i)
      if (set[i].st == NULL) g = &set[i];
    for (int i = 1; i <= DLC_POOL_BIG && g == NULL; ++i)
      if (set[i].st->used == 0 || !set[i].st->valid) g = &set[i];
    if (g == NULL) {
      g = &set[1];
      for (int i = 2; i <= DLC_POOL_BIG; ++i)
        if (set[i].st->used < g->st->used) g = &set[i];
    }
    if (g->st == NULL && map_region(g, readonly, page) != 0) return NULL;
    g->st->used = now + 1;
  } else if (g->st == NULL && map_region(g, readonly, page) != 0) {
    return NULL;
  }
  dlc_pool_state *st = g->st;
  if (!st->valid || st->phase != phase) {
    st->valid = 0;
    fill_phase(g->fill, start, pool_span, phase);
    st->phase = phase;
    st->from = start;
    st->valid = 1;
  } else if (start < st->from) {
    st->valid = 0;
    fill_phase(g->fill, start, st->from, phase);
    st->from = start;
    st->valid = 1;
  }
  return g->base + start;
}
#endif

int dlc_rec_materialize(const dlc_record *r, uint64_t cap, dlc_tensor_mem *m) {
  dlc_plan plan;
  dlc_rec_plan(r, cap, &plan);
  return dlc_rec_materialize_plan(r, &plan, m);
}

int dlc_rec_materialize_plan(const dlc_record *r, const dlc_plan *plan, dlc_tensor_mem *m) {
  memset(m, 0, sizeof *m);
  m->plan = *plan;
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
