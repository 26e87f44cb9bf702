/* consume: from_dlpack, the reference consumer. It reads as the spec's sequence: parse the
 * arguments; ask the producer's device and plan the request (stream, dl_device, copy);
 * call the producer, through its exchange API where a CPU producer offers one, else
 * __dlpack__ with the VER-06 retry; import what it gives (import.c). */
#include "ref.h"

#include <stdlib.h>
#include <string.h>

/* ---- arguments ---------------------------------------------------------------------- */

/* device: None, "cpu" or (kDLCPU, 0). 1 when given, 0 when None, -1 with BufferError. */
static int parse_device(PyObject *device) {
  if (device == Py_None) return 0;
  if (PyUnicode_Check(device) && PyUnicode_CompareWithASCIIString(device, "cpu") == 0)
    return 1;
  if (PyTuple_Check(device) && PyTuple_GET_SIZE(device) == 2) {
    long t = PyLong_AsLong(PyTuple_GET_ITEM(device, 0));
    long id = PyLong_AsLong(PyTuple_GET_ITEM(device, 1));
    if (!PyErr_Occurred() && t == kDLCPU && id == 0) return 1;
    PyErr_Clear();
  }
  PyErr_SetString(PyExc_BufferError, "from_dlpack: only device='cpu' or (1, 0) is supported"
                                     " (CPY-08)");
  return -1;
}

/* from_dlpack(x, /, *, device=None, copy=None). 0, or -1 with an exception. */
static int parse_arguments(PyObject *args, PyObject *kwargs, PyObject **x, int *want_device,
                           PyObject **copy) {
  static char *kwlist[] = {"", "device", "copy", NULL};
  PyObject *device = Py_None;
  *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OO:from_dlpack", kwlist, x, &device, copy) ||
      ref_check_copy(*copy) < 0)
    return -1;
  *want_device = parse_device(device);
  return *want_device < 0 ? -1 : 0;
}

/* ---- the plan ----------------------------------------------------------------------- */

/* API-04: __dlpack_device__ first; its exceptions propagate (ERR-02, ERR-03). The device
 * type, or -1 with an exception. */
static long producer_device(PyObject *x) {
  PyObject *dev = PyObject_CallMethod(x, "__dlpack_device__", NULL);
  if (!dev) return -1;
  long dev_type = -1;
  if (PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2)
    dev_type = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
  Py_DECREF(dev);
  if (dev_type == -1 && !PyErr_Occurred())
    PyErr_SetString(PyExc_TypeError, "__dlpack_device__ must return (device_type, device_id)");
  return dev_type;
}

/* What to ask the producer of x for: stream=None (STR-10 for CPU, STR-12 with dl_device),
 * dl_device=(kDLCPU, 0) when a device was asked for, copy as given. Memory on another
 * device is refused unless a host copy was asked for (DEV-07) and allowed (CPY-07: the
 * array API's copy text says BufferError, its device text and Raises section say
 * ValueError; the suite accepts either, the catalogue's reading). 0, or -1 with the
 * refusal raised. */
static int plan_request(PyObject *x, int want_device, PyObject *copy, ref_request *r) {
  long dev_type = producer_device(x);
  if (dev_type == -1) return -1;
  *r = (ref_request){.dev_type = dev_type, .want_device = want_device, .copy = copy,
                     .retry = 1, .xapi = dev_type == kDLCPU, .xapi_check_major = 1,
                     .xapi_check_dltensor = 1};
  if (dev_type != kDLCPU && !want_device)
    r->refusal = PyExc_BufferError,
    r->refusal_message = "from_dlpack: the reference imports CPU memory only";
  else if (dev_type != kDLCPU && copy == Py_False)
    r->refusal = PyExc_BufferError,
    r->refusal_message = "from_dlpack: copy=False but a copy to CPU is needed";
  ref_twist_request(r);
  if (!r->refusal) return 0;
  PyErr_SetString(r->refusal, r->refusal_message);
  return -1;
}

/* ---- the C exchange API path (XAPI-04, 06, 11) -----------------------------------
 * Used when type(x) carries a "dlpack_exchange_api" capsule whose major is ours and whose
 * required pointer is set; otherwise from_dlpack falls back to __dlpack__. copy=True with
 * a dltensor_from_py_object_no_sync copies straight from the non-owning DLTensor (valid
 * only until control returns, XAPI-15); everything else imports an owning tensor from
 * managed_tensor_from_py_object_no_sync (XAPI-14). The capsule is held while the table is
 * in use. */
static void free_wrapper(DLManagedTensorVersioned *m) { free(m); }

/* Copies a non-owning DLTensor now, through a heap wrapper with a freeing deleter. */
static PyObject *copy_borrowed(const DLTensor *dl) {
  DLManagedTensorVersioned *w = calloc(1, sizeof *w);
  if (!w) return PyErr_NoMemory();
  w->version.major = REF_SPEC_MAJOR;
  w->version.minor = REF_SPEC_MINOR;
  w->deleter = free_wrapper;
  w->dl_tensor = *dl;
  dlc_dtype_info info = dlc_dtype_classify(dl->dtype, REF_SPEC_MAJOR, REF_SPEC_MINOR);
  if (info.valid && info.subbyte) w->flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  return ref_import_managed(NULL, w, 1);
}

