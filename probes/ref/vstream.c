/* vstream: a virtual stream device for the reference, so the producer side of the stream
 * contract (STR-01, 03..08, 11, 12; CPY-04, 05) can be checked on a machine without a GPU.
 *
 * The device is kDLExtDev (12), id 0. Its memory is host memory; its streams and events are
 * software: nothing runs asynchronously, every ordering decision the producer takes is
 * appended to a log instead, and the suite reads the log. By mutual agreement (STR-15) the
 * stream argument follows CUDA's numbering:
 *   None -> the legacy default stream, 1 (STR-04)   1 -> legacy default (STR-05)
 *   2    -> the per-thread default stream (STR-06)  >2 -> a handle from vstream_new (STR-07)
 *   0    -> rejected with BufferError (STR-08)      -1 -> no wait, no sync (STR-03)
 *
 * Invariants:
 *  - every DeviceTensor owns one private stream (id > 2) on which its data was produced; it
 *    is never handed to a consumer;
 *  - an export for a consumer stream s != -1 logs ("wait", s, own) before it returns: s
 *    waits on an event recorded on the producer's stream (STR-01); -1 logs nothing;
 *  - a copy is logged as ("copy", s) on the consumer's stream (CPY-04), or on the own
 *    stream when the consumer asked for no synchronisation;
 *  - dl_device=(kDLCPU, 0) is an explicit host copy: stream must be None, the producer logs
 *    ("sync", own) first (STR-12), and copy=False is BufferError (CPY-05);
 *  - a consumer's stream is never destroyed by the producer (STR-11);
 *  - all state is touched with the GIL held (every entry point is a Python call). */
#include "ref.h"

#include <string.h>

#define VDEV_TYPE 12 /* kDLExtDev */
#define VSTREAM_MAX 65536 /* handles 3 .. VSTREAM_MAX-1 */

static unsigned char alive[VSTREAM_MAX];
static long next_handle = 3;
static PyObject *event_log; /* list of tuples */

static int stream_alive(long h) {
  if (h == REF_VSTREAM_LEGACY || h == REF_VSTREAM_PER_THREAD) return 1;
  return h > 2 && h < VSTREAM_MAX && alive[h];
}

static long stream_new(void) {
  if (next_handle >= VSTREAM_MAX) {
    PyErr_SetString(PyExc_MemoryError, "out of virtual streams");
    return -1;
  }
  alive[next_handle] = 1;
  return next_handle++;
}

/* Appends (kind, a) or (kind, a, b) to the log; -1 on error. */
static int log_event(const char *kind, long a, long b, int two) {
  PyObject *t = two ? Py_BuildValue("(sll)", kind, a, b) : Py_BuildValue("(sl)", kind, a);
  if (!t) return -1;
  int rc = PyList_Append(event_log, t);
  Py_DECREF(t);
  return rc;
}

/* ---- DeviceTensor ----------------------------------------------------------------- */
typedef struct {
  PyObject_HEAD
  RefTensor *base; /* the memory (host), held */
  long own;        /* the producer's private stream */
} VTensor;

static PyObject *VTensor_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"base", NULL};
  PyObject *base;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!:DeviceTensor", kwlist, &RefTensor_Type,
                                   &base))
    return NULL;
  long own = stream_new();
  if (own < 0) return NULL;
  VTensor *self = (VTensor *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  Py_INCREF(base);
  self->base = (RefTensor *)base;
  self->own = own;
  return (PyObject *)self;
}

