"""The suite's rules on one shared fuzz seed as a consumer imports it (suites/test_fuzz_seeds.py):
the calls it makes, the refusal rules, a legal export's values, and the exact deleter accounting.

support/seeds.py reads a seed into `facts`, a dict of literals (Input.facts: the export's
forge keywords, its memory plan, the keywords from_dlpack gets, the reasons to refuse it, and
two facts the suite established about the library), and judge(facts, target) runs the import
through the target's from_dlpack and describe() and applies the rules. The facts are literals,
so a seed's reproducer is the check's case with its facts written out.
"""
import gc

from dlconform import kit
from dlconform.fuzz import devices
from dlconform.fuzz.exchange import _as_long
from dlconform.kit.capsules import HOST_READABLE

from .attempts import drop_capsules, result_device
from .xapi_forge import handout_producer

#: what the messages call the import
WHAT = "the seed's export"
_INVALID = ("dlpack.h does not oblige a consumer to validate malformed metadata (issue 12 grading: accepting "
            "invalid input is warn)")


# ---------------------------------------------------------------------------- readings
def unknown_dtype_reading(describe_result, y, forged, expected, read=None):
    """How a result imported from a capsule of a dtype the consumer cannot know (`forged`, with
    element bytes `expected`) holds it: (misread, how). Carrying the dtype unchanged, or keeping
    untyped bytes, over the same bytes reads nothing into the unknown value; any other dtype, a
    typed result the library's describe() cannot name, or other bytes is a misread (VER-09).
    `read(y)`: its bytes where they are not in host memory at describe()'s address (device
    memory); kit.Unsupported when it cannot read them."""
    try:
        held = describe_result(y).get("dtype")
    except kit.Unsupported:  # the target cannot read the result (the reason says why): no verdict
        raise
    except Exception:  # noqa: BLE001 - a describe() that fails says nothing
        held = None
    held = tuple(held) if isinstance(held, (tuple, list)) else held
    if held is None:
        return True, "imported as a typed result (the library's own dtype, which cannot be %r)" % (forged,)
    if held != "bytes" and held != tuple(forged):
        return True, "imported as dtype %r" % (held,)
    try:
        if read is not None:
            got = read(y)
        else:
            d = describe_result(y)
            got = b"" if any(int(n) == 0 for n in d["shape"]) else kit.elements(d)
    except kit.Unsupported:
        raise
    except Exception as e:  # noqa: BLE001
        return True, "imported, but its bytes cannot be read (%s)" % kit.describe(e)
    if got != expected:
        return True, "imported with other bytes (%s, expected %s)" % (got[:16].hex(), expected[:16].hex())
    if held == "bytes":
        return False, "imported as untyped bytes (the dtype is not kept)"
    return False, "imported carrying dtype %r unchanged" % (held,)


def unknown_device_reading(y, forged):
    """(misread, how) for a result imported from memory of a device type the consumer cannot
    know: a result on another device misreads it; one with no device at all (a bare address) or
    on the same device carries it (VER-09)."""
    dev = result_device(y)
    if dev is None:
        return False, "imported as memory with no device attached (a bare address)"
    if dev == tuple(forged):
        return False, "imported carrying device %r unchanged" % (dev,)
    return True, "imported as memory of device %r" % (dev,)


# ---------------------------------------------------------------------------- one seed
def build(facts):
    """(holder, forge, producer, table) of the seed's export: the forge over the holder's buffer
    (or NULL, or an address never mapped), behind a recording producer, or behind one whose type
    offers an exchange table (`table`, an `_ref.ApiForge`, else None)."""
    holder, kw = None, dict(facts["forge"])
    if facts["data"] == "buffer":
        holder = kit.Forge(dtype=(1, 8, 1), shape=(facts["size"],))
        kw["data"] = holder.buffer_address + facts["pad"]
    else:
        kw["data"] = facts["data"]  # "null", or an address that is never mapped
    forge = kit.Forge(**kw)
    if facts["offer_minor"] is not None:
        from dlconform import _ref  # the C table forge: only seeds that offer a table need it

        table = _ref.ApiForge(0, minor=facts["offer_minor"])
        producer = handout_producer(forge, table, device=tuple(facts["device"]))
    else:
        table, producer = None, kit.RecordingProducer(forge, keep=True, device=tuple(facts["device"]),
                                                      legacy_only=facts["old_producer"])
    return holder, forge, producer, table


