/* consumer_oracles: see consumer_oracles.h for the clauses. */
#include "consumer_oracles.h"

#include <string.h>

#include "devices.h"
#include "devmem.h"
#include "exchange.h"
#include "oracle.h"
#include "plain_import.h"
#include "pyhost.h"
#include "py_refcount_calls.h" /* last: it redefines the refcount macros */

static int cpu_device_kw(const dlc_record *r) {
  return (r->kw & DLC_KW_DL_DEVICE) && r->kw_dev_type == kDLCPU && r->kw_dev_id == 0;
}

/* A TypeError about a keyword: the consumer (or an old producer) lacks that keyword. */
static int keyword_type_error(PyObject *type, PyObject *text) {
  if (!PyErr_GivenExceptionMatches(type, PyExc_TypeError) || text == NULL) return 0;
  const char *s = PyUnicode_AsUTF8(text);
  return s != NULL && strstr(s, "keyword") != NULL;
}

/* keyword_type_error on the pending exception, which stays pending. */
static int keyword_error_pending(void) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (type == NULL) return 0;
  PyErr_NormalizeException(&type, &value, &tb);
  PyObject *text = value ? PyObject_Str(value) : NULL;
  if (text == NULL) PyErr_Clear();
  int yes = keyword_type_error(type, text);
  Py_XDECREF(text);
  PyErr_Restore(type, value, tb);
  return yes;
}

void dlc_check_calls(const dlc_record *r, int copy, const dlc_producer_log *log, int refused,
                     int must_refuse) {
  if (log->stream_clause != NULL) dlc_oracle_fail(log->stream_clause, "%s", log->stream_msg);
  /* STR-07 (STR-01: the consumer passes the stream it will use): inside a side-stream context
   * of its library a consumer's current stream is that stream, and an int it names for a CUDA
   * export must be its handle. -1 (no synchronisation) and a host copy (None, STR-12) are other
   * rules'; None and 0 were judged above (STR-14, STR-08) */
  if (log->side != 0 && r->device_type == kDLCUDA && log->calls > 0 && log->named_int &&
      !log->named_host && log->named != -1 && log->named != 0 &&
      (uintptr_t)log->named != log->side)
    dlc_oracle_fail("STR-07", "inside a side-stream context of its library (stream %llu) the "
                    "consumer named stream %lld to __dlpack__", (unsigned long long)log->side,
                    log->named);
  if (refused && log->refused_kw > 0 && log->calls == log->refused_kw &&
      PyErr_ExceptionMatches(PyExc_TypeError))
    dlc_oracle_fail("VER-06", "an old producer's __dlpack__ raised TypeError for new keywords "
                    "%d time(s), and the consumer never retried without them", log->refused_kw);
  if (r->device_type == kDLCPU || must_refuse || !cpu_device_kw(r)) return;
  /* with copy=False a consumer may refuse at once: the copy to the host is needed (CPY-07) */
  if (refused && copy != DLC_COPY_FALSE && !log->cpu_dl_device && log->refused_kw == 0 &&
      !keyword_error_pending())
    dlc_oracle_fail("DEV-06", "from_dlpack(device='cpu') refused a producer on device %d "
                    "without asking it for dl_device=(1, 0)", r->device_type);
  if (copy == DLC_COPY_FALSE &&
      (log->copy_forwarded == DLC_FWD_NONE || log->copy_forwarded == DLC_FWD_TRUE))
    dlc_oracle_fail("CPY-07", "from_dlpack(device='cpu', copy=False) forwarded copy=%s to a "
                    "producer on device %d", log->copy_forwarded == DLC_FWD_NONE ? "None" : "True",
                    r->device_type);
  else if (copy == DLC_COPY_FALSE && log->cpu_ask_unguarded)
    dlc_oracle_fail("CPY-07", "from_dlpack(device='cpu', copy=False) asked a producer on device "
                    "%d for dl_device=(1, 0) without copy=False", r->device_type);
}

