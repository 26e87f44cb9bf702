/* exchange.c: `exchange_api(obj_or_type)`: find and read the C exchange API table.
 *
 * Lookup order: the v1.3 attribute `__dlpack_c_exchange_api__` (a PyCapsule named exactly
 * "dlpack_exchange_api", XAPI-01, XAPI-02), then the superseded v1.2 int attribute
 * `__c_dlpack_exchange_api__` (XAPI-03). Each is looked up on the type first (XAPI-04) and
 * then on the instance, so a table set only on an instance is reported with on_type False.
 *
 * The table is dereferenced only when its form is right: a capsule with the exact name, or
 * a non-zero int for the v1.2 attribute. Of the table only the header (version, prev_api)
 * is read unless version.major is ours (XAPI-06): the layout after the header belongs to
 * that major.
 */
#include "probe.h"

#include <string.h>

static const char XAPI_CAPSULE_NAME[] = "dlpack_exchange_api";
static const char ATTR_V13[] = "__dlpack_c_exchange_api__";
static const char ATTR_V12[] = "__c_dlpack_exchange_api__";

/* getattr(o, name), or NULL with no error when absent. -1 on another error. */
static int lookup(PyObject *o, const char *name, PyObject **out) {
  *out = PyObject_GetAttrString(o, name);
  if (*out != NULL) return 0;
  if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
    PyErr_Clear();
    return 0;
  }
  return -1;
}

static PyObject *functions_dict(const DLPackExchangeAPI *api) {
  return Py_BuildValue(
      "{s:N,s:N,s:N,s:N,s:N}", "managed_tensor_allocator",
      PROBE_FN_INT(api->managed_tensor_allocator), "managed_tensor_from_py_object_no_sync",
      PROBE_FN_INT(api->managed_tensor_from_py_object_no_sync),
      "managed_tensor_to_py_object_no_sync", PROBE_FN_INT(api->managed_tensor_to_py_object_no_sync),
      "dltensor_from_py_object_no_sync", PROBE_FN_INT(api->dltensor_from_py_object_no_sync),
      "current_work_stream", PROBE_FN_INT(api->current_work_stream));
}

static PyObject *describe(PyObject *value, const char *attr, int on_type) {
  int superseded = attr == ATTR_V12;
  const char *form = "other";
  PyObject *cap_name = Py_None;
  Py_INCREF(cap_name);
  const DLPackExchangeAPI *api = NULL;
  void *pointer = NULL;

  if (PyCapsule_CheckExact(value)) {
    const char *name = PyCapsule_GetName(value);
    if (name == NULL && PyErr_Occurred()) goto fail;
    Py_DECREF(cap_name);
    cap_name = probe_name_str(name);
    if (cap_name == NULL) return NULL;
    if (name != NULL && strcmp(name, XAPI_CAPSULE_NAME) == 0) {
      /* XAPI-02: the exact name says the pointer is a DLPackExchangeAPI*. */
      form = "capsule";
      pointer = PyCapsule_GetPointer(value, name);
      if (pointer == NULL) goto fail;
      api = (const DLPackExchangeAPI *)pointer;
    }
  } else if (PyLong_CheckExact(value)) {
    /* Unlike PyLong_AsVoidPtr, a negative int is refused: no producer's address is
     * negative, and following one would read the top of the address space. */
    form = "int";
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if ((v == (unsigned long long)-1 && PyErr_Occurred()) || v > UINTPTR_MAX) {
      PyErr_Clear(); /* negative or too large: no pointer at all */
      form = "other";
    } else if ((pointer = (void *)(uintptr_t)v) != NULL && superseded) {
      /* XAPI-03: the v1.2 form is an int usable with PyLong_AsVoidPtr. */
      api = (const DLPackExchangeAPI *)pointer;
    }
  }

  PyObject *d = PyDict_New();
  if (d == NULL) goto fail;
  /* probe_put steals cap_name whether or not it succeeds. */
  int bad = probe_put(d, "capsule_name", cap_name) < 0;
  cap_name = NULL;
  if (bad || probe_put(d, "attr", PyUnicode_FromString(attr)) < 0 ||
      probe_put(d, "form", PyUnicode_FromString(form)) < 0 ||
      probe_put(d, "superseded", PyBool_FromLong(superseded)) < 0 ||
      probe_put(d, "pointer", probe_ptr_int(pointer)) < 0 ||
      probe_put(d, "on_type", PyBool_FromLong(on_type)) < 0 ||
      probe_put(d, "type", PyUnicode_FromString(Py_TYPE(value)->tp_name)) < 0) {
    Py_DECREF(d);
    return NULL;
  }
  PyObject *version = Py_None, *prev = Py_None, *funcs = Py_None;
  Py_INCREF(version);
  Py_INCREF(prev);
  Py_INCREF(funcs);
  if (api != NULL) {
    Py_DECREF(version);
    Py_DECREF(prev);
    version = Py_BuildValue("(II)", (unsigned)api->header.version.major,
                            (unsigned)api->header.version.minor);
    prev = probe_ptr_int(api->header.prev_api);
    /* XAPI-06: the function table is this major's layout only. */
    if (api->header.version.major == DLPACK_MAJOR_VERSION) {
      Py_DECREF(funcs);
      funcs = functions_dict(api);
    }
  }
  /* Non-short-circuit: every value is stolen, even after a failure. */
  int failed = probe_put(d, "version", version) < 0;
  failed |= probe_put(d, "prev_api", prev) < 0;
  failed |= probe_put(d, "functions", funcs) < 0;
  if (failed) {
    Py_DECREF(d);
    return NULL;
  }
  return d;
fail:
  Py_XDECREF(cap_name);
  return NULL;
}

PyObject *probe_exchange_api(PyObject *self, PyObject *obj) {
  (void)self;
  PyObject *type = PyType_Check(obj) ? obj : (PyObject *)Py_TYPE(obj);
  PyObject *instance = PyType_Check(obj) ? NULL : obj;
  const char *attrs[2] = {ATTR_V13, ATTR_V12};
  for (int i = 0; i < 2; i++) {
    PyObject *v;
    if (lookup(type, attrs[i], &v) < 0) return NULL;
    int on_type = v != NULL;
    if (v == NULL && instance != NULL && lookup(instance, attrs[i], &v) < 0) return NULL;
    if (v == NULL) continue;
    PyObject *d = describe(v, attrs[i], on_type);
    Py_DECREF(v);
    return d;
  }
  Py_RETURN_NONE;
}
