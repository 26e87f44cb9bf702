/* export: Tensor.__dlpack__, and the no-copy versioned export it shares with
 * managed_tensor_from_py_object_no_sync.
 *
 * Invariants of what it exports: strides are non-NULL for ndim > 0 (LAY-06), data is NULL
 * for zero-size (LAY-04), versioned exports carry version (1, 3) (VER-07) and only defined
 * flags (FLG-01); a copy is compact and row-major, flagged IS_COPIED and never READ_ONLY
 * (FLG-04). The structs and their deleters are managed.c's. */
#include "ref.h"

DLManagedTensorVersioned *ref_export_versioned_fresh(RefTensor *t) {
  DLTensor dl;
  int64_t scratch[REF_MAX_NDIM];
  ref_tensor_fill(t, &dl);
  ref_twist_export_tensor(&dl, 1, scratch);
  return ref_make_versioned(t->buf, &dl, ref_export_flags(t, 0));
}

DLManagedTensorVersioned *ref_export_versioned_nocopy(RefTensor *t) {
  /* the cache holds clean exports only: a fault that alters them gets a fresh struct */
  if (ref_fault_changes_export()) return ref_export_versioned_fresh(t);
#ifdef Py_GIL_DISABLED
  return ref_cache_handout(t);
#else
  return ref_cache_handout_gil(t);
#endif
}

/* ---- reading the request ------------------------------------------------------------ */

/* STR-10 whatever max_version asks for (with_max_version: it was given). */
static int check_stream(PyObject *stream, int with_max_version) {
  if (stream == Py_None) return 0;
  if (PyLong_Check(stream) && !PyBool_Check(stream))
    return ref_refuse(with_max_version ? REF_REFUSE_CPU_STREAM_VERSIONED : REF_REFUSE_CPU_STREAM,
                      "stream must be None for a CPU tensor"); /* STR-10 */
  PyErr_Format(PyExc_TypeError, "stream must be None or an int, not %.100s", /* STR-02 */
               Py_TYPE(stream)->tp_name);
  return -1;
}

static int check_dl_device(PyObject *dev) {
  if (dev == Py_None) return 0;
  if (PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2 &&
      PyLong_Check(PyTuple_GET_ITEM(dev, 0)) && PyLong_Check(PyTuple_GET_ITEM(dev, 1))) {
    long type = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
    long id = PyLong_AsLong(PyTuple_GET_ITEM(dev, 1));
    if (PyErr_Occurred()) PyErr_Clear();
    else if (type == kDLCPU && id == 0 && !ref_fault_is(FAULT_DL_DEVICE_CPU_REFUSED)) return 0; /* DEV-06 */
  }
  return ref_refuse(REF_REFUSE_DL_DEVICE, "dl_device: this tensor exports to (1, 0) only"); /* DEV-05 */
}

/* The keywords in order: stream, max_version, dl_device, copy. API-01: keyword-only. */
static int read_request(PyObject *args, PyObject *kwargs, ref_dlpack_request *r) {
  static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  static char *kwlist3[] = {"stream", "max_version", "dl_device", NULL};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  int keywords = 4;
  const char *format = ref_twist_dlpack_format("|$OOOO:__dlpack__", &keywords);
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, keywords == 3 ? kwlist3 : kwlist,
                                   &stream, &max_version, &dl_device, &copy))
    return -1;
  if (check_stream(stream, max_version != Py_None) < 0) return -1;
  r->versioned = ref_parse_max_version(max_version);
  if (r->versioned < 0 || check_dl_device(dl_device) < 0 || ref_check_copy(copy) < 0) return -1;
  r->max_version_none = max_version == Py_None;
  r->copy = copy == Py_True; /* CPY-01..03: None exports CPU memory as it is */
  r->copy_false = copy == Py_False;
  ref_twist_dlpack_request(r);
  return 0;
}

/* 0 when t can be exported as r asks, else -1 with BufferError (ERR-01, FLG-02, FLG-06). */
static int check_exportable(const RefTensor *t, const ref_dlpack_request *r) {
  if (!t->exportable && ref_refuse(REF_REFUSE_UNEXPORTABLE, "this tensor cannot be exported") < 0)
    return -1;
  if (!r->versioned && t->subbyte) {
    PyErr_SetString(PyExc_BufferError,
                    "a padded sub-byte tensor needs IS_SUBBYTE_TYPE_PADDED: ask for "
                    "max_version >= (1, 1)");
    return -1;
  }
  if (!r->versioned && t->readonly && !r->copy) {
    PyErr_SetString(PyExc_BufferError,
                    "a read-only tensor needs the READ_ONLY flag: ask for max_version >= (1, 0)");
    return -1;
  }
  return 0;
}

/* ---- __dlpack__ --------------------------------------------------------------------- */

/* The managed struct of a legacy or a copying export (a new struct each time). */
static void *export_fresh(RefTensor *t, const ref_dlpack_request *r) {
  DLTensor dl;
  int64_t rm[REF_MAX_NDIM], scratch[REF_MAX_NDIM];
  ref_buf *buf = t->buf;
  ref_tensor_fill(t, &dl);
  if (r->copy && !(buf = ref_copy_export(t, &dl, rm))) return NULL;
  ref_twist_export_tensor(&dl, r->versioned, scratch);
  void *managed = ref_make_managed(buf, &dl, ref_export_flags(t, r->copy), r->versioned);
  if (r->copy) ref_buf_decref(buf); /* the struct holds its own reference */
  if (!managed) PyErr_NoMemory();
  return managed;
}

PyObject *ref_tensor_dlpack(RefTensor *self, PyObject *args, PyObject *kwargs) {
  ref_dlpack_request r;
  if (read_request(args, kwargs, &r) < 0 || check_exportable(self, &r) < 0) return NULL;
  void *managed;
  if (r.versioned && !r.copy) {
    managed = ref_export_versioned_nocopy(self);
    if (!managed) return PyErr_NoMemory();
  } else if (!(managed = export_fresh(self, &r))) {
    return NULL;
  }
  const char *name = ref_twist_capsule_name(r.versioned ? "dltensor_versioned" : "dltensor",
                                            r.versioned); /* CAP-01, CAP-02 */
  return ref_capsule_new(managed, name, r.versioned, 1);
}