def judge(facts, target):
    """[(clause, verdict, message)] of the rules for one seed against the target's consumer;
    empty when every rule holds."""
    holder, forge, producer, table = build(facts)
    result, exc = kit.attempt(lambda: target.from_dlpack(producer, **facts["kwargs"]))
    out, ptr = calls_rules(facts, producer.calls), None
    if exc is not None:
        out += refusal_rules(facts, exc, producer.calls, target)
    else:
        try:
            d = target.describe(result)
            ptr = int(d["ptr"])
        except kit.Unsupported as e:  # dlconform cannot read this library's results: its limit, no finding
            d = None
            out.append(("LAY-11", "unsupported", "%s: dlconform cannot read the result (%s)" % (WHAT, e.reason)))
        except Exception as e:  # noqa: BLE001 - a result the suite cannot read is the layout checks'
            d = None
            out.append(("LAY-11", "warn", "%s: the result cannot be described (%s)" % (WHAT, kit.describe(e))))
        out += acceptance_rules(facts, result, d, forge, holder, target)
        d = None
    # OWN-03 and CAP-03 as test_refusals.py has them: no deleter call while a result views the
    # memory, exactly one in all (none for a used_* capsule, which another consumer owns, or a
    # NULL deleter), the capsule renamed after a plain import
    imported = exc is None
    lo = holder.buffer_address if holder is not None else 0
    zero_copy = imported and ptr is not None and lo <= ptr < lo + facts["size"]
    kept = drop_capsules(producer, imported)
    gc.collect()
    alive = forge.deleter_calls
    result = None
    gc.collect()
    after = forge.deleter_calls
    expected = 1 if forge.capsules_made and facts["has_deleter"] and not facts["used"] else 0
    verdict = "warn" if any(m == "invalid" for _, m, _ in facts["reasons"]) else "fail"  # invalid input: unspecified
    if zero_copy and alive:
        out.append(("OWN-03", verdict, "%s: the deleter ran while the result viewed the memory" % WHAT))
    if after != expected:
        # the deleter of a used_* capsule belongs to the consumer that renamed it: running it is
        # CAP-04's breach (as fuzz/README.md's oracle table and test_refusals.py have it)
        out.append(("CAP-04" if facts["used"] else "OWN-03", verdict, "%s: the deleter ran %d time(s) in all, "
                    "expected %d%s" % (WHAT, after, expected, " (a used_* capsule: another consumer owns it)"
                                       if facts["used"] else "")))
    names = [n for n, _ in kept]
    table_used = table is not None and table.calls["managed_tensor_from_py_object_no_sync"] > 0
    if imported and not table_used and not facts["reasons"] and names and names[-1] not in kit.USED_NAMES:
        out.append(("CAP-03", "fail", "%s: the capsule is still named %r after the import" % (WHAT, names[-1])))
    return out


