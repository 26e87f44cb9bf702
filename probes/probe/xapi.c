/* xapi.c: call the functions of a DLPackExchangeAPI table, as a consumer would.
 *
 * Every helper takes the table's address (an int, from exchange_api()["pointer"]), checks
 * the header's major before touching the function pointers (XAPI-06) and refuses a NULL
 * function instead of calling it (XAPI-08..12). Return codes and Python exceptions are
 * returned, not raised, so a check can judge them: a function that fails must set an
 * exception (XAPI-14..17), and the allocator must report through SetError exactly when it
 * fails (XAPI-13). Tensors handed out come back as Handles (versioned, no capsule) that
 * call the deleter once (OWN-03).
 */
#include "probe.h"

#include <stdlib.h>
#include <string.h>

static const DLPackExchangeAPI *api_from(PyObject *ptr) {
  if (!PyLong_Check(ptr)) {
    PyErr_SetString(PyExc_TypeError, "api must be the table's address as an int");
    return NULL;
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(ptr);
  if ((v == (unsigned long long)-1 && PyErr_Occurred()) || v > UINTPTR_MAX || v == 0) {
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "api address must be a non-zero unsigned pointer");
    return NULL;
  }
  void *p = (void *)(uintptr_t)v;
  const DLPackExchangeAPI *api = (const DLPackExchangeAPI *)p;
  if (api->header.version.major != DLPACK_MAJOR_VERSION) {
    PyErr_Format(PyExc_ValueError,
                 "exchange API major %u differs from %d: the table must not be used (XAPI-06)",
                 (unsigned)api->header.version.major, DLPACK_MAJOR_VERSION);
    return NULL;
  }
  return api;
}

static int null_fn(const void *fn, const char *name, const char *clause) {
  if (fn != NULL) return 0;
  PyErr_Format(PyExc_NotImplementedError, "%s is NULL (%s)", name, clause);
  return -1;
}

/* The pending exception, normalised, as a new reference (traceback attached), or None. */
static PyObject *take_exception(void) {
  if (!PyErr_Occurred()) Py_RETURN_NONE;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (value != NULL && tb != NULL) PyException_SetTraceback(value, tb);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  if (value == NULL) Py_RETURN_NONE;
  return value;
}

/* A function that returned 0 must not leave an exception set: that is a SystemError, as
 * CPython reports it for its own functions. */
static int success_without_exception(const char *fn) {
  if (!PyErr_Occurred()) return 0;
  PyObject *exc = take_exception();
  PyErr_Format(PyExc_SystemError, "%s returned 0 with an exception set: %R", fn, exc);
  Py_DECREF(exc);
  return -1;
}

PyObject *probe_xapi_managed_from(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *ptr, *obj;
  if (!PyArg_ParseTuple(args, "OO:xapi_managed_from", &ptr, &obj)) return NULL;
  const DLPackExchangeAPI *api = api_from(ptr);
  if (api == NULL) return NULL;
  DLPackManagedTensorFromPyObjectNoSync fn = api->managed_tensor_from_py_object_no_sync;
  if (null_fn((const void *)(uintptr_t)fn, "managed_tensor_from_py_object_no_sync", "XAPI-09"))
    return NULL;
  DLManagedTensorVersioned *out = NULL;
  int rc = fn((void *)obj, &out);
  PyObject *exc = take_exception();
  PyObject *handle;
  if (rc == 0 && out != NULL) {
    /* XAPI-14: an owning versioned tensor; the Handle calls its deleter once. */
    handle = probe_handle_new(out, 1, NULL, NULL);
    if (handle == NULL) {
      Py_DECREF(exc);
      return NULL;
    }
  } else {
    /* On failure `out` is not ours to interpret. */
    handle = Py_None;
    Py_INCREF(handle);
  }
  return Py_BuildValue("(iNN)", rc, handle, exc);
}