void dlc_check_refusal_class(const dlc_record *r, int copy, const dlc_producer_log *log,
                             int other_reason, int backed) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (type == NULL)
    return dlc_oracle_fail("EXC", "from_dlpack returned NULL without setting an exception");
  /* the message is only rendered when a decision needs it (per-input fast path) */
  PyObject *text = NULL;
  int is_type_error = PyErr_GivenExceptionMatches(type, PyExc_TypeError);
  if (is_type_error) text = dlc_exception_text(&type, &value, &tb);
  const char *clause = NULL;
  /* host memory named as a device this machine has (or the CUDA mode's device, devmem.h): a
   * lie the consumer can act on (devices.h); device memory of the CUDA mode is none */
  int lie = (dlc_device_present(r->device_type) ||
             (dlc_devmem_active() && r->device_type == kDLCUDA)) &&
            !backed;
  if (r->device_type != kDLCPU && !other_reason && !lie && log->refused_kw == 0 &&
      !keyword_type_error(type, text) &&
      !PyErr_GivenExceptionMatches(type, PyExc_BufferError) &&
      !PyErr_GivenExceptionMatches(type, PyExc_MemoryError)) {
    if (!(r->kw & DLC_KW_DL_DEVICE))
      clause = "DEV-07"; /* SHOULD: a device it does not support gets BufferError */
    else if (cpu_device_kw(r) && !(copy == DLC_COPY_FALSE &&
                                   PyErr_GivenExceptionMatches(type, PyExc_ValueError)))
      /* CPY-08: device='cpu' it cannot support at all is BufferError (CPY-07: ValueError).
       * A producer that ignored the consumer's dl_device=(1, 0) and handed out an export of
       * its own device broke DEV-05 first; refusing that export is DEV-07's case (SHOULD). */
      clause = log->cpu_dl_device && !(r->kw & DLC_KW_STRICT_PRODUCER) ? "DEV-07" : "CPY-08";
    /* any other pair names no device the consumer knows: refusing the argument itself
     * (numpy 2: ValueError "Device not understood") is right, so only EXC applies */
  }
  /* device= as a pair other than (1, 0) is an argument no consumer has a device object for
   * (exchange.c): refusing it with any class is fine; only SystemError breaks the C API */
  int foreign_device_arg = (r->kw & DLC_KW_DL_DEVICE) && !cpu_device_kw(r);
  if (clause == NULL && !dlc_pyhost_exception_allowed(type) &&
      (!(foreign_device_arg || lie) || PyErr_GivenExceptionMatches(type, PyExc_SystemError)))
    clause = "EXC";
  if (clause != NULL && !dlc_oracle_ignored(clause)) {
    if (text == NULL) text = dlc_exception_text(&type, &value, &tb);
    dlc_refusal_fail(clause, type, text);
  }
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
}

int dlc_result_device(PyObject *result, long *type, long *id) {
  *type = *id = -1;
  PyObject *dev = PyObject_CallMethodNoArgs(result, dlc_py.dlpack_device);
  if (dev == NULL) {
    PyErr_Clear();
    return 0;
  }
  if (PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2) {
    *type = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
    *id = PyLong_AsLong(PyTuple_GET_ITEM(dev, 1));
    PyErr_Clear();
  }
  Py_DECREF(dev);
  return 1;
}

/* API-05: a result of a (1, 0) export, or of device memory (devmem.h), imported without
 * device=, reports the export's device. */
static void check_device(const dlc_record *r, PyObject *result, int backed) {
  if ((r->device_type != kDLCPU && !backed) || r->device_id != 0 || (r->kw & DLC_KW_DL_DEVICE))
    return;
  long t, i;
  if (!dlc_result_device(result, &t, &i)) return;
  if (t != r->device_type || i != 0)
    dlc_oracle_fail("API-05", "the result of a (%d, 0) export reports device (%ld, %ld)",
                    (int)r->device_type, t, i);
}

