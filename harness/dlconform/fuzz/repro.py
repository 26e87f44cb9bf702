"""A Python reproducer of one fuzz input (fuzz/README.md, "Reproducers").

`python3 -m dlconform fuzz-repro FILE [--target numpy] [--finding "CLAUSE: message"]` prints a
script that replays the input without the fuzzer.
- Consumer target: the record's export rebuilt over the same memory, a producer that
  behaves as fuzz/producer.c (with the offered exchange API tables), the consumer's
  from_dlpack with the target's keywords, then the target's oracles
  (dlconform.fuzz.consumer_oracles, held to the C ones by fuzz/tests/test_oracle_agreement.py).
- Producer target (TARGET producer-NAME): the same view of NAME's tensor, its __dlpack__ with
  the record's keywords, then the producer target's checks.
Its first line is a run line, as a suite reproducer's (dlconform.repro.run_header), and it ends
as one does (breaches.conclude): REPRODUCED and AssertionError "CLAUSE: message" (exit 1) for
the finding's clause, UNDETERMINED (exit 3) for another breach its known-findings file (the one
fuzz-ci used, fuzz/known/TARGET.txt by default) does not list, a sanitizer crash it cannot
show replayed by the sanitizer build (replay.py; UNSUPPORTED without one), else "done"; so
`dlconform recheck` reruns fuzz findings too.
"""
import os
import sys

from . import devmem
from . import record as R

CONSUMERS = {"numpy": ("import numpy", "numpy.from_dlpack"),
             "torch": ("import torch.utils.dlpack", "torch.utils.dlpack.from_dlpack"),
             "ref": ("from dlconform import _ref as ref_consumer", "ref_consumer.from_dlpack")}


DEVICE_LINES = """\
import os
os.environ[{env!r}] = {device!r}  # the CUDA mode (fuzz/devmem.h): a CUDA runtime and device, or DLCONFORM_CUDART
os.environ['DLCONFORM_FUZZ_CONSUMER'] = {consumer!r}  # whose side-stream context kw bit 6 enters
from dlconform.fuzz import devmem"""


def consumer_lines(target):
    """(import lines, from_dlpack expression) of a consumer, as fuzz/pyhost.c resolves it. A
    NAME@cuda target sets the CUDA mode first and takes NAME's device import (devmem.py)."""
    consumer, device = devmem.split_target(target)
    if consumer in CONSUMERS:
        imp, call = CONSUMERS[consumer]
    else:
        imp, call = "import importlib\nconsumer = importlib.import_module(%r)" % consumer, "consumer.from_dlpack"
    if device:
        imp = DEVICE_LINES.format(env=devmem.ENV, device=device, consumer=consumer) + "\n" + imp
        call = "(devmem.consumer_entry(%r) or %s)" % (consumer, call)
    return imp, call


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
{run_line}
# dlconform fuzz reproducer (consumer target), record format 2: {name}; needs dlconform._ref and _probe built
# finding: {finding}
# known: {known_line}
#
{description}
{consumer_import}
from dlconform.fuzz import consumer_oracles

