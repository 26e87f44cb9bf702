/* exchange: the consumer target's per-input Python plumbing (see exchange.h). Left out of
 * coverage instrumentation (coverage.ignore): its branches are bookkeeping. */
#include "exchange.h"

#include "devmem.h"
#include "oracle.h"
#include "pyhost.h"
#include "xapi_offer.h"

/* Most refusals are raised with PyErr_SetString / PyErr_Format and stay unnormalised: the
 * value is the message itself. For a class whose construction and __str__ are
 * BaseException's (no override anywhere up its MRO), str(type(message)) is that message,
 * so it is taken as it is, without building the exception object. Anything else is
 * normalised. */
PyObject *dlc_exception_text(PyObject **type, PyObject **value, PyObject **tb) {
  PyTypeObject *base = (PyTypeObject *)PyExc_BaseException;
  if (*value != NULL && PyUnicode_CheckExact(*value) && PyType_Check(*type)) {
    PyTypeObject *t = (PyTypeObject *)*type;
    if (t->tp_str == base->tp_str && t->tp_init == base->tp_init && t->tp_new == base->tp_new) {
      Py_INCREF(*value);
      return *value;
    }
  }
  PyErr_NormalizeException(type, value, tb);
  PyObject *text = *value ? PyObject_Str(*value) : NULL;
  if (text == NULL) PyErr_Clear();
  return text;
}

/* Set-aside refusals (exchange.h, dlc_refusal_fail). */
#define SET_ASIDE 16
static struct {
  const char *clause;
  PyObject *type; /* owned */
  PyObject *text; /* owned str */
} set_aside[SET_ASIDE];
static unsigned n_set_aside;

/* Equal str objects, compared without memcmp (which libFuzzer intercepts and records on
 * every mismatch). */
static int dlc_same_text(PyObject *a, PyObject *b) {
  if (a == b) return 1;
  if (!PyUnicode_CheckExact(b) || PyUnicode_READY(b) != 0) {
    PyErr_Clear();
    return 0;
  }
  Py_ssize_t n = PyUnicode_GET_LENGTH(a);
  int kind = PyUnicode_KIND(a);
  if (n != PyUnicode_GET_LENGTH(b) || kind != PyUnicode_KIND(b)) return 0;
  const unsigned char *x = PyUnicode_DATA(a), *y = PyUnicode_DATA(b);
  for (Py_ssize_t i = 0; i < n * kind; ++i)
    if (x[i] != y[i]) return 0;
  return 1;
}

static int dlc_set_aside_known(const char *clause, PyObject *type, PyObject *text) {
  if (text == NULL) return 0;
  for (unsigned i = 0; i < SET_ASIDE && i < n_set_aside; ++i)
    if (set_aside[i].clause == clause && set_aside[i].type == type &&
        dlc_same_text(set_aside[i].text, text))
      return 1;
  return 0;
}

static void dlc_set_aside_add(const char *clause, PyObject *type, PyObject *text) {
  if (text == NULL || !PyUnicode_CheckExact(text) || PyUnicode_READY(text) != 0) {
    PyErr_Clear();
    return;
  }
  unsigned i = n_set_aside++ % SET_ASIDE;
  Py_XDECREF(set_aside[i].type);
  Py_XDECREF(set_aside[i].text);
  set_aside[i].clause = clause;
  Py_INCREF(type);
  set_aside[i].type = type;
  Py_INCREF(text);
  set_aside[i].text = text;
}

void dlc_refusal_fail(const char *clause, PyObject *type, PyObject *text) {
  if (dlc_set_aside_known(clause, type, text)) return;
  const char *msg = text ? PyUnicode_AsUTF8(text) : NULL;
  if (msg == NULL) PyErr_Clear();
  dlc_oracle_fail(clause, "from_dlpack raised %s: %s", ((PyTypeObject *)type)->tp_name,
                  msg ? msg : "?");
  /* dlc_oracle_fail returned: set aside, unless it reports every breach and goes on */
  if (!dlc_oracle_keeps_going()) dlc_set_aside_add(clause, type, text);
}

