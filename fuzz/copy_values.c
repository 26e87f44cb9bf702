/* copy_values: see copy_values.h. */
#include "copy_values.h"

#include <string.h>

#include "devmem.h"
#include "oracle.h"

/* A device copy's bytes, read to the host: at most DLC_COPY_CHECK_MAX elements of 16 bytes. */
static uint8_t device_bytes[DLC_COPY_CHECK_MAX * 16];

/* The width in bits of the IEEE parts of an element of (code, bits), the parts compared one
 * by one (a complex number's two): 16, 32 or 64 for float and complex, 16 for bfloat16; 0 for
 * an integer (bytes compared whole); -1 for a dtype not judged. */
static int float_part(uint8_t code, uint8_t bits) {
  if (code == kDLInt || code == kDLUInt) return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? 0 : -1;
  if (code == kDLFloat) return bits == 16 || bits == 32 || bits == 64 ? bits : -1;
  if (code == kDLBfloat) return bits == 16 ? 16 : -1;
  if (code == kDLComplex) return bits == 64 || bits == 128 ? bits / 2 : -1;
  return -1;
}

/* The little-endian value of n bytes at p. */
static uint64_t part_value(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

/* 1 when the part of `width` bits holds a NaN: its exponent all ones, its fraction not zero
 * (bfloat16: 8 exponent bits; IEEE half, single, double: 5, 8, 11). */
static int is_nan(uint64_t v, int width, int bfloat) {
  int exp_bits = width == 16 ? (bfloat ? 8 : 5) : width == 32 ? 8 : 11;
  int frac_bits = width - 1 - exp_bits;
  uint64_t exp = (v >> frac_bits) & ((1ull << exp_bits) - 1), frac = v & ((1ull << frac_bits) - 1);
  return exp == (1ull << exp_bits) - 1 && frac != 0;
}

/* 1 when the element bytes `have` stand for the element `expect`: the same bytes, or, part by
 * part of a floating dtype, a NaN for a NaN (a copy may quiet a signalling NaN). */
static int same_element(const uint8_t *have, const uint8_t *expect, int item, int part, int bfloat) {
  if (memcmp(have, expect, (size_t)item) == 0) return 1;
  if (part <= 0) return 0;
  for (int at = 0; at < item; at += part / 8) {
    uint64_t h = part_value(have + at, part / 8), e = part_value(expect + at, part / 8);
    if (h != e && !(is_nan(h, part, bfloat) && is_nan(e, part, bfloat))) return 0;
  }
  return 1;
}

/* 1 when the n bytes at have are all DLC_DEVMEM_POISON. */
static int poisoned(const uint8_t *have, Py_ssize_t n) {
  for (Py_ssize_t j = 0; j < n; ++j)
    if (have[j] != DLC_DEVMEM_POISON) return 0;
  return 1;
}

long long dlc_check_copy_values(const dlc_record *r, const dlc_plan *p, const Py_buffer *v,
                                int on_device, uintptr_t stream, int pending) {
  const dlc_extent *e = &p->ext;
  if (p->mode != DLC_DATA_BUFFER || e->status != DLC_EXTENT_OK || e->zero_size ||
      e->numel > DLC_COPY_CHECK_MAX || r->lanes != 1 || (r->kind & DLC_REC_SHAPE_NULL) ||
      v->buf == NULL)
    return -1;
  int part = float_part(r->code, r->bits), bfloat = r->code == kDLBfloat;
  if (part < 0) return -1;
  int n = dlc_rec_dims(r);
  Py_ssize_t item = (Py_ssize_t)(r->bits / 8);
  if (v->ndim != n || v->itemsize != item) return -1;
  /* the result: the export's shape, compact row-major (a dim of extent 1 has any stride) */
  Py_ssize_t want = item;
  for (int i = n - 1; i >= 0; --i) {
    if (v->shape[i] != r->shape[i]) return -1;
    if (v->shape[i] > 1 && v->strides[i] != want) return -1;
    want *= v->shape[i];
  }
  size_t bytes = (size_t)e->numel * (size_t)item;
  const uint8_t *got = v->buf;
  if (on_device) {
    if (dlc_devmem_download(device_bytes, v->buf, bytes, stream) != 0) return -1; /* ours: no verdict */
    got = device_bytes;
  }
  /* the export's strides in elements: its own, or row-major for NULL (LAY-06) */
  int64_t rm[DLC_REC_MAX_NDIM];
  const int64_t *strides = r->strides;
  if (r->kind & DLC_REC_STRIDES_NULL) {
    if (dlc_row_major_strides(r->ndim, r->shape, rm) != 0) return -1;
    strides = rm;
  }
  int64_t idx[DLC_REC_MAX_NDIM] = {0};
  for (uint64_t k = 0; k < e->numel; ++k) {
    /* the element's offset in the buffer; the extent is valid, so it lies inside (layout.h) */
    int64_t off = (int64_t)p->pad + (int64_t)r->byte_offset;
    for (int i = 0; i < n; ++i) off += idx[i] * strides[i] * (int64_t)item;
    uint8_t expect[16];
    for (Py_ssize_t j = 0; j < item; ++j) expect[j] = (uint8_t)((uint64_t)(off + j) * 131u + r->fill_seed);
    const uint8_t *have = got + k * (uint64_t)item;
    if (!same_element(have, expect, (int)item, part, bfloat)) {
      if (pending && poisoned(have, item)) return (long long)k;
      Py_ssize_t j = 0;
      while (have[j] == expect[j]) ++j;
      dlc_oracle_fail("LAY-11", "the copy's element %llu holds byte %u at %lld, the export's "
                      "%u (buffer offset %lld)", (unsigned long long)k, have[j], (long long)j,
                      expect[j], (long long)(off + j));
      return -1;
    }
    for (int i = n - 1; i >= 0; --i) { /* the next row-major index */
      if (++idx[i] < r->shape[i]) break;
      idx[i] = 0;
    }
  }
  return -1;
}
