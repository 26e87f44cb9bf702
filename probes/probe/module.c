/* module.c: the `dlconform._probe` module: method table, HEADER_VERSION, rename().
 * See probes/README.md (section `dlconform._probe`) for the contract. */
#include "probe.h"

#include <string.h>

/* rename(capsule, name): only the four static names are accepted, so the capsule never
 * points at a temporary string (CAP-09). */
static PyObject *probe_rename(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *cap;
  const char *name;
  if (!PyArg_ParseTuple(args, "Os:rename", &cap, &name)) return NULL;
  if (!PyCapsule_CheckExact(cap)) {
    PyErr_Format(PyExc_TypeError, "expected a PyCapsule, got %.200s", Py_TYPE(cap)->tp_name);
    return NULL;
  }
  static const char *const names[] = {PROBE_NAME_LEGACY, PROBE_NAME_VERSIONED,
                                      PROBE_NAME_USED_LEGACY, PROBE_NAME_USED_VERSIONED};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strcmp(name, names[i]) == 0) {
      if (PyCapsule_SetName(cap, names[i]) < 0) return NULL;
      Py_RETURN_NONE;
    }
  }
  PyErr_Format(PyExc_ValueError, "not a DLPack capsule name: '%s'", name);
  return NULL;
}

static PyMethodDef probe_methods[] = {
    {"inspect", probe_inspect, METH_O,
     "inspect(capsule) -> dict: the capsule's metadata, without consuming it."},
    {"check", (PyCFunction)(void (*)(void))probe_check, METH_VARARGS | METH_KEYWORDS,
     "check(capsule, spec=(1, 3)) -> list of (clause, message)."},
    {"extent", probe_extent_py, METH_O, "extent(capsule) -> dict from dlc_extent_of."},
    {"read_elements", probe_read_elements, METH_O,
     "read_elements(capsule) -> bytes: logical row-major elements."},
    {"gather", probe_gather, METH_VARARGS,
     "gather(address, shape, strides, itemsize) -> bytes: logical row-major elements."},
    {"instrument", probe_instrument, METH_O,
     "instrument(capsule) -> Tracker: count and log the deleter calls."},
    {"consume", probe_consume, METH_O,
     "consume(capsule) -> Handle: rename to used_* and own the tensor."},
    {"rename", probe_rename, METH_VARARGS,
     "rename(capsule, name): set one of the four static DLPack capsule names."},
    {"exchange_api", probe_exchange_api, METH_O,
     "exchange_api(obj_or_type) -> dict or None: the C exchange API table."},
    {"xapi_managed_from", probe_xapi_managed_from, METH_VARARGS,
     "xapi_managed_from(api, obj) -> (rc, Handle or None, exception or None)."},
    {"xapi_dltensor_from", probe_xapi_dltensor_from, METH_VARARGS,
     "xapi_dltensor_from(api, obj) -> (rc, dict) on success, (rc, exception or None) on "
     "failure."},
    {"xapi_current_stream", probe_xapi_current_stream, METH_VARARGS,
     "xapi_current_stream(api, device_type, device_id) -> (rc, stream int) on success, "
     "(rc, exception or None) on failure."},
    {"xapi_alloc", probe_xapi_alloc, METH_VARARGS,
     "xapi_alloc(api, dtype, shape, device) -> (rc, Handle or None, [(kind, message)])."},
    {"stress", (PyCFunction)(void (*)(void))probe_stress, METH_VARARGS | METH_KEYWORDS, "stress(obj, expected, threads=4, iterations=100, *, api=0, reader=None) -> dict: see stress.c."},
    {"xapi_to_py", probe_xapi_to_py, METH_VARARGS,
     "xapi_to_py(api, handle) -> (rc, object) on success, (rc, exception or None) on "
     "failure; the tensor is stolen from the handle either way."},
    {"bench", (PyCFunction)(void (*)(void))probe_bench, METH_VARARGS | METH_KEYWORDS,
     "bench(op, objs, arg=None, *, batches=21, target_ms=2.0, warmup_ms=20.0) -> "
     "{'batch': n, 'samples': [ns per iteration]} (bench.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef probe_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dlconform._probe",
    .m_doc = "Reads, instruments and consumes DLPack capsules of any producer; finds and "
             "calls the C exchange API.",
    .m_size = -1,
    .m_methods = probe_methods,
};

PyMODINIT_FUNC PyInit__probe(void) {
  if (PyType_Ready(&ProbeTracker_Type) < 0 || PyType_Ready(&ProbeHandle_Type) < 0) return NULL;
  PyObject *m = PyModule_Create(&probe_module);
  if (m == NULL) return NULL;
  if (PyModule_AddObject(m, "HEADER_VERSION",
                         Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION)) < 0)
    goto fail;
  Py_INCREF(&ProbeTracker_Type);
  if (PyModule_AddObject(m, "Tracker", (PyObject *)&ProbeTracker_Type) < 0) {
    Py_DECREF(&ProbeTracker_Type);
    goto fail;
  }
  Py_INCREF(&ProbeHandle_Type);
  if (PyModule_AddObject(m, "Handle", (PyObject *)&ProbeHandle_Type) < 0) {
    Py_DECREF(&ProbeHandle_Type);
    goto fail;
  }
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
