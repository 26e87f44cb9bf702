"""Regenerates suites/clauses.json from the numbered catalogue (shared/spec/clauses.md).

The catalogue's IDs, sources and dates come from the tables; the level (MUST, SHOULD, MAY or
INFO) and the suite's reading of ambiguous clauses are this project's judgement and live here.
Usage: python3 suites/tools/build_catalogue.py [path/to/clauses.md] > suites/clauses.json
"""
import json
import re
import sys

SHOULD = {"API-04", "VER-06", "VER-11", "FLG-03", "DEV-06", "DEV-07", "STR-14", "ERR-01",
          "LAY-01", "LAY-02", "DT-02", "XAPI-03", "XAPI-04", "XAPI-19"}
MAY = {"SEM-02", "FLG-05", "DT-11"}
INFO = {"CAP-10", "DEV-08", "STR-13", "STR-15", "XAPI-20"}

READINGS = {
    "API-04": "A CPU-only consumer that skips __dlpack_device__ loses nothing, so a missing or late call is reported as warn.",
    "CPY-07": "The spec names ValueError in the device text and Raises section and BufferError in the copy text; the suite accepts either and fails any other class.",
    "LAY-04": "The producer side (data should be NULL) is a SHOULD and reports warn; the consumer side (accept NULL data for size 0) is a MUST. A consumer breaks it only by refusing the NULL pointer: when it refuses the same zero-size shape and strides over real memory too, it refuses the layout, which LAY-11 allows.",
    "LAY-06": "Binds capsules that claim version 1.2 or later; legacy capsules and older versions fall under LAY-07.",
    "LAY-07": "python_spec (v1.1 text) still says NULL strides mean row-major; the suite requires consumers to accept it in legacy capsules.",
    "LAY-10": "For sub-byte types the header formula (rounding each element up) and packed storage disagree; the suite reports such differences as warn.",
    "XAPI-06": "Only the major version must match; a different minor is not an error (peer suites that require equality are stricter than the spec).",
    "XAPI-14": "Returning an owning tensor or failing with an exception is a MUST; that the exception is BufferError is a SHOULD and reports warn.",
    "ERR-01": "BufferError is what the spec says should be raised; another class is reported as warn, SystemError or a crash as fail.",
    "VER-02": "Returning a legacy capsule is the rule; a BufferError is allowed from March 2025 and reports pass with a note.",
    "DT-12": "Checked for every array-API dtype the library itself can create; a dtype the library lacks is unsupported, not a failure.",
    "XAPI-03": "The v1.2 integer attribute is superseded by the v1.3 capsule; finding only the integer form reports warn.",
    "API-06": "The design topic says from_dlpack \"may raise\" AttributeError for an object without the methods, and the array API phrases the exception types of a Raises section as a should (design_topics/exceptions.rst): another ordinary exception reports warn; a result, a SystemError or a crash fails.",
    "ERR-03": "The array API phrases the exception types of a Raises section as a should (design_topics/exceptions.rst): another ordinary exception than AttributeError reports warn; a result, a SystemError or a crash fails.",
    "VER-05": "Checking the name and version is the MUST: a consumer that imports the capsule it got correctly, or refuses it cleanly (deleter called once), has checked. Refusing the legacy capsule a 0.x producer answers to max_version (VER-03) reports warn (VER-11 asks consumers to take both kinds); misreading one kind as the other, or refusing a versioned capsule of its own major, fails.",
    "VER-09": "Unknown enumeration values must not be misread: importing an unknown dtype code or device type as another dtype or device fails, refusing it passes. A consumer that carries the unknown value unchanged, or keeps no dtype or device at all (untyped bytes, a bare address), misreads nothing, but the header calls the tensor safe only \"as long as the consumer knows how to interpret all fields\": warn. The rule is applied to dtype codes no DLPack version defines (18, 99, 255) in capsules of any version: a consumer cannot tell them from a newer minor's codes (DT-01 binds the producer that sends them).",
    "DT-07": "Binds consumers that keep an element type: one whose result holds the fp6 code with other bits (or any type) fails. A consumer whose result keeps no element type (untyped bytes) neither reads nor passes on an fp6 type; whether it must stop too is not said: warn.",
    "DT-08": "Binds consumers that keep an element type: one whose result holds the fp4 code with other bits (or any type) fails. A consumer whose result keeps no element type (untyped bytes) neither reads nor passes on an fp4 type; whether it must stop too is not said: warn.",
    "DT-09": "Binds consumers that form elements from packed data: they must read little bit-endian. A consumer that keeps packed data packed (the same dtype, or untyped bytes) over the producer's bytes imposes no order and passes; its storage size is LAY-10's question.",
}

#: clauses no check can test here, with the reason (harness/tests/test_meta.py requires every
#: other clause to have a test). GPU-only clauses are checked on ref's virtual stream device
#: and through recording producers, so only informative clauses remain.
NO_CHECK = {
    "CAP-10": "informative: describes how capsules are meant to be used (consumed at once inside from_dlpack); "
              "nothing a library does can break it",
    "DEV-08": "informative: device_id numbering may differ between libraries, and documenting the ordering is "
              "advice to implementers; no behaviour to observe",
    "STR-13": "informative: supporting a stream other than None is optional; the stream checks (STR-01..12) "
              "judge what a library does when it supports one",
    "STR-15": "informative: for SYCL-like devices the stream argument is fixed by mutual agreement, so there is "
              "no rule to check (the oneAPI keywords a consumer passes are recorded by the STR-08/09/12/14 check)",
    "XAPI-20": "informative: a recommendation of which path consumers start with (__dlpack__ before the C "
               "exchange API); no behaviour to observe",
    "XAPI-19": "needs a GPU: only a consumer that launches kernels on a stream device can show which stream it uses; on the CPU current_work_stream is NULL and there is nothing to launch on",
}

BINDS = {"P": "producer", "C": "consumer", "B": "both"}


def needs_of(cpu):
    head = cpu.strip().strip("*")
    if head.startswith("Y"):
        return "cpu", "(" in cpu and ("partly" in cpu or "G" in cpu)
    if head.startswith("G"):
        return "gpu", "Y" in cpu
    if head.startswith("I"):
        return "info", False
    raise ValueError(cpu)


def main(path):
    pattern = re.compile(r"\| ([A-Z]+-\d\d) \| (.*) \| (.*) \| (.*) \| ([PCB][^|]*) \| (.*) \|\s*$")
    clauses = []
    for line in open(path, encoding="utf-8"):
        m = pattern.match(line)
        if not m:
            continue
        cid, text, source, since, binds, cpu = (g.strip() for g in m.groups())
        level = ("INFO" if cid in INFO else "SHOULD" if cid in SHOULD
                 else "MAY" if cid in MAY else "MUST")
        needs, partial = needs_of(cpu)
        entry = {"id": cid, "group": cid.split("-")[0], "level": level,
                 "binds": BINDS[binds[0]], "since": since, "source": source,
                 "needs": needs, "partial": partial, "text": text}
        if cid in READINGS:
            entry["reading"] = READINGS[cid]
        if cid in NO_CHECK:
            entry["no_check"] = NO_CHECK[cid]
        clauses.append(entry)
    if len(clauses) != 119:
        sys.exit(f"expected 119 clauses, parsed {len(clauses)}")
    unknown = sorted(set(NO_CHECK) - {c["id"] for c in clauses})
    if unknown:
        sys.exit(f"NO_CHECK names clauses the catalogue lacks: {unknown}")
    json.dump({"schema": "dlconform-clauses/1", "clauses": clauses}, sys.stdout, indent=1,
              ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/spec/clauses.md")
