/* inspect.c: `inspect(capsule)`: a copy of a capsule's metadata, without consuming it. */
#include "probe.h"

static PyObject *int64_tuple(const int64_t *v, int32_t n) {
  PyObject *t = PyTuple_New(n);
  if (t == NULL) return NULL;
  for (int32_t i = 0; i < n; i++) {
    PyObject *x = PyLong_FromLongLong((long long)v[i]);
    if (x == NULL) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SET_ITEM(t, i, x);
  }
  return t;
}

/* shape/strides are followed only when 0 <= ndim <= PROBE_MAX_NDIM (LAY-09): a negative or
 * absurd ndim from a producer must not turn into a wild read. */
static PyObject *dims_or_none(const int64_t *v, int32_t ndim) {
  if (v == NULL || ndim < 0 || ndim > PROBE_MAX_NDIM) Py_RETURN_NONE;
  return int64_tuple(v, ndim);
}

int probe_tensor_fields(PyObject *d, const DLTensor *t) {
  /* device_type is read as the int32 the ABI stores, whatever the enum says. */
  int32_t dev_type = (int32_t)t->device.device_type;
  if (probe_put(d, "data", probe_ptr_int(t->data)) < 0) return -1;
  if (probe_put(d, "device", Py_BuildValue("(ii)", (int)dev_type, (int)t->device.device_id)) < 0)
    return -1;
  if (probe_put(d, "ndim", PyLong_FromLong((long)t->ndim)) < 0) return -1;
  if (probe_put(d, "dtype", Py_BuildValue("(iii)", (int)t->dtype.code, (int)t->dtype.bits,
                                          (int)t->dtype.lanes)) < 0)
    return -1;
  if (probe_put(d, "shape", dims_or_none(t->shape, t->ndim)) < 0) return -1;
  if (probe_put(d, "strides", dims_or_none(t->strides, t->ndim)) < 0) return -1;
  if (probe_put(d, "byte_offset", PyLong_FromUnsignedLongLong(t->byte_offset)) < 0) return -1;
  return 0;
}

const DLTensor *probe_readable_tensor(void *managed, int versioned) {
  if (!versioned) return &((DLManagedTensor *)managed)->dl_tensor;
  DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)managed;
  /* VER-08: with another major the layout after `flags` is unknown; only the deleter may
   * be used. */
  if (m->version.major != DLPACK_MAJOR_VERSION) {
    PyErr_Format(PyExc_ValueError,
                 "versioned tensor has major version %u, this probe reads %d: the tensor "
                 "fields must not be read (VER-08)",
                 (unsigned)m->version.major, DLPACK_MAJOR_VERSION);
    return NULL;
  }
  return &m->dl_tensor;
}

int probe_managed_fields(PyObject *d, void *managed, int versioned) {
  if (!versioned) {
    DLManagedTensor *m = (DLManagedTensor *)managed;
    if (PyDict_SetItemString(d, "version", Py_None) < 0) return -1;
    if (PyDict_SetItemString(d, "flags", Py_None) < 0) return -1;
    if (probe_put(d, "manager_ctx", probe_ptr_int(m->manager_ctx)) < 0) return -1;
    if (probe_put(d, "deleter", PROBE_FN_INT(m->deleter)) < 0) return -1;
    if (PyDict_SetItemString(d, "readable", Py_True) < 0) return -1;
    return probe_tensor_fields(d, &m->dl_tensor);
  }
  DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)managed;
  /* VER-10: version, manager_ctx, deleter and flags keep their offsets across majors, so
   * they are read for any version; dl_tensor only for our major (VER-08). */
  if (probe_put(d, "version", Py_BuildValue("(II)", (unsigned)m->version.major,
                                            (unsigned)m->version.minor)) < 0)
    return -1;
  if (probe_put(d, "flags", PyLong_FromUnsignedLongLong(m->flags)) < 0) return -1;
  if (probe_put(d, "manager_ctx", probe_ptr_int(m->manager_ctx)) < 0) return -1;
  if (probe_put(d, "deleter", PROBE_FN_INT(m->deleter)) < 0) return -1;
  int readable = m->version.major == DLPACK_MAJOR_VERSION;
  if (PyDict_SetItemString(d, "readable", readable ? Py_True : Py_False) < 0) return -1;
  if (!readable) return 0;
  return probe_tensor_fields(d, &m->dl_tensor);
}

PyObject *probe_name_str(const char *name) {
  if (name == NULL) Py_RETURN_NONE;
  return PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "backslashreplace");
}

PyObject *probe_inspect(PyObject *self, PyObject *obj) {
  (void)self;
  probe_capsule c;
  if (probe_capsule_read(obj, &c) < 0) return NULL;
  PyObject *d = PyDict_New();
  if (d == NULL) return NULL;
  if (probe_put(d, "name", probe_name_str(c.name)) < 0) goto fail;
  if (probe_put(d, "pointer", probe_ptr_int(c.pointer)) < 0) goto fail;
  if (probe_put(d, "kind", PyUnicode_FromString(probe_kind_str(c.kind))) < 0) goto fail;
  if (probe_put(d, "destructor", PROBE_FN_INT(c.destructor)) < 0) goto fail;
  /* CAP-04: a used_* capsule belongs to another consumer and its struct may be freed; an
   * unknown name says nothing about the pointer. Neither is dereferenced. */
  if (c.kind == PROBE_KIND_LEGACY || c.kind == PROBE_KIND_VERSIONED) {
    if (probe_managed_fields(d, c.pointer, c.kind == PROBE_KIND_VERSIONED) < 0) goto fail;
  }
  return d;
fail:
  Py_DECREF(d);
  return NULL;
}

const DLTensor *probe_capsule_tensor(PyObject *obj) {
  probe_capsule c;
  if (probe_capsule_read(obj, &c) < 0) return NULL;
  if (c.kind != PROBE_KIND_LEGACY && c.kind != PROBE_KIND_VERSIONED) {
    PyErr_Format(PyExc_ValueError,
                 "capsule named %s%s%s is %s: it is not dereferenced (CAP-04)",
                 c.name ? "'" : "", c.name ? c.name : "NULL", c.name ? "'" : "",
                 c.kind == PROBE_KIND_USED ? "already consumed" : "not a DLPack capsule");
    return NULL;
  }
  return probe_readable_tensor(c.pointer, c.kind == PROBE_KIND_VERSIONED);
}
