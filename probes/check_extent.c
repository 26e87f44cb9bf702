/* check_extent: overflow-safe layout arithmetic (element count, bytes touched, row-major). */
#include "check.h"

/* Compact row-major strides follow numpy and PyTorch: stride[i] is the product of the
 * extents after i, where an extent of 0 counts as 1. So every tensor, zero-size included,
 * has one well-defined compact layout, and stride[i] needs no extent left of i. */
int dlc_row_major_strides(int32_t ndim, const int64_t *shape, int64_t *strides_out) {
  if (ndim < 0 || (ndim > 0 && shape == NULL)) return -1;
  int64_t s = 1;
  for (int32_t i = ndim - 1; i >= 0; --i) {
    if (shape[i] < 0) return -1;
    strides_out[i] = s;
    if (i > 0 && __builtin_mul_overflow(s, shape[i] > 0 ? shape[i] : 1, &s)) return -1;
  }
  return 0;
}

/* 1 when strides equal dlc_row_major_strides(shape) at every dim of extent != 1. Extents
 * are >= 0. A compact stride that does not fit in int64 equals no int64 stride, so the
 * first such stride decides the answer unless its dim has extent 1. */
static int dlc_is_row_major(int32_t ndim, const int64_t *shape, const int64_t *strides) {
  int64_t s = 1;
  int overflowed = 0;
  for (int32_t i = ndim - 1; i >= 0; --i) {
    if (shape[i] != 1 && (overflowed || strides[i] != s)) return 0;
    overflowed = overflowed || __builtin_mul_overflow(s, shape[i] > 0 ? shape[i] : 1, &s);
  }
  return 1;
}

/* Order of the checks, first failure wins: ndim >= 0 (LAY-09), shape non-NULL for ndim > 0
 * (LAY-09; ndim 0 with NULL shape is fine, LAY-08), every extent >= 0 (LAY-09), itemsize
 * > 0, then the arithmetic. On failure every field but status and itemsize is 0.
 *
 * On success:
 *  - zero-size (some extent 0): numel 0, lo = hi = 0, whatever the strides;
 *  - otherwise numel = prod(shape) <= INT64_MAX, and with element offsets
 *    off = sum_i (shape[i]-1) * strides[i] split into its negative and positive parts,
 *    lo = neg * itemsize, hi = pos * itemsize + itemsize, and hi - lo fits in int64;
 *  - ndim 0: numel 1, lo 0, hi itemsize;
 *  - NULL strides are the compact row-major strides (LAY-07);
 *  - row_major compares non-NULL strides with dlc_row_major_strides ignoring extent-1 dims;
 *    a zero-size tensor is row-major only when its strides match that convention too.
 * itemsize is GetDataSize's ceil(bits*lanes/8) (LAY-10): for a packed sub-byte dtype the
 * byte range is an upper bound of the bytes actually stored. */
dlc_extent dlc_extent_of(const DLTensor *t) {
  dlc_extent e = {0};
  e.itemsize = dlc_dtype_itemsize(t->dtype);
  const int32_t ndim = t->ndim;
  const int64_t *shape = t->shape;
  const int64_t *strides = t->strides;

  if (ndim < 0) {
    e.status = DLC_EXTENT_BAD_NDIM;
    return e;
  }
  if (ndim > 0 && shape == NULL) {
    e.status = DLC_EXTENT_NULL_SHAPE;
    return e;
  }
  int zero = 0;
  for (int32_t i = 0; i < ndim; ++i) {
    if (shape[i] < 0) {
      e.status = DLC_EXTENT_NEG_SHAPE;
      return e;
    }
    zero = zero || shape[i] == 0;
  }
  if (e.itemsize == 0) {
    e.status = DLC_EXTENT_BAD_ITEMSIZE;
    return e;
  }
  if (zero) {
    e.zero_size = 1;
    e.row_major = strides == NULL || dlc_is_row_major(ndim, shape, strides);
    return e;
  }

  int64_t numel = 1;
  for (int32_t i = 0; i < ndim; ++i) {
    if (__builtin_mul_overflow(numel, shape[i], &numel)) goto overflow;
  }
  /* Element offsets of the lowest and highest element. rm is the compact row-major stride
   * of dim i; it divides numel, so it cannot overflow. */
  int64_t neg = 0, pos = 0, rm = 1;
  for (int32_t i = ndim - 1; i >= 0; --i) {
    int64_t off;
    if (__builtin_mul_overflow(shape[i] - 1, strides ? strides[i] : rm, &off)) goto overflow;
    if (off < 0 ? __builtin_add_overflow(neg, off, &neg)
                : __builtin_add_overflow(pos, off, &pos))
      goto overflow;
    rm *= shape[i];
  }
  int64_t lo, hi, span;
  const int64_t item = (int64_t)e.itemsize; /* <= ceil(255 * 65535 / 8) */
  if (__builtin_mul_overflow(neg, item, &lo) || __builtin_mul_overflow(pos, item, &hi) ||
      __builtin_add_overflow(hi, item, &hi) || __builtin_sub_overflow(hi, lo, &span))
    goto overflow;

  e.numel = (uint64_t)numel;
  e.lo = lo;
  e.hi = hi;
  e.row_major = strides == NULL || dlc_is_row_major(ndim, shape, strides);
  return e;

overflow:
  e.status = DLC_EXTENT_OVERFLOW;
  return e;
}

const char *dlc_extent_status_name(dlc_extent_status s) {
  switch (s) {
    case DLC_EXTENT_OK: return "ok";
    case DLC_EXTENT_BAD_NDIM: return "bad_ndim";
    case DLC_EXTENT_NULL_SHAPE: return "null_shape";
    case DLC_EXTENT_NEG_SHAPE: return "neg_shape";
    case DLC_EXTENT_OVERFLOW: return "overflow";
    case DLC_EXTENT_BAD_ITEMSIZE: return "bad_itemsize";
  }
  return "unknown";
}
