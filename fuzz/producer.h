/* producer: the tiny Python object a consumer's from_dlpack receives.
 * __dlpack__(**kw) returns the capsule it was built with (a new reference each call) and
 * counts the calls; __dlpack_device__() returns the device tuple (API-01, API-02). */
#ifndef DLCONFORM_FUZZ_PRODUCER_H
#define DLCONFORM_FUZZ_PRODUCER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Creates the type once (after Py_Initialize). Returns 0, or -1 with an exception set. */
int dlc_producer_type_init(void);

/* A new producer holding a reference to capsule and to a (device_type, device_id) tuple. */
PyObject *dlc_producer_new(PyObject *capsule, int device_type, int device_id);

/* What the consumer did with the producer: __dlpack__ calls, and whether it passed a stream
 * other than None for a CPU export (STR-10). */
int dlc_producer_calls(PyObject *producer);
int dlc_producer_bad_stream(PyObject *producer);
/* max_version[0] the consumer passed in its last __dlpack__ call; -1 when it passed none. */
long dlc_producer_max_major(PyObject *producer);

#endif /* DLCONFORM_FUZZ_PRODUCER_H */