def calls_rules(facts, calls):
    """What the consumer asked the producer for, as test_stream.py's consumer checks have it:
    stream None for a CPU producer (STR-10) and with dl_device=(1, 0) (STR-12), and better
    1 than None for CUDA (STR-14, SHOULD). A call an old producer rejected for its new
    keywords never had its stream read."""
    out, device = [], tuple(facts["device"])
    for call in calls:
        stream, dev = call.get("stream"), call.get("dl_device")
        if facts["old_producer"] and set(call) - {"stream"}:
            continue
        if stream is None:
            if device[0] == 2 and dev is None:
                out.append(("STR-14", "warn", "the consumer passed stream=None to a CUDA producer; 1 names the "
                            "legacy default stream"))
            continue
        if dev is not None and tuple(dev) == (1, 0):
            out.append(("STR-12", "fail", "dl_device=(1, 0) with stream=%r" % (stream,)))
        elif device == (1, 0):
            out.append(("STR-10", "fail", "the consumer passed stream=%r to a CPU producer" % (stream,)))
    # CPY-07: device='cpu', copy=False of memory elsewhere: a copy is unavoidable, so the
    # consumer refuses; passing copy=None or True on, or asking for the host without copy=False,
    # lets the producer copy
    kwargs = facts["kwargs"]
    if device[0] != 1 and not facts["reasons"] and kwargs.get("device") == "cpu" and kwargs.get("copy") is False:
        passed = [c["copy"] for c in calls if "copy" in c]
        host = [c for c in calls if c.get("dl_device") is not None and tuple(c["dl_device"]) == (1, 0)]
        if (passed and passed[0] is not False) or any(c.get("copy") is not False for c in host):
            out.append(("CPY-07", "fail", "from_dlpack(device='cpu', copy=False) let the producer on device %r "
                        "copy (its calls: %r)" % (device, calls)))
    return out


def refusal_rules(facts, exc, calls, target):
    """The refusal rules: clean (kit.unclean's), BufferError for another device (DEV-07, or
    CPY-08 when device= asked for the host; not judged for a device this machine really has,
    dlconform.fuzz.devices), a retry without the new keywords for an old
    producer (VER-06), and no refusal of a plain export over its NULL strides or zero-size
    NULL data alone (LAY-07, LAY-04: the same export over row-major strides and a buffer
    imports, `facts["control"]`)."""
    kwargs, device = facts["kwargs"], tuple(facts["device"])
    why = kit.unclean(exc)
    if why:
        return [(facts["clause"], "fail", "%s refused uncleanly: %s" % (WHAT, why))]
    # a keyword the consumer does not take (a TypeError naming it)
    lacks = bool(kwargs) and isinstance(exc, TypeError) and "keyword" in str(exc)
    # host memory named as a device this machine has is a lie the consumer can act on (a CUDA
    # error from a copy of "device" memory): the class of its refusal says nothing there
    lie = devices.present(device[0])
    # the class says something about the device only when nothing else is unusual (the fuzz
    # oracles' rule): a plain layout, and a versioned capsule only for a consumer that asked
    asked = calls[-1].get("max_version") if calls else None
    unasked = facts["versioned"] and not (isinstance(asked, tuple) and asked and _as_long(asked[0]) >= 1)
    if (facts["clause"] == "DEV-07" and facts["device_alone"] and not unasked and not isinstance(exc, BufferError)
            and not lacks and not lie):
        clause = "CPY-08" if kwargs.get("device") is not None else "DEV-07"
        return [(clause, "fail" if clause == "CPY-08" else "warn", "memory on device %r refused with %s; %s names "
                 "BufferError" % (device, kit.describe(exc), clause))]
    if kwargs.get("device") == "cpu" and device[0] != 1 and not lacks and kwargs.get("copy") is not False and not any(
            c.get("dl_device") is not None and tuple(c["dl_device"]) == (1, 0) for c in calls):
        return [("DEV-06", "warn", "from_dlpack(device='cpu') refused memory on device %r without asking the "
                 "producer for dl_device=(1, 0) (%s)" % (device, kit.describe(exc)))]
    if facts["old_producer"] and isinstance(exc, TypeError) and calls and not any(set(c) <= {"stream"} for c in calls):
        return [("VER-06", "warn", "an old producer's TypeError for the new keywords was not retried without "
                 "them (%s)" % kit.describe(exc))]
    if facts["control"] is not None:
        clause, forge_kwargs = facts["control"]
        p = kit.RecordingProducer(kit.Forge(**forge_kwargs), keep=True)
        y, e = kit.attempt(lambda: target.from_dlpack(p))
        drop_capsules(p, e is None)
        del y
        gc.collect()
        if e is None:
            return [(clause, "fail", "%s refused (%s), the same over row-major strides and a buffer imports"
                     % (WHAT, kit.describe(exc)))]
    return []


