"""Producer keyword combinations: every stream x max_version x dl_device x copy of a table,
on the legacy path (max_version None or (0, x)) as well as the versioned one, against a CPU
tensor. A combination of valid values must export as the keywords ask; one with a value the
producer must refuse must be refused cleanly. Checks of one keyword alone live with their
clause group; this file finds what only a combination reaches (a check skipped on one path,
a keyword ignored next to another).

- Valid values: stream None; max_version None, (0, 9), (1, 0), (1, 3), (1, 99), (2, 0);
  dl_device None or the tensor's own device; copy None, False, True.
- Invalid arguments (suites/README.md, Grading: refusing cleanly passes, accepting is warn):
  an int or str stream on the CPU (STR-10); a dl_device that names no device, a negative id or
  a type dlpack.h does not define (DEV-05, any clean class); stream=-1 (no synchronisation,
  which a CPU producer never does anyway) and a CPU dl_device with an id other than 0 (DEV-02).
- Valid values to refuse: a dl_device of another dlpack.h device type (DEV-05: BufferError,
  or an export on that device), in a combination of otherwise valid values.
"""
import itertools

from dlconform import kit
from support import attempts as tries
from support import capsules as pycap
from support import readings as rd
from support import tensors as tns
from support.marks import producer


STREAMS = (None, -1, 1, 2, "1")
MAX_VERSIONS = (None, (0, 9), (1, 0), (1, 3), (1, 99), (2, 0))
OWN = "own"
DL_DEVICES = (None, OWN, (1, 1), (2, 0), (10, 0), (14, 0), (16, 0), (1, -1), (2, -1), (99, 0))
COPIES = (None, False, True)
#: device types of dlpack.h v1.3
KNOWN_DEVICE_TYPES = frozenset({1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18})


#: what a clause's own words say a producer refuses (check.must_refuse quotes it); kind "refuse"
#: of _problems breaks one of these, kind "ambiguous" is left open by the spec (a warn)
RULES = rd.REFUSAL_RULES


def _problems(stream, dl_device, own):
    """[(clause, kind, why)] of one combination: kind "refuse" (the export must fail), "class"
    (must fail with BufferError), "ambiguous" (either)."""
    out = []
    if stream is not None:
        if stream == -1:
            out.append(("STR-10", "ambiguous", "stream=-1 asks for no synchronisation, which a CPU producer never "
                        "does anyway"))
        else:
            out.append(("STR-10", "refuse", "stream=%r on the CPU, where only None is valid" % (stream,)))
    if dl_device is not None and tuple(dl_device) != own:
        t, i = dl_device
        if t == own[0] and i > 0:
            out.append(("DEV-05", "ambiguous", "dl_device=%r: a CPU device id other than 0 names no device (DEV-02)"
                        % (dl_device,)))
        elif i < 0 or t not in KNOWN_DEVICE_TYPES:
            out.append(("DEV-05", "refuse", "dl_device=%r is no device (a bad argument)" % (dl_device,)))
        else:
            out.append(("DEV-05", "class", "dl_device=%r, a device the CPU tensor cannot be exported to"
                        % (dl_device,)))
    return out


def _combos(own):
    for stream, mv, dev, copy in itertools.product(STREAMS, MAX_VERSIONS, DL_DEVICES, COPIES):
        yield stream, mv, own if dev == OWN else dev, copy


def _call_text(var, kw):
    return "%s.__dlpack__(%s)" % (var, ", ".join("%s=%r" % kv for kv in kw.items()))


def _lacks_keyword(exc):
    """The keyword a TypeError says __dlpack__ does not take, or None."""
    if not isinstance(exc, TypeError):
        return None
    return next((k for k in ("max_version", "dl_device", "copy", "stream") if pycap.keyword_rejected(exc, k)
                 and k in str(exc)), None)


def _setup(target):
    """(x, its device, whether its producer is legacy-only)."""
    x, _ = tns.make(target, "float32", (2, 3))  # 4-byte items (compare_layout below)
    own = tuple(int(v) for v in x.__dlpack_device__())
    if own != (1, 0):
        raise kit.Unsupported("the target's tensors are not on the CPU (device %r)" % (own,))
    return x, own, pycap.producer_is_legacy_only(x)


def _kwargs(stream, mv, dev, copy, legacy_only):
    """All four keywords (None passed explicitly: API-01 gives each a None default); an old
    producer (stream only) gets the stream alone, and None for the rest of the combination."""
    if legacy_only:
        return None if (mv, dev, copy) != (None, None, None) else {"stream": stream}
    return {"stream": stream, "max_version": mv, "dl_device": dev, "copy": copy}


