/* tensor: the reference strided CPU tensor, the Python type dlconform._ref.Tensor. What its
 * exports are made of is tensor_core.c's; __dlpack__ is export.c's.
 *
 * Invariants of a RefTensor:
 *  - buf holds one reference; data is buf's start for an owned buffer (256-byte aligned,
 *    LAY-01) or the imported DLTensor.data; data is NULL when the tensor is zero-size
 *    (LAY-04);
 *  - every element lies in [buf->lo, buf->hi) (checked with dlc_extent_of at creation);
 *  - shape/strides (elements) are owned copies, immutable; strides are never NULL for
 *    ndim > 0, so exports always carry strides (LAY-06);
 *  - readonly and exportable never change, so a cached export stays correct. */
#include "ref.h"

#include <stdlib.h>
#include <string.h>

/* ---- construction ----------------------------------------------------------------- */

RefTensor *ref_tensor_over(ref_buf *buf, char *data, uint64_t byte_offset, DLDataType dtype,
                           int32_t ndim, const int64_t *shape, const int64_t *strides,
                           int readonly) {
  int64_t rm[REF_MAX_NDIM];
  if (ndim < 0 || ndim > REF_MAX_NDIM) {
    ref_buf_decref(buf);
    PyErr_Format(PyExc_ValueError, "ndim %d out of range", (int)ndim);
    return NULL;
  }
  if (!strides) {
    if (dlc_row_major_strides(ndim, shape, rm) != 0) {
      ref_buf_decref(buf);
      PyErr_SetString(PyExc_ValueError, "shape has a negative extent or overflows");
      return NULL;
    }
    strides = rm;
  }
  DLTensor probe = {data, {kDLCPU, 0}, ndim, dtype, (int64_t *)shape, (int64_t *)strides,
                    byte_offset};
  dlc_extent e = dlc_extent_of(&probe);
  if (e.status != DLC_EXTENT_OK) {
    ref_buf_decref(buf);
    PyErr_Format(PyExc_ValueError, "invalid layout (extent status %d)", (int)e.status);
    return NULL;
  }
  if (!e.zero_size) {
    /* every byte touched must lie inside the buffer: data + byte_offset + [lo, hi) */
    uintptr_t first = (uintptr_t)data;
    int ok = data != NULL && byte_offset <= (uint64_t)INT64_MAX;
    if (ok) {
      int64_t lo = (int64_t)byte_offset + e.lo; /* e.lo <= 0: no overflow */
      ok = lo >= 0 || (uint64_t)(-lo) <= first;
      if (ok) {
        uintptr_t start = lo >= 0 ? first + (uintptr_t)lo : first - (uintptr_t)(-lo);
        ok = start >= buf->lo && (uint64_t)(e.hi - e.lo) <= buf->hi - start;
      }
    }
    if (!ok) {
      ref_buf_decref(buf);
      PyErr_SetString(PyExc_ValueError, "the view's extent leaves the buffer");
      return NULL;
    }
  }
  RefTensor *t = PyObject_New(RefTensor, &RefTensor_Type);
  if (!t) {
    ref_buf_decref(buf);
    return NULL;
  }
  t->buf = buf;
  t->data = e.zero_size ? NULL : data; /* LAY-04 */
  t->byte_offset = byte_offset;
  t->dtype = dtype;
  t->itemsize = (size_t)e.itemsize;
  t->subbyte = dlc_dtype_classify(dtype, REF_SPEC_MAJOR, REF_SPEC_MINOR).subbyte;
  t->ndim = ndim;
  t->shape = NULL;
  t->strides = NULL;
  t->numel = e.zero_size ? 0 : e.numel;
  t->zero_size = e.zero_size;
  t->readonly = readonly;
  t->exportable = 1;
  atomic_init(&t->cache, NULL);
  t->cache_gil = NULL;
  if (ndim > 0) {
    t->shape = malloc(sizeof(int64_t) * (size_t)ndim);
    t->strides = malloc(sizeof(int64_t) * (size_t)ndim);
    if (!t->shape || !t->strides) {
      Py_DECREF(t);
      PyErr_NoMemory();
      return NULL;
    }
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    memcpy(t->strides, strides, sizeof(int64_t) * (size_t)ndim);
  }
  return t;
}

