"""The fuzzer's shared seeds (fuzz/corpus/seeds) as suite inputs. A seed is a record of format 2
(fuzz/README.md; dlconform.fuzz.record decodes it and plans its memory): it becomes a forged
capsule behind a recording producer, the consumer gets the record's keywords, and the
suite's own rules judge what it does (the same rules as test_refusals.py: the refusal rule of
each reason, values of a legal export, the rename, exact deleter accounting). The fuzz target
judges the same input with its oracles (dlconform.fuzz.consumer_oracles);
harness/tests/test_seed_agreement.py holds the two to one verdict.

Seeds that offer an exchange table other than a plain one on the type (instance-only, other
majors, a NULL dltensor_from) are inputs of test_exchange_api.py's consumer checks, which
forge those tables themselves: `judge` leaves them out (`offers_table_checks`).
"""
import gc
import os

from dlconform import REPO_DIR, _probe, _ref
from dlconform.fuzz import record as R
from dlconform.fuzz.exchange import DANGLING
from dlconform.producers import RecordingProducer
from dlconform.xapi_forge import handout_producer

from . import capsules as pycap
from . import readings as rd
from .attempts import Attempt, copy_breach, describe_exc, drop_capsules

#: the fuzzer's shared seeds: in a clone, fuzz/corpus/seeds; installed, the package's copy
SEEDS_DIR = next((d for d in (os.path.join(REPO_DIR, "fuzz", "corpus", "seeds"),
                              os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "seeds"))
                  if os.path.isdir(d)), os.path.join(REPO_DIR, "fuzz", "corpus", "seeds"))
#: offer kinds (record byte 67) a plain producer with a table on its type makes: none, a 1.3
#: table, a 1.99 table
PLAIN_OFFERS = (0, 1, 7)
_INVALID = ("dlpack.h does not oblige a consumer to validate malformed metadata (issue 12 grading: accepting "
            "invalid input is warn)")


def seeds():
    """[(name, bytes)] of the shared seeds, by name."""
    return [(n, open(os.path.join(SEEDS_DIR, n), "rb").read()) for n in sorted(os.listdir(SEEDS_DIR))]


def offers_table_checks(rec):
    return R.offer_kind(rec) not in PLAIN_OFFERS


class Input:
    """One record as the suite feeds it: `forge` (its capsules), `holder` (its memory),
    `producer`, `kwargs` for from_dlpack, and `reasons` [(clause, must, why)]: must "refuse"
    (a MUST clause says so), "read" (an unknown value: refuse, or carry it unread), "invalid"
    (accepting is warn)."""

    def __init__(self, data):
        rec = R.apply_offer(R.decode(data))
        p = R.plan(rec)
        R.drop_giant_copies(rec, p)
        self.rec, self.plan = rec, p
        k = rec["kind"]
        self.holder = None
        if p["mode"] == "buffer":
            self.holder = _ref.Forge(dtype=(1, 8, 1), shape=(p["size"],))
            data_arg = self.holder.buffer_address + p["pad"]
        else:  # no buffer: NULL, or an address that is never mapped ("dangling")
            data_arg = DANGLING if p["mode"] == "dangling" else "null"
        args = dict(dtype=rec["dtype"], shape=rec["shape"], ndim=rec["ndim"], byte_offset=rec["byte_offset"],
                    strides=None if k & R.KIND["strides_null"] else rec["strides"], versioned=R.versioned(rec),
                    version=rec["version"], flags=rec["flags"], device=rec["device"], data=data_arg,
                    shape_null=bool(k & R.KIND["shape_null"]), null_deleter=bool(k & R.KIND["deleter_null"]))
        if k & R.KIND["used"]:
            args["capsule_name"] = pycap.USED_VERSIONED if R.versioned(rec) else pycap.USED_LEGACY
        self.forge = _ref.Forge(**args)
        self.has_deleter = not k & R.KIND["deleter_null"]
        device = tuple(rec["device"])
        legacy_only = bool(rec["kw"] & R.KW["old_producer"])
        self.table = None
        if R.offer_kind(rec):
            self.table = _ref.ApiForge(0, minor=99 if R.offer_kind(rec) == 7 else 3)
            self.producer = handout_producer(self.forge, self.table, device=device)
        else:
            self.producer = RecordingProducer(self.forge, keep=True, device=device, legacy_only=legacy_only)
        self.kwargs = R.from_dlpack_kwargs(rec, R.copy_passed(rec, p))
        self.reasons = self._reasons()

    def _reasons(self):
        rec, ext, out = self.rec, self.plan["ext"], []
        if rec["kind"] & R.KIND["used"]:
            out.append(("CAP-04", "refuse", "a capsule named used_*"))
        if R.versioned(rec) and rec["version"][0] != 1:
            out.append(("VER-08", "refuse", "version %d.%d" % tuple(rec["version"])))
            return out  # nothing past the version is read (VER-08)
        if ext["status"] != "ok":
            out.append(("LAY-10" if ext["status"] == "overflow" else "LAY-09", "invalid",
                        "extent status %s" % ext["status"]))
        meta = R.metadata_capsule(rec)
        found = {c for c, _ in _probe.check(meta, spec=(1, 3))}
        if any(c.startswith("DT-") for c in found) or "DEV-01" in found:
            out.append(("VER-09", "read", "dtype %r / device %r outside DLPack 1.3" % (rec["dtype"], rec["device"])))
        if ext["status"] == "ok" and not ext["zero_size"] and self.plan["mode"] == "null":
            out.append(("LAY-04", "invalid", "NULL data for %d elements" % ext["numel"]))
        return out

    def clause(self):
        """The clause a crash on this input is: its first reason's, DEV-07 for memory on
        another device, LAY-11 for a legal export."""
        if self.reasons:
            return self.reasons[0][0]
        return "DEV-07" if tuple(self.rec["device"]) != (1, 0) else "LAY-11"


