/* tensor_core: what a Tensor's exports are made of, below its Python type (tensor.c): the
 * DLTensor over its arrays, the flags its exports carry, and compact copies of its
 * elements. The Tensor's invariants are tensor.c's. */
#include "ref.h"

void ref_tensor_fill(const RefTensor *t, DLTensor *out) {
  out->data = t->data;
  out->device.device_type = kDLCPU;
  out->device.device_id = 0;
  out->ndim = t->ndim;
  out->dtype = t->dtype;
  out->shape = t->shape;
  out->strides = t->strides;
  out->byte_offset = t->byte_offset;
}

uint64_t ref_export_flags(const RefTensor *t, int copied) {
  uint64_t f = 0;
  if (copied) f |= DLPACK_FLAG_BITMASK_IS_COPIED;           /* FLG-04; the copy is the consumer's */
  else if (t->readonly) f |= DLPACK_FLAG_BITMASK_READ_ONLY; /* FLG-02 */
  /* sub-byte dtypes are stored one element per dlc_dtype_itemsize bytes (FLG-06) */
  if (t->subbyte) f |= DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  return ref_twist_export_flags(f);
}

ref_buf *ref_copy_compact(const RefTensor *t) {
  size_t n = t->zero_size ? 0 : (size_t)t->numel * t->itemsize;
  ref_buf *b = ref_buf_alloc(n);
  if (!b) {
    PyErr_NoMemory();
    return NULL;
  }
  if (n)
    ref_gather(t->data + t->byte_offset, t->ndim, t->shape, t->strides, t->itemsize, b->mem);
  return b;
}

ref_buf *ref_copy_export(const RefTensor *t, DLTensor *dl, int64_t *rm) {
  ref_buf *b = ref_copy_compact(t);
  if (!b) return NULL;
  dl->data = b->mem;
  dl->byte_offset = 0;
  if (dl->ndim > 0 && dlc_row_major_strides(dl->ndim, dl->shape, rm) == 0) dl->strides = rm;
  return b;
}
