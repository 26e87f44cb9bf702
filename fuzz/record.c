/* record: decode and encode the fuzz input format 2 (layout table in fuzz/README.md).
 * All multi-byte fields are little-endian. Field offsets are the single source of truth
 * below (REC_OFF_*); decode and encode use the same table so they cannot drift apart. */
#include "record.h"

#include <string.h>

enum {
  REC_OFF_FORMAT = 0,
  REC_OFF_KIND = 1,
  REC_OFF_NDIM = 2,
  REC_OFF_CODE = 3,
  REC_OFF_BITS = 4,
  REC_OFF_KW = 5,
  REC_OFF_LANES = 6,
  REC_OFF_DEV_TYPE = 8,
  REC_OFF_DEV_ID = 12,
  REC_OFF_VER_MAJOR = 16,
  REC_OFF_VER_MINOR = 20,
  REC_OFF_FLAGS = 24,
  REC_OFF_BYTE_OFFSET = 32,
  REC_OFF_KW_MAX_MAJOR = 40,
  REC_OFF_KW_MAX_MINOR = 44,
  REC_OFF_KW_DEV_TYPE = 48,
  REC_OFF_KW_DEV_ID = 52,
  REC_OFF_KW_STREAM = 56,
  REC_OFF_KW_COPY = 64,
  REC_OFF_KW_STREAM_KIND = 65,
  REC_OFF_FILL_SEED = 66,
  REC_OFF_OFFER = 67,
};
_Static_assert(REC_OFF_OFFER + 1 == DLC_REC_HEADER_SIZE, "header layout is contiguous");

/* Reads n little-endian bytes at off from a zero-extended view of (data, size). */
static uint64_t get_le(const uint8_t *data, size_t size, size_t off, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) {
    size_t at = off + (size_t)i;
    v = (v << 8) | (at < size ? data[at] : 0u);
  }
  return v;
}

/* Writes n little-endian bytes at off, dropping those at or beyond cap. */
static void put_le(uint8_t *out, size_t cap, size_t off, int n, uint64_t v) {
  for (int i = 0; i < n; ++i) {
    size_t at = off + (size_t)i;
    if (at < cap) out[at] = (uint8_t)(v >> (8 * i));
  }
}

int dlc_rec_dims(const dlc_record *r) { return r->ndim > 0 ? r->ndim : 0; }

size_t dlc_rec_size(const dlc_record *r) {
  return DLC_REC_HEADER_SIZE + 16u * (size_t)dlc_rec_dims(r);
}

/* Fixed-width little-endian loads and stores at a known offset (the fast paths below). */
static uint64_t ld(const uint8_t *p, int n) {
  uint64_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(&v, p, (size_t)n);
#else
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
#endif
  return v;
}

static void st(uint8_t *p, int n, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(p, &v, (size_t)n);
#else
  for (int i = 0; i < n; ++i) p[i] = (uint8_t)(v >> (8 * i));
#endif
}

/* Both codecs run on every input (the mutator decodes and encodes, the target decodes), so
 * the header goes through one zero-extended 68-byte copy and shape/strides through memcpy
 * where the input covers them; get_le/put_le handle only a partial tail. The result is the
 * same as reading every byte through get_le. */
void dlc_rec_decode(const uint8_t *data, size_t size, dlc_record *out) {
  if (data == NULL) size = 0;
  uint8_t h[DLC_REC_HEADER_SIZE];
  if (size >= DLC_REC_HEADER_SIZE) {
    memcpy(h, data, sizeof h);
  } else {
    memset(h, 0, sizeof h);
    if (size) memcpy(h, data, size);
  }
  out->format = h[REC_OFF_FORMAT];
  out->kind = h[REC_OFF_KIND];
  out->ndim = (int8_t)h[REC_OFF_NDIM];
  out->code = h[REC_OFF_CODE];
  out->bits = h[REC_OFF_BITS];
  out->kw = h[REC_OFF_KW];
  out->lanes = (uint16_t)ld(h + REC_OFF_LANES, 2);
  out->device_type = (int32_t)(uint32_t)ld(h + REC_OFF_DEV_TYPE, 4);
  out->device_id = (int32_t)(uint32_t)ld(h + REC_OFF_DEV_ID, 4);
  out->version_major = (uint32_t)ld(h + REC_OFF_VER_MAJOR, 4);
  out->version_minor = (uint32_t)ld(h + REC_OFF_VER_MINOR, 4);
  out->flags = ld(h + REC_OFF_FLAGS, 8);
  out->byte_offset = ld(h + REC_OFF_BYTE_OFFSET, 8);
  out->kw_max_major = (int32_t)(uint32_t)ld(h + REC_OFF_KW_MAX_MAJOR, 4);
  out->kw_max_minor = (int32_t)(uint32_t)ld(h + REC_OFF_KW_MAX_MINOR, 4);
  out->kw_dev_type = (int32_t)(uint32_t)ld(h + REC_OFF_KW_DEV_TYPE, 4);
  out->kw_dev_id = (int32_t)(uint32_t)ld(h + REC_OFF_KW_DEV_ID, 4);
  out->kw_stream = (int64_t)ld(h + REC_OFF_KW_STREAM, 8);
  out->kw_copy = h[REC_OFF_KW_COPY];
  out->kw_stream_kind = h[REC_OFF_KW_STREAM_KIND];
  out->fill_seed = h[REC_OFF_FILL_SEED];
  out->offer = h[REC_OFF_OFFER];
  int n = dlc_rec_dims(out);
  size_t shape_off = DLC_REC_HEADER_SIZE;
  size_t strides_off = shape_off + 8u * (size_t)n;
  /* entries beyond n stay 0 (record.h) */
  memset(out->shape + n, 0, sizeof(int64_t) * (size_t)(DLC_REC_MAX_NDIM - n));
  memset(out->strides + n, 0, sizeof(int64_t) * (size_t)(DLC_REC_MAX_NDIM - n));
  for (int i = 0; i < n; ++i) {
    size_t a = shape_off + 8u * (size_t)i, b = strides_off + 8u * (size_t)i;
    out->shape[i] = (int64_t)(a + 8 <= size ? ld(data + a, 8) : get_le(data, size, a, 8));
    out->strides[i] = (int64_t)(b + 8 <= size ? ld(data + b, 8) : get_le(data, size, b, 8));
  }
}