def _exported(x, own, legacy_only, keep):
    """(problems, kw, capsule or None, exception or None) of x exported with each combination
    whose problems `keep(problems)` selects; skips the combinations an old producer cannot be
    asked and refusals for a keyword it predates. The caller drops the capsule."""
    for stream, mv, dev, copy in _combos(own):
        problems = _problems(stream, dev, own)
        kw = _kwargs(stream, mv, dev, copy, legacy_only)
        if not keep(problems) or kw is None:
            continue
        cap, exc = kit.attempt(lambda: x.__dlpack__(**kw))
        if exc is not None and _lacks_keyword(exc) not in (None, "stream"):
            continue  # a keyword the producer predates: its own checks say so
        yield problems, kw, cap, exc
        del cap


def _bad_combinations(target, check, keep):
    """(table, cases) of the combinations with problems that `keep(problems)` selects: an
    unclean refusal is recorded (the first problem's clause that is not ambiguous), the rest
    are cases (problems, must, call, kw, capsule info or None, exception or None)."""
    table, cases = rd.CombinationTable(check, target), []
    for problems, kw, cap, exc in _exported(*_setup(target), lambda p: p and keep(p)):
        table.reached.update(clause for clause, _, _ in problems)
        info = None if exc is not None else kit.inspect(cap) if pycap.is_capsule(cap) else {}
        del cap
        must, call = [p for p in problems if p[1] != "ambiguous"], _call_text("x", kw)
        if exc is not None and check.unclean(exc):
            table.add((must or problems)[0][0], "fail", "%s raised %s" % (call, check.unclean(exc)))
        else:
            cases.append((problems, must, call, kw, info, exc))
    return table, cases


def _bad_argument(problems):
    return any(kind != "class" for _, kind, _ in problems)


@producer("STR-10", "DEV-05", feeds="argument")
def test_producer_refuses_bad_keywords_in_every_combination(target, check):
    """Every combination with an invalid argument (a stream on the CPU, a dl_device that names
    no device) is refused cleanly. Accepting one the clause's words say is refused (RULES: an int
    stream other than -1 on the CPU, STR-10; a dl_device that names no device, DEV-05) is the
    clause's breach; accepting one the spec leaves open (stream=-1, which asks for nothing; a CPU
    id other than 0), alone or beside another, is a warn (suites/README.md, Grading)."""
    table, cases = _bad_combinations(target, check, _bad_argument)
    for problems, must, call, kw, info, exc in cases:
        if exc is None:
            for clause, kind, why in problems:
                if kind != "ambiguous" or len(problems) == 1:
                    table.add(clause, RULES[clause] if kind == "refuse" else "accepted", "%s was accepted: %s%s" % (
                        call, why, " (the capsule is on device %r)" % (info.get("device"),) if kind == "class" else ""))
    table.close(("STR-10", "DEV-05"))


@producer("DEV-05", feeds="valid")
def test_producer_refuses_devices_it_cannot_serve_in_every_combination(target, check):
    """Every combination of valid values but a dl_device of another dlpack.h device type the
    CPU tensor cannot be exported to: refused with BufferError (DEV-05), or exported on that
    device."""
    table, cases = _bad_combinations(target, check, lambda problems: not _bad_argument(problems))
    for problems, must, call, kw, info, exc in cases:
        if exc is not None:
            if not isinstance(exc, BufferError):
                table.add("DEV-05", "fail", "%s raised %s: %s; DEV-05 names BufferError"
                          % (call, tries.describe_exc(exc, 160), must[0][2]))
        elif tuple(info.get("device") or ()) != tuple(kw["dl_device"]):
            table.add("DEV-05", "fail", "%s was accepted: %s, and the capsule is on device %r"
                      % (call, must[0][2], info.get("device")))
    table.close(("DEV-05",))


# ---------------------------------------------------------------------------- valid combinations
def _expect_kind(mv):
    """The capsule kind max_version asks for, and its clause: None -> legacy (VER-02); an
    older major -> legacy or BufferError (VER-04); major 1 and newer -> versioned (VER-03)."""
    if mv is None:
        return pycap.LEGACY, "VER-02"
    if mv[0] < 1:
        return pycap.LEGACY, "VER-04"
    return pycap.VERSIONED, "VER-03"


def _copy_clause(copy):
    return {True: "CPY-01", False: "CPY-02", None: "CPY-03"}[copy]


