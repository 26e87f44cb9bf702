/* stress.c: `stress(obj, expected, threads, iterations, api=0, reader=None)`: many C threads
 * export one shared tensor at once (issue 3 "Threads and caching"; OWN-04, OWN-05, XAPI-14).
 * `reader(address)`, a callable, reads the elements of the DLTensor at `address` where the
 * host cannot (device memory: through the CUDA runtime); it is called with the GIL held. Host
 * memory, and device memory without a reader (ValueError: bad values), is read here.
 *
 * Each of `threads` pthreads runs `iterations` rounds. A round takes the GIL through
 * PyGILState_Ensure (the thread is not a Python thread), then:
 *   - with a table (api != 0): two managed_tensor_from_py_object_no_sync hand-outs; the
 *     same pointer twice means the producer caches one struct (reported, not a fault);
 *   - one obj.__dlpack__(max_version=(1, 3)) capsule (TypeError: obj.__dlpack__()), taken
 *     over by renaming it used_* (CAP-03), so its deleter is ours to call.
 * Hand-outs go into a per-thread window of WINDOW live tensors. Oracles:
 *   - every hand-out's values equal `expected` when it is taken and again just before its
 *     own deleter runs, after other hand-outs (its own thread's and others') were released
 *     (OWN-05);
 *   - every hand-out gets exactly one deleter call, made WITHOUT the GIL (OWN-04): the
 *     counts must balance (deleter_calls + null_deleters == handouts);
 *   - poison: when two hand-outs are the same struct, one is released, the allocator is
 *     churned with blocks filled with 0xA5 (so a struct freed too early is likely
 *     overwritten), and the other must still hold the same fields and values.
 * Counters are atomics; the first messages are written with the GIL held. */
#include "probe.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 4
#define CHURN 64

typedef struct {
  void *managed;
  int versioned;
} handout;

typedef struct {
  PyObject *obj, *expected, *reader; /* reader: NULL, or a callable of a DLTensor's address */
  const DLPackExchangeAPI *api;
  long iterations;
  atomic_long handouts, xapi_handouts, dlpack_handouts, deleter_calls, null_deleters;
  atomic_long cached_pairs, bad_values, poison_checks, poison_failures, errors;
  PyObject *first_bad, *first_error; /* written with the GIL held */
} stress_state;

static const DLTensor *tensor_of(handout h) {
  return h.versioned ? &((DLManagedTensorVersioned *)h.managed)->dl_tensor
                     : &((DLManagedTensor *)h.managed)->dl_tensor;
}

/* GIL held. 1 when the hand-out's elements equal expected; records the first mismatch. */
static int values_ok(stress_state *s, handout h, const char *when) {
  const DLTensor *t = tensor_of(h);
  PyObject *got = s->reader && !probe_host_readable((int32_t)t->device.device_type)
                      ? PyObject_CallFunction(s->reader, "K", (unsigned long long)(uintptr_t)t)
                      : probe_read_tensor(t);
  int ok = got && PyObject_RichCompareBool(got, s->expected, Py_EQ) == 1;
  if (!ok) {
    atomic_fetch_add(&s->bad_values, 1);
    if (!s->first_bad)
      s->first_bad = PyUnicode_FromFormat("%s: read %R, expected %R", when, got ? got : Py_None,
                                          s->expected);
  }
  Py_XDECREF(got);
  PyErr_Clear();
  return ok;
}

/* GIL held: records the pending exception (or msg) as an error. */
static void error(stress_state *s, const char *msg) {
  atomic_fetch_add(&s->errors, 1);
  if (!s->first_error) {
    if (PyErr_Occurred()) {
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      s->first_error = PyUnicode_FromFormat("%s: %R", msg, value ? value : Py_None);
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(tb);
    } else {
      s->first_error = PyUnicode_FromString(msg);
    }
  }
  PyErr_Clear();
}

