/* module: dlconform._ref init, the top of the module's files. Exposes Tensor (with its
 * exchange API attribute), Forge, DeviceTensor, ApiForge, CudaTensor (with its own table)
 * and the cuda_* functions, from_dlpack, the vstream functions, the fault controls
 * (set_fault, fault, FAULTS, FAULT_SIDES), HEADER_VERSION and UNCACHED_EXCHANGE_API.
 * DLCONFORM_REF_FAULT in the environment selects a fault at import; an unknown name fails
 * the import. */
#include "ref.h"

#include <stdlib.h>

/* Makes name the active fault and re-installs the exchange API attribute for it (a no-op
 * before it is installed). 0, or -1 with ValueError. */
static int select_fault(const char *name) {
  if (ref_fault_set_name(name) < 0) return -1;
  ref_exchange_api_refresh();
  return 0;
}

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
  if (select_fault(name) < 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject *py_fault(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  ref_fault_id f = ref_fault_current();
  if (f == FAULT_NONE) Py_RETURN_NONE;
  return PyUnicode_FromString(ref_fault_table[f].name);
}

static PyObject *clause_and_description(const ref_fault_info *f) {
  return Py_BuildValue("(ss)", f->clause, f->description);
}

static PyObject *side(const ref_fault_info *f) { return PyUnicode_FromString(f->side); }

/* dict fault name -> value(fault) */
static PyObject *faults_map(PyObject *(*value)(const ref_fault_info *)) {
  PyObject *d = PyDict_New();
  for (int f = 1; d && f < FAULT_COUNT; f++) {
    PyObject *v = value(&ref_fault_table[f]);
    if (!v || PyDict_SetItemString(d, ref_fault_table[f].name, v) < 0) Py_CLEAR(d);
    Py_XDECREF(v);
  }
  return d;
}

static PyMethodDef module_methods[] = {
    {"from_dlpack", (PyCFunction)(void (*)(void))ref_from_dlpack, METH_VARARGS | METH_KEYWORDS,
     "from_dlpack(x, /, *, device=None, copy=None): the reference consumer."},
    {"cuda_from_dlpack", (PyCFunction)(void (*)(void))ref_cuda_from_dlpack,
     METH_VARARGS | METH_KEYWORDS,
     "cuda_from_dlpack(x, *, device=None, copy=None): the reference consumer of (kDLCUDA, 0) "
     "memory (needs cuda_bind)."},
    {"set_fault", py_set_fault, METH_O, "set_fault(name or None): the process-wide fault."},
    {"fault", py_fault, METH_NOARGS, "The active fault's name, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef ref_module = {
    PyModuleDef_HEAD_INIT, "dlconform._ref",
    "The reference DLPack 1.3 implementation, its capsule forge and its faults.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

/* Adds value (stolen, NULL: an error is set) as name. */
static int add(PyObject *m, const char *name, PyObject *value) {
  if (value && PyModule_AddObject(m, name, value) == 0) return 0;
  Py_XDECREF(value);
  return -1;
}

static int add_type(PyObject *m, const char *name, PyTypeObject *type) {
  if (PyType_Ready(type) < 0) return -1;
  Py_INCREF(type);
  return add(m, name, (PyObject *)type);
}

PyMODINIT_FUNC PyInit__ref(void) {
  PyObject *m = PyModule_Create(&ref_module);
  if (!m) return NULL;
  const char *env = getenv("DLCONFORM_REF_FAULT");
  if ((env && *env && select_fault(env) < 0) || add_type(m, "Tensor", &RefTensor_Type) < 0 ||
      ref_exchange_api_install(&RefTensor_Type) < 0 || /* XAPI-01: on the type */
      add_type(m, "Forge", &RefForge_Type) < 0 ||
      add_type(m, "DeviceTensor", &RefDeviceTensor_Type) < 0 || ref_vstream_init(m) < 0 ||
      add_type(m, "ApiForge", &RefApiForge_Type) < 0 || /* XAPI consumer checks */
      add_type(m, "CudaTensor", &RefCudaTensor_Type) < 0 ||
      ref_cuda_xapi_install(&RefCudaTensor_Type) < 0 || ref_cuda_init(m) < 0 ||
      add(m, "FAULTS", faults_map(clause_and_description)) < 0 ||
      add(m, "FAULT_SIDES", faults_map(side)) < 0 ||
      add(m, "HEADER_VERSION", Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION)) < 0 ||
      add(m, "UNCACHED_EXCHANGE_API", ref_uncached_api_capsule()) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
