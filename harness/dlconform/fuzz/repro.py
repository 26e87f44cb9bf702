"""A Python reproducer of one fuzz input (fuzz/README.md, "CI mode").

`python3 -m dlconform fuzz-repro FILE [--target numpy] [--finding "CLAUSE: message"]` prints a
script that replays the input without the fuzzer.
- Consumer target: the record's export rebuilt over the same memory, a producer that
  behaves as fuzz/producer.c (with the offered exchange API tables), the consumer's
  from_dlpack with the target's keywords, then the target's oracles
  (dlconform.fuzz.consumer_oracles, held to the C ones by fuzz/tests/test_oracle_agreement.py).
- Producer target (TARGET producer-NAME): the same view of NAME's tensor, its __dlpack__ with
  the record's keywords, then the producer target's checks.
A script fails with AssertionError "CLAUSE: message": the finding's clause when it shows,
else the first breach. It ends with "done" when nothing shows.
"""
import os

from . import record as R

CONSUMERS = {"numpy": ("import numpy", "numpy.from_dlpack"),
             "torch": ("import torch.utils.dlpack", "torch.utils.dlpack.from_dlpack"),
             "ref": ("from dlconform import _ref as ref_consumer", "ref_consumer.from_dlpack")}


def consumer_lines(target):
    """(import line, from_dlpack expression) of a consumer, as fuzz/pyhost.c resolves it."""
    if target in CONSUMERS:
        return CONSUMERS[target]
    return ("import importlib\nconsumer = importlib.import_module(%r)" % target, "consumer.from_dlpack")


def describe(rec, p):
    """Comment lines naming the export and the call the record makes."""
    k, versioned = rec["kind"], R.versioned(rec)
    names = [n for n, bit in R.KIND.items() if k & bit and n != "versioned"]
    capsule = ("DLManagedTensorVersioned %d.%d, flags %#x" % (rec["version"] + (rec["flags"],)) if versioned
               else "DLManagedTensor (legacy)")
    data = {"buffer": "a %d-byte buffer, data at +%d, fill seed %d%s" % (
        p["size"], p["pad"], rec["seed"], ", read-only pages" if p["readonly"] else ""),
        "null": "NULL", "dangling": "a dangling pointer"}[p["mode"]]
    producer = [w for w, bit in (("old", R.KW["old_producer"]), ("strict", R.KW["strict_producer"]))
                if rec["kw"] & bit]
    kwargs = R.from_dlpack_kwargs(rec, R.copy_passed(rec, p))
    return ["export   %s%s" % (capsule, "; " + ", ".join(names) if names else ""),
            "tensor   dtype %r, ndim %d, shape %r, strides %r, byte_offset %d, device %r" % (
                rec["dtype"], rec["ndim"], rec["shape"], None if k & R.KIND["strides_null"] else rec["strides"],
                rec["byte_offset"], rec["device"]),
            "data     %s" % data,
            "producer %s; exchange API offer: %s" % (" and ".join(producer) or "plain", R.OFFERS[R.offer_kind(rec)]),
            "call     from_dlpack(producer%s)" % "".join(", %s=%r" % kv for kv in kwargs.items())]


TEMPLATE = '''\
# dlconform fuzz reproducer (consumer target), record format 2: {name}
# finding: {finding}
# run: PYTHONPATH=harness /usr/bin/python3 THIS_FILE   (needs dlconform._ref built: make build)
#
{description}
{consumer_import}
from dlconform.fuzz import consumer_oracles

RECORD = bytes.fromhex(
{record})
consumer_oracles.reproduce(RECORD, {from_dlpack}, finding={finding_arg!r})
'''


def reproducer(data, target="numpy", finding="", name="input"):
    """The reproducer script (str) of one consumer-target input."""
    rec = R.apply_offer(R.decode(data))
    p = R.plan(rec)
    R.drop_giant_copies(rec, p)
    imp, call = consumer_lines(target)
    raw = bytes(data)
    hexlines = "\n".join("    %r" % raw[i:i + 32].hex() for i in range(0, len(raw), 32)) or "    ''"
    return TEMPLATE.format(name=name, finding=finding or "(none recorded)", consumer_import=imp,
                           description="\n".join("# " + line for line in describe(rec, p)), record=hexlines,
                           from_dlpack=call, finding_arg=finding)


def script(data, target, finding="", name="input"):
    """The reproducer of an input for TARGET: producer-NAME, or a consumer."""
    if target.startswith("producer-"):
        return producer_reproducer(data, target[len("producer-"):], finding, name)
    return reproducer(data, target, finding, name)


def main(argv):
    import argparse

    ap = argparse.ArgumentParser(prog="dlconform fuzz-repro",
                                 description="print a Python reproducer for a fuzz input (record format 2)")
    ap.add_argument("file")
    ap.add_argument("--target", default=None, help="consumer or producer-NAME (default: the file name's prefix, "
                    "else numpy)")
    ap.add_argument("--finding", default="", help='"CLAUSE: message" to check for')
    args = ap.parse_args(argv)
    base = os.path.basename(args.file)
    target = args.target or base.split("-", 1)[0]
    if not args.target and base.startswith("producer-"):
        target = "-".join(base.split("-")[:2])
    if target in ("crash", "leak", "timeout", "oom", "validator", ""):
        target = "numpy"
    with open(args.file, "rb") as f:
        print(script(f.read(), target, args.finding, base), end="")
    return 0


