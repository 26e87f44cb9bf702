/* devmem: see devmem.h. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "devmem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KDL_CUDA = 2, HOST_TO_DEVICE = 1, DEVICE_TO_HOST = 2, DEVICE_TO_DEVICE = 3, CUDA_NOT_READY = 600 };

/* the runtime's functions, all set (the mode is on) or all NULL */
static struct {
  int (*Malloc)(void **, size_t);
  int (*Free)(void *);
  int (*Memcpy)(void *, const void *, size_t, int);
  int (*GetLastError)(void);
  int (*StreamSynchronize)(void *);
  int (*StreamCreateWithFlags)(void **, unsigned);
  int (*StreamQuery)(void *);
  int (*DeviceSynchronize)(void);
  int (*MemcpyAsync)(void *, const void *, size_t, int, void *);
  int (*StreamWaitEvent)(void *, void *, unsigned);
  int (*EventCreateWithFlags)(void **, unsigned);
  int (*EventRecord)(void *, void *);
  int (*SlowFill)(void *, void *, size_t, int, long long); /* optional: dlc_slow_fill */
} rt;

/* The producer's side of pending uploads (devmem.h), made at the first one: its non-blocking
 * stream, the event recorded after the latest upload, a device byte the spin writes, host
 * poison to fill blocks with, and the device staging block the pending copy reads (a
 * device-to-device copy is asynchronous on every runtime; one from pageable host memory may
 * return only once it ran, which would wait for the spin and leave nothing pending). */
static struct {
  void *stream, *event, *spin_byte, *staging;
  long long cycles;
  uint8_t *poison;
  size_t poison_n, staging_n;
  int ready; /* 1: made; -1: the runtime failed to make them (no pending uploads) */
} pend;

static void fail(const char *why) {
  if (PyErr_Occurred()) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *s = value ? PyObject_Str(value) : NULL;
    const char *text = s ? PyUnicode_AsUTF8(s) : NULL;
    fprintf(stderr, "dlconform-fuzz: %s\n", text ? text : why);
    Py_XDECREF(s);
  } else {
    fprintf(stderr, "dlconform-fuzz: %s\n", why);
  }
  exit(2);
}

static void *address(PyObject *table, const char *name) {
  PyObject *v = PyDict_GetItemString(table, name); /* borrowed */
  void *p = v ? PyLong_AsVoidPtr(v) : NULL;
  if (p == NULL) fail("the CUDA runtime lacks a function the device mode needs");
  return p;
}

PyObject *dlc_devmem_init(const char *consumer) {
  const char *mode = getenv("DLCONFORM_FUZZ_DEVICE");
  if (mode == NULL || *mode == '\0') return NULL;
  PyObject *mod = PyImport_ImportModule("dlconform.fuzz.devmem");
  if (mod == NULL) fail("cannot import dlconform.fuzz.devmem");
  PyObject *m = PyObject_CallMethod(mod, "mode", NULL); /* validates the value */
  Py_XDECREF(m);
  if (m == NULL) fail("bad DLCONFORM_FUZZ_DEVICE");
  PyObject *got = PyObject_CallMethod(mod, "setup", "s", consumer);
  Py_DECREF(mod);
  if (got == NULL || !PyTuple_Check(got) || PyTuple_GET_SIZE(got) != 2)
    fail("the CUDA device mode cannot start");
  PyObject *table = PyTuple_GET_ITEM(got, 1);
  *(void **)&rt.Malloc = address(table, "cudaMalloc");
  *(void **)&rt.Free = address(table, "cudaFree");
  *(void **)&rt.Memcpy = address(table, "cudaMemcpy");
  *(void **)&rt.GetLastError = address(table, "cudaGetLastError");
  *(void **)&rt.StreamSynchronize = address(table, "cudaStreamSynchronize");
  *(void **)&rt.StreamCreateWithFlags = address(table, "cudaStreamCreateWithFlags");
  *(void **)&rt.StreamQuery = address(table, "cudaStreamQuery");
  *(void **)&rt.DeviceSynchronize = address(table, "cudaDeviceSynchronize");
  *(void **)&rt.MemcpyAsync = address(table, "cudaMemcpyAsync");
  *(void **)&rt.StreamWaitEvent = address(table, "cudaStreamWaitEvent");
  *(void **)&rt.EventCreateWithFlags = address(table, "cudaEventCreateWithFlags");
  *(void **)&rt.EventRecord = address(table, "cudaEventRecord");
  PyObject *fill = PyDict_GetItemString(table, "dlc_slow_fill"); /* borrowed; absent: no spin */
  *(void **)&rt.SlowFill = fill ? PyLong_AsVoidPtr(fill) : NULL;
  PyErr_Clear();
  PyObject *entry = PyTuple_GET_ITEM(got, 0);
  entry = entry == Py_None ? NULL : Py_NewRef(entry);
  Py_DECREF(got);
  return entry;
}