static PyObject *Tensor_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  (void)type;
  static char *kwlist[] = {"dtype", "shape", "strides", "byte_offset", "data", "readonly",
                           "exportable", NULL};
  PyObject *dtype_obj, *shape_obj, *strides_obj = Py_None, *data_obj = Py_None;
  unsigned long long byte_offset = 0;
  int readonly = 0, exportable = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$OKOpp", kwlist, &dtype_obj, &shape_obj,
                                   &strides_obj, &byte_offset, &data_obj, &readonly,
                                   &exportable))
    return NULL;
  DLDataType dt;
  int64_t shape[REF_MAX_NDIM], strides[REF_MAX_NDIM];
  if (ref_parse_dtype(dtype_obj, &dt) < 0) return NULL;
  int ndim = ref_parse_dims(shape_obj, "shape", shape);
  if (ndim < 0) return NULL;
  if (strides_obj == Py_None) {
    if (dlc_row_major_strides(ndim, shape, strides) != 0) {
      PyErr_SetString(PyExc_ValueError, "shape has a negative extent or overflows");
      return NULL;
    }
  } else {
    int ns = ref_parse_dims(strides_obj, "strides", strides);
    if (ns < 0) return NULL;
    if (ns != ndim) {
      PyErr_SetString(PyExc_ValueError, "strides must have one entry per dim");
      return NULL;
    }
  }
  DLTensor probe = {NULL, {kDLCPU, 0}, ndim, dt, shape, strides, byte_offset};
  dlc_extent e = dlc_extent_of(&probe);
  if (e.status != DLC_EXTENT_OK) {
    PyErr_Format(PyExc_ValueError, "invalid layout (extent status %d)", (int)e.status);
    return NULL;
  }
  /* The buffer covers exactly [data, data + byte_offset + hi); data is its aligned start,
   * so byte_offset must reach the lowest element (negative strides). */
  size_t size = 0;
  if (!e.zero_size) {
    if (byte_offset > (unsigned long long)INT64_MAX || (int64_t)byte_offset + e.lo < 0 ||
        (uint64_t)e.hi > (uint64_t)INT64_MAX - byte_offset) {
      PyErr_SetString(PyExc_ValueError,
                      "byte_offset must reach the lowest element (negative strides)");
      return NULL;
    }
    size = (size_t)(byte_offset + (uint64_t)e.hi);
  }
  Py_buffer in = {0};
  if (data_obj != Py_None) {
    if (PyObject_GetBuffer(data_obj, &in, PyBUF_SIMPLE) < 0) return NULL;
    if ((uint64_t)in.len != e.numel * e.itemsize * (e.zero_size ? 0 : 1)) {
      PyBuffer_Release(&in);
      PyErr_Format(PyExc_ValueError, "data must hold numel * itemsize = %llu bytes",
                   (unsigned long long)(e.zero_size ? 0 : e.numel * e.itemsize));
      return NULL;
    }
  }
  ref_buf *buf = ref_buf_alloc(size);
  if (!buf) {
    if (data_obj != Py_None) PyBuffer_Release(&in);
    return PyErr_NoMemory();
  }
  char *data = buf->mem;
  if (data_obj != Py_None) {
    if (!e.zero_size)
      ref_scatter(data + byte_offset, ndim, shape, strides, (size_t)e.itemsize, in.buf);
    PyBuffer_Release(&in);
  }
  RefTensor *t = ref_tensor_over(buf, data, byte_offset, dt, ndim, shape, strides, readonly);
  if (t) t->exportable = exportable;
  return (PyObject *)t;
}

static void Tensor_dealloc(RefTensor *self) {
  /* an import given back as the interpreter finalises (consumer_release_dies_at_exit, OWN-03) */
  if (self->buf && (self->buf->legacy || self->buf->versioned))
    ref_twist_at_exit(FAULT_CONSUMER_RELEASE_DIES_AT_EXIT);
  ref_cache_release(self);
  ref_buf_decref(self->buf);
  free(self->shape);
  free(self->strides);
  PyObject_Free(self);
}

/* ---- methods ---------------------------------------------------------------------- */

static PyObject *Tensor_tobytes(RefTensor *self, PyObject *unused) {
  (void)unused;
  size_t n = self->zero_size ? 0 : (size_t)self->numel * self->itemsize;
  PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
  if (!out || n == 0) return out;
  ref_gather(self->data + self->byte_offset, self->ndim, self->shape, self->strides,
             self->itemsize, PyBytes_AS_STRING(out));
  return out;
}

/* write(data): writes logical row-major element bytes through the strides. */
static PyObject *Tensor_write(RefTensor *self, PyObject *arg) {
  if (self->readonly) {
    PyErr_SetString(PyExc_ValueError, "tensor is read-only");
    return NULL;
  }
  Py_buffer in;
  if (PyObject_GetBuffer(arg, &in, PyBUF_SIMPLE) < 0) return NULL;
  size_t n = self->zero_size ? 0 : (size_t)self->numel * self->itemsize;
  if ((size_t)in.len != n) {
    PyBuffer_Release(&in);
    PyErr_Format(PyExc_ValueError, "data must hold %zu bytes", n);
    return NULL;
  }
  if (n)
    ref_scatter(self->data + self->byte_offset, self->ndim, self->shape, self->strides,
                self->itemsize, in.buf);
  PyBuffer_Release(&in);
  Py_RETURN_NONE;
}

