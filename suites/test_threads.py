"""Threads and caching (issue 3): N C threads, each taking the GIL through PyGILState,
export one shared tensor through the C exchange API and `__dlpack__`, check every hand-out's
values until its own deleter runs, and release them without the GIL (`_probe.stress`,
probes/probe/stress.c).

OWN-05: every hand-out stays valid until its own deleter runs, and when two hand-outs are the
same struct (a cache), releasing one leaves the other intact (poison check). OWN-04: each
deleter runs once, from a C thread without the GIL, and the counts balance. XAPI-14: every
managed_tensor_from_py_object_no_sync call gives an owning tensor. Caching itself is allowed:
it is reported in the pass message.

A device variant's tensors (torch@cuda, cupy@cuda, pyref@cuda: a device run) go through the same
threads: their hand-outs' elements are read through the CUDA runtime (the `reader` of
`_probe.stress`), once the made tensor is ready, so the lifetime of CUDA exports taken at once
from many threads is judged as the host's.
"""

from dlconform import _probe
from dlconform import kit
from support import dtypes as dty
from support import exchange as xa
from support import tensors as tns
from support.marks import producer

THREADS, ITERATIONS = 8, 200


def _run(target, with_table):
    """The stress counters of a tensor x of the target (`_probe.stress`: C threads), with
    "layout": the layout findings (compare_layout) of one __dlpack__ export of x, taken as the
    threads take theirs."""
    dtype = dty.pick(target)[0]
    x = tns.make(target, dtype, (3, 5))[0]
    reader = _device_reader(target)
    api, table = 0, None
    if with_table:
        x, table = xa.table(target, x)  # Unsupported without a usable table
        api = table.ptr
    layout = []
    try:
        try:
            cap = x.__dlpack__(max_version=(1, 3))
        except TypeError:
            cap = x.__dlpack__()
        info = kit.inspect(cap)
        if info.get("kind") in ("legacy", "versioned") and info.get("readable", True):
            layout = tns.compare_layout(target, x, info, dty.itemsize(dtype))
        del cap
    except Exception:  # noqa: BLE001 - an export that fails here fails in the threads too: "errors"
        pass
    r = _probe.stress(x, target.expected(x), THREADS, ITERATIONS, api=api, reader=reader)
    r["layout"] = layout
    return r


def _device_reader(target):
    """For a device variant's tensors: the threads' reader of a hand-out's elements through the
    CUDA runtime (a DLTensor's address in, its row-major element bytes out), after the device
    finished making the tensor (the lifetime is judged here, not the streams:
    test_cuda_stream.py); None for host tensors, which the threads read themselves."""
    if tuple(getattr(target, "device", None) or (1, 0))[0] == 1:
        return None
    from dlconform.kit import abi, capsules, cuda

    rt = cuda.runtime()
    if rt is None:
        raise kit.Unsupported("%s's tensors are on a device, and no CUDA runtime reads them: %s"
                              % (target.name, cuda.why_not()))
    rt.synchronize()
    return lambda address: capsules.read_tensor(abi.DLTensor.from_address(address))


def _judge(check, r):
    if r["layout"]:
        # the values read through an export whose layout does not describe the tensor are the
        # layout checks' finding (LAY-03, LAY-05, LAY-09), not a lifetime one
        check.record("OWN-05", "unsupported", "the export's layout does not describe the tensor (%s: %s): the values "
                     "the threads read are not judged here" % r["layout"][0])
    else:
        check.that(r["bad_values"] == 0, "OWN-05", "%d hand-outs read wrong values before their own deleter ran; "
                   "first: %s" % (r["bad_values"], r["first_bad"]))
    check.that(r["poison_failures"] == 0, "OWN-05", "releasing one of two identical (cached) hand-outs broke the other "
               "%d of %d times" % (r["poison_failures"], r["poison_checks"]))
    check.equal(r["deleter_calls"] + r["null_deleters"], r["handouts"], "OWN-04",
                "deleter calls (+ NULL deleters) vs hand-outs, from %d threads without the GIL" % r["threads"])
    if r["cached_pairs"]:
        check.record("OWN-05", "pass", "info: the producer caches its export (the same struct twice in %d of %d "
                     "rounds); %d poison checks passed" % (r["cached_pairs"], THREADS * ITERATIONS, r["poison_checks"]))


@producer("OWN-04", "OWN-05")
def test_dlpack_from_many_c_threads(target, check):
    """__dlpack__ from 8 C threads (PyGILState), deleters without the GIL."""
    r = _run(target, False)
    check.that(r["errors"] == 0, "OWN-05", "%d exports failed; first: %s" % (r["errors"], r["first_error"]))
    _judge(check, r)


@producer("OWN-04", "OWN-05", "XAPI-14")
def test_exchange_api_and_dlpack_from_many_c_threads(target, check):
    """managed_tensor_from_py_object_no_sync (twice per round) and __dlpack__ from 8 C threads."""
    r = _run(target, True)
    check.that(r["errors"] == 0, "XAPI-14", "%d exports failed; first: %s" % (r["errors"], r["first_error"]))
    check.equal(r["xapi_handouts"], 2 * THREADS * ITERATIONS, "XAPI-14", "owning tensors from the C path")
    _judge(check, r)
