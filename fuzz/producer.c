/* producer: a C-defined type with __dlpack__ and __dlpack_device__ (see producer.h). */
#include "producer.h"

#include <dlpack/dlpack.h>
#include <stdio.h>

typedef struct {
  PyObject_HEAD
  PyObject *capsule; /* owned */
  PyObject *device;  /* owned (type, id) tuple */
  int device_type;
  int old;           /* an old producer: __dlpack__ takes only stream (VER-06) */
  int strict;        /* BufferError for a dl_device other than its own (DEV-05) */
  dlc_producer_order order; /* its data is pending on a stream (producer.h), or NULL */
  dlc_producer_log log;
} Producer;

static PyTypeObject *producer_type;
/* interned keyword names, looked up per __dlpack__ call */
static PyObject *k_stream, *k_dl_device, *k_copy, *k_max_version;

/* 1 when dl_device is the tuple (kDLCPU, 0). */
static int is_cpu_device(PyObject *dl_device) {
  if (dl_device == NULL || !PyTuple_Check(dl_device) || PyTuple_GET_SIZE(dl_device) != 2)
    return 0;
  long t = PyLong_AsLong(PyTuple_GET_ITEM(dl_device, 0));
  long i = PyLong_AsLong(PyTuple_GET_ITEM(dl_device, 1));
  if (PyErr_Occurred()) PyErr_Clear();
  return t == kDLCPU && i == 0;
}

/* The stream rule the consumer broke with this call, or NULL (see producer.h). */
static const char *stream_breach(const Producer *self, PyObject *stream, PyObject *dl_device,
                                 long *value) {
  *value = 0;
  int cpu_request = dl_device != NULL && dl_device != Py_None && is_cpu_device(dl_device);
  /* no stream passed is the array API's default, None: not explicit either (STR-14), as the
   * suite's test_stream.py reads it */
  if (stream == NULL || stream == Py_None) {
    /* a retry after an old producer's keyword TypeError passes only stream (VER-06) */
    if (self->device_type == kDLCUDA && (dl_device == NULL || dl_device == Py_None) &&
        self->log.refused_kw == 0)
      return "STR-14";
    return NULL;
  }
  if (PyLong_Check(stream)) {
    *value = PyLong_AsLong(stream);
    if (PyErr_Occurred()) PyErr_Clear();
    /* device-specific values first: they are wrong with or without dl_device */
    if (self->device_type == kDLCUDA && *value == 0) return "STR-08";
    if (self->device_type == kDLROCM && (*value == 1 || *value == 2)) return "STR-09";
  }
  if (cpu_request) return "STR-12";
  if (self->device_type == kDLCPU) return "STR-10";
  return NULL; /* STR-02 (type) is the producer's to reject */
}

static void log_call(Producer *self, PyObject *kwargs) {
  dlc_producer_log *log = &self->log;
  PyObject *stream = PyDict_GetItem(kwargs, k_stream);       /* borrowed */
  PyObject *dl_device = PyDict_GetItem(kwargs, k_dl_device); /* borrowed */
  PyObject *copy = PyDict_GetItem(kwargs, k_copy);           /* borrowed */
  PyObject *mv = PyDict_GetItem(kwargs, k_max_version);      /* borrowed */
  long value;
  const char *clause = stream_breach(self, stream, dl_device, &value);
  if (clause != NULL && log->stream_clause == NULL) {
    log->stream_clause = clause;
    snprintf(log->stream_msg, sizeof log->stream_msg,
             "consumer passed stream=%s to a producer on device type %d%s",
             stream == NULL       ? "None (by passing none)"
             : stream == Py_None  ? "None"
             : PyLong_Check(stream) ? "an int"
                                    : "a non-int",
             self->device_type, dl_device && dl_device != Py_None ? " with dl_device" : "");
    if (stream != NULL && stream != Py_None && PyLong_Check(stream))
      snprintf(log->stream_msg, sizeof log->stream_msg,
               "consumer passed stream=%ld to a producer on device type %d%s", value,
               self->device_type, dl_device && dl_device != Py_None ? " with dl_device" : "");
  }
  if (dl_device != NULL && is_cpu_device(dl_device)) {
    log->cpu_dl_device = 1;
    if (copy != Py_False) log->cpu_ask_unguarded = 1;
  }
  if (copy != NULL && log->copy_forwarded == DLC_FWD_ABSENT)
    log->copy_forwarded = copy == Py_None    ? DLC_FWD_NONE
                          : copy == Py_False ? DLC_FWD_FALSE
                                             : DLC_FWD_TRUE;
  log->named_int = stream != NULL && PyLong_Check(stream) && !PyBool_Check(stream);
  log->named = log->named_int ? PyLong_AsLongLong(stream) : 0;
  if (PyErr_Occurred()) { /* past long long: no handle of this process */
    PyErr_Clear();
    log->named = -2;
  }
  log->named_host = dl_device != NULL && is_cpu_device(dl_device);
  log->max_major = -1;
  if (mv != NULL && PyTuple_Check(mv) && PyTuple_GET_SIZE(mv) >= 1) {
    log->max_major = PyLong_AsLong(PyTuple_GET_ITEM(mv, 0));
    if (log->max_major == -1 && PyErr_Occurred()) PyErr_Clear();
  }
}

/* API-01: keyword-only. A positional argument is the consumer's mistake; answer it as a
 * conforming producer would (TypeError). */