static PyObject *Tensor_view(RefTensor *self, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"shape", "strides", "byte_offset", NULL};
  PyObject *shape_obj, *strides_obj = Py_None, *off_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO", kwlist, &shape_obj, &strides_obj,
                                   &off_obj))
    return NULL;
  int64_t shape[REF_MAX_NDIM], strides[REF_MAX_NDIM];
  int ndim = ref_parse_dims(shape_obj, "shape", shape);
  if (ndim < 0) return NULL;
  const int64_t *sp = NULL;
  if (strides_obj != Py_None) {
    int ns = ref_parse_dims(strides_obj, "strides", strides);
    if (ns < 0) return NULL;
    if (ns != ndim) {
      PyErr_SetString(PyExc_ValueError, "strides must have one entry per dim");
      return NULL;
    }
    sp = strides;
  }
  uint64_t off = self->byte_offset;
  if (off_obj != Py_None) {
    unsigned long long v = PyLong_AsUnsignedLongLong(off_obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    off = v;
  }
  /* a zero-size base has no data pointer; its views are zero-size or rejected */
  char *data = self->data;
  if (!data && self->buf->mem) data = self->buf->mem;
  ref_buf_incref(self->buf);
  RefTensor *v = ref_tensor_over(self->buf, data, off, self->dtype, ndim, shape, sp,
                                 self->readonly);
  if (v) v->exportable = self->exportable;
  return (PyObject *)v;
}

static PyObject *Tensor_dlpack_device(RefTensor *self, PyObject *unused) {
  (void)unused;
  int imported = self->buf->legacy || self->buf->versioned; /* a from_dlpack result */
  DLDevice d = ref_twist_tensor_device((DLDevice){kDLCPU, 0}, imported);
  return Py_BuildValue("(ii)", (int)d.device_type, (int)d.device_id);
}

static PyMethodDef Tensor_methods[] = {
    {"tobytes", (PyCFunction)Tensor_tobytes, METH_NOARGS,
     "Logical row-major element bytes."},
    {"write", (PyCFunction)Tensor_write, METH_O,
     "Write logical row-major element bytes through the strides (ValueError if read-only)."},
    {"view", (PyCFunction)(void (*)(void))Tensor_view, METH_VARARGS | METH_KEYWORDS,
     "view(shape, strides=None, byte_offset=None): a tensor over the same buffer; "
     "byte_offset counts from data_ptr (default: this tensor's)."},
    {"__dlpack_device__", (PyCFunction)Tensor_dlpack_device, METH_NOARGS,
     "(device_type, device_id): (1, 0)."},
    {"__dlpack__", (PyCFunction)(void (*)(void))ref_tensor_dlpack,
     METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)"},
    {NULL, NULL, 0, NULL},
};

/* ---- attributes ------------------------------------------------------------------- */

/* GETTER(name, expression of s): a read-only attribute */
#define GETTER(fn, expr)                              \
  static PyObject *fn(RefTensor *s, void *closure) {  \
    (void)closure;                                    \
    return expr;                                      \
  }
GETTER(get_shape, ref_dims_tuple(s->ndim, s->shape))
GETTER(get_strides, ref_dims_tuple(s->ndim, s->strides))
GETTER(get_dtype, Py_BuildValue("(III)", (unsigned)s->dtype.code, (unsigned)s->dtype.bits,
                                (unsigned)s->dtype.lanes))
GETTER(get_itemsize, PyLong_FromSize_t(s->itemsize))
GETTER(get_byte_offset, PyLong_FromUnsignedLongLong(s->byte_offset))
GETTER(get_data_ptr, PyLong_FromVoidPtr(s->data))
GETTER(get_readonly, PyBool_FromLong(s->readonly))
GETTER(get_exportable, PyBool_FromLong(s->exportable))
GETTER(get_ndim, PyLong_FromLong(s->ndim))
#undef GETTER
static PyObject *get_nbytes(RefTensor *s, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(s->zero_size ? 0 : s->numel * s->itemsize);
}

static PyGetSetDef Tensor_getset[] = {
    {"shape", (getter)get_shape, NULL, "extents", NULL},
    {"strides", (getter)get_strides, NULL, "strides in elements", NULL},
    {"dtype", (getter)get_dtype, NULL, "(code, bits, lanes)", NULL},
    {"itemsize", (getter)get_itemsize, NULL, "bytes per element", NULL},
    {"byte_offset", (getter)get_byte_offset, NULL, "DLTensor.byte_offset", NULL},
    {"data_ptr", (getter)get_data_ptr, NULL, "DLTensor.data as exported", NULL},
    {"readonly", (getter)get_readonly, NULL, "exports carry READ_ONLY", NULL},
    {"exportable", (getter)get_exportable, NULL, "False: __dlpack__ raises BufferError", NULL},
    {"ndim", (getter)get_ndim, NULL, "number of dims", NULL},
    {"nbytes", (getter)get_nbytes, NULL, "numel * itemsize", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject RefTensor_Type = {
    REF_TYPE_HEAD("Tensor", RefTensor),
    .tp_dealloc = (destructor)Tensor_dealloc,
    .tp_doc = "Tensor(dtype, shape, *, strides=None, byte_offset=0, data=None, "
              "readonly=False, exportable=True): the reference strided CPU tensor.",
    .tp_methods = Tensor_methods,
    .tp_getset = Tensor_getset,
    .tp_new = Tensor_new,
};
