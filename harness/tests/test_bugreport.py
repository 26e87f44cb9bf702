"""`dlconform report`: bug reports whose reproducers need only the library, Python and ctypes
(issue 13, item 5)."""
import gc
import json
import os
import shutil
import subprocess
import sys

import pytest

import fault_repros as fr
from dlconform import _probe, _ref
from dlconform.bugreport import kit, markdown, standalone
from dlconform.producers import RecordingProducer

#: (fault, test function) -> why its standalone script does not reproduce with the kit (seen, to fix)
KIT_EXCEPTIONS = {
}

FORGES = [dict(shape=(2, 3)), dict(shape=(3, 2), strides=(1, 3), dtype=(1, 16, 1)),
          dict(shape=(4,), byte_offset=8, versioned=False), dict(shape=(2, 2), strides=(-2, 1), byte_offset=8),
          dict(shape=(0, 3), data="null"), dict(shape=(3,), version=(2, 0), flags=1, device=(2, 1)),
          dict(shape=(-1,), buffer_size=16), dict(shape=(1 << 62, 4), buffer_size=64),
          # a 0-d tensor may have a NULL shape (LAY-08); ndim > 0 may not (LAY-09)
          dict(shape=(), shape_null=True, dtype=(1, 8, 1)), dict(shape=(2,), shape_null=True)]
FIELDS = ("name", "kind", "version", "flags", "device", "ndim", "dtype", "shape", "strides", "byte_offset")


@pytest.mark.parametrize("kw", FORGES)
def test_kit_forges_what_ref_forges(kw):
    mine, theirs = kit.Forge(**kw), _ref.Forge(**kw)
    a, b = kit.inspect(mine.capsule()), _probe.inspect(theirs.capsule())
    assert {k: a[k] for k in FIELDS} == {k: b.get(k) for k in FIELDS}
    ca, cb = mine.capsule(), theirs.capsule()
    if not b.get("readable", True):
        for reader, cap in ((kit.extent, ca), (_probe.extent, cb), (kit.read_elements, ca)):
            with pytest.raises(ValueError):
                reader(cap)
        return
    assert kit.extent(ca)["status"] == _probe.extent(cb)["status"]
    if kit.extent(ca)["status"] == "ok":
        assert kit.read_elements(ca) == _probe.read_elements(cb)
        assert mine.expected_elements() == theirs.expected_elements()


def test_kit_capsules_give_the_tensor_back_once():
    f = kit.Forge(shape=(2, 3))
    y = _ref.from_dlpack(RecordingProducer(f))
    assert f.deleter_calls == 0 and bytes(y.tobytes()) == f.expected_elements()
    del y
    assert f.deleter_calls == 1
    f.capsule()  # dropped unconsumed: the destructor calls the deleter
    assert f.deleter_calls == 2


SHUTDOWN = """
holders = []
for versioned in (True, False):
    f = Forge(versioned=versioned)
    cap = f.capsule()
    t = _probe.instrument(cap)
    holders.append((f, t, _probe.consume(cap), f.capsule(), cap))
print("held until exit")
"""


def test_kit_callbacks_survive_interpreter_shutdown(tmp_path):
    """A library may keep a kit capsule's tensor until the interpreter exits: the deleter,
    destructor and trampoline then run after the script's globals are cleared, and must still
    work silently (a standalone script that behaves exits 0 with nothing on stderr)."""
    script = tmp_path / "shutdown.py"
    script.write_text("\n".join([standalone._source(standalone._snippet), standalone._source(kit), standalone.GLUE,
                                  SHUTDOWN]))
    proc = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout.strip(), proc.stderr) == (0, "held until exit", ""), proc.stderr[-2000:]
@pytest.mark.parametrize("forge", [kit.Forge, _ref.Forge], ids=["kit", "ref"])
def test_a_second_deleter_call_is_counted(forge):
    """A consumer that gives the tensor back on a refusal but leaves the capsule's name (an
    OWN-03 breach) makes the destructor call the deleter a second time: the kit's forge counts
    it, as ref's does (its structs live as long as the forge, not until the first call)."""
    f = forge(shape=(2, 3))
    cap = f.capsule()
    info = kit.inspect(cap)
    kit._Deleter(info["deleter"])(info["pointer"])
    assert f.deleter_calls == 1
    del cap
    assert f.deleter_calls == 2


