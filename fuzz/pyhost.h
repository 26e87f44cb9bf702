/* pyhost: the embedded CPython every Python fuzz target shares (consumer and empty).
 * dlc_pyhost_init runs once, from LLVMFuzzerInitialize, so AFL++ runs it before its fork
 * server and libFuzzer before the first input:
 *   - OPENBLAS_NUM_THREADS=1, OMP_NUM_THREADS=1 and MKL_NUM_THREADS=1 are set before
 *     Py_Initialize (thread pools do not survive fork; TOOLCHAIN.md, Fuzzing);
 *   - the interpreter is the user's: DLCONFORM_FUZZ_PYTHON names it (a virtualenv's
 *     python3: its site-packages count), else a runtime bundled next to the executable
 *     (python/, fuzz/oss-fuzz/build.sh), else CPython's defaults; PYTHONPATH counts;
 *   - harness/ goes on sys.path (DLCONFORM_HARNESS_DIR, else the build-time path), and
 *     the bundle's python/site after it;
 *   - the consumer named by DLCONFORM_FUZZ_CONSUMER (default numpy) is imported and its
 *     from_dlpack resolved: numpy -> numpy.from_dlpack, torch ->
 *     torch.utils.dlpack.from_dlpack, ref -> dlconform._ref.from_dlpack, any other name ->
 *     importlib.import_module(name).from_dlpack (the consumer target's CUDA mode then takes
 *     the consumer's import of device memory instead: devmem.h).
 * A consumer that cannot be imported ends the process with exit status 2 and a message. */
#ifndef DLCONFORM_FUZZ_PYHOST_H
#define DLCONFORM_FUZZ_PYHOST_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
  const char *consumer;  /* the name from DLCONFORM_FUZZ_CONSUMER */
  PyObject *from_dlpack; /* owned, lives for the process */
  PyObject *kw_copy;     /* interned "copy" */
  PyObject *kw_device;   /* interned "device" */
  PyObject *dlpack_device; /* interned "__dlpack_device__" */
} dlc_pyhost;

extern dlc_pyhost dlc_py;

void dlc_pyhost_init(void);

/* The role the library plays, for dlc_pyhost_init's one-line failures: "consumer" (default),
 * or "producer" (target_producer.c sets it first). */
extern const char *dlc_pyhost_role;

/* 1 when exc (a type) is one the spec names for a refusal (BufferError, TypeError,
 * ValueError; MemoryError, ERR-01) or one listed in DLCONFORM_FUZZ_ALLOW_EXC (comma-separated builtin names). */
int dlc_pyhost_exception_allowed(PyObject *exc_type);

#endif /* DLCONFORM_FUZZ_PYHOST_H */