/* Without the GIL (OWN-04): the hand-out's one deleter call. */
static void release(stress_state *s, handout h) {
  if (h.versioned) {
    DLManagedTensorVersioned *m = h.managed;
    if (m->deleter) m->deleter(m);
    else atomic_fetch_add(&s->null_deleters, 1);
  } else {
    DLManagedTensor *m = h.managed;
    if (m->deleter) m->deleter(m);
    else atomic_fetch_add(&s->null_deleters, 1);
  }
}

static void count_release(stress_state *s, handout h) {
  int has = h.versioned ? ((DLManagedTensorVersioned *)h.managed)->deleter != NULL
                        : ((DLManagedTensor *)h.managed)->deleter != NULL;
  release(s, h);
  if (has) atomic_fetch_add(&s->deleter_calls, 1);
}

/* GIL held: one __dlpack__ capsule taken over (renamed used_*). 0 when none. */
static int take_capsule(stress_state *s, handout *out) {
  PyObject *kw = Py_BuildValue("{s:(ii)}", "max_version", 1, 3);
  PyObject *meth = PyObject_GetAttrString(s->obj, "__dlpack__");
  PyObject *empty = PyTuple_New(0), *cap = NULL;
  if (kw && meth && empty) {
    cap = PyObject_Call(meth, empty, kw);
    if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      cap = PyObject_CallNoArgs(meth);
    }
  }
  Py_XDECREF(kw);
  Py_XDECREF(meth);
  Py_XDECREF(empty);
  if (!cap) return error(s, "__dlpack__"), 0;
  probe_capsule c;
  int rc = 0;
  if (probe_capsule_read(cap, &c) == 0 &&
      (c.kind == PROBE_KIND_LEGACY || c.kind == PROBE_KIND_VERSIONED)) {
    int v = c.kind == PROBE_KIND_VERSIONED;
    if (PyCapsule_SetName(cap, v ? PROBE_NAME_USED_VERSIONED : PROBE_NAME_USED_LEGACY) == 0) {
      out->managed = c.pointer;
      out->versioned = v;
      rc = 1;
    }
  }
  if (!rc) error(s, "__dlpack__ gave no readable capsule");
  Py_DECREF(cap);
  return rc;
}

/* Without the GIL: allocator churn that overwrites freed blocks with 0xA5. */
static void churn(void) {
  void *blocks[CHURN];
  for (int i = 0; i < CHURN; i++) {
    size_t n = (size_t)(16 + (i % 8) * 16);
    blocks[i] = malloc(n);
    if (blocks[i]) memset(blocks[i], 0xA5, n);
  }
  for (int i = 0; i < CHURN; i++) free(blocks[i]);
}

static void *worker(void *arg) {
  stress_state *s = arg;
  handout win[WINDOW];
  int live = 0;
  for (long it = 0; it < s->iterations; it++) {
    handout got[3];
    int n = 0;
    PyGILState_STATE g = PyGILState_Ensure();
    if (s->api) {
      for (int k = 0; k < 2; k++) {
        DLManagedTensorVersioned *m = NULL;
        if (s->api->managed_tensor_from_py_object_no_sync(s->obj, &m) != 0 || !m) {
          error(s, "managed_tensor_from_py_object_no_sync");
          continue;
        }
        atomic_fetch_add(&s->xapi_handouts, 1);
        got[n++] = (handout){m, 1};
      }
    }
    if (take_capsule(s, &got[n])) {
      atomic_fetch_add(&s->dlpack_handouts, 1);
      n++;
    }
    atomic_fetch_add(&s->handouts, n);
    for (int k = 0; k < n; k++) values_ok(s, got[k], "at hand-out");
    int same = s->api && n >= 2 && got[0].managed == got[1].managed;
    DLTensor before;
    if (same) {
      atomic_fetch_add(&s->cached_pairs, 1);
      before = *tensor_of(got[1]);
    }
    PyGILState_Release(g);

    if (same) { /* poison check: release one of the pair, churn, inspect the other */
      count_release(s, got[0]);
      churn();
      g = PyGILState_Ensure();
      const DLTensor *after = tensor_of(got[1]);
      atomic_fetch_add(&s->poison_checks, 1);
      if (memcmp(&before, after, sizeof before) != 0 || !values_ok(s, got[1], "after poison")) {
        atomic_fetch_add(&s->poison_failures, 1);
      }
      PyGILState_Release(g);
      got[0] = got[--n]; /* got[0] is released: keep the others */
    }
    for (int k = 0; k < n; k++) {
      if (live == WINDOW) { /* the oldest: values once more, then its own deleter */
        g = PyGILState_Ensure();
        values_ok(s, win[0], "before its deleter");
        PyGILState_Release(g);
        count_release(s, win[0]);
        memmove(win, win + 1, sizeof win[0] * (WINDOW - 1));
        live--;
      }
      win[live++] = got[k];
    }
  }
  for (int k = 0; k < live; k++) {
    PyGILState_STATE g = PyGILState_Ensure();
    values_ok(s, win[k], "before its deleter");
    PyGILState_Release(g);
    count_release(s, win[k]);
  }
  return NULL;
}