def test_a_body_keeps_apart_from_the_inlined_helpers():
    """A reproducer's own name that the inlined code also defines (snippet.py's `_names`, the
    kit's `_name_of`) is renamed in the script, its uses with it; attributes and strings are not."""
    body = "_names = [1]\nx = _names[0] + len(y._names)\nprint('_names')\nimport ctypes\n[n for n in x]\n"
    assert standalone.unshadow(body, {"_names", "ctypes", "n"}) == (
        "_names_r = [1]\nx = _names_r[0] + len(y._names)\nprint('_names')\nimport ctypes\n[n for n in x]\n")
    snippet = "\n".join(["# run: python3 repro.py", "from dlconform import _probe, _ref", "_names = ['x']",
                          "_name_of = len", "expect_raises(lambda: 1 / 0, 'X-01', 'it', KeyError)"])
    text, why = standalone.script(snippet, "numpy")
    assert why is None and "_names_r = ['x']" in text and "_name_of_r = len" in text
    p = subprocess.run([sys.executable, "-I", "-c", text], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "REPRODUCED X-01: it raised ZeroDivisionError" in p.stdout, p.stderr


FOCUSED = "\n".join(["# run: python3 repro.py", "from dlconform import _probe, _ref",
                     "expect(False, 'A-01', 'first')", "expect_equal(1, 2, 'B-02', 'second')",
                     "y = None if %s else 0", "print(y.real)"])


@pytest.mark.parametrize("clause, bug, rc, line", [
    (None, True, 1, "REPRODUCED A-01: first"),
    ("B-02", True, 1, "REPRODUCED B-02: second: got 1, expected 2"),
    ("B-02", False, 3, "UNDETERMINED B-02: the script stopped before it reached B-02, after the finding of A-01"),
    ("C-03", True, 1, "REPRODUCED A-01: first"),  # the snippet never asserts C-03: no focus
])
def test_script_about_one_clause(clause, bug, rc, line):
    """A report's script is about the report's clause: another clause's finding is printed as
    ALSO and the script goes on; it exits 3 (UNDETERMINED) when it then cannot."""
    snippet = FOCUSED % ("True" if not bug else "False")
    if clause == "B-02" and not bug:
        snippet = snippet.replace("expect_equal(1, 2,", "expect_equal(2, 2,")
    text, why = standalone.script(snippet, "numpy", clause)
    assert why is None
    p = subprocess.run([sys.executable, "-I", "-c", text], capture_output=True, text=True, timeout=60)
    out = p.stdout.strip().splitlines()
    assert (p.returncode, out[-1]) == (rc, line), (p.stdout, p.stderr[-500:])
    assert ("ALSO A-01: first" in p.stdout) == (clause == "B-02")


def test_script_about_a_fixed_clause_exits_0():
    snippet = FOCUSED.replace("expect_equal(1, 2,", "expect_equal(2, 2,") % "False"
    text, _ = standalone.script(snippet, "numpy", "B-02")
    p = subprocess.run([sys.executable, "-I", "-c", text], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "ALSO A-01: first" in p.stdout, (p.stdout, p.stderr[-500:])


def _tables():
    """Objects whose exchange API table _probe.exchange_api reads, in each form it tells apart."""
    v13 = _ref.ApiForge(0)
    major2 = _ref.ApiForge(1, major=2, prev_api="ref")

    def holder(on_type=True, **attrs):
        cls = type("Holder", (), attrs if on_type else {})
        obj = cls()
        if not on_type:
            obj.__dict__.update(attrs)
        return obj

    forge = kit.Forge()  # outlives its capsule: the capsule's destructor is the forge's
    caps = [_ref.Tensor("float32", (2, 3)), type(_ref.Tensor("float32", (2,)))]
    return [v13, major2, forge], caps + [
        holder(__dlpack_c_exchange_api__=major2.capsule()), holder(False, __dlpack_c_exchange_api__=v13.capsule()),
        holder(__c_dlpack_exchange_api__=v13.pointer), holder(__dlpack_c_exchange_api__=v13.pointer),
        holder(__c_dlpack_exchange_api__=-1), holder(__c_dlpack_exchange_api__=0),
        holder(__dlpack_c_exchange_api__=None), holder(__dlpack_c_exchange_api__=forge.capsule()),
        holder(), object()]


def test_kit_reads_exchange_tables_as_probe():
    """kit.exchange_api gives _probe.exchange_api's dict for a table in every form: a capsule on
    the type or the instance only, another major (header only, XAPI-06), the v1.2 int (XAPI-03),
    an int under the v1.3 name, a negative or zero int, None, a capsule of another name, none."""
    keep, objects = _tables()
    for obj in objects:
        assert kit.exchange_api(obj) == _probe.exchange_api(obj), obj
    assert kit.exchange_api(objects[2])["functions"] is None and kit.exchange_api(objects[2])["version"] == (2, 3)
    del objects
    gc.collect()  # the capsules die before their forges
    del keep


def _same_call(a, b):
    """Two results of an xapi_* call alike: handles by their tensor's fields, exceptions by type
    and message, dicts by their items but the data address (each call exports anew)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same_call(x, y) for x, y in zip(a, b))
    if isinstance(a, BaseException) or isinstance(b, BaseException):
        return type(a) is type(b) and str(a) == str(b)
    if hasattr(a, "inspect") and hasattr(b, "inspect"):
        drop = ("pointer", "data", "deleter", "manager_ctx", "name", "destructor")
        same = {k: v for k, v in a.inspect().items() if k not in drop} == {
            k: v for k, v in b.inspect().items() if k not in drop}
        return same and a.release() and b.release()
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: v for k, v in a.items() if k != "data"} == {k: v for k, v in b.items() if k != "data"}
    return a == b


def test_kit_calls_exchange_tables_as_probe():
    """kit.xapi_* call ref's table as _probe.xapi_* do (probes/probe/xapi.c): an export and a
    refusal of managed_tensor_from_py_object_no_sync (XAPI-14), dltensor_from (XAPI-15), the
    allocator on a valid and an invalid prototype with its SetError records (XAPI-13), and
    to_py stealing its tensor (XAPI-17); a NULL function (XAPI-09) and another major (XAPI-06)
    are refused, not called."""
    x = _ref.Tensor("float32", (2, 3))
    api = _probe.exchange_api(type(x))["pointer"]
    for obj in (x, object(), _ref.Tensor("float32", (2, 3), exportable=False)):
        assert _same_call(kit.xapi_managed_from(api, obj), _probe.xapi_managed_from(api, obj)), obj
        assert _same_call(kit.xapi_dltensor_from(api, obj), _probe.xapi_dltensor_from(api, obj)), obj
    for proto in (((2, 32, 1), (2, 3), (1, 0)), ((250, 32, 1), (2,), (1, 0)), ((2, 32, 1), (), (2, 0))):
        assert _same_call(kit.xapi_alloc(api, *proto), _probe.xapi_alloc(api, *proto)), proto
    results = []
    for probe in (kit._probe, _probe):
        cap = _ref.Tensor("float32", (2, 3)).__dlpack__(max_version=(1, 3))  # a tensor of its own
        tracker, handle = _probe.instrument(cap), probe.consume(cap)
        rc, y = probe.xapi_to_py(api, handle)
        del handle
        results.append((rc, type(y), tracker.calls))
        del y
        gc.collect()
        results.append(tracker.calls)
    assert results[:2] == results[2:] == [(0, type(x), 0), 1]
    null, major2 = _ref.ApiForge(0, null=["managed_tensor_from_py_object_no_sync"]), _ref.ApiForge(1, major=2)
    for table, kind in ((null.pointer, NotImplementedError), (major2.pointer, ValueError)):
        for probe in (kit._probe, _probe):
            with pytest.raises(kind):
                probe.xapi_managed_from(table, x)


def test_kit_reads_a_pending_exception_as_failure_only_without_output():
    """ctypes drops a table function's return code when it leaves an exception pending: the kit
    reads that as the header's -1 when the function wrote nothing, and will not guess once it
    wrote its output (a success with an exception set, which the probe reports, looks the same)."""
    def fails():
        raise BufferError("cannot export")

    rc, exc = kit._xapi_call(fails, "f", lambda: False)
    assert rc == -1 and isinstance(exc, BufferError)
    assert kit._xapi_call(lambda: 0, "f", lambda: True) == (0, None)
    with pytest.raises(RuntimeError, match="cannot tell a failure from a success"):
        kit._xapi_call(fails, "f", lambda: True)


@pytest.mark.parametrize("flags, rc", [(2, 0), (0, 1)])
def test_a_script_inlines_the_producers(flags, rc):
    """dlconform.producers is inlined as it is (CopyingProducer included), forging with the
    kit's Forge: its copy=True export is a versioned capsule flagged IS_COPIED (CPY-01)."""
    snippet = "\n".join(["# run: python3 repro.py", "from dlconform import _probe, _ref",
                          "from dlconform.producers import CopyingProducer, RecordingProducer",
                          "p = CopyingProducer(shape=(2, 3))", "cap = p.__dlpack__(max_version=(1, 3), copy=True)",
                          "expect_equal(_probe.inspect(cap)['flags'], %d, 'CPY-01', 'flags of a copy')" % flags])
    text, why = standalone.script(snippet, "numpy")
    assert why is None and text.count("class CopyingProducer(RecordingProducer):") == 1
    p = subprocess.run([sys.executable, "-I", "-c", text], capture_output=True, text=True, timeout=60)
    assert p.returncode == rc, p.stdout + p.stderr


@pytest.mark.parametrize("versioned", [True, False])
def test_kit_instrument_consume_rename_as_probe(versioned):
    for probe, forge in ((kit._probe, kit.Forge(versioned=versioned)), (_probe, _ref.Forge(versioned=versioned))):
        cap = forge.capsule()
        name = probe.inspect(cap)["name"]
        t = probe.instrument(cap)
        h = probe.consume(cap)
        assert probe.inspect(cap)["name"] == "used_" + name and probe.inspect(cap)["kind"] == "used"
        assert h.read_elements() == forge.expected_elements() and h.inspect()["shape"] == (4,)
        del cap
        assert (t.calls, forge.deleter_calls) == (0, 0)
        assert h.release() and not h.release()
        assert (t.calls, forge.deleter_calls, t.original_null) == (1, 1, False)
        with pytest.raises(ValueError):
            probe.rename(forge.capsule(), "other")


def _results(records):
    return {"environment": {"python": {"version": "3.11.2", "implementation": "CPython"}, "platform": "Linux-x",
                            "machine": "x86_64", "dlpack_header": [1, 3]},
            "targets": {}, "results": records}


def _report(tmp_path, records, *args):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_results(records)))
    out = tmp_path / "reports"
    p = subprocess.run([sys.executable, "-m", "dlconform", "report", "--results", str(path), str(out), *args],
                       env=fr._env(), capture_output=True, text=True, timeout=120)
    return p, sorted(out.glob("*.md")) if out.exists() else []


