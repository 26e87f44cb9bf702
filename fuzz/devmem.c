/* devmem: see devmem.h. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "devmem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { KDL_CUDA = 2, HOST_TO_DEVICE = 1, DEVICE_TO_HOST = 2, CUDA_NOT_READY = 600 };

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
} rt;

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
  PyObject *entry = PyTuple_GET_ITEM(got, 0);
  entry = entry == Py_None ? NULL : Py_NewRef(entry);
  Py_DECREF(got);
  return entry;
}

int dlc_devmem_active(void) { return rt.Malloc != NULL; }

int dlc_devmem_backs(const dlc_record *r, const dlc_plan *p) {
  return rt.Malloc != NULL && r->device_type == KDL_CUDA && r->device_id == 0 &&
         p->mode == DLC_DATA_BUFFER;
}

void *dlc_devmem_upload(const void *host, size_t n) {
  void *block = NULL;
  /* one byte more than the buffer: no other block can start at its end, where check_result
   * would take it for a view of the export (its aliasing range is inclusive) */
  if (rt.Malloc(&block, n + 1) != 0) {
    rt.GetLastError();
    return NULL;
  }
  if (rt.Memcpy(block, host, n, HOST_TO_DEVICE) != 0) {
    rt.GetLastError();
    rt.Free(block);
    return NULL;
  }
  return block;
}

void dlc_devmem_free(void *block) {
  if (block != NULL && rt.Free != NULL) rt.Free(block);
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