def _judge_export(table, x, kw, info, cap, native, expected, baseline):
    """One accepted valid combination: kind and version, flags, device, memory, values."""
    mv, copy, call = kw.get("max_version"), kw.get("copy"), _call_text("x", kw)
    name, clause = _expect_kind(mv)
    if info.get("name") != name:
        table.add(clause, "fail", "%s gave a %r capsule, expected %r" % (call, info.get("name"), name))
        return
    flags = info.get("flags") or 0
    if name == pycap.VERSIONED and not info.get("readable", True):
        table.add("VER-03", "fail", "%s answered with a versioned capsule of version %r, whose fields a consumer "
                  "of major 1 cannot read" % (call, info.get("version")))
        return
    if name == pycap.VERSIONED:
        v = tuple(info.get("version") or ())
        if v not in (baseline, tuple(mv)):
            table.add("VER-03", "fail", "%s stamped version %r: neither the producer's own %r nor max_version"
                      % (call, v, baseline))
    if tuple(info.get("device") or ()) != tuple(x.__dlpack_device__()):
        table.add("DEV-04", "fail", "%s exported on device %r, the tensor's is %r"
                  % (call, info.get("device"), tuple(x.__dlpack_device__())))
        return
    first = None if info.get("data") is None else info["data"] + info["byte_offset"]
    if native is not None and first is not None:
        moved = first != native
        if copy is True and not moved:
            table.add("CPY-01", "fail", "%s exported the tensor's own memory" % call)
        elif copy is not True and moved:
            table.add(_copy_clause(copy), "fail", "%s exported other memory (%#x, the tensor's is at %#x)"
                      % (call, first, native))
        if name == pycap.VERSIONED and moved and not flags & pycap.FLAG_IS_COPIED:
            table.add("FLG-04", "fail", "%s copied (flags %#x) without IS_COPIED" % (call, flags))
    if copy is True and name == pycap.VERSIONED and not flags & pycap.FLAG_IS_COPIED:
        table.add("FLG-04", "fail", "%s: flags %#x lack IS_COPIED" % (call, flags))
    if tns.compare_layout(table.target, x, info, 4):
        return  # a layout that does not describe the tensor is the layout checks' (LAY-05)
    try:
        got = kit.read_elements(cap)
    except ValueError as e:
        table.add(_copy_clause(copy), "fail", "%s: the export cannot be read (%s)" % (call, e))
        return
    if got != expected:
        table.add(_copy_clause(copy), "fail", "%s: values %s, the tensor's %s" % (call, got[:8].hex(),
                                                                                 expected[:8].hex()))


VALID_CLAUSES = ("VER-02", "VER-03", "VER-04", "DEV-04", "DEV-06", "CPY-01", "CPY-02", "CPY-03", "FLG-04")


@producer(*VALID_CLAUSES, feeds="valid")
def test_producer_honours_every_valid_keyword_combination(target, check):
    """Every combination of valid values exports what it asks for: the capsule kind of
    max_version, a version of the producer's or max_version's, the tensor's device, its own
    memory unless copy=True, a copy with IS_COPIED when copy=True, and the tensor's values.
    Refusals: BufferError for an older or newer major (VER-04, VER-01); refusing its own device
    is warn (DEV-06); any other refusal fails the clause of the keyword it concerns."""
    x, own, legacy_only = _setup(target)
    baseline = None
    if not legacy_only:
        try:
            baseline = tuple(kit.inspect(x.__dlpack__(max_version=pycap.SUITE_VERSION)).get("version") or ())
        except Exception as e:  # noqa: BLE001
            raise kit.Unsupported("the plain versioned export raises %s" % tries.describe_exc(e))
    native, expected = tns.native_ptr(target, x), target.expected(x)
    table = rd.CombinationTable(check, target)
    for _, kw, cap, exc in _exported(x, own, legacy_only, lambda problems: not problems):
        mv, dev, copy = kw.get("max_version"), kw.get("dl_device"), kw.get("copy")
        table.reached.update([_expect_kind(mv)[1], "DEV-04", _copy_clause(copy)] + (["DEV-06"] if dev == own else [])
                             + (["FLG-04"] if mv is not None and mv[0] >= 1 else []))
        if exc is not None:
            call = "%s raised %s" % (_call_text("x", kw), tries.describe_exc(exc, 160))
            if isinstance(exc, BufferError) and mv is not None and mv[0] != 1:
                continue  # another major may be refused (VER-04, VER-01)
            if dev == own and not check.unclean(exc):
                table.add("DEV-06", "warn", "%s: a library should export to its own device this way" % call)
            elif copy is True:
                verdict, why = rd.copy_refused(exc)
                table.add("CPY-01", verdict, "%s: %s" % (_call_text("x", kw), why))
            elif copy is not None:
                table.add(_copy_clause(copy), "fail", call)
            else:
                table.add(_expect_kind(mv)[1], "fail", call)
        else:
            info = kit.inspect(cap) if pycap.is_capsule(cap) else {"name": type(cap).__name__}
            _judge_export(table, x, kw, info, cap, native, expected, baseline)
            del cap
    table.close(VALID_CLAUSES)
