/* xapi_guard: XAPI-11 for a consumer that calls the NULL dltensor_from_py_object_no_sync of
 * a DLC_OFFER_NULL_DLTENSOR table (xapi_offer.h) instead of handling the NULL.
 *
 * A call through a NULL function pointer faults with the program counter at 0 (and
 * si_addr 0). A SIGSEGV handler, installed once, turns exactly that fault, while an
 * exchange with that offer is in flight (dlc_xapi_log_now()->offer), into
 *     dlconform-oracle: XAPI-11: ...
 * and abort(), like every other oracle. Any other fault, or this one with XAPI-11 set aside,
 * reinstalls the handler that was there before and returns: the faulting instruction runs
 * again into it (the sanitizer's report, the engine's crash handler), so a plain crash stays
 * the plain crash it was. The engine may install its own handler later and chain to this one
 * (libFuzzer does); both orders reach the same decision. */
#ifndef DLCONFORM_FUZZ_XAPI_GUARD_H
#define DLCONFORM_FUZZ_XAPI_GUARD_H

/* Installs the handler (once). Returns 0, or -1 when sigaction failed. */
int dlc_xapi_guard_install(void);

#endif /* DLCONFORM_FUZZ_XAPI_GUARD_H */
