/* xapi_guard: the NULL-call fault of XAPI-11 as an oracle line (see xapi_guard.h). */
#include "xapi_guard.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include "oracle.h"
#include "xapi_offer.h"

static struct sigaction previous;
static int installed;

/* The program counter at the fault; 1 (not 0) where this platform's context is unknown, so
 * the guard then never claims a fault. */
static uintptr_t fault_pc(const void *context) {
  const ucontext_t *uc = context;
#if defined(__x86_64__)
  return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
  return (uintptr_t)uc->uc_mcontext.pc;
#else
  (void)uc;
  return 1;
#endif
}

static void on_segv(int sig, siginfo_t *info, void *context) {
  const dlc_xapi_log *x = dlc_xapi_log_now();
  if (info->si_addr == NULL && fault_pc(context) == 0 && x->offer >= 0 &&
      (x->offer & DLC_OFFER_KIND) == DLC_OFFER_NULL_DLTENSOR)
    dlc_oracle_fail("XAPI-11", "from_dlpack called dltensor_from_py_object_no_sync, which the "
                    "exchange table leaves NULL (an optional pointer)");
  /* not ours, or set aside: the fault re-runs into the previous handler */
  sigaction(sig, &previous, NULL);
}

int dlc_xapi_guard_install(void) {
  if (installed) return 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &previous) != 0) return -1;
  installed = 1;
  return 0;
}