PyObject *probe_stress(PyObject *self, PyObject *args, PyObject *kwargs) {
  (void)self;
  static char *kwlist[] = {"obj", "expected", "threads", "iterations", "api", "reader", NULL};
  PyObject *obj, *expected, *api_obj = NULL, *reader = NULL;
  int threads = 4;
  long iterations = 100;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OS|il$OO:stress", kwlist, &obj, &expected,
                                   &threads, &iterations, &api_obj, &reader))
    return NULL;
  if (reader == Py_None) reader = NULL;
  if (reader && !PyCallable_Check(reader)) {
    PyErr_SetString(PyExc_TypeError, "reader must be None or a callable of a DLTensor's address");
    return NULL;
  }
  if (threads < 1 || threads > 64 || iterations < 1) {
    PyErr_SetString(PyExc_ValueError, "threads must be 1..64 and iterations >= 1");
    return NULL;
  }
  stress_state s;
  memset(&s, 0, sizeof s);
  s.obj = obj;
  s.expected = expected;
  s.reader = reader;
  s.iterations = iterations;
  void *p = api_obj && api_obj != Py_None ? PyLong_AsVoidPtr(api_obj) : NULL;
  if (PyErr_Occurred()) return NULL;
  if (p) { /* 0 or None: __dlpack__ only */
    s.api = p;
    /* XAPI-06, XAPI-09: only a table of our major with the function we call */
    if (s.api->header.version.major != DLPACK_MAJOR_VERSION ||
        !s.api->managed_tensor_from_py_object_no_sync) {
      PyErr_SetString(PyExc_ValueError, "the table's major differs or from_py_object is NULL");
      return NULL;
    }
  }
  pthread_t tid[64];
  int started = 0;
  Py_BEGIN_ALLOW_THREADS
  for (; started < threads; started++)
    if (pthread_create(&tid[started], NULL, worker, &s) != 0) break;
  for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
  Py_END_ALLOW_THREADS
  PyObject *none1 = Py_None, *none2 = Py_None;
  return Py_BuildValue(
      "{s:i,s:l,s:l,s:l,s:l,s:l,s:l,s:l,s:l,s:l,s:l,s:N,s:N}", "threads", started, "handouts",
      atomic_load(&s.handouts), "xapi_handouts", atomic_load(&s.xapi_handouts),
      "dlpack_handouts", atomic_load(&s.dlpack_handouts), "deleter_calls",
      atomic_load(&s.deleter_calls), "null_deleters", atomic_load(&s.null_deleters),
      "cached_pairs", atomic_load(&s.cached_pairs), "bad_values", atomic_load(&s.bad_values),
      "poison_checks", atomic_load(&s.poison_checks), "poison_failures",
      atomic_load(&s.poison_failures), "errors", atomic_load(&s.errors), "first_bad",
      s.first_bad ? s.first_bad : (Py_INCREF(none1), none1), "first_error",
      s.first_error ? s.first_error : (Py_INCREF(none2), none2));
}
