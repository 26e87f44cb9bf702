/* parse: the Python arguments ref's types and functions share: dtype names and tuples,
 * dims tuples, max_version (VER-02..04) and copy. No state. */
#include "ref.h"

#include <stdlib.h>
#include <string.h>

static int dtype_by_name(const char *name, uint16_t lanes, DLDataType *out) {
  for (unsigned code = 0; code <= kDLFloat4_e2m1fn; code++) {
    for (unsigned bits = 1; bits <= 255; bits++) {
      DLDataType dt = {(uint8_t)code, (uint8_t)bits, lanes};
      dlc_dtype_info info = dlc_dtype_classify(dt, REF_SPEC_MAJOR, REF_SPEC_MINOR);
      if (info.valid && strcmp(info.name, name) == 0) {
        *out = dt;
        return 0;
      }
    }
  }
  return -1;
}

int ref_parse_dtype(PyObject *obj, DLDataType *out) {
  if (PyUnicode_Check(obj)) {
    const char *name = PyUnicode_AsUTF8(obj);
    if (!name) return -1;
    if (dtype_by_name(name, 1, out) == 0) return 0;
    /* vector names: "<scalar>x<lanes>" */
    const char *x = strrchr(name, 'x');
    if (x && x[1] >= '0' && x[1] <= '9') {
      char *end;
      long lanes = strtol(x + 1, &end, 10);
      if (*end == '\0' && lanes > 1 && lanes <= 65535) {
        char scalar[64];
        size_t n = (size_t)(x - name);
        if (n < sizeof scalar) {
          memcpy(scalar, name, n);
          scalar[n] = '\0';
          DLDataType dt;
          if (dtype_by_name(scalar, 1, &dt) == 0) {
            dt.lanes = (uint16_t)lanes;
            if (dlc_dtype_classify(dt, REF_SPEC_MAJOR, REF_SPEC_MINOR).valid) {
              *out = dt;
              return 0;
            }
          }
        }
      }
    }
    PyErr_Format(PyExc_ValueError, "unknown dtype name '%s'", name);
    return -1;
  }
  unsigned long code, bits, lanes;
  if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 3) {
    PyErr_SetString(PyExc_TypeError, "dtype must be a name or a (code, bits, lanes) tuple");
    return -1;
  }
  code = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(obj, 0));
  bits = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(obj, 1));
  lanes = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(obj, 2));
  if (PyErr_Occurred()) return -1;
  if (code > 255 || bits > 255 || lanes > 65535) {
    PyErr_SetString(PyExc_ValueError, "dtype field out of range");
    return -1;
  }
  DLDataType dt = {(uint8_t)code, (uint8_t)bits, (uint16_t)lanes};
  dlc_dtype_info info = dlc_dtype_classify(dt, REF_SPEC_MAJOR, REF_SPEC_MINOR);
  if (!info.valid) {
    PyErr_Format(PyExc_ValueError, "dtype (%lu, %lu, %lu) is not a DLPack %u.%u dtype (%s)",
                 code, bits, lanes, REF_SPEC_MAJOR, REF_SPEC_MINOR, info.clause);
    return -1;
  }
  *out = dt;
  return 0;
}

int ref_parse_dims(PyObject *obj, const char *what, int64_t *out) {
  return ref_parse_dims_upto(obj, what, out, REF_MAX_NDIM);
}

int ref_parse_dims_upto(PyObject *obj, const char *what, int64_t *out, int max_dims) {
  PyObject *seq = PySequence_Fast(obj, "dims must be a sequence of ints");
  if (!seq) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n > max_dims) {
    Py_DECREF(seq);
    PyErr_Format(PyExc_ValueError, "%s: at most %d dims", what, max_dims);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      return -1;
    }
    out[i] = (int64_t)v;
  }
  Py_DECREF(seq);
  return (int)n;
}

PyObject *ref_dims_tuple(int32_t n, const int64_t *v) {
  PyObject *t = PyTuple_New(n);
  if (!t) return NULL;
  for (int32_t i = 0; i < n; i++) {
    PyObject *x = PyLong_FromLongLong(v[i]);
    if (!x) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SET_ITEM(t, i, x);
  }
  return t;
}

int ref_parse_max_version(PyObject *max_version) {
  if (max_version == Py_None) return 0; /* VER-02 */
  if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) != 2 ||
      !PyLong_Check(PyTuple_GET_ITEM(max_version, 0)) ||
      !PyLong_Check(PyTuple_GET_ITEM(max_version, 1))) {
    PyErr_SetString(PyExc_TypeError, "max_version must be None or a (major, minor) tuple");
    return -1;
  }
  int overflow;
  long long major = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(max_version, 0), &overflow);
  if (major == -1 && PyErr_Occurred()) return -1;
  return overflow > 0 || major >= (long long)REF_SPEC_MAJOR; /* VER-03; VER-04: legacy */
}

int ref_check_copy(PyObject *copy) {
  if (copy == Py_None || PyBool_Check(copy)) return 0;
  PyErr_SetString(PyExc_TypeError, "copy must be None, True or False");
  return -1;
}
