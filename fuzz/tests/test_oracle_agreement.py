"""The Python reproducers hold to the C targets' oracles (run by `make fuzz-test`).

For every seed of fuzz/corpus/seeds and a fixed set of mutants of them, the C target and
the Python reproducer that dlconform.fuzz.repro writes give one verdict (verdicts.py): no
finding, the same finding key (clause and message, numbers as N: what fuzz/known/ files list,
so a reproducer sets aside what fuzz-ci does), or both a plain crash.
- Consumer: against ref clean and against each consumer-side fault of ref that the
  consumer target can reach (fuzz/ci/unfuzzable.txt lists the others); in the CUDA mode
  (ref@cuda, dlconform.pyref@cuda) against the faults of their imports of CUDA memory.
- Producer: against ref clean and against each producer-side fault of ref; in the CUDA mode
  (producer-ref@cuda, producer-dlconform.pyref@cuda) against ref's and pyref's device faults;
  a library's own arrays (producer-dlconform.pyref) against pyref's host producer faults.
Each consumer fault must be found on some input, so that every config tests an oracle
that fires.
The one exception is the reproducer's blind spot (verdicts.UNSEEN, exchange.py): such a
pair counts as unseen, not as a disagreement; the test prints how many there were.
"""
import concurrent.futures
import os
import random
import tempfile

import verdicts as V  # first: it puts harness/ on sys.path
from dlconform.fuzz import record as R

SEEDS = os.path.join(V.ROOT, "fuzz", "corpus", "seeds")
MUTANTS_PER_SEED = 4

# One field edit each; a mutant takes one to three.
EDITS = (
    lambda r, g: r.update(kind=r["kind"] ^ (1 << g.randrange(7))),
    lambda r, g: r.update(kw=r["kw"] ^ (1 << g.randrange(6))),
    lambda r, g: r.update(copy=g.randrange(3), kw=r["kw"] | R.KW["copy"]),
    lambda r, g: r.update(stream_kind=g.randrange(3), stream=g.choice((-1, 0, 1, 2, 7)), kw=r["kw"] | R.KW["stream"]),
    lambda r, g: r.update(kw_device=g.choice(((1, 0), (2, 0), (1, 3), (10, 0), (2, -1), (99, 0))),
                          kw=r["kw"] | R.KW["dl_device"]),
    lambda r, g: r.update(device=g.choice(((1, 0), (2, 0), (10, 0), (3, 0), (13, 1), (99, 0), (1, 2)))),
    lambda r, g: r.update(version=g.choice(((1, 3), (1, 0), (2, 0), (0, 9), (1, 99)))),
    lambda r, g: r.update(flags=g.choice((0, 1, 2, 3, 4))),
    lambda r, g: r.update(byte_offset=g.choice((0, 4, 8, 12, 1 << 62))),
    lambda r, g: r.update(dtype=g.choice(((2, 32, 1), (0, 8, 1), (1, 8, 1), (5, 64, 1), (6, 8, 1), (2, 16, 1),
                                          (4, 16, 1), (2, 32, 4), (1, 4, 1), (0, 0, 1), (99, 8, 1), (2, 32, 0)))),
    lambda r, g: r.update(offer=g.randrange(16)),
    lambda r, g: r.update(max_version=g.choice(((1, 3), (0, 9), (2, 0))), kw=r["kw"] | R.KW["max_version"]),
    lambda r, g: _edit_dim(r, g, "strides", (0, -1, 1, 2, 3, 7, -4)),
    lambda r, g: _edit_dim(r, g, "shape", (0, 1, 2, 5, -1, 1 << 40)),
    lambda r, g: r.update(seed=g.randrange(256)),
    # pairs of fields that only break a rule together
    lambda r, g: r.update(device=g.choice(((2, 0), (10, 0))), stream_kind=1, stream=g.choice((0, 1, 2, -1)),
                          kw=r["kw"] | R.KW["stream"]),
    lambda r, g: r.update(device=g.choice(((2, 0), (10, 0))), kw_device=(1, 0), copy=g.randrange(3),
                          kw=r["kw"] | R.KW["dl_device"] | R.KW["copy"]),
    lambda r, g: r.update(dtype=g.choice(((99, 8, 1), (2, 24, 1), (1, 8, 3))), kind=r["kind"] & ~R.KIND["used"]),
)


def _edit_dim(r, g, field, values):
    if r["ndim"] > 0:
        dims = list(r[field])
        dims[g.randrange(len(dims))] = g.choice(values)
        r[field] = tuple(dims)


#: metadata no seed has and random edits rarely make, applied to every seed of ndim > 0 that
#: it changes: ndim < 0 (LAY-09) and a NULL shape with ndim > 0 (LAY-09). Seeds that offer an
#: exchange table are left out: there the input breaks two rules at once (the table's hand-out,
#: XAPI-*, and the metadata), and which one a side reports first is the order it checks in
EDGES = {
    "ndim-neg": lambda r: r.update(ndim=-1, shape=(), strides=()),
    "shape-null": lambda r: r.update(kind=r["kind"] | R.KIND["shape_null"]),
}