def test_report_writes_one_file_per_finding(fault_findings, tmp_path):
    ref = [r for r in fault_findings if r["library"] == "ref"]
    p, files = _report(tmp_path, ref, "--all-findings", "-q")
    assert p.returncode == 0, p.stderr
    assert len(files) == len({(r["target"], r["clause"], r["test"]) for r in ref})
    text = files[0].read_text()
    for heading in ("## Versions", "## The requirement", "Where it is written:", "## Expected behaviour",
                    "## Actual behaviour", "## Reproducer", "| dlpack.h | 1.3 |"):
        assert heading in text
    one = ref[0]
    p, files = _report(tmp_path / "one", ref, "--target", one["target"], "--clause", one["clause"])
    assert p.returncode == 0 and files and all(one["clause"] in f.name for f in files)
    p, _ = _report(tmp_path / "none", ref, "--clause", "LAY-*")
    assert p.returncode == 2 and "--all-findings" in p.stderr


def _library_folder(tmp_path):
    """A folder with the libraries as a standalone script finds them beside it: ref's module,
    pyref's folder (which imports nothing from dlconform)."""
    from dlconform import pyref

    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copy(_ref.__file__, lib)
    shutil.copytree(os.path.dirname(pyref.__file__), lib / "pyref", ignore=shutil.ignore_patterns("__pycache__"))
    return lib