def judge(target, data):
    """[(clause, verdict, message)] of the suite's rules for one record against `target`'s
    consumer; empty when every rule holds."""
    inp = Input(data)
    att = Attempt(target, inp.producer, **inp.kwargs)
    out, ptr = _calls(inp), None
    what = "the seed's export"
    if att.exc is not None:
        out += _refused(target, inp, att, what)
    else:
        try:
            d = target.describe(att.result)
            ptr = int(d["ptr"])
        except Exception as e:  # noqa: BLE001 - a result the suite cannot read is the layout checks'
            d = None
            out.append(("LAY-11", "warn", "%s: the result cannot be described (%s)" % (what, describe_exc(e, 160))))
        out += _accepted(target, inp, att, d, what)
    out += _accounting(inp, att, ptr, what)
    return out


def _calls(inp):
    """What the consumer asked the producer for, as test_stream.py's consumer checks have it:
    stream None for a CPU producer (STR-10) and with dl_device=(1, 0) (STR-12), and better
    1 than None for CUDA (STR-14, SHOULD). A call an old producer rejected for its new
    keywords never had its stream read."""
    out = []
    old = inp.rec["kw"] & R.KW["old_producer"]
    for call in inp.producer.calls:
        stream, dev = call.get("stream"), call.get("dl_device")
        if old and set(call) - {"stream"}:
            continue
        if stream is None:
            if inp.rec["device"][0] == 2 and dev is None:
                out.append(("STR-14", "warn", "the consumer passed stream=None to a CUDA producer; 1 names the "
                            "legacy default stream"))
            continue
        if dev is not None and tuple(dev) == (1, 0):
            out.append(("STR-12", "fail", "dl_device=(1, 0) with stream=%r" % (stream,)))
        elif tuple(inp.rec["device"]) == (1, 0):
            out.append(("STR-10", "fail", "the consumer passed stream=%r to a CPU producer" % (stream,)))
    return out


def _plain(inp):
    """A CPU export any consumer takes: an array-API dtype, no reason to refuse, no keyword."""
    rec = inp.rec
    return (not inp.reasons and tuple(rec["device"]) == (1, 0) and rec["dtype"][2] == 1 and not inp.kwargs
            and rec["dtype"][0] in (0, 1, 2, 5, 6) and rec["dtype"][1] % 8 == 0 and rec["ndim"] <= 8
            and not rec["kw"] & R.KW["old_producer"])