def _write(tmp, name, rec, paths):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(R.encode(rec))
    paths.append(path)


def inputs(tmp):
    """The seeds, MUTANTS_PER_SEED deterministic mutants of each, and each EDGES edit of each
    seed with ndim > 0, as files in tmp. Each seed's mutants come from a generator of its own,
    seeded by its name: a new seed leaves every other seed's mutants as they were."""
    paths = []
    for name in sorted(os.listdir(SEEDS)):
        g = random.Random("20240614:" + name)
        data = open(os.path.join(SEEDS, name), "rb").read()
        paths.append(os.path.join(SEEDS, name))
        for i in range(MUTANTS_PER_SEED):
            rec = R.decode(data)
            for _ in range(g.randint(1, 3)):
                g.choice(EDITS)(rec, g)
            _write(tmp, "%s-m%d" % (name, i), rec, paths)
        for edge, edit in EDGES.items():
            rec = R.decode(data)
            if rec["ndim"] > 0 and not rec["kind"] & R.KIND["shape_null"] and not R.offer_kind(rec):
                edit(rec)
                _write(tmp, "%s-%s" % (name, edge), rec, paths)
    return paths


def faults(side):
    from dlconform import _ref

    with open(os.path.join(V.ROOT, "fuzz", "ci", "unfuzzable.txt")) as f:
        unfuzzable = {line.split()[0] for line in f if line.strip() and not line.startswith("#")}
    return sorted(n for n, s in _ref.FAULT_SIDES.items() if s == side and n not in unfuzzable)


def compare(target, configs):
    """(disagreements [(config, input, C, Python)], configs whose fault nothing found,
    number of unseen pairs) over every config: None (clean) or a fault of ref."""
    rows, silent, unseen = [], [], 0
    with tempfile.TemporaryDirectory(prefix="agreement-") as tmp:
        paths = inputs(tmp)
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0))) as pool:
            jobs = [(fault, pool.submit(V.c_verdicts, target, V.env(target, fault), paths, tmp, keys=True),
                     pool.submit(V.py_verdicts, target, V.env(target, fault), paths, keys=True)) for fault in configs]
            for fault, c_job, py_job in jobs:
                c, py = c_job.result(), py_job.result()
                if fault and all(v == V.NO_FINDING for v in c.values()):
                    silent.append(fault)
                for p in paths:
                    if c[p].startswith(V.PLAIN_CRASH) and py[p] == V.PLAIN_CRASH:
                        continue  # the same crash, with or without the sanitizer's name for it
                    if c[p].startswith(V.PLAIN_CRASH + " (") and py[p] == V.NO_FINDING:
                        unseen += 1
                    elif c[p] != py[p]:
                        rows.append((fault or "clean", os.path.basename(p), c[p], py[p]))
        print("%s: %d inputs x %d configs; %d pair(s) unseen by the reproducer (ASan reports); "
              "faults found by no input: %s" % (target, len(paths), len(configs), unseen, len(silent)))
    return rows, silent


#: consumer faults the fixed inputs here (seeds and their mutants) do not reach, though the
#: fuzzer finds them within seconds (fuzz/ci/smoke.sh): both sides are still compared on them
REACHED_BY_FUZZING_ONLY = {
    "consumer_xapi_trusts_handout": "needs a table offer whose hand-out carries another major version",
}
#: consumer faults no fuzz input can show, each with the check that catches it instead
NOT_FUZZABLE = {
    "consumer_release_dies_at_exit": "dies only as the interpreter finalises, after every input ran: "
                                     "test_ownership.py::test_imports_alive_at_interpreter_exit catches it",
}


def _assert_agree(target, configs, every_fault_found):
    rows, silent = compare(target, configs)
    silent = [f for f in silent if f not in REACHED_BY_FUZZING_ONLY and f not in NOT_FUZZABLE]
    report = "\n".join("%-34s %-44s C: %-14s Python: %s" % r for r in rows[:40])
    assert not rows, "%s: the C target and the Python reproducer disagree (%d):\n%s" % (target, len(rows), report)
    assert not (every_fault_found and silent), "%s: no input finds these faults: %s" % (target, ", ".join(silent))


def test_consumer_reproducers_agree_with_the_consumer_target():
    """Every consumer fault of ref is found (the ones the target cannot reach are listed). A
    cuda_* fault acts in ref's import of CUDA memory: the CUDA mode's test judges it."""
    _assert_agree("ref", [None] + [f for f in faults("consumer") if not f.startswith("cuda_")],
                  every_fault_found=True)