def _on_and_off(item, lib):
    """None when the standalone script of ((library, fault, name), text) exits non-zero under the
    fault and 0 with it off (no dlconform on the path), else what it did."""
    (library, fault, name), text = item
    slug = fr.slug("%s_%s" % (fault, name))
    rc_on, out_on = fr.run(text, lib, slug + "_on", env={}, args=("-E", "-s"))
    rc_off, out_off = fr.run(fr.fault_off(text, library, fault), lib, slug + "_off", env={}, args=("-E", "-s"))
    if rc_on in (0, None) or rc_off != 0:
        return "%s %s: under the fault exit %s (%s); fault off exit %s (%s)" % (
            fault, name, rc_on, fr.tail(out_on, 1), rc_off, fr.tail(out_off, 1))
    return None


@pytest.mark.parametrize("library", ["ref", "pyref"])
def test_standalone_reproducers_of_faults(fault_findings, tmp_path, library):
    """Each fault's standalone script runs with no dlconform on the path (the library itself
    beside it: ref's module, pyref's folder): non-zero under the fault, 0 with the fault off."""
    lib = _library_folder(tmp_path)
    scripts, none = {}, {}
    for r in fault_findings:
        if r["library"] != library:
            continue
        text, why = standalone.script(r["repro"], r["target"], r["clause"])  # about the fault's clause
        key = (r["fault"], r["test"].split("::")[-1].split("[")[0])
        if text is None:
            none.setdefault(why, set()).add(key)
        elif key not in KIT_EXCEPTIONS:
            scripts.setdefault(key, text)  # the records of one test share their reproducer

    items = [((library, fault, test), text) for (fault, test), text in sorted(scripts.items())]
    bad = [b for b in fr.run_many(lambda item: _on_and_off(item, lib), items) if b]
    seen = {(r["fault"], r["test"].split("::")[-1].split("[")[0]) for r in fault_findings}
    bad += ["kit exception %r names no record any more" % (k,) for k in sorted(set(KIT_EXCEPTIONS) - seen)]
    print("\n%s: %d standalone scripts; none for %d: %s" % (library, len(scripts), sum(map(len, none.values())),
                                                           {w: len(k) for w, k in none.items()}))
    assert len(scripts) >= {"ref": 150, "pyref": 85}[library]  # 161 and 91 when written
    assert not bad, "\n".join(bad)


