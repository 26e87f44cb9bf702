"""The fuzzer's shared seeds (fuzz/corpus/seeds) as suite inputs. A seed is a record of format 2
(fuzz/README.md; dlconform.fuzz.record decodes it and plans its memory): it becomes a forged
capsule behind a recording producer, the consumer gets the record's keywords, and the
suite's own rules judge what it does (the same rules as test_refusals.py: the refusal rule of
each reason, values of a legal export, the rename, exact deleter accounting). Input reads a
record into literals (`facts`); the rules are support/seedrules.py, and a seed's reproducer is
the check's case with those facts written out.
The fuzz target judges the same input with its oracles (dlconform.fuzz.consumer_oracles);
harness/tests/test_fuzz_flow_back.py holds the two to one verdict.

Seeds that offer an exchange table other than a plain one on the type (instance-only, other
majors, a NULL dltensor_from) are inputs of test_exchange_api.py's consumer checks, which
forge those tables themselves: `judge` leaves them out (`offers_table_checks`).
"""
import os

from dlconform import REPO_DIR, _probe
from dlconform.fuzz import consumer_oracles as CO
from dlconform.fuzz import record as R
from dlconform.fuzz.exchange import DANGLING

from . import capsules as pycap
from . import seedrules as sr
from .attempts import copy_breach

#: the fuzzer's shared seeds: in a clone, fuzz/corpus/seeds; installed, the package's copy
SEEDS_DIR = next((d for d in (os.path.join(REPO_DIR, "fuzz", "corpus", "seeds"),
                              os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "seeds"))
                  if os.path.isdir(d)), os.path.join(REPO_DIR, "fuzz", "corpus", "seeds"))
#: offer kinds (record byte 67) a plain producer with a table on its type makes: none, a 1.3
#: table, a 1.99 table
PLAIN_OFFERS = (0, 1, 7)


def seeds():
    """[(name, bytes)] of the shared seeds, by name."""
    return [(n, open(os.path.join(SEEDS_DIR, n), "rb").read()) for n in sorted(os.listdir(SEEDS_DIR))]


def offers_table_checks(rec):
    return R.offer_kind(rec) not in PLAIN_OFFERS


class Input:
    """One record as the suite feeds it: `rec` and its memory `plan`, `kwargs` for from_dlpack,
    and `reasons` [(clause, must, why)]: must "refuse" (a MUST clause says so), "read" (an
    unknown value: refuse, or carry it unread), "invalid" (accepting is warn). facts(target)
    is all that seedrules.judge needs of it, as literals."""

    def __init__(self, data):
        rec = R.apply_offer(R.decode(data))
        p = R.plan(rec)
        R.drop_giant_copies(rec, p)
        self.rec, self.plan = rec, p
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

    def device_alone(self):
        """Nothing but the device is unusual (the fuzz target's test before it judges a
        refusal's class, DEV-07 and CPY-08): no reason to refuse, an array-API dtype, at most 32
        dims, no byte_offset, a valid row-major extent over a buffer within the cap."""
        rec, p, ext = self.rec, self.plan, self.plan["ext"]
        return (not self.reasons and CO.array_api_dtype(rec) and rec["ndim"] <= 32 and rec["byte_offset"] == 0
                and ext["status"] == "ok" and ext["row_major"] and p["mode"] == "buffer" and CO.small_span(rec, p))

    def forge_kwargs(self):
        """The keywords of the export's forge, but its data (seedrules.build puts it)."""
        rec, k = self.rec, self.rec["kind"]
        kw = dict(dtype=tuple(rec["dtype"]), shape=tuple(rec["shape"]), ndim=rec["ndim"],
                  byte_offset=rec["byte_offset"], strides=None if k & R.KIND["strides_null"] else tuple(rec["strides"]),
                  versioned=R.versioned(rec), version=tuple(rec["version"]), flags=rec["flags"],
                  device=tuple(rec["device"]), shape_null=bool(k & R.KIND["shape_null"]),
                  null_deleter=bool(k & R.KIND["deleter_null"]))
        if k & R.KIND["used"]:
            kw["capsule_name"] = pycap.USED_VERSIONED if R.versioned(rec) else pycap.USED_LEGACY
        return kw

    def control(self):
        """(clause, forge keywords) of the control import for LAY-07 / LAY-04: a plain export
        refused over its NULL strides or zero-size NULL data alone, remade over row-major strides
        and a buffer; None where a refusal has no such control."""
        rec, ext = self.rec, self.plan["ext"]
        if not (_plain(self) and ext["row_major"] and rec["byte_offset"] == 0 and (
                rec["kind"] & R.KIND["strides_null"] and not R.versioned(rec)
                or self.plan["mode"] == "null" and ext["zero_size"])):
            return None
        return ("LAY-07" if rec["kind"] & R.KIND["strides_null"] else "LAY-04",
                dict(dtype=tuple(rec["dtype"]), shape=tuple(rec["shape"]),
                     strides=tuple(R.row_major_strides(rec["ndim"], rec["shape"])), versioned=R.versioned(rec),
                     buffer_size=64))

    def facts(self, target):
        """What seedrules.judge reads of this record, as literals, with two facts the suite
        establishes about the library where the rules read them (else None): how a needless copy
        is graded (attempts.copy_breach) and whether it has read-only arrays."""
        rec, p = self.rec, self.plan
        offer = R.offer_kind(rec)
        # seedrules.result_rules reads the library facts only for a legal CPU export of a buffer
        cpu_buffer = not self.reasons and p["mode"] == "buffer" and tuple(rec["device"]) == (1, 0)
        graded = cpu_buffer and _plain_view(self) and self.kwargs.get("copy") is not True
        read_only = cpu_buffer and R.versioned(rec) and rec["flags"] & R.READ_ONLY
        return {"forge": self.forge_kwargs(), "device": tuple(rec["device"]), "dtype": tuple(rec["dtype"]),
                "data": "buffer" if p["mode"] == "buffer" else DANGLING if p["mode"] == "dangling" else "null",
                "pad": p["pad"], "size": p["size"], "kwargs": dict(self.kwargs), "reasons": list(self.reasons),
                "clause": self.clause(), "old_producer": bool(rec["kw"] & R.KW["old_producer"]),
                "used": bool(rec["kind"] & R.KIND["used"]), "has_deleter": not rec["kind"] & R.KIND["deleter_null"],
                "offer_minor": (99 if offer == 7 else 3) if offer else None, "control": self.control(),
                "versioned": R.versioned(rec), "device_alone": self.device_alone(),
                "plain_view": _plain_view(self), "copy_breach": tuple(copy_breach(target)) if graded else None,
                "has_readonly": _has_readonly(target) if read_only else None}


def judge(target, data):
    """[(clause, verdict, message)] of the suite's rules for one record against `target`'s
    consumer; empty when every rule holds (seedrules.judge)."""
    return sr.judge(Input(data).facts(target), target)


def _plain(inp):
    """A CPU export any consumer takes: an array-API dtype, no reason to refuse, no keyword."""
    rec = inp.rec
    return (not inp.reasons and tuple(rec["device"]) == (1, 0) and rec["dtype"][2] == 1 and not inp.kwargs
            and rec["dtype"][0] in (0, 1, 2, 5, 6) and rec["dtype"][1] % 8 == 0 and rec["ndim"] <= 8
            and not rec["kw"] & R.KW["old_producer"])


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
