/* buffer: refcounted memory behind tensors, and strided element copies. No Python here:
 * the last release may run in a deleter on any thread without the GIL (OWN-04). */
#include "ref.h"

#include <stdlib.h>
#include <string.h>

ref_buf *ref_buf_alloc(size_t size) {
  ref_buf *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  atomic_init(&b->refs, 1);
  if (size > 0) {
    if (size > SIZE_MAX - REF_ALIGN) { free(b); return NULL; }
    size_t rounded = (size + REF_ALIGN - 1) / REF_ALIGN * REF_ALIGN;
    b->mem = aligned_alloc(REF_ALIGN, rounded); /* LAY-01: data is 256-byte aligned */
    if (!b->mem) { free(b); return NULL; }
    memset(b->mem, 0, rounded);
    b->lo = (uintptr_t)b->mem;
    b->hi = b->lo + size;
  }
  return b;
}

ref_buf *ref_buf_foreign(DLManagedTensor *legacy, DLManagedTensorVersioned *versioned,
                         uintptr_t lo, uintptr_t hi) {
  ref_buf *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  atomic_init(&b->refs, 1);
  b->deleter_calls = 1;
  b->null_check = 1;
  b->legacy = legacy;
  b->versioned = versioned;
  b->lo = lo;
  b->hi = hi;
  return b;
}

void ref_buf_incref(ref_buf *b) { atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed); }

void ref_buf_call_deleter(ref_buf *b) {
  if (b->versioned && (b->versioned->deleter || !b->null_check))
    b->versioned->deleter(b->versioned);
  if (b->legacy && (b->legacy->deleter || !b->null_check)) b->legacy->deleter(b->legacy);
}

void ref_buf_decref(ref_buf *b) {
  if (!b) return;
  if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
  /* deleter_calls is 1 except under the consumer faults latched at import (OWN-03) */
  for (int i = 0; i < b->deleter_calls; i++) ref_buf_call_deleter(b);
  free(b->mem);
  free(b);
}

/* Walks every element in logical row-major order; copies itemsize bytes per element
 * between the strided side (base) and the compact side (flat). */
static void walk(char *base, int32_t ndim, const int64_t *shape, const int64_t *strides,
                 size_t itemsize, char *flat, int to_flat) {
  int64_t idx[REF_MAX_NDIM];
  int64_t rm[REF_MAX_NDIM];
  uint64_t numel = 1;
  for (int32_t d = 0; d < ndim; d++) {
    if (shape[d] == 0) return;
    numel *= (uint64_t)shape[d];
    idx[d] = 0;
  }
  if (!strides) {
    int64_t s = 1;
    for (int32_t d = ndim - 1; d >= 0; d--) { rm[d] = s; s *= shape[d]; }
    strides = rm;
  }
  int64_t off = 0; /* current element offset, in elements */
  for (uint64_t n = 0; n < numel; n++) {
    char *p = base + off * (int64_t)itemsize;
    if (to_flat) memcpy(flat + n * itemsize, p, itemsize);
    else memcpy(p, flat + n * itemsize, itemsize);
    for (int32_t d = ndim - 1; d >= 0; d--) {
      idx[d]++;
      off += strides[d];
      if (idx[d] < shape[d]) break;
      off -= strides[d] * idx[d];
      idx[d] = 0;
    }
  }
}

void ref_gather(const char *src, int32_t ndim, const int64_t *shape, const int64_t *strides,
                size_t itemsize, char *out) {
  walk((char *)src, ndim, shape, strides, itemsize, out, 1);
}

void ref_scatter(char *dst, int32_t ndim, const int64_t *shape, const int64_t *strides,
                 size_t itemsize, const char *in) {
  walk(dst, ndim, shape, strides, itemsize, (char *)in, 0);
}