PRODUCER_TEMPLATE = '''\
# dlconform fuzz reproducer (producer target), record format 2: {name}
# finding: {finding}
# run: PYTHONPATH=harness /usr/bin/python3 THIS_FILE
from dlconform import _probe
from dlconform.fuzz import producer_views

# fuzz/target_producer.c's view parameters for this record
made = producer_views.build({producer!r}, {dtype_index}, {shape!r}, {strides!r}, {offset}, {readonly}, {seed})
assert made is not None, "the producer cannot express this view (the target skips it)"
x, expected, itemsize, base, nbytes = made
print("view:", type(x).__name__, getattr(x, "shape", None))
try:
    cap = x.__dlpack__({kwargs})
except Exception as e:  # a defined non-CPU dl_device the producer cannot handle: BufferError
    dev05 = "DEV-05: dl_device=%r refused with %s, not BufferError" % ({dl_device!r}, type(e).__name__)
    assert not {foreign} or isinstance(e, (BufferError, TypeError)), dev05
    # the classes fuzz/target_producer.c allows (a refused stream: any but SystemError)
    if isinstance(e, (BufferError, TypeError, ValueError, MemoryError)) or ({odd_stream} and not isinstance(e, SystemError)):
        print("refused with %s: %s; no finding" % (type(e).__name__, e))
        raise SystemExit(0)
    raise
assert {stream!r} is None, "STR-10/STR-02: a CPU tensor was exported with stream=%r" % ({stream!r},)
assert {dl_device!r} in (None, (1, 0)), "DEV-05: exported for dl_device=%r" % ({dl_device!r},)
info = _probe.inspect(cap)
print("capsule:", info["name"], "flags", info.get("flags"), "shape", info.get("shape"), "strides", info.get("strides"),
      "byte_offset", info.get("byte_offset"))
if info["name"] == "dltensor_versioned":  # READ_ONLY 1, IS_COPIED 2 (a copy may drop READ_ONLY)
    assert not {copy_true} or info["flags"] & 2, "FLG-04: copy=True exported without IS_COPIED"
    assert not {readonly} or info["flags"] & 3, "FLG-02: a read-only view exported without READ_ONLY"
print("check:", _probe.check(cap))
got = _probe.read_elements(cap)
assert got == expected, "SEM-01: the values read through the export differ from the view's"
print("done: the finding did not show; the exception or assertion above is the finding otherwise")
'''

DTYPE_KEYS = ((6, 8), (0, 8), (0, 16), (0, 32), (0, 64), (1, 8), (1, 16), (1, 32), (1, 64), (2, 32), (2, 64),
              (5, 64), (5, 128))


def producer_reproducer(data, producer="numpy", finding="", name="input"):
    """Reproducer for an input of the producer target (fuzz/target_producer.c's mapping)."""
    rec = R.decode(data)
    code, bits, _lanes = rec["dtype"]
    idx = DTYPE_KEYS.index((code, bits)) if (code, bits) in DTYPE_KEYS else (code + bits) % 13
    nd = (rec["ndim"] & 0xFF) % 5
    shape = tuple((rec["shape"][i] if i < len(rec["shape"]) else 0) % (1 << 64) % 5 for i in range(nd))
    strides = tuple(_c_mod(rec["strides"][i] if i < len(rec["strides"]) else 0, 9) for i in range(nd))
    kw = {}
    if rec["kw"] & R.KW["max_version"]:
        kw["max_version"] = rec["max_version"]
    if rec["kw"] & R.KW["copy"]:
        kw["copy"] = R.COPY_VALUES[rec["copy"] % 3]
    if rec["kw"] & R.KW["dl_device"]:
        kw["dl_device"] = rec["kw_device"]
    if rec["kw"] & R.KW["stream"]:
        kw["stream"] = (None, rec["stream"], "stream")[rec["stream_kind"] % 3]
    return PRODUCER_TEMPLATE.format(
        name=name, finding=finding or "(none recorded)", producer=producer, dtype_index=idx, shape=shape,
        strides=strides, offset=rec["byte_offset"] % 64, readonly=rec["flags"] & 1, seed=rec["seed"],
        kwargs=", ".join("%s=%r" % kv for kv in kw.items()), stream=kw.get("stream"), dl_device=kw.get("dl_device"),
        copy_true=kw.get("copy") is True, foreign=_foreign_device(kw),
        odd_stream=kw.get("stream") is not None)


# DLDeviceType values of DLPack 1.3 other than kDLCPU (probes/check_validate.c)
NON_CPU_DEVICES = {2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}


def _foreign_device(kw):
    """Whether the producer target judges a refusal's class as DEV-05 (its foreign_device):
    a defined non-CPU dl_device with an id >= 0, and no stream other than None asked."""
    dev = kw.get("dl_device")
    return dev is not None and dev[0] in NON_CPU_DEVICES and dev[1] >= 0 and kw.get("stream") is None


def _c_mod(a, m):
    """C's a % m for int64 a (the sign follows a)."""
    r = abs(a) % m
    return -r if a < 0 else r