def acceptance_rules(facts, y, d, forge, holder, target):
    """The reasons' rules for an import, and a legal CPU export's values (LAY-11)."""
    out, device = [], tuple(facts["device"])
    for clause, must, why in facts["reasons"]:
        if must == "refuse":
            out.append((clause, "fail", "%s (%s) was imported" % (WHAT, why)))
        elif must == "read":
            misread, how = (unknown_dtype_reading(target.describe, y, facts["dtype"], b"") if device == (1, 0)
                            else unknown_device_reading(y, device))
            out.append((clause, "fail" if misread else "warn", "%s (%s): %s" % (WHAT, why, how)))
        else:
            out.append((clause, "warn", "%s (%s) was imported; %s" % (WHAT, why, _INVALID)))
    dev = result_device(y) if d is not None else None
    if d is not None and "device" not in facts["kwargs"] and device == (1, 0) and dev not in (None, (1, 0)):
        out.append(("API-05", "fail", "%s imported on device %r" % (WHAT, dev)))
    if d is None or facts["reasons"] or facts["data"] != "buffer" or device != (1, 0):
        return out
    if dev is not None and dev[0] not in HOST_READABLE:
        return out  # moved to memory the host cannot read (API-05's finding): dlconform never reads it
    out += result_rules(facts, d, holder)
    if d.get("dtype") not in (None, tuple(facts["dtype"])):
        return out  # untyped bytes or another element type: the dtype checks judge that
    got = b"" if any(int(n) == 0 for n in d["shape"]) else kit.elements(d)
    expected = forge.expected_elements()
    if got != expected and not _offset_ignored(facts, d, holder):  # else LAY-03's finding (result_rules)
        out.append(("LAY-11", "fail", "%s imported with other values (%s, expected %s)"
                    % (WHAT, got[:16].hex(), expected[:16].hex())))
    return out


def _offset_ignored(facts, d, holder):
    """True when a view of a non-empty export with a non-zero byte_offset starts at `data`: the
    consumer left byte_offset out (LAY-03), which is neither a copy (SEM-01) nor a layout it
    misread (LAY-11)."""
    offset = facts["forge"]["byte_offset"]
    return bool(offset) and d["ptr"] == holder.buffer_address + facts["pad"] and not any(
        int(n) == 0 for n in d["shape"]) and facts["kwargs"].get("copy") is not True


def result_rules(facts, d, holder):
    """A CPU import of a buffer: a view of the export unless copy=True (SEM-01, for exports of
    whole-byte scalars; `facts["copy_breach"]` grades it), a copy when copy=True (CPY-06, unless
    the producer flagged IS_COPIED), read-only when the export is and the library can say so
    (FLG-03, `facts["has_readonly"]`)."""
    out = []
    first = holder.buffer_address + facts["pad"] + facts["forge"]["byte_offset"]
    inside = holder.buffer_address <= d["ptr"] < holder.buffer_address + facts["size"]
    copy = facts["kwargs"].get("copy")
    flags = facts["forge"]["flags"] if facts["forge"]["versioned"] else 0
    if _offset_ignored(facts, d, holder):
        out.append(("LAY-03", "fail", "%s: the result starts at data (%#x), not at data + byte_offset %d (%#x): "
                    "byte_offset ignored" % (WHAT, d["ptr"], facts["forge"]["byte_offset"], first)))
    elif facts["plain_view"] and copy is not True and d["ptr"] != first and not any(
            int(n) == 0 for n in d["shape"]):
        verdict, reading = facts["copy_breach"]
        out.append(("SEM-01", verdict, "%s was copied: the result starts at %#x, the export at %#x%s"
                    % (WHAT, d["ptr"], first, reading)))
    if copy is True and inside and not flags & kit.FLAG_IS_COPIED:
        out.append(("CPY-06", "fail", "%s: copy=True returned a view of the producer's memory" % WHAT))
    if flags & kit.FLAG_READ_ONLY and inside and not d.get("readonly") and facts["has_readonly"]:
        out.append(("FLG-03", "warn", "%s: a READ_ONLY export imported writable by a library with read-only "
                    "arrays" % WHAT))
    return out
