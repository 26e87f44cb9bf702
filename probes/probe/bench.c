/* bench.c: timing loops for the exchange-overhead benchmark (`bench`, harness/dlconform/bench.py).
 *
 * bench(op, objs, arg=None, batches=21, target_ms=2.0, warmup_ms=20.0)
 *   -> {"batch": calls per batch, "samples": [ns per iteration, one per batch]}
 *
 * Method (invariants):
 *  - every Python object the loop uses (tensors, the callable, argument tuples, names) is
 *    made before the clock starts; inside the loop only the measured operation runs;
 *  - one iteration applies the operation once to each object of `objs` (1 object: one
 *    exchange; 3 objects: a three-argument call), so a sample is ns per iteration;
 *  - the clock (clock_gettime(CLOCK_MONOTONIC)) is read only around whole batches: the batch
 *    size is doubled until a batch takes >= target/4, then scaled to about target (2 ms by
 *    default), so the timer's ~20 ns are amortised over >= 1000 calls for any op under 2 us;
 *  - batches run first for at least warmup_ms (caches, branch predictors, allocator pools),
 *    and their samples are thrown away;
 *  - each op has its own loop function, so the per-iteration cost is the op itself plus a
 *    loop counter, never an extra indirect call;
 *  - an op that fails (NULL result, non-zero return code) stops the batch and raises.
 * The GIL is held throughout (the caller is Python), as a consumer calling these would hold it.
 */
#include "probe.h"

#include <string.h>
#include <time.h>

#if defined(__GNUC__) || defined(__clang__)
#define BENCH_NOINLINE __attribute__((noinline))
#define BENCH_BARRIER() __asm__ __volatile__("" ::: "memory")
#else
#define BENCH_NOINLINE
#define BENCH_BARRIER() ((void)0)
#endif

#define BENCH_MAX_OBJS 8
#define BENCH_MAX_BATCH 50000000L

/* The baseline: an empty function, called through a volatile function pointer. The volatile
 * load hides the target from the compiler, so the call is neither inlined nor elided. */
BENCH_NOINLINE static void bench_empty(void) { BENCH_BARRIER(); }
static void (*volatile bench_empty_ptr)(void) = bench_empty;

static int bench_seterr_calls; /* allocator SetError calls seen (the allocator must not fail) */
static void bench_set_error(void *ctx, const char *kind, const char *message) {
  (void)ctx;
  (void)kind;
  (void)message;
  bench_seterr_calls++;
}

typedef struct {
  PyObject *objs[BENCH_MAX_OBJS]; /* borrowed from the caller's tuple */
  Py_ssize_t nobj;
  PyObject *callable;             /* from_dlpack: the consumer's function */
  PyObject *method;               /* "__dlpack__" */
  PyObject *attr;                 /* "__dlpack_c_exchange_api__" */
  PyObject *kwnames;              /* ("max_version",) */
  PyObject *max_version;          /* (1, 3) */
  const DLPackExchangeAPI *api;
  DLTensor proto;                 /* allocator prototype: float32 (8, 8) on (kDLCPU, 0) */
  int64_t proto_shape[2];
} bench_ctx;

typedef int (*bench_loop)(bench_ctx *c, long n);

static int loop_noop(bench_ctx *c, long n) {
  (void)c;
  for (long i = 0; i < n; i++) {
    void (*f)(void) = bench_empty_ptr;
    f();
  }
  return 0;
}

