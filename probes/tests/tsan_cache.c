/* tsan_cache: ref's cached versioned export under ThreadSanitizer (issue 3, OWN-04/05).
 *
 * An executable that embeds libpython and links the probes/ref and probes/check C sources
 * directly, so every line of the cache is instrumented (a TSan runtime preloaded into
 * python crashes: TOOLCHAIN.md). `_ref` is registered with PyImport_AppendInittab.
 * Both cache disciplines (cache.c) are stressed, ROUNDS rounds each:
 *
 * Free-threaded discipline (ref_cache_handout): the main thread (GIL held) makes a fresh
 * Tensor, releases the GIL, and THREADS pthreads (no GIL, real parallelism) start together
 * at a barrier and each take HANDOUTS hand-outs, the path that races to create and publish
 * the tensor's one cached struct. With the compare-and-swap it is race-free; with
 * DLCONFORM_REF_FAULT=cache_no_cas the plain store races with the other threads' loads.
 *
 * GIL discipline (ref_export_versioned_nocopy in a GIL build): each thread takes the GIL
 * with PyGILState_Ensure for its hand-outs and lets it go; the deleters then run without
 * the GIL, in parallel with other threads' hand-outs, and must take it themselves. With
 * DLCONFORM_REF_FAULT=cache_deleter_no_gil they drop the plain count without it: a race.
 *
 * In both, each thread reads the exported elements before calling every hand-out's
 * deleter, and the main thread retakes the GIL and drops the tensor. Invariants checked
 * here: every hand-out of one round is the same struct and its values are the tensor's.
 * TSan checks the rest. Exit: 0 clean, 1 an invariant broke, 2 setup failed, 66 TSan found
 * a race. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ref/ref.h"

PyMODINIT_FUNC PyInit__ref(void);

#define THREADS 4
#define HANDOUTS 8
#define ROUNDS 200
#define NELEM 16

static pthread_barrier_t start;
static RefTensor *shared;
static DLManagedTensorVersioned *seen[THREADS][HANDOUTS];
static int bad[THREADS];
static int gil_discipline; /* 0: ref_cache_handout without the GIL; 1: under the GIL */

static void take_handouts(int id) {
  if (!gil_discipline) {
    for (int k = 0; k < HANDOUTS; k++) seen[id][k] = ref_cache_handout(shared);
    return;
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  for (int k = 0; k < HANDOUTS; k++) seen[id][k] = ref_export_versioned_nocopy(shared);
  PyGILState_Release(gil);
}

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  pthread_barrier_wait(&start);
  take_handouts(id);
  for (int k = 0; k < HANDOUTS; k++) {
    DLManagedTensorVersioned *m = seen[id][k];
    if (!m) {
      bad[id] = 1;
      continue;
    }
    const float *f = (const float *)((const char *)m->dl_tensor.data + m->dl_tensor.byte_offset);
    for (int i = 0; i < NELEM; i++)
      if (f[i] != (float)i) bad[id] = 1;
  }
  if (gil_discipline) /* deleters without the GIL, while other threads hand out (OWN-04) */
    for (int k = 0; k < HANDOUTS; k++)
      if (seen[id][k]) seen[id][k]->deleter(seen[id][k]);
  return NULL;
}

static void release_all(void) {
  for (int t = 0; t < THREADS; t++)
    for (int k = 0; k < HANDOUTS; k++)
      if (seen[t][k]) seen[t][k]->deleter(seen[t][k]);
}

int main(void) {
  if (PyImport_AppendInittab("_ref", PyInit__ref) < 0) return 2;
  Py_Initialize();
  PyObject *mod = PyImport_ImportModule("_ref");
  PyObject *tensor_type = mod ? PyObject_GetAttrString(mod, "Tensor") : NULL;
  float values[NELEM];
  for (int i = 0; i < NELEM; i++) values[i] = (float)i;
  PyObject *data = PyBytes_FromStringAndSize((const char *)values, sizeof values);
  if (!tensor_type || !data) {
    PyErr_Print();
    return 2;
  }
  int rc = 0;
  pthread_barrier_init(&start, NULL, THREADS);
  for (int round = 0; round < 2 * ROUNDS && rc == 0; round++) {
    gil_discipline = round >= ROUNDS;
    PyObject *kw = Py_BuildValue("{s:O}", "data", data);
    PyObject *args = Py_BuildValue("(s(i))", "float32", NELEM);
    PyObject *t = kw && args ? PyObject_Call(tensor_type, args, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(args);
    if (!t) {
      PyErr_Print();
      rc = 2;
      break;
    }
    shared = (RefTensor *)t;
    memset(seen, 0, sizeof seen);
    pthread_t tid[THREADS];
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < THREADS; i++) pthread_create(&tid[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++) pthread_join(tid[i], NULL);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < THREADS; i++) {
      if (bad[i]) rc = 1;
      for (int k = 0; k < HANDOUTS; k++)
        if (seen[i][k] != seen[0][0]) rc = 1; /* one struct per tensor */
    }
    if (!gil_discipline) {
      Py_BEGIN_ALLOW_THREADS
      release_all(); /* deleters without the GIL (OWN-04) */
      Py_END_ALLOW_THREADS
    }
    Py_DECREF(t);
  }
  if (rc == 1) fprintf(stderr, "tsan_cache: racing hand-outs got different structs or values\n");
  pthread_barrier_destroy(&start);
  Py_DECREF(data);
  Py_DECREF(tensor_type);
  Py_DECREF(mod);
  if (Py_FinalizeEx() < 0) return 2;
  printf("tsan_cache: 2 disciplines x %d rounds x %d threads x %d hand-outs: %s\n", ROUNDS, THREADS, HANDOUTS,
         rc ? "FAILED" : "ok");
  return rc;
}
