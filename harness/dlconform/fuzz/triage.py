"""Crash triage for fuzz-ci: the clause, dedup key and evidence of one replayed crash.

A dedup key is "CLAUSE: message" with numbers as N (normalize: the same rule as
dlc_oracle_normalize in fuzz/oracle.c, so keys in fuzz/known/ match both sides), or
"SIGNAL in f1 < f2 < f3" from the top frames of the sanitizer's stack that are not
sanitizer, libFuzzer, libc, CPython or harness frames.
"""
import os
import re

SKIP_FRAME = re.compile(r"^(__sanitizer|__asan|__pthread_kill|__gxx_personality|_Unwind_|pthread_kill|__GI_|__ubsan|"
                        r"__interceptor|__lsan|fuzzer::|abort$|raise$|__libc|gsignal|"
                        r"LLVMFuzzer|dlc_|_Py|Py(?!Array|UFunc|DataMem)|std::|__cxa|__gnu_cxx|__clone|start_thread|"
                        r"_start$|main$|malloc$|calloc$|realloc$|operator new|method_vectorcall|cfunction_|vectorcall|"
                        r"slot_tp|call_function|wrap_|object_vacall)")
FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in (.+?)(?: (/\S+?)(?::\d+)*(?::\d+)?)?$")
FRAME_MOD = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ +\((\S+?)\+(0x[0-9a-f]+)\)")
RUNTIME_MODULES = ("libc.so", "libpython", "libstdc++", "libgcc_s", "consumer.", "validator.", "producer.")
KEY_MAX = 199  # the C side compares at most this many characters (fuzz/oracle.c)


def _number_at(msg, i):
    """Length of the token at i that normalises to N (a number, or a literal N standing alone,
    so that a key normalised again stays as it is); 0 when there is none."""
    n = len(msg)
    if msg[i] == "0" and i + 1 < n and msg[i + 1] in "xX":
        j = i + 2
        while j < n and msg[j] in "0123456789abcdefABCDEF":
            j += 1
        return j - i
    if msg[i].isdigit() or (msg[i] == "-" and i + 1 < n and msg[i + 1].isdigit() and
                            (i == 0 or not msg[i - 1].isalnum())):
        j = i + 1
        while j < n and msg[j].isdigit():
            j += 1
        return j - i
    if msg[i] == "N" and (i == 0 or not msg[i - 1].isalnum()) and not (i + 1 < n and msg[i + 1].isalnum()):
        return 1
    return 0


def normalize(msg):
    """Numbers (decimal, 0x hex, a leading minus) -> N, and inside [...] a list of them -> one N
    whatever its length; the same rule as dlc_oracle_normalize (fuzz/oracle.c)."""
    out, i, depth = "", 0, 0
    while i < len(msg):
        n = _number_at(msg, i)
        if n:
            i += n
            out = out[:-2] if depth > 0 and out.endswith("N, ") else out + "N"
        else:
            c = msg[i]
            depth += 1 if c == "[" else -1 if c == "]" and depth > 0 else 0
            out += c
            i += 1
    return out[:KEY_MAX]


def oracle_key(clause, msg):
    return ("%s: %s" % (clause, normalize(msg)))[:KEY_MAX]


def _signal(log):
    m = re.search(r"ERROR: AddressSanitizer: (SEGV|BUS|FPE|ILL|ABRT)", log)
    if m:
        return "SIG" + m.group(1)
    m = re.search(r"ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer): ([\w-]+)", log)
    if m:
        return m.group(2)
    if "runtime error:" in log:
        return "ubsan"
    if "ERROR: libFuzzer: timeout" in log:
        return "timeout"
    if "out-of-memory" in log:
        return "oom"
    if "ERROR: libFuzzer: deadly signal" in log:
        return "SIGABRT"
    return "crash"


def top_frames(log, n=3):
    """The first n frames of the first stack that are not sanitizer/libFuzzer/libc/CPython/harness."""
    frames, started = [], False
    for line in log.splitlines():
        if re.match(r"^\s*#0 ", line):
            if started and frames:
                break
            started = True
        if not started:
            continue
        m = FRAME.match(line)
        if m:
            name = m.group(1).strip()
            if name.startswith("("):  # "in (module+0x..)" forms
                mm = re.match(r"\((\S+?)\+(0x[0-9a-f]+)\)", name)
                name = "%s+%s" % (os.path.basename(mm.group(1)), mm.group(2)) if mm else name
                if name.startswith(RUNTIME_MODULES):
                    continue
            else:
                if " (" in name:  # "f (module+0x..)"
                    name = name[:name.index(" (")]
                name = re.sub(r"\(.*$", "", name)  # C++ arguments
                name = name.split(" ")[0].strip()  # "f path/file.c:1:2"
                if SKIP_FRAME.match(name):
                    continue
            frames.append(name)
        else:
            mm = FRAME_MOD.match(line)
            if mm:
                base = os.path.basename(mm.group(1))
                if base.startswith(RUNTIME_MODULES):
                    continue
                frames.append("%s+%s" % (base, mm.group(2)))
        if len(frames) >= n:
            break
    return frames


def triage_log(log):
    """dict(clause, message, key, kind, evidence) from a replay's output."""
    ctx = re.search(r"^dlconform-input: ([^:]+): (.*)$", log, re.M)
    orc = re.search(r"^dlconform-oracle: ([^:]+): (.*)$", log, re.M)
    if orc:
        clause, msg = orc.group(1), orc.group(2)
        return {"clause": clause, "message": msg, "key": oracle_key(clause, msg), "kind": "oracle",
                "evidence": orc.group(0), "context": ctx.group(1) if ctx else ""}
    sig = _signal(log)
    frames = top_frames(log)
    clause = ctx.group(1) if ctx else "*"
    key = "%s in %s" % (sig, " < ".join(frames) if frames else "?")
    lines = [l for l in log.splitlines() if re.search(r"ERROR:|SUMMARY:|runtime error|^\s*#\d+ |terminate|what\(\)", l)]
    msg = "%s on an input: %s" % (sig, ctx.group(2) if ctx else "one the target could not classify")
    return {"clause": clause, "message": msg, "key": key[:KEY_MAX], "kind": sig,
            "evidence": "\n".join(lines[:40]), "context": clause}
