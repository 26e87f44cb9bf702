/* read.c: `read_elements(capsule)` and `gather(address, shape, strides, itemsize)`: the
 * logical row-major element bytes of a strided tensor, read only after the layout has been
 * validated with check's overflow-safe extent arithmetic. */
#include "probe.h"

int probe_host_readable(int32_t device_type) {
  return device_type == kDLCPU || device_type == kDLCUDAHost || device_type == kDLROCMHost ||
         device_type == kDLCUDAManaged;
}

/* Copies the elements of a non-empty tensor into out, in logical row-major order.
 * Preconditions (dlc_extent_of returned OK with zero_size == 0): ndim in [0, PROBE_MAX_NDIM],
 * shape non-NULL when ndim > 0, every extent >= 1, and for each index the byte offset
 * sum(idx[d] * strides[d]) * itemsize lies in [lo, hi), so every partial sum below fits in
 * int64. The multiplications are still checked: -1 (nothing meaningful written) if one
 * overflows, which would mean check's extent arithmetic disagrees with ours. */
static int gather_into(const char *base, int32_t ndim, const int64_t *shape,
                       const int64_t *strides, int64_t itemsize, char *out) {
  if (ndim == 0) {
    memcpy(out, base, (size_t)itemsize);
    return 0;
  }
  int rc = -1;
  int64_t *step = PyMem_Malloc(sizeof(int64_t) * 3 * (size_t)ndim);
  if (step == NULL) return -2;
  int64_t *span = step + ndim, *idx = span + ndim;
  if (strides == NULL) {
    /* NULL strides: compact row-major (LAY-07). */
    if (dlc_row_major_strides(ndim, shape, idx) != 0) goto done;
    strides = idx; /* idx is reset below, after step/span are computed from it */
  }
  for (int32_t d = 0; d < ndim; d++) {
    step[d] = 0;
    span[d] = 0;
    /* A dimension of extent 1 never steps: its stride is irrelevant (and may be huge). */
    if (shape[d] < 2) continue;
    if (__builtin_mul_overflow(strides[d], itemsize, &step[d])) goto done;
    if (__builtin_mul_overflow(step[d], shape[d] - 1, &span[d])) goto done;
  }
  for (int32_t d = 0; d < ndim; d++) idx[d] = 0;

  int64_t off = 0; /* byte offset of the current element from base */
  char *dst = out;
  for (;;) {
    memcpy(dst, base + off, (size_t)itemsize);
    dst += itemsize;
    int32_t d = ndim - 1;
    while (d >= 0 && idx[d] + 1 >= shape[d]) {
      off -= span[d]; /* back to index 0 in this dimension */
      idx[d] = 0;
      d--;
    }
    if (d < 0) break;
    idx[d]++;
    off += step[d];
  }
  rc = 0;
done:
  PyMem_Free(step);
  return rc;
}

PyObject *probe_read_tensor(const DLTensor *t) {
  dlc_extent e = probe_extent(t);
  if (e.status != DLC_EXTENT_OK) {
    PyErr_Format(PyExc_ValueError, "cannot read elements: extent status %s (LAY-09)",
                 dlc_extent_status_name(e.status));
    return NULL;
  }
  /* LAY-04: a zero-size tensor has no element to read, whatever data is. */
  if (e.zero_size || e.numel == 0) return PyBytes_FromStringAndSize(NULL, 0);
  int32_t dev = (int32_t)t->device.device_type;
  if (!probe_host_readable(dev)) {
    PyErr_Format(PyExc_ValueError, "cannot read elements on device type %d from the host",
                 (int)dev);
    return NULL;
  }
  if (t->data == NULL) {
    PyErr_SetString(PyExc_ValueError, "data is NULL for a non-empty tensor");
    return NULL;
  }
  uint64_t total;
  if (e.itemsize == 0 || e.itemsize > INT64_MAX ||
      __builtin_mul_overflow(e.numel, e.itemsize, &total) || total > (uint64_t)PY_SSIZE_T_MAX) {
    PyErr_SetString(PyExc_OverflowError, "numel * itemsize does not fit in memory");
    return NULL;
  }
  /* data + byte_offset + [lo, hi) must not wrap around the address space (LAY-03). */
  uintptr_t base;
  if (__builtin_add_overflow((uintptr_t)t->data, t->byte_offset, &base) ||
      (e.lo < 0 && base < (uintptr_t)(-(e.lo + 1)) + 1) ||
      (e.hi > 0 && base + (uintptr_t)e.hi < base)) {
    PyErr_SetString(PyExc_ValueError, "data + byte_offset + extent wraps the address space");
    return NULL;
  }
  PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
  if (out == NULL) return NULL;
  int rc = gather_into((const char *)base, t->ndim, t->shape, t->strides, (int64_t)e.itemsize,
                       PyBytes_AS_STRING(out));
  if (rc != 0) {
    Py_DECREF(out);
    if (rc == -2) return PyErr_NoMemory();
    PyErr_SetString(PyExc_ValueError, "stride arithmetic overflows");
    return NULL;
  }
  return out;
}