def _refused(target, inp, att, what):
    """The refusal rules: clean (check.unclean's), BufferError for another device (DEV-07, or
    CPY-08 when device= asked for the host), a retry without the new keywords for an old
    producer (VER-06), and no refusal of a plain export over its NULL strides or zero-size
    NULL data alone (LAY-07, LAY-04: the same export over row-major strides and a buffer
    imports)."""
    exc, rec = att.exc, inp.rec
    why = _unclean(exc)
    if why:
        return [(inp.clause(), "fail", "%s refused uncleanly: %s" % (what, why))]
    lacks = bool(inp.kwargs) and pycap.keyword_rejected(exc, "keyword")  # a keyword it does not take
    if inp.clause() == "DEV-07" and not isinstance(exc, BufferError) and not lacks:
        clause = "CPY-08" if inp.kwargs.get("device") is not None else "DEV-07"
        return [(clause, "fail" if clause == "CPY-08" else "warn", "memory on device %r refused with %s; %s names "
                 "BufferError" % (tuple(rec["device"]), describe_exc(exc, 160), clause))]
    calls = inp.producer.calls
    if inp.kwargs.get("device") == "cpu" and rec["device"][0] != 1 and not lacks and inp.kwargs.get("copy") \
            is not False and not any(c.get("dl_device") is not None and tuple(c["dl_device"]) == (1, 0) for c in calls):
        return [("DEV-06", "warn", "from_dlpack(device='cpu') refused memory on device %r without asking the "
                 "producer for dl_device=(1, 0) (%s)" % (tuple(rec["device"]), describe_exc(exc, 160)))]
    if rec["kw"] & R.KW["old_producer"] and isinstance(exc, TypeError) and calls and not any(
            set(c) <= {"stream"} for c in calls):
        return [("VER-06", "warn", "an old producer's TypeError for the new keywords was not retried without "
                 "them (%s)" % describe_exc(exc, 160))]
    if _plain(inp) and inp.plan["ext"]["row_major"] and rec["byte_offset"] == 0 and (
            rec["kind"] & R.KIND["strides_null"] and not R.versioned(rec)
            or inp.plan["mode"] == "null" and inp.plan["ext"]["zero_size"]):
        control = Attempt(target, RecordingProducer(_ref.Forge(
            dtype=rec["dtype"], shape=rec["shape"], strides=R.row_major_strides(rec["ndim"], rec["shape"]),
            versioned=R.versioned(rec), buffer_size=64), keep=True))
        clause = "LAY-07" if rec["kind"] & R.KIND["strides_null"] else "LAY-04"
        if control.exc is None:
            control.settle()
            return [(clause, "fail", "%s refused (%s), the same over row-major strides and a buffer imports"
                     % (what, describe_exc(exc, 160)))]
        control.settle()
    return []


def _unclean(exc):
    text = str(exc).splitlines()[0] if str(exc) else ""
    if isinstance(exc, SystemError) or "without setting an exception" in text or "with an exception set" in text:
        return describe_exc(exc, 200)
    return None


def _accepted(target, inp, att, d, what):
    """The reasons' rules for an import, and a legal CPU export's values (LAY-11)."""
    out = []
    for clause, must, why in inp.reasons:
        if must == "refuse":
            out.append((clause, "fail", "%s (%s) was imported" % (what, why)))
        elif must == "read":
            rec = inp.rec
            misread, how = (rd.unknown_dtype_reading(target, att.result, rec["dtype"], b"")
                            if tuple(rec["device"]) == (1, 0) else rd.unknown_device_reading(att.result, rec["device"]))
            out.append((clause, "fail" if misread else "warn", "%s (%s): %s" % (what, why, how)))
        else:
            out.append((clause, "warn", "%s (%s) was imported; %s" % (what, why, _INVALID)))
    if d is not None and "device" not in inp.kwargs and tuple(inp.rec["device"]) == (1, 0):
        dev = rd.result_device(att.result)
        if dev not in (None, (1, 0)):
            out.append(("API-05", "fail", "%s imported on device %r" % (what, dev)))
    if d is None or inp.reasons or inp.plan["mode"] != "buffer" or tuple(inp.rec["device"]) != (1, 0):
        return out
    out += _result_rules(target, inp, att, d, what)
    if d.get("dtype") not in (None, tuple(inp.rec["dtype"])):
        return out  # untyped bytes or another element type: the dtype checks judge that
    got = b"" if any(int(n) == 0 for n in d["shape"]) else _probe.gather(
        d["ptr"], tuple(d["shape"]), tuple(d["strides"]), d["itemsize"])
    expected = inp.forge.expected_elements()
    if got != expected:
        out.append(("LAY-11", "fail", "%s imported with other values (%s, expected %s)"
                    % (what, got[:16].hex(), expected[:16].hex())))
    return out


