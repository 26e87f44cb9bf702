/* capsule.c: classify a PyCapsule by name without dereferencing its pointer. */
#include "probe.h"

#include <string.h>

/* Static storage (CAP-09): these pointers are handed to PyCapsule_SetName. */
const char PROBE_NAME_LEGACY[] = "dltensor";
const char PROBE_NAME_VERSIONED[] = "dltensor_versioned";
const char PROBE_NAME_USED_LEGACY[] = "used_dltensor";
const char PROBE_NAME_USED_VERSIONED[] = "used_dltensor_versioned";

const char *probe_kind_str(probe_kind k) {
  switch (k) {
    case PROBE_KIND_LEGACY: return "legacy";
    case PROBE_KIND_VERSIONED: return "versioned";
    case PROBE_KIND_USED: return "used";
    default: return "unknown";
  }
}

/* Exact comparison: "dltensor" and "dltensor_versioned" are the only names that say what the
 * pointer is (CAP-01, CAP-02); "used_*" means another consumer owns it (CAP-03, CAP-04). */
probe_kind probe_kind_of_name(const char *name) {
  if (name == NULL) return PROBE_KIND_UNKNOWN;
  if (strcmp(name, PROBE_NAME_LEGACY) == 0) return PROBE_KIND_LEGACY;
  if (strcmp(name, PROBE_NAME_VERSIONED) == 0) return PROBE_KIND_VERSIONED;
  if (strcmp(name, PROBE_NAME_USED_LEGACY) == 0 || strcmp(name, PROBE_NAME_USED_VERSIONED) == 0)
    return PROBE_KIND_USED;
  return PROBE_KIND_UNKNOWN;
}

int probe_capsule_read(PyObject *obj, probe_capsule *c) {
  if (!PyCapsule_CheckExact(obj)) {
    PyErr_Format(PyExc_TypeError, "expected a PyCapsule, got %.200s", Py_TYPE(obj)->tp_name);
    return -1;
  }
  c->name = PyCapsule_GetName(obj);
  if (c->name == NULL && PyErr_Occurred()) return -1;
  /* GetPointer with the capsule's own name never dereferences the pointer. */
  c->pointer = PyCapsule_GetPointer(obj, c->name);
  if (c->pointer == NULL) return -1;
  c->destructor = PyCapsule_GetDestructor(obj);
  if (c->destructor == NULL && PyErr_Occurred()) return -1;
  c->kind = probe_kind_of_name(c->name);
  return 0;
}

PyObject *probe_ptr_int(const void *p) {
  return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)p);
}

int probe_put(PyObject *dict, const char *key, PyObject *value) {
  if (value == NULL) return -1;
  int rc = PyDict_SetItemString(dict, key, value);
  Py_DECREF(value);
  return rc;
}
