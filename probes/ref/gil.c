/* gil: "does the calling thread hold the GIL?" for the GIL-counted cached export's
 * deleter (cache.c, managed.c), which runs on every hand-out's release.
 *
 * PyGILState_Check answers it, but on 3.11 it costs about 4.5 ns here (several calls and
 * a thread-specific lookup), most of the cached export's budget (issue 6). This file reads
 * the same two values that PyGILState_Check compares, inline:
 *  - 3.12 and later: the thread's attached thread state is thread-local and non-NULL
 *    exactly while this thread holds the GIL (GIL builds);
 *  - 3.11: the GIL holder's thread state (gilstate.tstate_current) against this thread's
 *    own (the gilstate TSS key), as PyGILState_Check does;
 *  - older, or with the check disabled (sub-interpreters): PyGILState_Check itself.
 * Only this file sees CPython internals; it never writes them. */
#include <patchlevel.h> /* PY_VERSION_HEX, before Python.h decides what it declares */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define Py_BUILD_CORE 1 /* 3.11: the gilstate fields live in the internal headers */
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#include <internal/pycore_runtime.h>
#include <pthread.h>
#endif

#include "ref.h"

int ref_gil_held(void) {
#if PY_VERSION_HEX >= 0x030D0000
  return PyThreadState_GetUnchecked() != NULL;
#elif PY_VERSION_HEX >= 0x030C0000
  return _PyThreadState_UncheckedGet() != NULL;
#elif PY_VERSION_HEX >= 0x030B0000
  struct _gilstate_runtime_state *g = &_PyRuntime.gilstate;
  if (!g->check_enabled || !g->autoTSSkey._is_initialized) return PyGILState_Check();
  PyThreadState *holder = (PyThreadState *)_Py_atomic_load_relaxed(&g->tstate_current);
  return holder && holder == pthread_getspecific(g->autoTSSkey._key);
#else
  return PyGILState_Check();
#endif
}