/* x.__dlpack__() and the capsule's destruction (its destructor calls the deleter). */
static int loop_dlpack_legacy(bench_ctx *c, long n) {
  for (long i = 0; i < n; i++) {
    for (Py_ssize_t k = 0; k < c->nobj; k++) {
      PyObject *args[1] = {c->objs[k]};
      PyObject *cap = PyObject_VectorcallMethod(c->method, args,
                                                1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
      if (cap == NULL) return -1;
      Py_DECREF(cap);
    }
  }
  return 0;
}

/* x.__dlpack__(max_version=(1, 3)) and the capsule's destruction. */
static int loop_dlpack_versioned(bench_ctx *c, long n) {
  for (long i = 0; i < n; i++) {
    for (Py_ssize_t k = 0; k < c->nobj; k++) {
      PyObject *args[2] = {c->objs[k], c->max_version};
      PyObject *cap = PyObject_VectorcallMethod(c->method, args,
                                                1 | PY_VECTORCALL_ARGUMENTS_OFFSET, c->kwnames);
      if (cap == NULL) return -1;
      Py_DECREF(cap);
    }
  }
  return 0;
}

/* consumer.from_dlpack(x) and the result's destruction (which releases the import). */
static int loop_from_dlpack(bench_ctx *c, long n) {
  for (long i = 0; i < n; i++) {
    for (Py_ssize_t k = 0; k < c->nobj; k++) {
      PyObject *args[2] = {NULL, c->objs[k]};
      PyObject *r = PyObject_Vectorcall(c->callable, args + 1,
                                        1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
      if (r == NULL) return -1;
      Py_DECREF(r);
    }
  }
  return 0;
}

static int bench_xapi_failed(const char *fn, int rc) {
  if (!PyErr_Occurred())
    PyErr_Format(PyExc_RuntimeError, "%s returned %d without an exception", fn, rc);
  return -1;
}

/* managed_tensor_from_py_object_no_sync, then the hand-out's deleter. */
static int loop_xapi_managed(bench_ctx *c, long n) {
  for (long i = 0; i < n; i++) {
    for (Py_ssize_t k = 0; k < c->nobj; k++) {
      DLManagedTensorVersioned *m = NULL;
      int rc = c->api->managed_tensor_from_py_object_no_sync(c->objs[k], &m);
      if (rc != 0 || m == NULL) return bench_xapi_failed("managed_tensor_from_py_object_no_sync", rc);
      if (m->deleter) m->deleter(m);
    }
  }
  return 0;
}

/* dltensor_from_py_object_no_sync into a stack DLTensor (nothing to release, XAPI-15). */
static int loop_xapi_dltensor(bench_ctx *c, long n) {
  for (long i = 0; i < n; i++) {
    for (Py_ssize_t k = 0; k < c->nobj; k++) {
      DLTensor t;
      int rc = c->api->dltensor_from_py_object_no_sync(c->objs[k], &t);
      if (rc != 0) return bench_xapi_failed("dltensor_from_py_object_no_sync", rc);
    }
  }
  return 0;
}

static int loop_xapi_stream(bench_ctx *c, long n) {
  for (long i = 0; i < n; i++) {
    void *s = NULL;
    int rc = c->api->current_work_stream(kDLCPU, 0, &s);
    if (rc != 0) return bench_xapi_failed("current_work_stream", rc);
  }
  return 0;
}

/* managed_tensor_allocator for float32 (8, 8) on CPU, then the deleter. */
static int loop_xapi_alloc(bench_ctx *c, long n) {
  for (long i = 0; i < n; i++) {
    DLManagedTensorVersioned *m = NULL;
    int rc = c->api->managed_tensor_allocator(&c->proto, &m, NULL, bench_set_error);
    if (rc != 0 || m == NULL) {
      PyErr_Clear();
      PyErr_Format(PyExc_RuntimeError, "managed_tensor_allocator returned %d", rc);
      return -1;
    }
    if (m->deleter) m->deleter(m);
  }
  return 0;
}

/* The table through type(x).__dlpack_c_exchange_api__: attribute lookup on the type and the
 * capsule's pointer, as a consumer finds it per call. NULL with an exception on failure. */
static const DLPackExchangeAPI *bench_lookup(bench_ctx *c, PyObject *obj) {
  PyObject *v = PyObject_GetAttr((PyObject *)Py_TYPE(obj), c->attr);
  if (v == NULL) return NULL;
  const DLPackExchangeAPI *api = PyCapsule_GetPointer(v, "dlpack_exchange_api");
  Py_DECREF(v); /* the type keeps the capsule alive (XAPI-05: the table is static) */
  return api;
}

static int loop_xapi_lookup(bench_ctx *c, long n) {
  for (long i = 0; i < n; i++) {
    for (Py_ssize_t k = 0; k < c->nobj; k++) {
      if (bench_lookup(c, c->objs[k]) == NULL) return -1;
    }
  }
  return 0;
}

/* What a consumer pays per argument from nothing: lookup, managed export, deleter. */
static int loop_xapi_lookup_managed(bench_ctx *c, long n) {
  for (long i = 0; i < n; i++) {
    for (Py_ssize_t k = 0; k < c->nobj; k++) {
      const DLPackExchangeAPI *api = bench_lookup(c, c->objs[k]);
      if (api == NULL) return -1;
      DLManagedTensorVersioned *m = NULL;
      int rc = api->managed_tensor_from_py_object_no_sync(c->objs[k], &m);
      if (rc != 0 || m == NULL) return bench_xapi_failed("managed_tensor_from_py_object_no_sync", rc);
      if (m->deleter) m->deleter(m);
    }
  }
  return 0;
}

typedef struct {
  const char *name;
  bench_loop loop;
  int needs; /* 1: callable, 2: exchange API table */
} bench_op;

static const bench_op bench_ops[] = {
    {"noop", loop_noop, 0},
    {"dlpack_legacy", loop_dlpack_legacy, 0},
    {"dlpack_versioned", loop_dlpack_versioned, 0},
    {"from_dlpack", loop_from_dlpack, 1},
    {"xapi_managed", loop_xapi_managed, 2},
    {"xapi_dltensor", loop_xapi_dltensor, 2},
    {"xapi_stream", loop_xapi_stream, 2},
    {"xapi_alloc", loop_xapi_alloc, 2},
    {"xapi_lookup", loop_xapi_lookup, 0},
    {"xapi_lookup_managed", loop_xapi_lookup_managed, 0},
};

static double bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* One batch of n iterations; its duration in ns, or -1 with an exception set. */
static double bench_batch(const bench_op *op, bench_ctx *c, long n) {
  double t0 = bench_now_ns();
  int rc = op->loop(c, n);
  double t1 = bench_now_ns();
  return rc < 0 ? -1.0 : t1 - t0;
}

/* The table from an int address or a "dlpack_exchange_api" capsule; NULL + exception. */
static const DLPackExchangeAPI *bench_api_from(PyObject *arg) {
  const DLPackExchangeAPI *api = NULL;
  if (PyCapsule_CheckExact(arg)) {
    api = PyCapsule_GetPointer(arg, "dlpack_exchange_api");
  } else if (PyLong_Check(arg)) {
    api = PyLong_AsVoidPtr(arg);
    if (api == NULL && !PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError, "the exchange API address is 0");
  } else {
    PyErr_SetString(PyExc_TypeError, "arg must be the exchange API (int address or capsule)");
  }
  if (api != NULL && api->header.version.major != DLPACK_MAJOR_VERSION) {
    PyErr_SetString(PyExc_ValueError, "exchange API of another major (XAPI-06)");
    return NULL;
  }
  return api;
}

static int bench_ctx_init(bench_ctx *c, const bench_op *op, PyObject *objs, PyObject *arg) {
  memset(c, 0, sizeof *c);
  if (!PyTuple_Check(objs) || PyTuple_GET_SIZE(objs) > BENCH_MAX_OBJS) {
    PyErr_Format(PyExc_TypeError, "objs must be a tuple of at most %d objects", BENCH_MAX_OBJS);
    return -1;
  }
  c->nobj = PyTuple_GET_SIZE(objs);
  for (Py_ssize_t k = 0; k < c->nobj; k++) c->objs[k] = PyTuple_GET_ITEM(objs, k);
  if (c->nobj == 0 && op->loop != loop_noop && op->loop != loop_xapi_stream &&
      op->loop != loop_xapi_alloc) {
    PyErr_Format(PyExc_ValueError, "op %s needs at least one object", op->name);
    return -1;
  }
  if (op->needs == 1) {
    if (!PyCallable_Check(arg)) {
      PyErr_SetString(PyExc_TypeError, "from_dlpack needs a callable arg");
      return -1;
    }
    c->callable = arg;
  }
  if (op->needs == 2) {
    c->api = bench_api_from(arg);
    if (c->api == NULL) return -1;
    const void *fns[4] = {(const void *)(uintptr_t)c->api->managed_tensor_from_py_object_no_sync,
                          (const void *)(uintptr_t)c->api->dltensor_from_py_object_no_sync,
                          (const void *)(uintptr_t)c->api->current_work_stream,
                          (const void *)(uintptr_t)c->api->managed_tensor_allocator};
    bench_loop loops[4] = {loop_xapi_managed, loop_xapi_dltensor, loop_xapi_stream,
                           loop_xapi_alloc};
    for (int i = 0; i < 4; i++) {
      if (op->loop == loops[i] && fns[i] == NULL) {
        PyErr_Format(PyExc_NotImplementedError, "the table's function for %s is NULL", op->name);
        return -1;
      }
    }
  }
  c->method = PyUnicode_InternFromString("__dlpack__");
  c->attr = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
  c->kwnames = Py_BuildValue("(s)", "max_version");
  c->max_version = Py_BuildValue("(ii)", 1, 3);
  c->proto_shape[0] = c->proto_shape[1] = 8;
  c->proto.device.device_type = kDLCPU;
  c->proto.ndim = 2;
  c->proto.dtype.code = kDLFloat;
  c->proto.dtype.bits = 32;
  c->proto.dtype.lanes = 1;
  c->proto.shape = c->proto_shape;
  if (!c->method || !c->attr || !c->kwnames || !c->max_version) return -1;
  return 0;
}

static void bench_ctx_clear(bench_ctx *c) {
  Py_CLEAR(c->method);
  Py_CLEAR(c->attr);
  Py_CLEAR(c->kwnames);
  Py_CLEAR(c->max_version);
}

/* Calibration and warm-up; the batch size, or -1 with an exception set. */
static long bench_calibrate(const bench_op *op, bench_ctx *c, double target, double warmup) {
  long n = 1;
  double t;
  for (;;) {
    if ((t = bench_batch(op, c, n)) < 0) return -1;
    if (t >= target / 4 || n >= BENCH_MAX_BATCH) break;
    n *= 2;
  }
  double scaled = (double)n * target / (t > 1.0 ? t : 1.0);
  n = scaled < 1.0 ? 1 : scaled > (double)BENCH_MAX_BATCH ? BENCH_MAX_BATCH : (long)scaled;
  double start = bench_now_ns();
  do {
    if (bench_batch(op, c, n) < 0) return -1;
  } while (bench_now_ns() - start < warmup);
  return n;
}

PyObject *probe_bench(PyObject *self, PyObject *args, PyObject *kwargs) {
  (void)self;
  static char *kwlist[] = {"op", "objs", "arg", "batches", "target_ms", "warmup_ms", NULL};
  const char *name;
  PyObject *objs, *arg = Py_None;
  int batches = 21;
  double target_ms = 2.0, warmup_ms = 20.0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sO|O$idd:bench", kwlist, &name, &objs, &arg,
                                   &batches, &target_ms, &warmup_ms))
    return NULL;
  if (batches < 1 || batches > 100000 || !(target_ms > 0) || target_ms > 10000 ||
      !(warmup_ms >= 0) || warmup_ms > 60000) {
    PyErr_SetString(PyExc_ValueError, "batches in [1, 100000], target_ms in (0, 1e4], "
                                      "warmup_ms in [0, 6e4]");
    return NULL;
  }
  const bench_op *op = NULL;
  for (size_t i = 0; i < sizeof bench_ops / sizeof bench_ops[0]; i++)
    if (strcmp(name, bench_ops[i].name) == 0) op = &bench_ops[i];
  if (op == NULL) {
    PyErr_Format(PyExc_ValueError, "unknown bench op '%s'", name);
    return NULL;
  }
  bench_ctx c;
  PyObject *samples = NULL, *result = NULL;
  if (bench_ctx_init(&c, op, objs, arg) < 0) goto done;
  Py_INCREF(objs); /* keeps the borrowed objects alive whatever the op does */
  long n = bench_calibrate(op, &c, target_ms * 1e6, warmup_ms * 1e6);
  if (n > 0 && (samples = PyList_New(batches)) != NULL) {
    for (int b = 0; b < batches; b++) {
      double t = bench_batch(op, &c, n);
      PyObject *v = t < 0 ? NULL : PyFloat_FromDouble(t / (double)n);
      if (v == NULL) {
        Py_CLEAR(samples);
        break;
      }
      PyList_SET_ITEM(samples, b, v);
    }
  }
  Py_DECREF(objs);
  if (samples != NULL) result = Py_BuildValue("{s:l,s:N}", "batch", n, "samples", samples);
done:
  bench_ctx_clear(&c);
  return result;
}
