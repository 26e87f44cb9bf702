/* py_refcount_calls: Py_INCREF, Py_XINCREF, Py_DECREF and Py_XDECREF become calls of
 * CPython's exported Py_IncRef and Py_DecRef.
 *
 * For the consumer target's instrumented files only (target_consumer.c, consumer_oracles.c):
 *   - the inline macros add coverage edges (a branch per release) that say nothing about
 *     the consumer, and libFuzzer pays for every edge an input hits;
 *   - the other files are left out of instrumentation (coverage.ignore) and keep the macros.
 * Include it last, from a .c file: it redefines the macros for the rest of that file
 * (Py_SETREF and the like expand to the new ones there). Py_IncRef and Py_DecRef accept
 * NULL, so the X forms are the same calls. */
#ifndef DLCONFORM_FUZZ_PY_REFCOUNT_CALLS_H
#define DLCONFORM_FUZZ_PY_REFCOUNT_CALLS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#undef Py_DECREF
#undef Py_XDECREF
#undef Py_INCREF
#undef Py_XINCREF
#define Py_DECREF(op) Py_DecRef(_PyObject_CAST(op))
#define Py_XDECREF(op) Py_DecRef(_PyObject_CAST(op))
#define Py_INCREF(op) Py_IncRef(_PyObject_CAST(op))
#define Py_XINCREF(op) Py_IncRef(_PyObject_CAST(op))

#endif /* DLCONFORM_FUZZ_PY_REFCOUNT_CALLS_H */
