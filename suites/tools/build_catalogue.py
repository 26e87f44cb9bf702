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
    "LAY-04": "The producer side (data should be NULL) is a SHOULD and reports warn; the consumer side (accept NULL data for size 0) is a MUST.",
    "LAY-06": "Binds capsules that claim version 1.2 or later; legacy capsules and older versions fall under LAY-07.",
    "LAY-07": "python_spec (v1.1 text) still says NULL strides mean row-major; the suite requires consumers to accept it in legacy capsules.",
    "LAY-10": "For sub-byte types the header formula (rounding each element up) and packed storage disagree; the suite reports such differences as warn.",
    "XAPI-06": "Only the major version must match; a different minor is not an error (peer suites that require equality are stricter than the spec).",
    "XAPI-14": "Returning an owning tensor or failing with an exception is a MUST; that the exception is BufferError is a SHOULD and reports warn.",
    "ERR-01": "BufferError is what the spec says should be raised; another class is reported as warn, SystemError or a crash as fail.",
    "VER-02": "Returning a legacy capsule is the rule; a BufferError is allowed from March 2025 and reports pass with a note.",
    "DT-12": "Checked for every array-API dtype the library itself can create; a dtype the library lacks is unsupported, not a failure.",
    "XAPI-03": "The v1.2 integer attribute is superseded by the v1.3 capsule; finding only the integer form reports warn.",
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