size_t dlc_rec_encode(const dlc_record *r, uint8_t *out, size_t cap) {
  if (out == NULL) cap = 0;
  uint8_t h[DLC_REC_HEADER_SIZE];
  h[REC_OFF_FORMAT] = r->format;
  h[REC_OFF_KIND] = r->kind;
  h[REC_OFF_NDIM] = (uint8_t)r->ndim;
  h[REC_OFF_CODE] = r->code;
  h[REC_OFF_BITS] = r->bits;
  h[REC_OFF_KW] = r->kw;
  st(h + REC_OFF_LANES, 2, r->lanes);
  st(h + REC_OFF_DEV_TYPE, 4, (uint32_t)r->device_type);
  st(h + REC_OFF_DEV_ID, 4, (uint32_t)r->device_id);
  st(h + REC_OFF_VER_MAJOR, 4, r->version_major);
  st(h + REC_OFF_VER_MINOR, 4, r->version_minor);
  st(h + REC_OFF_FLAGS, 8, r->flags);
  st(h + REC_OFF_BYTE_OFFSET, 8, r->byte_offset);
  st(h + REC_OFF_KW_MAX_MAJOR, 4, (uint32_t)r->kw_max_major);
  st(h + REC_OFF_KW_MAX_MINOR, 4, (uint32_t)r->kw_max_minor);
  st(h + REC_OFF_KW_DEV_TYPE, 4, (uint32_t)r->kw_dev_type);
  st(h + REC_OFF_KW_DEV_ID, 4, (uint32_t)r->kw_dev_id);
  st(h + REC_OFF_KW_STREAM, 8, (uint64_t)r->kw_stream);
  h[REC_OFF_KW_COPY] = r->kw_copy;
  h[REC_OFF_KW_STREAM_KIND] = r->kw_stream_kind;
  h[REC_OFF_FILL_SEED] = r->fill_seed;
  h[REC_OFF_OFFER] = r->offer;
  if (cap) memcpy(out, h, cap < sizeof h ? cap : sizeof h);
  int n = dlc_rec_dims(r);
  size_t shape_off = DLC_REC_HEADER_SIZE;
  size_t strides_off = shape_off + 8u * (size_t)n;
  for (int i = 0; i < n; ++i) {
    size_t a = shape_off + 8u * (size_t)i, b = strides_off + 8u * (size_t)i;
    if (a + 8 <= cap) st(out + a, 8, (uint64_t)r->shape[i]);
    else put_le(out, cap, a, 8, (uint64_t)r->shape[i]);
    if (b + 8 <= cap) st(out + b, 8, (uint64_t)r->strides[i]);
    else put_le(out, cap, b, 8, (uint64_t)r->strides[i]);
  }
  return dlc_rec_size(r);
}

int dlc_rec_offer(const dlc_record *r) { return r->offer & DLC_OFFER_KIND; }

void dlc_rec_apply_offer(dlc_record *r) {
  if (dlc_rec_offer(r) != DLC_OFFER_NONE) r->kind |= DLC_REC_VERSIONED;
}

void dlc_rec_init(dlc_record *r) {
  memset(r, 0, sizeof *r);
  r->format = DLC_REC_FORMAT;
  r->code = 2; /* kDLFloat */
  r->bits = 32;
  r->lanes = 1;
  r->device_type = 1; /* kDLCPU */
  r->version_major = 1;
  r->version_minor = 3;
}