static void VTensor_dealloc(VTensor *self) {
  if (self->own > 2 && self->own < VSTREAM_MAX) alive[self->own] = 0;
  Py_XDECREF(self->base);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *VTensor_device(VTensor *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return Py_BuildValue("(ii)", VDEV_TYPE, 0);
}

/* dl_device: 0 own device, 1 host (kDLCPU, 0), -1 BufferError (DEV-05). */
static int vt_target_device(PyObject *dev) {
  if (dev == Py_None) return 0;
  if (PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2) {
    long t = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
    long id = PyLong_AsLong(PyTuple_GET_ITEM(dev, 1));
    if (!PyErr_Occurred() && id == 0 && (t == VDEV_TYPE || t == kDLCPU)) return t == kDLCPU;
    PyErr_Clear();
  }
  PyErr_SetString(PyExc_BufferError, "dl_device: this tensor exports to (12, 0) or (1, 0) only");
  return -1;
}

/* The consumer stream an export waits on: > 0 a stream id, 0 none (-1 was passed), -1 an
 * error. */
static long wait_stream(PyObject *stream) {
  if (stream == Py_None) return REF_VSTREAM_LEGACY; /* STR-04 */
  long s = PyLong_AsLong(stream);
  if (s == -1 && PyErr_Occurred()) return -1;
  if (s < -1) {
    PyErr_SetString(PyExc_ValueError, "stream must be an int >= -1 (STR-02)");
    return -1;
  }
  if (s == -1) return 0; /* STR-03 */
  if (s == 0) /* STR-08; where a fault accepts it, it is the legacy default stream */
    return ref_refuse(REF_REFUSE_VSTREAM_ZERO, "stream=0 is ambiguous and not accepted (STR-08)")
               ? -1 : REF_VSTREAM_LEGACY;
  if (s == REF_VSTREAM_LEGACY || s == REF_VSTREAM_PER_THREAD) return s; /* STR-05, STR-06 */
  if (!stream_alive(s)) {
    PyErr_Format(PyExc_BufferError, "stream %ld is not a live stream handle", s);
    return -1;
  }
  return s; /* STR-07 */
}

/* Logs what the plan does on the streams, in order; -1 on error. */
static int run_plan(const ref_vstream_plan *p, long own) {
  if (p->wait > 0 && log_event("wait", p->wait, own, 1) < 0) return -1; /* STR-01 */
  if (p->sync && log_event("sync", own, 0, 0) < 0) return -1;
  if (p->copy && log_event("copy", p->copy_on, 0, 0) < 0) return -1;
  if (p->destroy > 0) {
    alive[p->destroy] = 0;
    if (log_event("destroy", p->destroy, 0, 0) < 0) return -1;
  }
  return 0;
}

/* A capsule over base's memory (or a compact copy of it) claiming device dev. DeviceTensor
 * capsules carry the base's flags as a no-copy export would, IS_COPIED for a copy. */
static PyObject *vt_capsule(RefTensor *base, int versioned, int copy, DLDevice dev) {
  DLTensor dl;
  int64_t rm[REF_MAX_NDIM];
  ref_buf *buf = base->buf;
  uint64_t flags = ref_export_flags(base, 0);
  ref_tensor_fill(base, &dl);
  dl.device = dev;
  if (copy) {
    if (!(buf = ref_copy_export(base, &dl, rm))) return NULL;
    flags = (flags & ~(uint64_t)DLPACK_FLAG_BITMASK_READ_ONLY) | DLPACK_FLAG_BITMASK_IS_COPIED;
  }
  void *m = ref_make_managed(buf, &dl, flags, versioned);
  if (copy) ref_buf_decref(buf); /* the struct holds its own reference */
  if (!m) return PyErr_NoMemory();
  return ref_capsule_new(m, versioned ? "dltensor_versioned" : "dltensor", versioned, 0);
}

static PyObject *VTensor_dlpack(VTensor *self, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *mv = Py_None, *dev = Py_None, *copy_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", kwlist, &stream, &mv,
                                   &dev, &copy_obj)) /* API-01 */
    return NULL;
  if (stream != Py_None && (!PyLong_Check(stream) || PyBool_Check(stream))) {
    PyErr_Format(PyExc_TypeError, "stream must be None or an int, not %.100s", /* STR-02 */
                 Py_TYPE(stream)->tp_name);
    return NULL;
  }
  if (ref_check_copy(copy_obj) < 0) return NULL;
  int versioned = ref_parse_max_version(mv);
  if (versioned < 0) return NULL;
  int to_host = vt_target_device(dev);
  if (to_host < 0) return NULL;

  ref_vstream_plan plan = {.to_host = to_host};
  if (to_host) {
    /* STR-12: for kDLCPU the stream must be None, and the producer synchronises */
    if (stream != Py_None) {
      PyErr_SetString(PyExc_BufferError, "dl_device=(1, 0) takes stream=None only (STR-12)");
      return NULL;
    }
    if (copy_obj == Py_False &&
        ref_refuse(REF_REFUSE_VSTREAM_NO_COPY,
                   "dl_device=(1, 0) needs a copy but copy=False (CPY-05)") < 0)
      return NULL;
    plan.sync = plan.copy = 1; /* the copy to the host (copy_on 0) after the sync */
  } else {
    plan.wait = ref_twist_vstream_wait(wait_stream(stream), stream == Py_None);
    if (plan.wait < 0) return NULL;
    plan.copy = copy_obj == Py_True;
    plan.copy_on = plan.wait > 0 ? plan.wait : self->own; /* CPY-04: the consumer's stream */
  }
  ref_twist_vstream_plan(&plan, self->own);
  if (run_plan(&plan, self->own) < 0) return NULL;
  DLDevice on = to_host ? (DLDevice){kDLCPU, 0} : (DLDevice){VDEV_TYPE, 0};
  return vt_capsule(self->base, versioned, plan.copy, on);
}

