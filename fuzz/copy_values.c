/* copy_values: see copy_values.h. */
#include "copy_values.h"

#include <string.h>

#include "devmem.h"
#include "oracle.h"

/* A device copy's bytes, read to the host: at most DLC_COPY_CHECK_MAX elements of 8 bytes. */
static uint8_t device_bytes[DLC_COPY_CHECK_MAX * 8];

void dlc_check_copy_values(const dlc_record *r, const dlc_plan *p, const Py_buffer *v, int on_device,
                           uintptr_t stream) {
  const dlc_extent *e = &p->ext;
  if (p->mode != DLC_DATA_BUFFER || e->status != DLC_EXTENT_OK || e->zero_size ||
      e->numel > DLC_COPY_CHECK_MAX || r->lanes != 1 || (r->code != kDLInt && r->code != kDLUInt) ||
      r->bits == 0 || r->bits % 8 != 0 || r->bits > 64 || (r->kind & DLC_REC_SHAPE_NULL) ||
      v->buf == NULL)
    return;
  int n = dlc_rec_dims(r);
  Py_ssize_t item = (Py_ssize_t)(r->bits / 8);
  if (v->ndim != n || v->itemsize != item) return;
  /* the result: the export's shape, compact row-major (a dim of extent 1 has any stride) */
  Py_ssize_t want = item;
  for (int i = n - 1; i >= 0; --i) {
    if (v->shape[i] != r->shape[i]) return;
    if (v->shape[i] > 1 && v->strides[i] != want) return;
    want *= v->shape[i];
  }
  size_t bytes = (size_t)e->numel * (size_t)item;
  const uint8_t *got = v->buf;
  if (on_device) {
    if (dlc_devmem_download(device_bytes, v->buf, bytes, stream) != 0) return; /* ours: no verdict */
    got = device_bytes;
  }
  /* the export's strides in elements: its own, or row-major for NULL (LAY-06) */
  int64_t rm[DLC_REC_MAX_NDIM];
  const int64_t *strides = r->strides;
  if (r->kind & DLC_REC_STRIDES_NULL) {
    if (dlc_row_major_strides(r->ndim, r->shape, rm) != 0) return;
    strides = rm;
  }
  int64_t idx[DLC_REC_MAX_NDIM] = {0};
  for (uint64_t k = 0; k < e->numel; ++k) {
    /* the element's offset in the buffer; the extent is valid, so it lies inside (layout.h) */
    int64_t off = (int64_t)p->pad + (int64_t)r->byte_offset;
    for (int i = 0; i < n; ++i) off += idx[i] * strides[i] * (int64_t)item;
    for (Py_ssize_t j = 0; j < item; ++j) {
      uint8_t expect = (uint8_t)((uint64_t)(off + j) * 131u + r->fill_seed);
      uint8_t have = got[k * (uint64_t)item + (uint64_t)j];
      if (have != expect)
        return dlc_oracle_fail("LAY-11", "the copy's element %llu holds byte %u at %lld, the export's "
                               "%u (buffer offset %lld)", (unsigned long long)k, have, (long long)j,
                               expect, (long long)(off + j));
    }
    for (int i = n - 1; i >= 0; --i) { /* the next row-major index */
      if (++idx[i] < r->shape[i]) break;
      idx[i] = 0;
    }
  }
}