const DLPackExchangeAPI *ref_offered_table(PyObject *x, const ref_request *r, PyObject **cap) {
  PyObject *owner = r->xapi_on_instance ? x : (PyObject *)Py_TYPE(x);
  *cap = PyObject_GetAttrString(owner, "__dlpack_c_exchange_api__"); /* XAPI-04 */
  const DLPackExchangeAPI *api = NULL;
  if (*cap && PyCapsule_IsValid(*cap, "dlpack_exchange_api")) /* XAPI-02 */
    api = PyCapsule_GetPointer(*cap, "dlpack_exchange_api");
  /* XAPI-06: the layout after the header belongs to that major */
  if (api && (api->header.version.major == DLPACK_MAJOR_VERSION || !r->xapi_check_major) &&
      api->managed_tensor_from_py_object_no_sync)
    return api;
  Py_CLEAR(*cap);
  PyErr_Clear();
  return NULL;
}

/* 1 when the exchange API was used (*res is the result or NULL with an exception), 0 to
 * fall back to __dlpack__ (no exception set). */
static int import_exchange(PyObject *x, int copy, const ref_request *r, PyObject **res) {
  *res = NULL;
  PyObject *cap;
  const DLPackExchangeAPI *api = ref_offered_table(x, r, &cap);
  if (!api) return 0;
  if (copy && (api->dltensor_from_py_object_no_sync || !r->xapi_check_dltensor)) { /* XAPI-11 */
    DLTensor dl;
    memset(&dl, 0, sizeof dl);
    if (api->dltensor_from_py_object_no_sync(x, &dl) != 0) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_SystemError, "dltensor_from_py_object_no_sync failed without "
                                           "an exception (XAPI-15)");
    } else {
      *res = copy_borrowed(&dl);
    }
    Py_DECREF(cap);
    return 1;
  }
  DLManagedTensorVersioned *m = NULL;
  int rc = api->managed_tensor_from_py_object_no_sync(x, &m);
  Py_DECREF(cap);
  if (rc != 0 || !m) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_SystemError, "managed_tensor_from_py_object_no_sync gave no "
                                         "tensor and no exception (XAPI-14)");
    return 1;
  }
  if (!(m = ref_twist_handout(m))) return 1; /* VER-08: the hand-out's own version counts */
  *res = ref_import_managed(NULL, m, copy && !ref_import_is_copy(m)); /* FLG-05 */
  return 1;
}

/* ---- the __dlpack__ path ------------------------------------------------------------ */

static PyObject *request_keywords(const ref_request *r) {
  PyObject *stream = r->stream_given ? PyLong_FromLong(r->stream) : Py_NewRef(Py_None);
  PyObject *dl_device = r->want_device ? Py_BuildValue("(ii)", (int)kDLCPU, 0) : Py_NewRef(Py_None);
  PyObject *kw = NULL;
  if (stream && dl_device)
    kw = Py_BuildValue("{s:(ii),s:O,s:O,s:O}", "max_version", (int)REF_SPEC_MAJOR,
                       (int)REF_SPEC_MINOR, "stream", stream, "copy", r->copy, "dl_device",
                       dl_device);
  Py_XDECREF(stream);
  Py_XDECREF(dl_device);
  return kw;
}

/* x.__dlpack__(max_version, stream, copy, dl_device), retried with stream alone when an
 * older producer raises TypeError for the new keywords (VER-06). */
static PyObject *call_producer(PyObject *x, const ref_request *r) {
  PyObject *method = PyObject_GetAttrString(x, "__dlpack__");
  if (!method) return NULL;
  PyObject *kw = request_keywords(r), *empty = PyTuple_New(0), *cap = NULL;
  if (kw && empty) {
    cap = PyObject_Call(method, empty, kw);
    if (!cap && r->retry && PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyObject *kw_old = Py_BuildValue("{s:O}", "stream", Py_None);
      if (kw_old) cap = PyObject_Call(method, empty, kw_old);
      Py_XDECREF(kw_old);
    }
    if (!cap && r->host_copy_refusal && PyErr_ExceptionMatches(PyExc_BufferError)) {
      PyErr_Clear();
      PyErr_SetString(r->host_copy_refusal, "from_dlpack: cannot place the data on the device");
    }
  }
  Py_XDECREF(kw);
  Py_XDECREF(empty);
  Py_DECREF(method);
  return cap;
}

static PyObject *import_result(PyObject *cap, int copy) {
  PyObject *res = NULL;
  if (!PyCapsule_CheckExact(cap))
    PyErr_SetString(PyExc_TypeError, "__dlpack__ did not return a PyCapsule");
  else
    res = ref_import_capsule(cap, copy);
  Py_DECREF(cap);
  return res;
}

PyObject *ref_from_dlpack(PyObject *module, PyObject *args, PyObject *kwargs) {
  (void)module;
  PyObject *x, *copy_obj;
  int want_device;
  if (parse_arguments(args, kwargs, &x, &want_device, &copy_obj) < 0) return NULL;
  int copy = copy_obj == Py_True;
  if (PyCapsule_CheckExact(x)) return ref_import_capsule(x, copy); /* raw capsules, for tests */
  ref_request r;
  if (plan_request(x, want_device, copy_obj, &r) < 0) return NULL;
  PyObject *res;
  if (r.xapi && import_exchange(x, copy, &r, &res)) return res;
  PyObject *cap = call_producer(x, &r);
  return cap ? import_result(cap, copy) : NULL;
}
