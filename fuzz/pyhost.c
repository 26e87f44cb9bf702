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

/* "3.11": the standard library's folder name, for the bundled runtime */
#define DLC_STR_(x) #x
#define DLC_STR(x) DLC_STR_(x)
#define DLC_PY_XY DLC_STR(PY_MAJOR_VERSION) "." DLC_STR(PY_MINOR_VERSION)

#define MAX_ALLOWED 16

dlc_pyhost dlc_py;

static PyObject *allowed[MAX_ALLOWED]; /* owned exception types */
static int n_allowed;

const char *dlc_pyhost_role = "consumer";

static void die(const char *what) {
  if (PyErr_Occurred()) PyErr_Print();
  fprintf(stderr, "dlconform-fuzz: %s (%s '%s')\n", what, dlc_pyhost_role, dlc_py.consumer);
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
    die(strcmp(dlc_pyhost_role, "consumer") ? "cannot import the producer module" : "cannot import the consumer module");
  }
  PyObject *fn = PyObject_GetAttrString(mod, attr);
  Py_DECREF(mod);
  if (fn == NULL || !PyCallable_Check(fn)) die("the consumer module has no callable from_dlpack");
  return fn;
}

/* The path `name` next to the executable, or NULL (no /proc, or a name too long). */
static const char *beside_exe(const char *name) {
  static char buf[3][4096];
  static int next;
  char *p = buf[next++ % 3];
  ssize_t n = readlink("/proc/self/exe", p, sizeof buf[0] - 1);
  if (n <= 0) return NULL;
  p[n] = '\0';
  char *slash = strrchr(p, '/');
  if (slash == NULL || (size_t)(slash + 1 - p) + strlen(name) >= sizeof buf[0]) return NULL;
  strcpy(slash + 1, name);
  return p;
}

/* harness/ for sys.path: DLCONFORM_HARNESS_DIR, else the build-time path when it exists,
 * else "harness" next to the executable (how fuzz/oss-fuzz/build.sh ships it in $OUT). */
static const char *harness_dir(void) {
  const char *env = getenv("DLCONFORM_HARNESS_DIR");
  if (env != NULL && *env) return env;
  if (access(DLC_HARNESS_DIR, R_OK) == 0) return DLC_HARNESS_DIR;
  const char *beside = beside_exe("harness");
  return beside ? beside : DLC_HARNESS_DIR;
}

/* The Python runtime fuzz/oss-fuzz/build.sh bundles next to the executable: python/ is
 * the home (python/lib/pythonX.Y: the standard library), python/site holds the library
 * under test and its dependencies. NULL when there is none. */
static const char *bundled_home(void) {
  const char *home = beside_exe("python");
  const char *stdlib = beside_exe("python/lib/python" DLC_PY_XY "/os.py");
  return home && stdlib && access(stdlib, R_OK) == 0 ? home : NULL;
}

/* The interpreter the target embeds is the one the user runs:
 *   - DLCONFORM_FUZZ_PYTHON (fuzz-ci sets it in a virtualenv: that python3) is the program
 *     name, so the venv's pyvenv.cfg and site-packages count, as in `python3 -c ...`;
 *   - else a runtime bundled next to the executable is the home (OSS-Fuzz and
 *     ClusterFuzzLite run targets where the builder's Python is absent);
 *   - else CPython's defaults (the build's prefix), with PYTHONPATH and the like as usual.
 * Signal handlers are left to the engine (Py_InitializeEx(0)). Returns 1 when the bundled
 * runtime is the home. */
static int start_interpreter(void) {
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.install_signal_handlers = 0;
  config.parse_argv = 0;
  const char *python = getenv("DLCONFORM_FUZZ_PYTHON");
  if (python != NULL && *python == '\0') python = NULL;
  const char *home = python ? NULL : bundled_home();
  PyStatus st = PyStatus_Ok();
  if (python != NULL)
    st = PyConfig_SetBytesString(&config, &config.program_name, python);
  else if (home != NULL)
    st = PyConfig_SetBytesString(&config, &config.home, home);
  if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(st)) {
    fprintf(stderr, "dlconform-fuzz: cannot start Python (%s%s)%s%s\n", st.func ? st.func : "",
            st.func ? ": " : "", st.err_msg ? st.err_msg : "", python ? "; DLCONFORM_FUZZ_PYTHON set" : "");
    exit(2);
  }
  return home != NULL;
}

/* Puts dir at sys.path[pos]. */
static void path_insert(Py_ssize_t pos, const char *dir) {
  PyObject *path = PySys_GetObject("path"); /* borrowed */
  PyObject *d = PyUnicode_FromString(dir);
  if (path == NULL || d == NULL || PyList_Insert(path, pos, d) != 0) die("cannot set sys.path");
  Py_DECREF(d);
}

void dlc_pyhost_init(void) {
  if (dlc_py.from_dlpack != NULL) return;
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  setenv("OMP_NUM_THREADS", "1", 1);
  setenv("MKL_NUM_THREADS", "1", 1);
  dlc_py.consumer = getenv("DLCONFORM_FUZZ_CONSUMER");
  if (dlc_py.consumer == NULL || *dlc_py.consumer == '\0') dlc_py.consumer = "numpy";
  int bundled = start_interpreter();
  path_insert(0, harness_dir());
  if (bundled) path_insert(1, beside_exe("python/site"));
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