#: pyref's faults of its import of CUDA memory (device_from_dlpack) that the seeds and their
#: mutants show in the CUDA mode. Fuzzing finds two more within 15 s: rejects_null_data (as
#: LAY-04) and lands_on_host (as API-05, through an old producer); no_sync is STR-01 (the export's
#: bytes pending on the producer's stream, devmem.h); the rest break what no fuzz
#: oracle judges (which stream it names, a 0-d or dtype refusal, the max_version's type).
PYREF_CUDA_FAULTS = ("cuda_consumer_passes_zero", "cuda_consumer_ignores_offset", "cuda_consumer_ignores_strides",
                     "cuda_consumer_unchecked", "cuda_consumer_copy_ignored", "cuda_consumer_host_copy_false",
                     "cuda_consumer_device_ignored", "cuda_consumer_valueerror", "cuda_consumer_no_retry",
                     "cuda_consumer_column_major", "cuda_consumer_no_sync", "cuda_consumer_ignores_context")


def test_cuda_mode_reproducers_agree_with_the_consumer_target():
    """The CUDA mode (fuzz/devmem.h) on the simulated runtime, where the export of a (2, 0) record
    is device memory: ref's import of it (cuda_from_dlpack) clean and with each reachable cuda_*
    consumer fault of ref, and pyref's (device_from_dlpack) clean and with PYREF_CUDA_FAULTS."""
    _assert_agree("ref@cuda", [None] + [f for f in faults("consumer") if f.startswith("cuda_")],
                  every_fault_found=True)
    _assert_agree("dlconform.pyref@cuda", [None] + list(PYREF_CUDA_FAULTS), every_fault_found=True)


def test_producer_reproducers_agree_with_the_producer_target():
    """Many producer faults of ref lie outside what the producer target exercises (streams,
    most of the exchange API): those configs must agree on no finding."""
    _assert_agree("producer-ref", [None] + faults("producer"), every_fault_found=False)


#: pyref's device-array producer faults the producer target's CUDA mode shows (producer_cuda.h):
#: its arrays' data is still pending on their own stream, which the simulated runtime runs only
#: when something waits for it, so a consumer's stream the export did not make wait reads stale
#: data. The two left out block the host (cuda_host_sync, cuda_minus_one_syncs): the suites'
#: test_cuda_stream.py counts host blocks, the fuzz oracles do not
PYREF_CUDA_PRODUCER_FAULTS = ("cuda_stream_zero_accepted", "cuda_stream_type_unchecked", "cuda_host_copy_unflagged",
                              "cuda_host_copy_despite_false", "cuda_copy_shares_memory", "cuda_copy_unflagged",
                              "cuda_destroys_stream", "cuda_no_wait", "cuda_omitted_stream_no_sync",
                              "cuda_wrong_stream", "cuda_host_copy_unsynced")


def test_producer_cuda_mode_reproducers_agree_with_the_producer_target():
    """The producer target's CUDA mode on the simulated runtime: ref's CudaTensor clean, with its
    cuda_* producer faults (strides in bytes is found, as LAY-05; the rest act on the exchange
    table's streams: they must agree on no finding) and with version_wrong (its capsules are
    ref's); pyref's DeviceArray clean and with PYREF_CUDA_PRODUCER_FAULTS, each found."""
    _assert_agree("producer-ref@cuda", [None] + [f for f in faults("producer") if f.startswith("cuda_")] +
                  ["version_wrong"], every_fault_found=False)
    _assert_agree("producer-dlconform.pyref@cuda", [None] + list(PYREF_CUDA_PRODUCER_FAULTS),
                  every_fault_found=True)


#: pyref's host producer faults the producer target shows through a library's own arrays
#: (producer_views: pyref.from_dlpack of a compact export, then its __dlpack__); the others act
#: where a compact import does not reach (strides, byte_offset, dtypes outside the array API's,
#: the deleter, __dlpack_device__). versioned_flags_before_deleter is found too (FLG-01), but its
#: deleter slot holds the flags, which the reproducer's consumption then calls: a crash after the
#: breach, which the C target reports first
PYREF_GENERIC_PRODUCER_FAULTS = ("byte_strides", "byteswap_in_place", "complex_part_bits", "copy_none_copies",
                                 "dl_device_unchecked_on_copy", "ignore_max_version", "legacy_capsule_name",
                                 "readonly_unflagged", "reexport_drops_readonly", "stream_accepted",
                                 "stream_type_unchecked")


def test_generic_producer_reproducers_agree_with_the_producer_target():
    """A library with no view maker of its own (producer-MODULE: its from_dlpack of a compact
    export makes the array it exports), here pyref on the host: clean and with each of
    PYREF_GENERIC_PRODUCER_FAULTS, each found."""
    _assert_agree("producer-dlconform.pyref", [None] + list(PYREF_GENERIC_PRODUCER_FAULTS), every_fault_found=True)


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
            print("ok", name)
