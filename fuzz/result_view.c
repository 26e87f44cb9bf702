/* result_view: see result_view.h. */
#include "result_view.h"

#include <stdlib.h>
#include <string.h>

#include "devmem.h"
#include "record.h"

/* Storage of the one CUDA array interface view alive at a time (check_result's), and the
 * stream its interface names (v3 "stream": work on it comes before a read; 0: none). */
static Py_ssize_t cai_shape[DLC_REC_MAX_NDIM], cai_strides[DLC_REC_MAX_NDIM];
uintptr_t dlc_cai_stream;

/* The result's __cuda_array_interface__ (the CUDA libraries' own description of device
 * memory: data (address, readonly), shape, strides in bytes or None for row-major, typestr)
 * as a view in *v, with buf, ndim, itemsize, shape and strides set and obj NULL: 1, or 0 when
 * the result has none, a malformed one, or none with an address. Its readonly is not used:
 * torch and cupy cannot express read-only memory and always say False (FLG-03 asks nothing of
 * them). */
static int cai_view(PyObject *result, Py_buffer *v) {
  PyObject *cai = PyObject_GetAttrString(result, "__cuda_array_interface__");
  int ok = 0;
  if (cai == NULL || !PyDict_Check(cai)) goto done;
  PyObject *data = PyDict_GetItemString(cai, "data"), *shape = PyDict_GetItemString(cai, "shape");
  PyObject *strides = PyDict_GetItemString(cai, "strides");
  PyObject *typestr = PyDict_GetItemString(cai, "typestr");
  PyObject *stream = PyDict_GetItemString(cai, "stream");
  dlc_cai_stream = stream != NULL && PyLong_Check(stream) ? (uintptr_t)PyLong_AsVoidPtr(stream) : 0;
  if (data == NULL || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) < 1 || shape == NULL ||
      !PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) > DLC_REC_MAX_NDIM || typestr == NULL ||
      !PyUnicode_Check(typestr))
    goto done;
  const char *ts = PyUnicode_AsUTF8(typestr);
  long itemsize = ts != NULL && strlen(ts) > 2 ? strtol(ts + 2, NULL, 10) : 0;
  void *buf = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
  if (itemsize <= 0 || buf == NULL) goto done;
  int ndim = (int)PyTuple_GET_SIZE(shape);
  int has_strides = strides != NULL && strides != Py_None;
  if (has_strides && (!PyTuple_Check(strides) || PyTuple_GET_SIZE(strides) != ndim)) goto done;
  for (int i = 0; i < ndim; ++i) {
    cai_shape[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
    if (has_strides) cai_strides[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, i));
  }
  if (PyErr_Occurred()) goto done;
  if (!has_strides) /* row-major in bytes; a product past Py_ssize_t is no view */
    for (int i = ndim - 1; i >= 0; --i) {
      if (i == ndim - 1) cai_strides[i] = itemsize;
      else if (__builtin_mul_overflow(cai_strides[i + 1], cai_shape[i + 1], &cai_strides[i]))
        goto done;
    }
  memset(v, 0, sizeof *v);
  v->buf = buf;
  v->ndim = ndim;
  v->itemsize = itemsize;
  v->readonly = 0;
  v->shape = cai_shape;
  v->strides = cai_strides;
  ok = 1;
done:
  Py_XDECREF(cai);
  PyErr_Clear();
  return ok;
}

const uint8_t *dlc_result_address(PyObject *result, Py_buffer *view, int *have_view) {
  *have_view = 0;
  if (PyObject_CheckBuffer(result)) {
    if (PyObject_GetBuffer(result, view, PyBUF_RECORDS_RO) == 0) {
      *have_view = 1;
      /* NULL strides mean C-contiguous (the buffer protocol): spelled out for the oracles */
      static Py_ssize_t contiguous[DLC_REC_MAX_NDIM];
      if (view->strides == NULL && view->shape != NULL && view->ndim <= DLC_REC_MAX_NDIM) {
        Py_ssize_t s = view->itemsize;
        for (int i = view->ndim - 1; i >= 0; --i) {
          contiguous[i] = s;
          s *= view->shape[i];
        }
        view->strides = contiguous;
      }
      return view->buf;
    }
    PyErr_Clear();
  }
  if (dlc_devmem_active() && cai_view(result, view)) {
    *have_view = 2;
    return view->buf;
  }
  /* data_ptr: a method (torch: first element) or an int attribute (ref: DLTensor.data, with
   * a byte_offset attribute next to it). */
  PyObject *ptr = PyObject_GetAttrString(result, "data_ptr");
  if (ptr != NULL && PyCallable_Check(ptr)) Py_SETREF(ptr, PyObject_CallNoArgs(ptr));
  if (ptr == NULL || !PyLong_Check(ptr)) {
    Py_XDECREF(ptr);
    PyErr_Clear();
    return NULL;
  }
  uintptr_t addr = (uintptr_t)PyLong_AsVoidPtr(ptr);
  Py_DECREF(ptr);
  PyObject *off = PyObject_GetAttrString(result, "byte_offset");
  if (off != NULL && PyLong_Check(off)) addr += (uintptr_t)PyLong_AsSsize_t(off);
  Py_XDECREF(off);
  PyErr_Clear();
  return (const uint8_t *)addr; /* integer arithmetic: data may be NULL */
}