static PyObject *producer_dlpack(PyObject *self_, PyObject *args, PyObject *kwargs) {
  Producer *self = (Producer *)self_;
  self->log.calls += 1;
  if (PyTuple_GET_SIZE(args) != 0) {
    PyErr_SetString(PyExc_TypeError, "__dlpack__ takes keyword arguments only");
    return NULL;
  }
  if (kwargs != NULL && self->old) {
    /* VER-06: an old producer raises TypeError for any keyword but stream */
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      if (!PyUnicode_Check(key) || PyUnicode_CompareWithASCIIString(key, "stream") != 0) {
        self->log.refused_kw += 1;
        PyErr_Format(PyExc_TypeError, "__dlpack__() got an unexpected keyword argument %R", key);
        return NULL;
      }
    }
  }
  if (kwargs != NULL) log_call(self, kwargs);
  else self->log.max_major = -1, self->log.named_int = 0, self->log.named_host = 0;
  if (self->strict && kwargs != NULL) {
    /* DEV-05: a producer that cannot export to the requested device raises BufferError */
    PyObject *dl_device = PyDict_GetItem(kwargs, k_dl_device); /* borrowed */
    if (dl_device != NULL && dl_device != Py_None &&
        PyObject_RichCompareBool(dl_device, self->device, Py_EQ) != 1) {
      PyErr_Clear();
      PyErr_SetString(PyExc_BufferError, "cannot export to the requested dl_device");
      return NULL;
    }
  }
  if (self->order != NULL) {
    PyObject *stream = kwargs ? PyDict_GetItem(kwargs, k_stream) : NULL;       /* borrowed */
    PyObject *dl_device = kwargs ? PyDict_GetItem(kwargs, k_dl_device) : NULL; /* borrowed */
    self->order(stream, dl_device != NULL && is_cpu_device(dl_device));
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

/* Methods, slots and layout every producer type shares; getattro set for offer types. */
static PyTypeObject *type_from(const char *name, getattrofunc getattro) {
  PyType_Slot slots[] = {
      {Py_tp_dealloc, (void *)producer_dealloc},
      {Py_tp_methods, producer_methods},
      {getattro ? Py_tp_getattro : 0, (void *)getattro},
      {0, NULL},
  };
  PyType_Spec spec = {name, sizeof(Producer), 0, Py_TPFLAGS_DEFAULT, slots};
  return (PyTypeObject *)PyType_FromSpec(&spec);
}

int dlc_producer_type_init(void) {
  if (producer_type != NULL) return 0;
  k_stream = PyUnicode_InternFromString("stream");
  k_dl_device = PyUnicode_InternFromString("dl_device");
  k_copy = PyUnicode_InternFromString("copy");
  k_max_version = PyUnicode_InternFromString("max_version");
  if (!k_stream || !k_dl_device || !k_copy || !k_max_version) return -1;
  producer_type = type_from("dlconform_fuzz.Producer", NULL);
  return producer_type ? 0 : -1;
}

PyTypeObject *dlc_producer_type_new(const char *name, getattrofunc getattro) {
  if (dlc_producer_type_init() != 0) return NULL;
  return type_from(name, getattro);
}

/* A (device_type, device_id) tuple: the last one made when it matches (tuples are
 * immutable, so producers may share one), else a new one. */
static PyObject *device_tuple(int device_type, int device_id) {
  static PyObject *last;
  static int last_type, last_id;
  if (last != NULL && last_type == device_type && last_id == device_id) {
    Py_INCREF(last);
    return last;
  }
  PyObject *t = PyTuple_New(2), *a = PyLong_FromLong(device_type), *b = PyLong_FromLong(device_id);
  if (t == NULL || a == NULL || b == NULL) {
    Py_XDECREF(t);
    Py_XDECREF(a);
    Py_XDECREF(b);
    return NULL;
  }
  PyTuple_SET_ITEM(t, 0, a);
  PyTuple_SET_ITEM(t, 1, b);
  Py_XSETREF(last, t);
  last_type = device_type;
  last_id = device_id;
  Py_INCREF(t);
  return t;
}

PyObject *dlc_producer_new(PyObject *capsule, int device_type, int device_id) {
  return dlc_producer_new_of(NULL, capsule, device_type, device_id);
}

PyObject *dlc_producer_new_of(PyTypeObject *type, PyObject *capsule, int device_type,
                              int device_id) {
  Producer *self = PyObject_New(Producer, type ? type : producer_type);
  if (self == NULL) return NULL;
  self->capsule = NULL;
  self->old = 0;
  self->strict = 0;
  self->order = NULL;
  memset(&self->log, 0, sizeof self->log);
  self->log.max_major = -1;
  self->log.copy_forwarded = DLC_FWD_ABSENT;
  self->device_type = device_type;
  self->device = device_tuple(device_type, device_id);
  if (self->device == NULL) {
    Py_DECREF(self);
    return NULL;
  }
  Py_INCREF(capsule);
  self->capsule = capsule;
  return (PyObject *)self;
}

void dlc_producer_set_old(PyObject *producer) { ((Producer *)producer)->old = 1; }
void dlc_producer_set_strict(PyObject *producer) { ((Producer *)producer)->strict = 1; }
void dlc_producer_set_order(PyObject *producer, dlc_producer_order order) {
  ((Producer *)producer)->order = order;
}

/* Every producer type shares producer_dealloc: that identifies its instances. */
PyObject *dlc_producer_capsule(PyObject *obj) {
  if (obj == NULL || Py_TYPE(obj)->tp_dealloc != producer_dealloc) return NULL;
  return ((Producer *)obj)->capsule;
}

const dlc_producer_log *dlc_producer_log_of(PyObject *producer) {
  return &((Producer *)producer)->log;
}