/* The side-stream context's factory (a callable giving a new context manager) and its
 * stream, or NULL. */
static PyObject *side_factory;
static uintptr_t side_stream;

void dlc_devmem_side_init(const char *consumer) {
  if (rt.Malloc == NULL) return;
  PyObject *mod = PyImport_ImportModule("dlconform.fuzz.devmem");
  PyObject *got = mod ? PyObject_CallMethod(mod, "side_stream", "s", consumer) : NULL;
  Py_XDECREF(mod);
  if (got != NULL && PyTuple_Check(got) && PyTuple_GET_SIZE(got) == 2) {
    side_stream = (uintptr_t)PyLong_AsVoidPtr(PyTuple_GET_ITEM(got, 1));
    if (!PyErr_Occurred()) side_factory = Py_NewRef(PyTuple_GET_ITEM(got, 0));
  }
  if (PyErr_Occurred()) {
    fprintf(stderr, "dlconform-fuzz: no side-stream context for %s: ", consumer);
    PyErr_Print();
  }
  Py_XDECREF(got);
}

PyObject *dlc_devmem_side_enter(uintptr_t *stream) {
  *stream = 0;
  if (side_factory == NULL) return NULL;
  PyObject *ctx = PyObject_CallNoArgs(side_factory);
  PyObject *entered = ctx ? PyObject_CallMethod(ctx, "__enter__", NULL) : NULL;
  if (entered == NULL) {
    PyErr_Clear();
    Py_XDECREF(ctx);
    return NULL;
  }
  Py_DECREF(entered);
  *stream = side_stream;
  return ctx;
}

void dlc_devmem_side_exit(PyObject *ctx) {
  if (ctx == NULL) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject *r = PyObject_CallMethod(ctx, "__exit__", "OOO", Py_None, Py_None, Py_None);
  if (r == NULL) PyErr_Clear();
  Py_XDECREF(r);
  Py_DECREF(ctx);
  PyErr_Restore(type, value, tb);
}

int dlc_devmem_active(void) { return rt.Malloc != NULL; }

int dlc_devmem_backs(const dlc_record *r, const dlc_plan *p) {
  return rt.Malloc != NULL && r->device_type == KDL_CUDA && r->device_id == 0 &&
         p->mode == DLC_DATA_BUFFER;
}

/* Makes pend's stream, event and spin byte once: 0, or -1 when the runtime cannot. */
static int pend_ready(void) {
  if (pend.ready == 0) {
    const char *c = getenv("DLCONFORM_FUZZ_PENDING_CYCLES");
    pend.cycles = c && *c ? strtoll(c, NULL, 10) : 200000;
    pend.ready = rt.StreamCreateWithFlags(&pend.stream, 0x01 /* NonBlocking */) == 0 &&
                         rt.EventCreateWithFlags(&pend.event, 0x02 /* DisableTiming */) == 0 &&
                         rt.Malloc(&pend.spin_byte, 1) == 0
                     ? 1
                     : -1;
    if (pend.ready < 0) rt.GetLastError();
  }
  return pend.ready > 0 ? 0 : -1;
}

/* A staging block of at least n bytes, or NULL. The producer's stream is idle on return: the
 * pending copy of an earlier upload has read the staging block before it is reused. */
static void *staging(size_t n) {
  if (rt.StreamSynchronize(pend.stream) != 0) return NULL;
  if (n > pend.staging_n) {
    if (pend.staging != NULL) rt.Free(pend.staging);
    pend.staging = NULL;
    pend.staging_n = 0;
    if (rt.Malloc(&pend.staging, n) != 0) return NULL;
    pend.staging_n = n;
  }
  return pend.staging;
}

/* n bytes of poison on the host (grown as needed), or NULL. */
static const uint8_t *poison(size_t n) {
  if (n > pend.poison_n) {
    uint8_t *p = realloc(pend.poison, n);
    if (p == NULL) return NULL;
    memset(p, DLC_DEVMEM_POISON, n);
    pend.poison = p;
    pend.poison_n = n;
  }
  return pend.poison;
}

