/* record: decode and encode the fuzz input format 1 (layout table in fuzz/README.md).
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
  REC_OFF_RESERVED = 67,
};
_Static_assert(REC_OFF_RESERVED + 1 == DLC_REC_HEADER_SIZE, "header layout is contiguous");

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

void dlc_rec_decode(const uint8_t *data, size_t size, dlc_record *out) {
  if (data == NULL) size = 0;
  memset(out, 0, sizeof *out);
  out->format = (uint8_t)get_le(data, size, REC_OFF_FORMAT, 1);
  out->kind = (uint8_t)get_le(data, size, REC_OFF_KIND, 1);
  out->ndim = (int8_t)(uint8_t)get_le(data, size, REC_OFF_NDIM, 1);
  out->code = (uint8_t)get_le(data, size, REC_OFF_CODE, 1);
  out->bits = (uint8_t)get_le(data, size, REC_OFF_BITS, 1);
  out->kw = (uint8_t)get_le(data, size, REC_OFF_KW, 1);
  out->lanes = (uint16_t)get_le(data, size, REC_OFF_LANES, 2);
  out->device_type = (int32_t)(uint32_t)get_le(data, size, REC_OFF_DEV_TYPE, 4);
  out->device_id = (int32_t)(uint32_t)get_le(data, size, REC_OFF_DEV_ID, 4);
  out->version_major = (uint32_t)get_le(data, size, REC_OFF_VER_MAJOR, 4);
  out->version_minor = (uint32_t)get_le(data, size, REC_OFF_VER_MINOR, 4);
  out->flags = get_le(data, size, REC_OFF_FLAGS, 8);
  out->byte_offset = get_le(data, size, REC_OFF_BYTE_OFFSET, 8);
  out->kw_max_major = (int32_t)(uint32_t)get_le(data, size, REC_OFF_KW_MAX_MAJOR, 4);
  out->kw_max_minor = (int32_t)(uint32_t)get_le(data, size, REC_OFF_KW_MAX_MINOR, 4);
  out->kw_dev_type = (int32_t)(uint32_t)get_le(data, size, REC_OFF_KW_DEV_TYPE, 4);
  out->kw_dev_id = (int32_t)(uint32_t)get_le(data, size, REC_OFF_KW_DEV_ID, 4);
  out->kw_stream = (int64_t)get_le(data, size, REC_OFF_KW_STREAM, 8);
  out->kw_copy = (uint8_t)get_le(data, size, REC_OFF_KW_COPY, 1);
  out->kw_stream_kind = (uint8_t)get_le(data, size, REC_OFF_KW_STREAM_KIND, 1);
  out->fill_seed = (uint8_t)get_le(data, size, REC_OFF_FILL_SEED, 1);
  out->reserved = (uint8_t)get_le(data, size, REC_OFF_RESERVED, 1);
  int n = dlc_rec_dims(out);
  size_t shape_off = DLC_REC_HEADER_SIZE;
  size_t strides_off = shape_off + 8u * (size_t)n;
  for (int i = 0; i < n; ++i) {
    out->shape[i] = (int64_t)get_le(data, size, shape_off + 8u * (size_t)i, 8);
    out->strides[i] = (int64_t)get_le(data, size, strides_off + 8u * (size_t)i, 8);
  }
}

size_t dlc_rec_encode(const dlc_record *r, uint8_t *out, size_t cap) {
  if (out == NULL) cap = 0;
  put_le(out, cap, REC_OFF_FORMAT, 1, r->format);
  put_le(out, cap, REC_OFF_KIND, 1, r->kind);
  put_le(out, cap, REC_OFF_NDIM, 1, (uint8_t)r->ndim);
  put_le(out, cap, REC_OFF_CODE, 1, r->code);
  put_le(out, cap, REC_OFF_BITS, 1, r->bits);
  put_le(out, cap, REC_OFF_KW, 1, r->kw);
  put_le(out, cap, REC_OFF_LANES, 2, r->lanes);
  put_le(out, cap, REC_OFF_DEV_TYPE, 4, (uint32_t)r->device_type);
  put_le(out, cap, REC_OFF_DEV_ID, 4, (uint32_t)r->device_id);
  put_le(out, cap, REC_OFF_VER_MAJOR, 4, r->version_major);
  put_le(out, cap, REC_OFF_VER_MINOR, 4, r->version_minor);
  put_le(out, cap, REC_OFF_FLAGS, 8, r->flags);
  put_le(out, cap, REC_OFF_BYTE_OFFSET, 8, r->byte_offset);
  put_le(out, cap, REC_OFF_KW_MAX_MAJOR, 4, (uint32_t)r->kw_max_major);
  put_le(out, cap, REC_OFF_KW_MAX_MINOR, 4, (uint32_t)r->kw_max_minor);
  put_le(out, cap, REC_OFF_KW_DEV_TYPE, 4, (uint32_t)r->kw_dev_type);
  put_le(out, cap, REC_OFF_KW_DEV_ID, 4, (uint32_t)r->kw_dev_id);
  put_le(out, cap, REC_OFF_KW_STREAM, 8, (uint64_t)r->kw_stream);
  put_le(out, cap, REC_OFF_KW_COPY, 1, r->kw_copy);
  put_le(out, cap, REC_OFF_KW_STREAM_KIND, 1, r->kw_stream_kind);
  put_le(out, cap, REC_OFF_FILL_SEED, 1, r->fill_seed);
  put_le(out, cap, REC_OFF_RESERVED, 1, r->reserved);
  int n = dlc_rec_dims(r);
  size_t shape_off = DLC_REC_HEADER_SIZE;
  size_t strides_off = shape_off + 8u * (size_t)n;
  for (int i = 0; i < n; ++i) {
    put_le(out, cap, shape_off + 8u * (size_t)i, 8, (uint64_t)r->shape[i]);
    put_le(out, cap, strides_off + 8u * (size_t)i, 8, (uint64_t)r->strides[i]);
  }
  return dlc_rec_size(r);
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