#: faults the fuzz-seed check (suites/test_fuzz_seeds.py) catches on some shared seeds, on the
#: rules of seedrules.judge: the rename (CAP-03), the values (LAY-11), the calls (STR-10), the
#: deleter accounting (OWN-03), the strides read (LAY-11)
SEED_FAULTS = ("ref:fault=consumer_no_rename", "ref:fault=consumer_ignores_byte_offset",
               "ref:fault=consumer_stream_for_cpu", "pyref:fault=consumer_double_delete",
               "pyref:fault=consumer_strides_as_bytes")


def test_standalone_reproducers_of_fuzz_seeds(tmp_path):
    """The fuzz-seed check's findings have standalone scripts: the seed's facts as literals and
    dlconform/seedrules.py inlined (no dlconform on the path). Each exits non-zero under a fault
    the check catches and 0 with the fault off; a seed offering an exchange table has none."""
    from dlconform import SUITES_DIR

    suites = tmp_path / "suites"  # the suites' support with test_fuzz_seeds.py alone
    suites.mkdir()
    for entry in os.listdir(SUITES_DIR):
        if not entry.startswith("test_") or entry == "test_fuzz_seeds.py":
            os.symlink(os.path.join(SUITES_DIR, entry), suites / entry)
    out = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "dlconform", "run", "--suites", str(suites), "--out", str(out), "-q",
                    "-j", "1", *("--target=" + spec for spec in SEED_FAULTS)],
                   env=fr._env(), capture_output=True, timeout=600)
    records = [r for r in json.loads((out / "results.json").read_text())["results"] if r["verdict"] in fr.FINDINGS]
    scripts, none = {}, {}
    for r in records:
        assert "test_consumer_shared_fuzz_seed" in r["test"], r
        library, fault = r["target"].split(":fault=")
        key = (library, fault, r["test"].split("[")[-1].rstrip("]"))
        text, why = standalone.script(r["repro"], r["target"], r["clause"])
        if text is None:
            none[key] = why
        else:
            scripts.setdefault(key, text)
    assert {k[1] for k in scripts} == {spec.split("=")[1] for spec in SEED_FAULTS}
    assert all(k[2].startswith("offer-") for k in none), none
    lib = _library_folder(tmp_path)
    bad = [b for b in fr.run_many(lambda item: _on_and_off(item, lib), sorted(scripts.items())) if b]
    print("\n%d standalone scripts of fuzz-seed findings; none for %d offering an exchange table" % (
        len(scripts), len(none)))
    assert not bad, "\n".join(bad)


def test_standalone_reproducers_against_host_torch(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "dlconform", "run", "--target", "torch", "--clause", "LAY-03,OWN-03,STR-10,CAP-07",
                    "--out", str(out), "-q"], env=fr._env(), capture_output=True, timeout=300)
    results = json.loads((out / "results.json").read_text())
    paths = markdown.write(results, str(tmp_path / "reports"))
    scripts = [s for s in (markdown.standalone_script(open(p).read()) for p in paths) if s]
    if not scripts:
        pytest.skip("this torch has no finding on these clauses")
    for i, text in enumerate(scripts):
        rc, output = fr.run(text, tmp_path / "scripts", "torch_%d" % i, env={}, args=("-I",))
        assert rc not in (0, None) and (rc < 0 or "REPRODUCED " in output), (rc, fr.tail(output))
    # where they ran, dlconform cannot be imported
    p = subprocess.run([sys.executable, "-I", "-c", "import dlconform"], env={}, cwd=tmp_path, capture_output=True)
    assert p.returncode != 0