void *dlc_devmem_upload(const void *host, size_t n, int pending) {
  void *block = NULL;
  /* one byte more than the buffer: no other block can start at its end, where check_result
   * would take it for a view of the export (its aliasing range is inclusive) */
  if (rt.Malloc(&block, n + 1) != 0) {
    rt.GetLastError();
    return NULL;
  }
  int rc;
  if (!pending || pend_ready() != 0) {
    rc = rt.Memcpy(block, host, n, HOST_TO_DEVICE);
  } else {
    const uint8_t *bad = poison(n + 1);
    void *stage = staging(n);
    /* the bytes to the staging block and poison to the block, synchronously: a read on any
     * stream before the copy below sees poison */
    rc = bad == NULL || stage == NULL ? -1 : rt.Memcpy(stage, host, n, HOST_TO_DEVICE);
    if (rc == 0) rc = rt.Memcpy(block, bad, n + 1, HOST_TO_DEVICE);
    if (rc == 0 && rt.SlowFill != NULL && pend.cycles > 0)
      rc = rt.SlowFill(pend.stream, pend.spin_byte, 1, 0, pend.cycles);
    if (rc == 0) rc = rt.MemcpyAsync(block, stage, n, DEVICE_TO_DEVICE, pend.stream);
    if (rc == 0) rc = rt.EventRecord(pend.event, pend.stream);
  }
  if (rc != 0) {
    rt.GetLastError();
    if (pend.stream) rt.StreamSynchronize(pend.stream); /* nothing left to write the block */
    rt.GetLastError();
    rt.Free(block);
    return NULL;
  }
  return block;
}

void dlc_devmem_order(PyObject *stream, int host_copy) {
  if (pend.ready <= 0) return;
  if (host_copy) {
    if (rt.StreamSynchronize(pend.stream) != 0) rt.GetLastError();
    return;
  }
  long long v = 1; /* None or no stream: the legacy default stream (STR-04) */
  if (stream != NULL && stream != Py_None) {
    if (!PyLong_Check(stream)) return;
    int overflow = 0;
    v = PyLong_AsLongLongAndOverflow(stream, &overflow);
    if (overflow > 0) v = 3; /* a handle past LLONG_MAX: passed on as it is */
    if (PyErr_Occurred() || overflow < 0) {
      PyErr_Clear();
      return;
    }
    if (v == 0) v = 1;
    if (v < 0) return; /* -1 (STR-03) and the values below it */
  }
  void *handle = v <= 2 ? (void *)(uintptr_t)v : PyLong_AsVoidPtr(stream);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return;
  }
  if (rt.StreamWaitEvent(handle, pend.event, 0) != 0) rt.GetLastError();
}

void *dlc_devmem_work_stream(void) { return pend.ready > 0 ? pend.stream : NULL; }

void dlc_devmem_free(void *block) {
  if (block == NULL || rt.Free == NULL) return;
  if (pend.ready > 0 && rt.StreamSynchronize(pend.stream) != 0) rt.GetLastError();
  rt.Free(block);
}

int dlc_devmem_download(void *dst, const void *src, size_t n, uintptr_t stream) {
  if (rt.Malloc == NULL) return -1;
  if ((stream != 0 && rt.StreamSynchronize((void *)stream) != 0) ||
      rt.Memcpy(dst, src, n, DEVICE_TO_HOST) != 0) {
    rt.GetLastError();
    return -1;
  }
  return 0;
}

int dlc_devmem_read_settled(void *dst, const void *src, size_t n) {
  if (rt.Malloc == NULL) return -1;
  if (rt.DeviceSynchronize() != 0 || rt.Memcpy(dst, src, n, DEVICE_TO_HOST) != 0) {
    rt.GetLastError();
    return -1;
  }
  return 0;
}

int dlc_devmem_read_on(void *dst, const void *src, size_t n, uintptr_t stream) {
  if (rt.Malloc == NULL) return -1;
  if (rt.MemcpyAsync(dst, src, n, DEVICE_TO_HOST, (void *)stream) != 0 ||
      rt.StreamSynchronize((void *)stream) != 0) {
    rt.GetLastError();
    return -1;
  }
  return 0;
}

uintptr_t dlc_devmem_stream_new(void) {
  void *s = NULL;
  if (rt.StreamCreateWithFlags == NULL || rt.StreamCreateWithFlags(&s, 0x01 /* NonBlocking */) != 0) {
    if (rt.GetLastError) rt.GetLastError();
    return 0;
  }
  return (uintptr_t)s;
}

int dlc_devmem_stream_alive(uintptr_t stream) {
  int rc = rt.StreamQuery((void *)stream);
  if (rc != 0) rt.GetLastError();
  return rc == 0 || rc == CUDA_NOT_READY;
}
