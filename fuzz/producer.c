/* producer: a C-defined type with __dlpack__ and __dlpack_device__ (see producer.h). */
#include "producer.h"

#include <dlpack/dlpack.h>

typedef struct {
  PyObject_HEAD
  PyObject *capsule; /* owned */
  PyObject *device;  /* owned (type, id) tuple */
  int device_type;
  int calls;
  int bad_stream;
  long max_major; /* max_version[0] of the last call, -1 when not passed or not a tuple */
} Producer;

static PyTypeObject *producer_type;

/* API-01: keyword-only. A positional argument is the consumer's mistake; answer it as a
 * conforming producer would (TypeError). */
static PyObject *producer_dlpack(PyObject *self_, PyObject *args, PyObject *kwargs) {
  Producer *self = (Producer *)self_;
  self->calls += 1;
  if (PyTuple_GET_SIZE(args) != 0) {
    PyErr_SetString(PyExc_TypeError, "__dlpack__ takes keyword arguments only");
    return NULL;
  }
  if (kwargs != NULL) {
    PyObject *stream = PyDict_GetItemString(kwargs, "stream"); /* borrowed */
    if (stream != NULL && stream != Py_None && self->device_type == kDLCPU)
      self->bad_stream = 1;
    PyObject *mv = PyDict_GetItemString(kwargs, "max_version"); /* borrowed */
    self->max_major = -1;
    if (mv != NULL && PyTuple_Check(mv) && PyTuple_GET_SIZE(mv) >= 1) {
      self->max_major = PyLong_AsLong(PyTuple_GET_ITEM(mv, 0));
      if (self->max_major == -1 && PyErr_Occurred()) PyErr_Clear();
    }
  }
  Py_INCREF(self->capsule);
  return self->capsule;
}

static PyObject *producer_device(PyObject *self_, PyObject *unused) {
  (void)unused;
  Producer *self = (Producer *)self_;
  Py_INCREF(self->device);
  return self->device;
}

static void producer_dealloc(PyObject *self_) {
  Producer *self = (Producer *)self_;
  PyTypeObject *tp = Py_TYPE(self_);
  Py_CLEAR(self->capsule);
  Py_CLEAR(self->device);
  tp->tp_free(self_);
  Py_DECREF(tp);
}

static PyMethodDef producer_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))producer_dlpack, METH_VARARGS | METH_KEYWORDS,
     NULL},
    {"__dlpack_device__", producer_device, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot producer_slots[] = {
    {Py_tp_dealloc, (void *)producer_dealloc},
    {Py_tp_methods, producer_methods},
    {0, NULL},
};

static PyType_Spec producer_spec = {
    "dlconform_fuzz.Producer", sizeof(Producer), 0, Py_TPFLAGS_DEFAULT, producer_slots,
};

int dlc_producer_type_init(void) {
  if (producer_type != NULL) return 0;
  producer_type = (PyTypeObject *)PyType_FromSpec(&producer_spec);
  return producer_type ? 0 : -1;
}

PyObject *dlc_producer_new(PyObject *capsule, int device_type, int device_id) {
  Producer *self = PyObject_New(Producer, producer_type);
  if (self == NULL) return NULL;
  self->capsule = NULL;
  self->calls = 0;
  self->bad_stream = 0;
  self->max_major = -1;
  self->device_type = device_type;
  self->device = Py_BuildValue("(ii)", device_type, device_id);
  if (self->device == NULL) {
    Py_DECREF(self);
    return NULL;
  }
  Py_INCREF(capsule);
  self->capsule = capsule;
  return (PyObject *)self;
}

int dlc_producer_calls(PyObject *producer) { return ((Producer *)producer)->calls; }
int dlc_producer_bad_stream(PyObject *producer) { return ((Producer *)producer)->bad_stream; }
long dlc_producer_max_major(PyObject *producer) { return ((Producer *)producer)->max_major; }