/* from_dlpack(producer[, copy=][, device=]) as a vectorcall. Helpers here are named dlc_*:
 * fuzz-ci's dedup keys skip those frames of a crash's stack.
 * device= is the consumer's own device object (array API from_dlpack), not __dlpack__'s
 * dl_device pair: the CPU, kw dl_device (1, 0), goes as "cpu", the name numpy, torch and ref
 * all take (as suites/test_device.py passes it for DEV-06 / CPY-08); numpy 2 refuses the pair
 * (1, 0) with ValueError, which is right and read as a CPY-08 / DEV-06 breach. Other pairs
 * stay tuples: no library has a device object for them, and any refusal but SystemError
 * passes (consumer_oracles.c). */
static PyObject *dlc_device_arg(int dev_type, int dev_id) {
  static PyObject *cpu;
  if (dev_type != kDLCPU || dev_id != 0) return Py_BuildValue("(ii)", dev_type, dev_id);
  if (cpu == NULL && (cpu = PyUnicode_InternFromString("cpu")) == NULL) return NULL;
  Py_INCREF(cpu);
  return cpu;
}

static PyObject *dlc_call_consumer(PyObject *producer, int copy, int device, int dev_type,
                                   int dev_id) {
  static PyObject *names[4]; /* keyword names by bit 0 copy, bit 1 device */
  PyObject *args[3] = {producer, NULL, NULL};
  size_t n = 1;
  unsigned which = 0;
  PyObject *dev = NULL;
  if (copy >= 0) {
    args[n++] = copy == DLC_COPY_NONE ? Py_None : copy == DLC_COPY_TRUE ? Py_True : Py_False;
    which |= 1;
  }
  if (device) {
    dev = dlc_device_arg(dev_type, dev_id);
    if (dev == NULL) return NULL;
    args[n++] = dev;
    which |= 2;
  }
  if (which != 0 && names[which] == NULL) {
    names[which] = which == 1   ? PyTuple_Pack(1, dlc_py.kw_copy)
                   : which == 2 ? PyTuple_Pack(1, dlc_py.kw_device)
                                : PyTuple_Pack(2, dlc_py.kw_copy, dlc_py.kw_device);
    if (names[which] == NULL) {
      Py_XDECREF(dev);
      return NULL;
    }
  }
  PyObject *result = PyObject_Vectorcall(dlc_py.from_dlpack, args, 1, which ? names[which] : NULL);
  Py_XDECREF(dev);
  return result;
}

int dlc_exchange(dlc_forged *f, const dlc_record *r, int copy, PyObject **result,
                 dlc_producer_log *log) {
  PyObject *capsule = dlc_forged_capsule(f);
  PyObject *producer = capsule ? dlc_producer_new_of(dlc_xapi_offer_type(r), capsule,
                                                     r->device_type, r->device_id)
                               : NULL;
  Py_XDECREF(capsule); /* the producer holds the only reference now */
  if (producer == NULL) {
    PyErr_Clear();
    return -1;
  }
  if (r->kw & DLC_KW_OLD_PRODUCER) dlc_producer_set_old(producer);
  if (r->kw & DLC_KW_STRICT_PRODUCER) dlc_producer_set_strict(producer);
  if (f->device != NULL && f->pending) dlc_producer_set_order(producer, dlc_devmem_order);
  uintptr_t side = 0; /* DLC_KW_SIDE_STREAM: inside the library's side-stream context */
  PyObject *ctx = (r->kw & DLC_KW_SIDE_STREAM) ? dlc_devmem_side_enter(&side) : NULL;
  dlc_xapi_begin(r); /* the offer's tables judge and count calls from here (xapi_offer.h) */
  *result = dlc_call_consumer(producer, copy, (r->kw & DLC_KW_DL_DEVICE) != 0,
                              r->kw_dev_type, r->kw_dev_id);
  dlc_xapi_end();
  dlc_devmem_side_exit(ctx);
  *log = *dlc_producer_log_of(producer);
  log->side = side;
  /* the producer still holds the capsule it handed out: its name is the consumer's doing */
  log->unrenamed = log->calls > 0 && dlc_forged_capsule_unconsumed(dlc_producer_capsule(producer));
  Py_DECREF(producer);
  return 0;
}