/* FLG-03: a zero-copy result of a READ_ONLY export, whose type can say read-only, says so. */
static void check_readonly(PyObject *result, const Py_buffer *view) {
  if (view != NULL) {
    if (!view->readonly)
      dlc_oracle_fail("FLG-03", "the zero-copy result of a READ_ONLY export is a writable buffer");
    return;
  }
  PyObject *ro = PyObject_GetAttrString(result, "readonly");
  if (ro == NULL) {
    PyErr_Clear();
    return;
  }
  if (ro == Py_False)
    dlc_oracle_fail("FLG-03", "the zero-copy result of a READ_ONLY export has readonly False");
  Py_DECREF(ro);
}

/* The result's element strides from a `strides` tuple attribute or a `stride()` method;
 * NULL when it offers neither. */
static PyObject *element_strides(PyObject *result) {
  PyObject *s = PyObject_GetAttrString(result, "strides");
  if (s != NULL && PyTuple_Check(s)) return s;
  Py_XDECREF(s);
  PyErr_Clear();
  s = PyObject_CallMethod(result, "stride", NULL);
  if (s != NULL && PyTuple_Check(s)) return s;
  Py_XDECREF(s);
  PyErr_Clear();
  return NULL;
}

/* LAY-11: a zero-copy result without the buffer protocol keeps the export's strides. */
static void check_strides(const dlc_record *r, const dlc_forged *f, PyObject *result) {
  DLTensor exported = dlc_forged_tensor(f, r);
  const DLTensor *t = &exported;
  int64_t rm[DLC_REC_MAX_NDIM];
  if (t->strides == NULL && dlc_row_major_strides(t->ndim, t->shape, rm) != 0) return;
  const int64_t *want = t->strides ? t->strides : rm;
  PyObject *s = element_strides(result);
  if (s == NULL) return;
  if (PyTuple_GET_SIZE(s) == t->ndim) {
    for (int i = 0; i < t->ndim; ++i) {
      long long got = PyLong_AsLongLong(PyTuple_GET_ITEM(s, i));
      if (PyErr_Occurred()) {
        PyErr_Clear();
        break;
      }
      if (t->shape[i] > 1 && got != want[i]) {
        dlc_oracle_fail("LAY-11", "result stride[%d] = %lld elements, export %lld", i, got,
                        (long long)want[i]);
        break;
      }
    }
  }
  Py_DECREF(s);
}

void dlc_check_result_extra(const dlc_record *r, int copy, const dlc_forged *f, PyObject *result,
                            const Py_buffer *view, int described, int aliases, const void *addr,
                            int view_only) {
  const dlc_plan *p = &f->mem.plan;
  int backed = f->device != NULL;
  check_device(r, result, backed);
  int copied_flag = (r->kind & DLC_REC_VERSIONED) && (r->flags & DLPACK_FLAG_BITMASK_IS_COPIED);
  if (copy == DLC_COPY_TRUE && aliases && !p->ext.zero_size && !copied_flag)
    dlc_oracle_fail("CPY-06", "from_dlpack(copy=True) returned a view of the producer's memory");
  if (copy != DLC_COPY_TRUE && addr != NULL && !aliases && p->mode == DLC_DATA_BUFFER &&
      !p->ext.zero_size &&
      ((r->device_type == kDLCPU && r->device_id == 0) || (backed && p->ext.row_major)) &&
      r->lanes == 1 && r->bits % 8 == 0 &&
      (!(r->kw & DLC_KW_DL_DEVICE) || (r->kw_dev_type == r->device_type && r->kw_dev_id == r->device_id)))
    dlc_oracle_fail("SEM-01", "the result copies a %s export it could view (copy not requested)%s",
                    backed ? "CUDA" : "CPU",
                    dlc_plain_import_copies(backed)
                        ? " " DLC_AMBIGUOUS "this consumer copies even a plain contiguous export: read as a "
                          "library whose arrays own their memory)"
                        : "");
  if (aliases && p->readonly && !view_only) check_readonly(result, view);
  if (aliases && !described && !p->ext.zero_size) check_strides(r, f, result);
}