PyObject *probe_xapi_dltensor_from(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *ptr, *obj;
  if (!PyArg_ParseTuple(args, "OO:xapi_dltensor_from", &ptr, &obj)) return NULL;
  const DLPackExchangeAPI *api = api_from(ptr);
  if (api == NULL) return NULL;
  DLPackDLTensorFromPyObjectNoSync fn = api->dltensor_from_py_object_no_sync;
  /* XAPI-11: this one may be NULL; the caller decides what that means. */
  if (null_fn((const void *)(uintptr_t)fn, "dltensor_from_py_object_no_sync", "XAPI-11"))
    return NULL;
  DLTensor t;
  memset(&t, 0, sizeof t);
  int rc = fn((void *)obj, &t);
  if (rc != 0) return Py_BuildValue("(iN)", rc, take_exception());
  if (success_without_exception("dltensor_from_py_object_no_sync") < 0) return NULL;
  /* XAPI-15: shape, strides and data are valid only until control returns to the producer,
   * so everything (elements included) is copied now. */
  PyObject *d = PyDict_New();
  if (d == NULL) return NULL;
  if (probe_tensor_fields(d, &t) < 0) goto fail;
  dlc_extent e = probe_extent(&t);
  if (probe_put(d, "extent", probe_extent_dict(&e)) < 0) goto fail;
  PyObject *elements = probe_read_tensor(&t);
  if (elements == NULL) {
    PyObject *err = take_exception();
    PyObject *msg = PyObject_Str(err);
    Py_DECREF(err);
    if (probe_put(d, "elements_error", msg) < 0) goto fail;
    elements = Py_None;
    Py_INCREF(elements);
  }
  if (probe_put(d, "elements", elements) < 0) goto fail;
  return Py_BuildValue("(iN)", rc, d);
fail:
  Py_DECREF(d);
  return NULL;
}

PyObject *probe_xapi_current_stream(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *ptr;
  int device_type, device_id;
  if (!PyArg_ParseTuple(args, "Oii:xapi_current_stream", &ptr, &device_type, &device_id))
    return NULL;
  const DLPackExchangeAPI *api = api_from(ptr);
  if (api == NULL) return NULL;
  DLPackCurrentWorkStream fn = api->current_work_stream;
  if (null_fn((const void *)(uintptr_t)fn, "current_work_stream", "XAPI-12")) return NULL;
  void *stream = NULL;
  int rc = fn((DLDeviceType)device_type, (int32_t)device_id, &stream);
  if (rc != 0) return Py_BuildValue("(iN)", rc, take_exception());
  if (success_without_exception("current_work_stream") < 0) return NULL;
  /* XAPI-16: NULL is a valid answer for kDLCPU. */
  return Py_BuildValue("(iN)", rc, probe_ptr_int(stream));
}

/* ---- allocator SetError recording (XAPI-13) ---------------------------------------- */

#define SETERR_MAX 8
#define SETERR_LEN 4096

/* Filled by set_error, which may run without the GIL (XAPI-13 says SetError may have to
 * take it): plain C only. */
typedef struct {
  int count; /* calls seen (records saturate at SETERR_MAX) */
  char *kind[SETERR_MAX];
  char *message[SETERR_MAX];
} seterr_ctx;

static char *copy_cstr(const char *s) {
  if (s == NULL) return NULL;
  size_t n = strnlen(s, SETERR_LEN);
  char *c = malloc(n + 1);
  if (c == NULL) return NULL;
  memcpy(c, s, n);
  c[n] = '\0';
  return c;
}

static void set_error(void *error_ctx, const char *kind, const char *message) {
  seterr_ctx *ctx = (seterr_ctx *)error_ctx;
  if (ctx == NULL) return;
  if (ctx->count < SETERR_MAX) {
    ctx->kind[ctx->count] = copy_cstr(kind);
    ctx->message[ctx->count] = copy_cstr(message);
  }
  ctx->count++;
}

static PyObject *cstr_or_none(const char *s) {
  if (s == NULL) Py_RETURN_NONE;
  return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "backslashreplace");
}

static int parse_int_tuple(PyObject *o, const char *what, Py_ssize_t n, long long *out) {
  if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != n) {
    PyErr_Format(PyExc_TypeError, "%s must be a tuple of %zd ints", what, n);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    out[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(o, i));
    if (out[i] == -1 && PyErr_Occurred()) return -1;
  }
  return 0;
}