def _result_rules(target, inp, att, d, what):
    """A CPU import of a buffer: a view of the export unless copy=True (SEM-01, for exports of
    whole-byte scalars), a copy when copy=True (CPY-06, unless the producer flagged IS_COPIED),
    read-only when the export is and the library can say so (FLG-03)."""
    out, rec = [], inp.rec
    first = inp.holder.buffer_address + inp.plan["pad"] + rec["byte_offset"]
    inside = inp.holder.buffer_address <= d["ptr"] < inp.holder.buffer_address + inp.plan["size"]
    copy = inp.kwargs.get("copy")
    flags = rec["flags"] if R.versioned(rec) else 0
    if _plain_view(inp) and copy is not True and d["ptr"] != first and not any(int(n) == 0 for n in d["shape"]):
        verdict, reading = copy_breach(target)
        out.append(("SEM-01", verdict, "%s was copied: the result starts at %#x, the export at %#x%s"
                    % (what, d["ptr"], first, reading)))
    if copy is True and inside and not flags & pycap.FLAG_IS_COPIED:
        out.append(("CPY-06", "fail", "%s: copy=True returned a view of the producer's memory" % what))
    if flags & pycap.FLAG_READ_ONLY and inside and not d.get("readonly") and _has_readonly(target):
        out.append(("FLG-03", "warn", "%s: a READ_ONLY export imported writable by a library with read-only "
                    "arrays" % what))
    return out


def _plain_view(inp):
    rec = inp.rec
    return (tuple(rec["device"]) == (1, 0) and rec["dtype"][2] == 1 and rec["dtype"][1] % 8 == 0
            and rec["dtype"][0] in (0, 1, 2, 4, 5, 6))


_READONLY = {}


def _has_readonly(target):
    if target.name not in _READONLY:
        try:
            x = target.make(target.dtypes()[0], (1,), bytes(8)[:1 * dict(target.discover_dtypes())[
                target.dtypes()[0]][1]])
            _READONLY[target.name] = bool(target.readonly_ways(x))
        except Exception:  # noqa: BLE001 - a producer-less consumer
            _READONLY[target.name] = False
    return _READONLY[target.name]


def _accounting(inp, att, ptr, what):
    """OWN-03 and CAP-03 as test_refusals.py has them, on one record: no deleter call while a
    result views the memory, exactly one in all (none for a used_* capsule, which another
    consumer owns, or a NULL deleter), the capsule renamed after a plain import."""
    out = []
    imported = att.exc is None
    lo = inp.holder.buffer_address if inp.holder is not None else 0
    zero_copy = imported and ptr is not None and lo <= ptr < lo + inp.plan["size"]
    kept = drop_capsules(inp.producer, imported=imported)
    gc.collect()
    alive = inp.forge.deleter_calls
    att.result = None
    gc.collect()
    after = inp.forge.deleter_calls
    expected = 1 if inp.forge.capsules_made and inp.has_deleter and not inp.rec["kind"] & R.KIND["used"] else 0
    verdict = "warn" if any(m == "invalid" for _, m, _ in inp.reasons) else "fail"  # invalid input: unspecified
    if zero_copy and alive:
        out.append(("OWN-03", verdict, "%s: the deleter ran while the result viewed the memory" % what))
    if after != expected:
        out.append(("OWN-03", verdict, "%s: the deleter ran %d time(s) in all, expected %d" % (what, after, expected)))
    names = [n for n, _ in kept]
    table_used = inp.table is not None and inp.table.calls["managed_tensor_from_py_object_no_sync"] > 0
    if imported and not table_used and not inp.reasons and names and names[-1] not in pycap.USED_NAMES:
        out.append(("CAP-03", "fail", "%s: the capsule is still named %r after the import" % (what, names[-1])))
    return out