RECORD = bytes.fromhex(
{record})
consumer_oracles.reproduce(RECORD, {from_dlpack}, finding={finding_arg!r}, known={known!r}{crash})
'''


def _known_line(known):
    return ("%s: a breach it lists is printed, not raised" % known if known else
            "none: every breach is raised")


def _ending(name, known, sanitizer, target):
    """The template fields of how the script ends (breaches.conclude) and how it is run: saved
    as NAME.py beside the input, by the Python that wrote it, as `dlconform recheck` runs it."""
    from ..repro import run_header

    return {"run_line": run_header(name=os.path.basename(name) + ".py"), "known": known,
            "known_line": _known_line(known),
            "crash": ", sanitizer=%r, name=%r, target=%r" % (sanitizer, name, target) if sanitizer else ""}


def reproducer(data, target="numpy", finding="", name="input", known=None, sanitizer=None):
    """The reproducer script (str) of one consumer-target input; `known`: the path of a
    known-findings file whose breaches it sets aside; `sanitizer`: the kind of crash the
    finding is, where the fuzz target's sanitizer reported it (not an oracle breach)."""
    rec = R.apply_offer(R.decode(data))
    p = R.plan(rec)
    R.drop_giant_copies(rec, p)
    imp, call = consumer_lines(target)
    return TEMPLATE.format(name=name, finding=finding or "(none recorded)", consumer_import=imp,
                           description="\n".join("# " + line for line in describe(rec, p)), record=_hex_lines(data),
                           from_dlpack=call, finding_arg=finding, **_ending(name, known, sanitizer, target))


def script(data, target, finding="", name="input", known=None, sanitizer=None):
    """The reproducer of an input for TARGET: producer-NAME, or a consumer."""
    if target.startswith("producer-"):
        return producer_reproducer(data, target[len("producer-"):], finding, name, known, sanitizer)
    return reproducer(data, target, finding, name, known, sanitizer)


def main(argv):
    import argparse

    ap = argparse.ArgumentParser(prog="dlconform fuzz-repro",
                                 description="print a Python reproducer for a fuzz input (record format 2)")
    ap.add_argument("file")
    ap.add_argument("--target", default=None, help="consumer or producer-NAME (default: the file name's prefix, "
                    "else numpy)")
    ap.add_argument("--finding", default="", help='"CLAUSE: message" to check for')
    ap.add_argument("--known", default=None, help="known-findings file whose breaches the script prints and does "
                    "not raise (default fuzz/known/TARGET.txt when there is one, as fuzz-ci; '' for none)")
    args = ap.parse_args(argv)
    try:
        with open(args.file, "rb") as f:
            data = f.read()
    except OSError as e:
        print("fuzz-repro: cannot read %s: %s" % (args.file, e.strerror or e), file=sys.stderr)
        return 2
    base = os.path.basename(args.file)
    target = args.target or base.split("-", 1)[0]
    if not args.target and base.startswith("producer-"):
        target = "-".join(base.split("-")[:2])
    if target in ("crash", "leak", "timeout", "oom", "validator", ""):
        target = "numpy"
    # fuzz-ci's rule (devmem.split_target: NAME or NAME@MODE, producer-NAME too), NAME a built-in
    # consumer or a module that can be found: never imported here, as fuzz-ci does not
    from ..targets.loader import _not_found

    try:
        name = devmem.split_target(target[len("producer-"):] if target.startswith("producer-") else target)[0]
        why = None if name in CONSUMERS else _not_found(name.split(".")[0], name)
        why = why and "target %r: %s" % (target, why)
    except devmem.Unavailable as e:
        why = str(e)
    if why and args.target:
        print("fuzz-repro: %s" % why, file=sys.stderr)
        return 2
    if why:  # a name of the file's own, not a fuzz-ci output's TARGET-...: the default target
        print("fuzz-repro: the file name's prefix %r is no target here: a numpy reproducer (--target names "
              "another)" % target, file=sys.stderr)
        target = "numpy"
    known = args.known
    if known is None:
        known = os.path.join("fuzz", "known", target + ".txt")
        known = known if os.path.exists(known) else ""
    elif known and not os.path.exists(known):
        print("fuzz-repro: no known-findings file %s" % known, file=sys.stderr)
        return 2
    print(script(data, target, args.finding, base, os.path.abspath(known) if known else None), end="")
    return 0


PRODUCER_TEMPLATE = '''\
{run_line}
# dlconform fuzz reproducer (producer target), record format 2: {name}; needs dlconform._probe built
# finding: {finding}
# known: {known_line}
#
# view     {producer} tensor of dtype {dtype}, shape {shape!r}, element strides {strides!r}, element offset
#          {offset} into a {base}-element base{readonly}, byte i of the base (i * 131 + {seed}) & 0xff
# call     __dlpack__({kwargs}), then the type's exchange API when it offers one{device}
from dlconform.fuzz import producer_oracles

RECORD = bytes.fromhex(
{record})
producer_oracles.reproduce(RECORD, {producer!r}, finding={finding_arg!r}, known={known!r}{crash})
'''


def _hex_lines(data):
    raw = bytes(data)
    return "\n".join("    %r" % raw[i:i + 32].hex() for i in range(0, len(raw), 32)) or "    ''"


def producer_reproducer(data, producer="numpy", finding="", name="input", known=None, sanitizer=None):
    """The reproducer script (str) of one producer-target input."""
    from .producer_oracles import BASE_ELEMENTS, dlpack_kwargs, view_parameters
    from .producer_views import DTYPES

    rec = R.decode(data)
    idx, shape, strides, offset, readonly, seed = view_parameters(rec)
    device = ""
    if producer.partition("@")[2]:  # the CUDA mode (fuzz/producer_cuda.h)
        readonly = 0
        device = ("\n# device   the view lies in CUDA memory on (2, 0) of the runtime dlconform.kit.cuda finds "
                  "(DLCONFORM_CUDART=build/cuda/sim/libcudart.so:\n#          the simulated one); a stream above 2 "
                  "is the reproducer's own non-blocking stream")
    return PRODUCER_TEMPLATE.format(
        device=device,
        name=name, finding=finding or "(none recorded)", producer=producer, dtype=DTYPES[idx][0], shape=shape,
        strides=strides, offset=offset, base=BASE_ELEMENTS, readonly=", read-only" if readonly else "", seed=seed,
        kwargs=", ".join("%s=%r" % kv for kv in dlpack_kwargs(rec).items()), record=_hex_lines(data),
        finding_arg=finding, **_ending(name, known, sanitizer, "producer-" + producer))