PyObject *probe_read_elements(PyObject *self, PyObject *obj) {
  (void)self;
  const DLTensor *t = probe_capsule_tensor(obj);
  if (t == NULL) return NULL;
  return probe_read_tensor(t);
}

/* A sequence of at most PROBE_MAX_NDIM ints into a PyMem buffer (*out, *n). */
static int int64_seq(PyObject *seq, const char *what, int64_t **out, Py_ssize_t *n) {
  PyObject *fast = PySequence_Fast(seq, what);
  if (fast == NULL) return -1;
  Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
  if (len > PROBE_MAX_NDIM) {
    Py_DECREF(fast);
    PyErr_Format(PyExc_ValueError, "%s has more than %d entries", what, PROBE_MAX_NDIM);
    return -1;
  }
  int64_t *v = PyMem_Malloc(sizeof(int64_t) * (size_t)(len ? len : 1));
  if (v == NULL) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    long long x = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (x == -1 && PyErr_Occurred()) {
      PyMem_Free(v);
      Py_DECREF(fast);
      return -1;
    }
    v[i] = (int64_t)x;
  }
  Py_DECREF(fast);
  *out = v;
  *n = len;
  return 0;
}

PyObject *probe_gather(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *addr_obj, *shape_obj, *strides_obj;
  Py_ssize_t itemsize;
  if (!PyArg_ParseTuple(args, "OOOn:gather", &addr_obj, &shape_obj, &strides_obj, &itemsize))
    return NULL;
  if (!PyLong_Check(addr_obj)) {
    PyErr_SetString(PyExc_TypeError, "address must be an int");
    return NULL;
  }
  unsigned long long addr = PyLong_AsUnsignedLongLong(addr_obj);
  if (PyErr_Occurred() || addr > UINTPTR_MAX) {
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "address out of range");
    return NULL;
  }
  /* The element size is expressed as a dtype of `itemsize` 8-bit lanes, so check's
   * dlc_dtype_itemsize gives it back exactly. */
  if (itemsize < 1 || itemsize > UINT16_MAX) {
    PyErr_SetString(PyExc_ValueError, "itemsize must be in [1, 65535]");
    return NULL;
  }
  int64_t *shape = NULL, *strides = NULL;
  Py_ssize_t ndim = 0, nstrides = 0;
  PyObject *out = NULL;
  if (int64_seq(shape_obj, "shape", &shape, &ndim) < 0) goto done;
  if (strides_obj != Py_None) {
    if (int64_seq(strides_obj, "strides", &strides, &nstrides) < 0) goto done;
    if (nstrides != ndim) {
      PyErr_SetString(PyExc_ValueError, "strides and shape differ in length");
      goto done;
    }
  }
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = (void *)(uintptr_t)addr;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = (int32_t)ndim;
  t.dtype.code = kDLUInt;
  t.dtype.bits = 8;
  t.dtype.lanes = (uint16_t)itemsize;
  t.shape = shape;
  t.strides = strides;
  t.byte_offset = 0;
  out = probe_read_tensor(&t);
done:
  PyMem_Free(shape);
  PyMem_Free(strides);
  return out;
}
