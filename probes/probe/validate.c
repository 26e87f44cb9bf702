/* validate.c: `check(capsule, spec)` and `extent(capsule)`: the pure-C validators of
 * check.h applied to a capsule's struct. */
#include "probe.h"

/* An ndim above PROBE_MAX_NDIM is reported as bad_ndim before dlc_extent_of would walk
 * ndim entries of a producer's shape array (LAY-09). */
dlc_extent probe_extent(const DLTensor *t) {
  if (t->ndim > PROBE_MAX_NDIM) {
    dlc_extent e;
    memset(&e, 0, sizeof e);
    e.status = DLC_EXTENT_BAD_NDIM;
    e.itemsize = dlc_dtype_itemsize(t->dtype);
    return e;
  }
  return dlc_extent_of(t);
}

PyObject *probe_extent_dict(const dlc_extent *e) {
  PyObject *d = PyDict_New();
  if (d == NULL) return NULL;
  if (probe_put(d, "status", PyUnicode_FromString(dlc_extent_status_name(e->status))) < 0 ||
      probe_put(d, "zero_size", PyBool_FromLong(e->zero_size)) < 0 ||
      probe_put(d, "numel", PyLong_FromUnsignedLongLong(e->numel)) < 0 ||
      probe_put(d, "itemsize", PyLong_FromUnsignedLongLong(e->itemsize)) < 0 ||
      probe_put(d, "lo", PyLong_FromLongLong(e->lo)) < 0 ||
      probe_put(d, "hi", PyLong_FromLongLong(e->hi)) < 0 ||
      probe_put(d, "row_major", PyBool_FromLong(e->row_major)) < 0) {
    Py_DECREF(d);
    return NULL;
  }
  return d;
}

PyObject *probe_extent_py(PyObject *self, PyObject *obj) {
  (void)self;
  const DLTensor *t = probe_capsule_tensor(obj);
  if (t == NULL) return NULL;
  dlc_extent e = probe_extent(t);
  return probe_extent_dict(&e);
}

/* A spec version: a 2-sequence of ints in [0, 2**32). */
static int parse_spec(PyObject *spec, uint32_t *major, uint32_t *minor) {
  if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 2) {
    PyErr_SetString(PyExc_TypeError, "spec must be a (major, minor) tuple of ints");
    return -1;
  }
  uint32_t out[2];
  for (int i = 0; i < 2; i++) {
    PyObject *v = PyTuple_GET_ITEM(spec, i);
    if (!PyLong_Check(v)) {
      PyErr_SetString(PyExc_TypeError, "spec must be a (major, minor) tuple of ints");
      return -1;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (PyErr_Occurred() || x > UINT32_MAX) {
      PyErr_Clear();
      PyErr_SetString(PyExc_ValueError, "spec version parts must be in [0, 2**32)");
      return -1;
    }
    out[i] = (uint32_t)x;
  }
  *major = out[0];
  *minor = out[1];
  return 0;
}

PyObject *probe_check(PyObject *self, PyObject *args, PyObject *kwargs) {
  (void)self;
  static char *kwlist[] = {"capsule", "spec", NULL};
  PyObject *obj, *spec = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:check", kwlist, &obj, &spec)) return NULL;
  uint32_t major = DLPACK_MAJOR_VERSION, minor = DLPACK_MINOR_VERSION;
  if (spec != NULL && spec != Py_None && parse_spec(spec, &major, &minor) < 0) return NULL;

  probe_capsule c;
  if (probe_capsule_read(obj, &c) < 0) return NULL;
  /* The capsule name decides which struct the pointer is (CAP-01, CAP-02); used or unknown
   * capsules are never dereferenced (CAP-04). */
  if (c.kind != PROBE_KIND_LEGACY && c.kind != PROBE_KIND_VERSIONED) {
    PyErr_Format(PyExc_ValueError, "cannot check a capsule named %s (%s)",
                 c.name ? c.name : "NULL", probe_kind_str(c.kind));
    return NULL;
  }
  dlc_report *r = PyMem_Malloc(sizeof *r);
  if (r == NULL) return PyErr_NoMemory();
  dlc_report_init(r);
  if (c.kind == PROBE_KIND_LEGACY)
    dlc_check_managed((const DLManagedTensor *)c.pointer, major, minor, r);
  else
    dlc_check_versioned((const DLManagedTensorVersioned *)c.pointer, major, minor, r);

  PyObject *out = PyList_New(0);
  if (out == NULL) goto done;
  for (int i = 0; i < r->count && i < DLC_MAX_VIOLATIONS; i++) {
    /* The message buffer is read at most DLC_MESSAGE_LEN bytes, terminated or not. */
    const char *msg = r->items[i].message;
    PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strnlen(msg, DLC_MESSAGE_LEN),
                                          "backslashreplace");
    PyObject *item = text == NULL ? NULL
                                  : Py_BuildValue("(sN)", r->items[i].clause ? r->items[i].clause
                                                                             : "?", text);
    if (item == NULL || PyList_Append(out, item) < 0) {
      Py_XDECREF(item);
      Py_CLEAR(out);
      goto done;
    }
    Py_DECREF(item);
  }
done:
  PyMem_Free(r);
  return out;
}
