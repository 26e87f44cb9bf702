/* module: dlconform._ref init. Exposes Tensor, Forge, from_dlpack, the fault controls
 * (set_fault, fault, FAULTS) and HEADER_VERSION. DLCONFORM_REF_FAULT in the environment
 * selects a fault at import; an unknown name fails the import. */
#include "ref.h"

#include <stdlib.h>

static PyObject *py_set_fault(PyObject *self, PyObject *arg) {
  (void)self;
  const char *name = NULL;
  if (arg != Py_None) {
    if (!PyUnicode_Check(arg)) {
      PyErr_SetString(PyExc_TypeError, "set_fault(name or None)");
      return NULL;
    }
    name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
  }
  if (ref_fault_set_name(name) < 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject *py_fault(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  ref_fault_id f = ref_fault_current();
  if (f == FAULT_NONE) Py_RETURN_NONE;
  return PyUnicode_FromString(ref_fault_table[f].name);
}

static PyObject *faults_dict(void) {
  PyObject *d = PyDict_New();
  if (!d) return NULL;
  for (int f = 1; f < FAULT_COUNT; f++) {
    PyObject *v = Py_BuildValue("(ss)", ref_fault_table[f].clause,
                                ref_fault_table[f].description);
    if (!v || PyDict_SetItemString(d, ref_fault_table[f].name, v) < 0) {
      Py_XDECREF(v);
      Py_DECREF(d);
      return NULL;
    }
    Py_DECREF(v);
  }
  return d;
}

static PyObject *faults_sides(void) {
  PyObject *d = PyDict_New();
  if (!d) return NULL;
  for (int f = 1; f < FAULT_COUNT; f++) {
    PyObject *v = PyUnicode_FromString(ref_fault_table[f].side);
    if (!v || PyDict_SetItemString(d, ref_fault_table[f].name, v) < 0) {
      Py_XDECREF(v);
      Py_DECREF(d);
      return NULL;
    }
    Py_DECREF(v);
  }
  return d;
}

static PyMethodDef module_methods[] = {
    {"from_dlpack", (PyCFunction)(void (*)(void))ref_from_dlpack, METH_VARARGS | METH_KEYWORDS,
     "from_dlpack(x, /, *, device=None, copy=None): the reference consumer."},
    {"set_fault", py_set_fault, METH_O, "set_fault(name or None): the process-wide fault."},
    {"fault", py_fault, METH_NOARGS, "The active fault's name, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef ref_module = {
    PyModuleDef_HEAD_INIT, "dlconform._ref",
    "The reference DLPack 1.3 implementation, its capsule forge and its faults.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ref(void) {
  PyObject *m = PyModule_Create(&ref_module);
  if (!m) return NULL;
  const char *env = getenv("DLCONFORM_REF_FAULT");
  if (env && *env && ref_fault_set_name(env) < 0) goto fail;
  if (ref_tensor_init_type(m) < 0 || ref_forge_init_type(m) < 0) goto fail;
  if (ref_vstream_init(m) < 0) goto fail;
  if (ref_api_forge_init_type(m) < 0) goto fail; /* ApiForge: XAPI consumer checks */
  PyObject *faults = faults_dict();
  if (!faults || PyModule_AddObject(m, "FAULTS", faults) < 0) {
    Py_XDECREF(faults);
    goto fail;
  }
  PyObject *sides = faults_sides();
  if (!sides || PyModule_AddObject(m, "FAULT_SIDES", sides) < 0) {
    Py_XDECREF(sides);
    goto fail;
  }
  PyObject *hv = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
  if (!hv || PyModule_AddObject(m, "HEADER_VERSION", hv) < 0) {
    Py_XDECREF(hv);
    goto fail;
  }
  PyObject *uncached = ref_uncached_api_capsule();
  if (!uncached || PyModule_AddObject(m, "UNCACHED_EXCHANGE_API", uncached) < 0) {
    Py_XDECREF(uncached);
    goto fail;
  }
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
