"""results.junit.xml: one testsuite per target, one testcase per (test, clause).

fail -> <failure>; crash, timeout, error -> <error>; skip, unsupported, and a finding a
known-failures file lists (known.py) -> <skipped>; warn passes with the warning in <system-out>
and a property.
"""
import re
import xml.etree.ElementTree as ET

#: the control characters XML 1.0 forbids (all below 0x20 but tab, newline and return)
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")


def _clean(text):
    """text with each character XML 1.0 forbids written as \\xNN (a regular expression: the
    reproducers make megabytes of text, which a loop over characters took 0.5 s to walk)."""
    return _FORBIDDEN.sub(lambda m: "\\x%02x" % ord(m.group()), str(text or ""))


def render(doc):
    root = ET.Element("testsuites", name="dlconform")
    results = doc.get("results", [])
    names = list(doc.get("targets", {}))
    for r in results:
        if r["target"] not in names:
            names.append(r["target"])
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for name in names:
        mine = [r for r in results if r["target"] == name]
        counts = {"tests": len(mine),
                  "failures": sum(r["verdict"] == "fail" and not r.get("known") for r in mine),
                  "errors": sum(r["verdict"] in ("crash", "timeout", "error") and not r.get("known") for r in mine),
                  "skipped": sum(r["verdict"] in ("skip", "unsupported") or bool(r.get("known")) for r in mine)}
        suite = ET.SubElement(root, "testsuite", name=_clean(name),
                              time="%.3f" % sum(float(r.get("duration") or 0) for r in mine),
                              **{k: str(v) for k, v in counts.items()})
        info = doc.get("targets", {}).get(name, {})
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="status", value=_clean(info.get("status", "")))
        for lib, ver in (info.get("versions") or {}).items():
            ET.SubElement(props, "property", name="version." + _clean(lib), value=_clean(ver))
        if info.get("reason"):
            ET.SubElement(props, "property", name="reason", value=_clean(info["reason"]))
        for k in total:
            total[k] += counts[k]
        for r in mine:
            case = ET.SubElement(suite, "testcase", classname=_clean("%s.%s" % (name, r.get("group") or "")),
                                 name=_clean("%s [%s]" % (r["test"], r["clause"])),
                                 time="%.3f" % float(r.get("duration") or 0))
            v = r["verdict"]
            msg = _clean("%s: %s" % (r["clause"], r.get("message", "")))
            body = _clean(r.get("message", "") + ("\n\nreproducer:\n" + r["repro"] if r.get("repro") else "")
                          + ("\n\nevidence:\n" + r["evidence"] if r.get("evidence") else ""))
            if r.get("known"):
                ET.SubElement(case, "skipped", message=_clean("known %s: %s" % (v, r.get("message", ""))))
            elif v == "fail":
                el = ET.SubElement(case, "failure", message=msg, type="fail")
                el.text = body
            elif v in ("crash", "timeout", "error"):
                el = ET.SubElement(case, "error", message=msg, type=v)
                el.text = body
            elif v in ("skip", "unsupported"):
                ET.SubElement(case, "skipped", message=_clean("%s: %s" % (v, r.get("message", ""))))
            elif v == "warn":
                cp = ET.SubElement(case, "properties")
                ET.SubElement(cp, "property", name="verdict", value="warn")
                out = ET.SubElement(case, "system-out")
                out.text = _clean("warn: " + body)
    for k, v in total.items():
        root.set(k, str(v))
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