PyObject *probe_xapi_alloc(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *ptr, *dtype_obj, *shape_obj, *device_obj;
  if (!PyArg_ParseTuple(args, "OOOO:xapi_alloc", &ptr, &dtype_obj, &shape_obj, &device_obj))
    return NULL;
  const DLPackExchangeAPI *api = api_from(ptr);
  if (api == NULL) return NULL;
  DLPackManagedTensorAllocator fn = api->managed_tensor_allocator;
  if (null_fn((const void *)(uintptr_t)fn, "managed_tensor_allocator", "XAPI-08")) return NULL;

  long long dt[3], dev[2];
  if (parse_int_tuple(dtype_obj, "dtype", 3, dt) < 0) return NULL;
  if (parse_int_tuple(device_obj, "device", 2, dev) < 0) return NULL;
  if (dt[0] < 0 || dt[0] > UINT8_MAX || dt[1] < 0 || dt[1] > UINT8_MAX || dt[2] < 0 ||
      dt[2] > UINT16_MAX || dev[0] < INT32_MIN || dev[0] > INT32_MAX || dev[1] < INT32_MIN ||
      dev[1] > INT32_MAX) {
    PyErr_SetString(PyExc_ValueError, "dtype or device value out of range for its field");
    return NULL;
  }
  if (!PyTuple_Check(shape_obj) || PyTuple_GET_SIZE(shape_obj) > PROBE_MAX_NDIM) {
    PyErr_Format(PyExc_TypeError, "shape must be a tuple of at most %d ints", PROBE_MAX_NDIM);
    return NULL;
  }
  Py_ssize_t ndim = PyTuple_GET_SIZE(shape_obj);
  int64_t *shape = PyMem_Malloc(sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
  if (shape == NULL) return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < ndim; i++) {
    long long x = PyLong_AsLongLong(PyTuple_GET_ITEM(shape_obj, i));
    if (x == -1 && PyErr_Occurred()) {
      PyMem_Free(shape);
      return NULL;
    }
    shape[i] = (int64_t)x;
  }
  /* XAPI-13: only dtype, ndim, shape and device of the prototype are to be used. */
  DLTensor proto;
  memset(&proto, 0, sizeof proto);
  proto.dtype.code = (uint8_t)dt[0];
  proto.dtype.bits = (uint8_t)dt[1];
  proto.dtype.lanes = (uint16_t)dt[2];
  proto.device.device_type = (DLDeviceType)dev[0];
  proto.device.device_id = (int32_t)dev[1];
  proto.ndim = (int32_t)ndim;
  proto.shape = shape;

  seterr_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  DLManagedTensorVersioned *out = NULL;
  int rc = fn(&proto, &out, &ctx, set_error);
  PyMem_Free(shape);

  PyObject *result = NULL, *handle = NULL, *errors = PyList_New(0);
  if (errors == NULL) goto done;
  int n = ctx.count < SETERR_MAX ? ctx.count : SETERR_MAX;
  for (int i = 0; i < n; i++) {
    PyObject *rec = Py_BuildValue("(NN)", cstr_or_none(ctx.kind[i]), cstr_or_none(ctx.message[i]));
    if (rec == NULL || PyList_Append(errors, rec) < 0) {
      Py_XDECREF(rec);
      goto done;
    }
    Py_DECREF(rec);
  }
  /* An allocator reports through SetError, not a Python exception (XAPI-13); one left
   * pending is recorded as a pseudo-record so it is neither lost nor raised. */
  if (PyErr_Occurred()) {
    PyObject *exc = take_exception();
    PyObject *rec = Py_BuildValue("(sN)", "<python exception pending>", PyObject_Repr(exc));
    Py_DECREF(exc);
    if (rec == NULL || PyList_Append(errors, rec) < 0) {
      Py_XDECREF(rec);
      goto done;
    }
    Py_DECREF(rec);
  }
  if (rc == 0 && out != NULL) {
    handle = probe_handle_new(out, 1, NULL, NULL);
    if (handle == NULL) goto done;
  } else {
    handle = Py_None;
    Py_INCREF(handle);
  }
  result = Py_BuildValue("(iNO)", rc, handle, errors);
done:
  Py_XDECREF(errors);
  for (int i = 0; i < SETERR_MAX; i++) {
    free(ctx.kind[i]);
    free(ctx.message[i]);
  }
  return result;
}

PyObject *probe_xapi_to_py(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *ptr, *handle;
  if (!PyArg_ParseTuple(args, "OO:xapi_to_py", &ptr, &handle)) return NULL;
  const DLPackExchangeAPI *api = api_from(ptr);
  if (api == NULL) return NULL;
  DLPackManagedTensorToPyObjectNoSync fn = api->managed_tensor_to_py_object_no_sync;
  if (null_fn((const void *)(uintptr_t)fn, "managed_tensor_to_py_object_no_sync", "XAPI-10"))
    return NULL;
  /* XAPI-17: the callee steals the tensor, on success and on failure alike; the Handle
   * gives it up first so that its deleter is never called from here. */
  DLManagedTensorVersioned *m = probe_handle_steal_versioned(handle);
  if (m == NULL) return NULL;
  void *out = NULL;
  int rc = fn(m, &out);
  /* On failure `out` is not interpreted (it may be garbage): never dereferenced. */
  if (rc != 0) return Py_BuildValue("(iN)", rc, take_exception());
  if (success_without_exception("managed_tensor_to_py_object_no_sync") < 0) {
    Py_XDECREF((PyObject *)out);
    return NULL;
  }
  if (out == NULL) return Py_BuildValue("(iO)", rc, Py_None);
  return Py_BuildValue("(iN)", rc, (PyObject *)out);
}