static PyMethodDef VTensor_methods[] = {
    {"__dlpack_device__", (PyCFunction)VTensor_device, METH_NOARGS, "(12, 0): kDLExtDev."},
    {"__dlpack__", (PyCFunction)(void (*)(void))VTensor_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)"},
    {NULL, NULL, 0, NULL},
};

static PyObject *VTensor_get_base(VTensor *self, void *c) {
  (void)c;
  Py_INCREF(self->base);
  return (PyObject *)self->base;
}

static PyObject *VTensor_get_stream(VTensor *self, void *c) {
  (void)c;
  return PyLong_FromLong(self->own);
}

static PyGetSetDef VTensor_getset[] = {
    {"base", (getter)VTensor_get_base, NULL, "the host tensor holding the data", NULL},
    {"stream", (getter)VTensor_get_stream, NULL, "the producer's own stream", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject RefDeviceTensor_Type = {
    REF_TYPE_HEAD("DeviceTensor", VTensor),
    .tp_dealloc = (destructor)VTensor_dealloc,
    .tp_doc = "DeviceTensor(base): base's memory on the virtual stream device (12, 0).",
    .tp_methods = VTensor_methods,
    .tp_getset = VTensor_getset,
    .tp_new = VTensor_new,
};

/* ---- module functions ------------------------------------------------------------- */
static PyObject *py_vstream_new(PyObject *m, PyObject *unused) {
  (void)m;
  (void)unused;
  long h = stream_new();
  return h < 0 ? NULL : PyLong_FromLong(h);
}

static PyObject *py_vstream_destroy(PyObject *m, PyObject *arg) {
  (void)m;
  long h = PyLong_AsLong(arg);
  if (h == -1 && PyErr_Occurred()) return NULL;
  if (h <= 2 || h >= VSTREAM_MAX || !alive[h]) {
    PyErr_Format(PyExc_ValueError, "%ld is not a live created stream", h);
    return NULL;
  }
  alive[h] = 0;
  Py_RETURN_NONE;
}

static PyObject *py_vstream_alive(PyObject *m, PyObject *arg) {
  (void)m;
  long h = PyLong_AsLong(arg);
  if (h == -1 && PyErr_Occurred()) return NULL;
  return PyBool_FromLong(stream_alive(h));
}

static PyObject *py_vstream_log(PyObject *m, PyObject *args, PyObject *kwargs) {
  (void)m;
  static char *kwlist[] = {"clear", NULL};
  int clear = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$p:vstream_log", kwlist, &clear)) return NULL;
  PyObject *out = PyList_GetSlice(event_log, 0, PyList_GET_SIZE(event_log));
  if (out && clear && PyList_SetSlice(event_log, 0, PyList_GET_SIZE(event_log), NULL) < 0)
    Py_CLEAR(out);
  return out;
}

static PyMethodDef vstream_functions[] = {
    {"vstream_new", py_vstream_new, METH_NOARGS, "A new stream handle (an int > 2)."},
    {"vstream_destroy", py_vstream_destroy, METH_O, "Destroys a stream made by vstream_new."},
    {"vstream_alive", py_vstream_alive, METH_O, "True for 1, 2 and live handles."},
    {"vstream_log", (PyCFunction)(void (*)(void))py_vstream_log, METH_VARARGS | METH_KEYWORDS,
     "vstream_log(*, clear=False): the ordering events so far: ('wait', consumer, producer), "
     "('sync', producer), ('copy', stream or 0 for the host), ('destroy', stream)."},
    {NULL, NULL, 0, NULL},
};

int ref_vstream_init(PyObject *module) {
  if (!event_log && !(event_log = PyList_New(0))) return -1;
  if (PyModule_AddFunctions(module, vstream_functions) < 0) return -1;
  return PyModule_AddIntConstant(module, "VSTREAM_DEVICE", VDEV_TYPE);
}
