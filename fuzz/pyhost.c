/* pyhost: interpreter start-up and consumer resolution (see pyhost.h). */
#include "pyhost.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DLC_HARNESS_DIR
#define DLC_HARNESS_DIR "harness"
#endif

#define MAX_ALLOWED 16

dlc_pyhost dlc_py;

static PyObject *allowed[MAX_ALLOWED]; /* owned exception types */
static int n_allowed;

static void die(const char *what) {
  if (PyErr_Occurred()) PyErr_Print();
  fprintf(stderr, "dlconform-fuzz: %s (consumer '%s')\n", what, dlc_py.consumer);
  exit(2);
}

static void allow(const char *name) {
  PyObject *builtins = PyEval_GetBuiltins(); /* borrowed */
  PyObject *t = builtins ? PyDict_GetItemString(builtins, name) : NULL;
  if (t == NULL || !PyExceptionClass_Check(t)) {
    fprintf(stderr, "dlconform-fuzz: DLCONFORM_FUZZ_ALLOW_EXC: no builtin exception '%s'\n",
            name);
    exit(2);
  }
  if (n_allowed < MAX_ALLOWED) {
    Py_INCREF(t);
    allowed[n_allowed++] = t;
  }
}

static void init_allowed(void) {
  allow("BufferError");
  allow("TypeError");
  allow("ValueError");
  allow("MemoryError"); /* ERR-01: out of memory is an "other failure" */
  const char *extra = getenv("DLCONFORM_FUZZ_ALLOW_EXC");
  if (extra == NULL) return;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", extra);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    if (*tok) allow(tok);
}

/* A consumer's import may install its own fatal-signal handlers: tvm_ffi (backward-cpp)
 * prints a backtrace and exits with SIGSEGV, so ASan never reports the crash and libFuzzer
 * never writes its input (fuzz-ci: "exited -11 without a crash input"). The engine's
 * handlers, installed before, are put back once the import is done. */
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define N_FATAL (sizeof fatal_signals / sizeof fatal_signals[0])

static PyObject *import_keeping_signal_handlers(const char *module) {
  struct sigaction saved[N_FATAL];
  for (size_t i = 0; i < N_FATAL; ++i) sigaction(fatal_signals[i], NULL, &saved[i]);
  PyObject *mod = PyImport_ImportModule(module);
  for (size_t i = 0; i < N_FATAL; ++i) sigaction(fatal_signals[i], &saved[i], NULL);
  return mod;
}

static PyObject *resolve(const char *name) {
  const char *module = name, *attr = "from_dlpack";
  if (strcmp(name, "torch") == 0) module = "torch.utils.dlpack";
  else if (strcmp(name, "ref") == 0) module = "dlconform._ref";
  PyObject *mod = import_keeping_signal_handlers(module);
  if (mod == NULL) {
    if (strcmp(name, "ref") == 0)
      die("cannot import dlconform._ref: build harness/dlconform/_ref*.so first (make build)");
    die("cannot import the consumer module");
  }
  PyObject *fn = PyObject_GetAttrString(mod, attr);
  Py_DECREF(mod);
  if (fn == NULL || !PyCallable_Check(fn)) die("the consumer module has no callable from_dlpack");
  return fn;
}

/* harness/ for sys.path: DLCONFORM_HARNESS_DIR, else the build-time path when it exists,
 * else "harness" next to the executable (how fuzz/oss-fuzz/build.sh ships it in $OUT). */
static const char *harness_dir(void) {
  static char exe_dir[4096];
  const char *env = getenv("DLCONFORM_HARNESS_DIR");
  if (env != NULL && *env) return env;
  if (access(DLC_HARNESS_DIR, R_OK) == 0) return DLC_HARNESS_DIR;
  ssize_t n = readlink("/proc/self/exe", exe_dir, sizeof exe_dir - 16);
  if (n <= 0) return DLC_HARNESS_DIR;
  exe_dir[n] = '\0';
  char *slash = strrchr(exe_dir, '/');
  if (slash == NULL) return DLC_HARNESS_DIR;
  strcpy(slash + 1, "harness");
  return exe_dir;
}

void dlc_pyhost_init(void) {
  if (dlc_py.from_dlpack != NULL) return;
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  setenv("OMP_NUM_THREADS", "1", 1);
  setenv("MKL_NUM_THREADS", "1", 1);
  dlc_py.consumer = getenv("DLCONFORM_FUZZ_CONSUMER");
  if (dlc_py.consumer == NULL || *dlc_py.consumer == '\0') dlc_py.consumer = "numpy";
  Py_InitializeEx(0);
  PyObject *path = PySys_GetObject("path"); /* borrowed */
  PyObject *dir = PyUnicode_FromString(harness_dir());
  if (path == NULL || dir == NULL || PyList_Insert(path, 0, dir) != 0) die("cannot set sys.path");
  Py_DECREF(dir);
  init_allowed();
  dlc_py.from_dlpack = resolve(dlc_py.consumer);
  dlc_py.kw_copy = PyUnicode_InternFromString("copy");
  dlc_py.kw_device = PyUnicode_InternFromString("device");
  dlc_py.dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
  if (dlc_py.kw_copy == NULL || dlc_py.kw_device == NULL || dlc_py.dlpack_device == NULL)
    die("out of memory");
}

/* Answers per exception type, memoised: a refusal is judged per input, and most come with
 * the same few classes. Each entry holds a reference, so its type cannot be freed and its
 * address reused by another. */
#define ALLOWED_MEMO 8
static struct {
  PyObject *type; /* owned */
  int allowed;
} allowed_memo[ALLOWED_MEMO];
static unsigned n_allowed_memo;

int dlc_pyhost_exception_allowed(PyObject *exc_type) {
  for (unsigned i = 0; i < ALLOWED_MEMO; ++i)
    if (allowed_memo[i].type == exc_type && exc_type != NULL) return allowed_memo[i].allowed;
  int yes = 0;
  for (int i = 0; i < n_allowed && !yes; ++i)
    yes = PyErr_GivenExceptionMatches(exc_type, allowed[i]);
  if (exc_type != NULL && PyType_Check(exc_type)) {
    unsigned i = n_allowed_memo++ % ALLOWED_MEMO;
    Py_XDECREF(allowed_memo[i].type);
    Py_INCREF(exc_type);
    allowed_memo[i].type = exc_type;
    allowed_memo[i].allowed = yes;
  }
  return yes;
}
