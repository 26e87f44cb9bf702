"""kit.cuda over dlconform's simulated CUDA runtime (build/cuda/sim/libcudart.so, `make build`):
the simulation keeps CUDA's ordering semantics, deterministically, so the GPU checks' logic is
testable here. What a reader on a stream sees is what the stream waited for (STR-01); the legacy
default stream and the blocking streams wait for each other, non-blocking ones do not (STR-05,
STR-06); host-blocking calls are counted (STR-03's observation); kit.read_elements reads CUDA
capsules through the runtime, and without one reads as it always did."""
import os
import shutil
import subprocess
import sys

import pytest

from dlconform import kit
from dlconform.kit import cuda

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.path.join(ROOT, "build", "cuda", "sim", "libcudart.so")
N = 64


@pytest.fixture
def rt(monkeypatch):
    if not os.path.exists(SIM):
        pytest.skip("no simulated runtime: run `make build` first")
    monkeypatch.setenv(cuda.ENV, SIM)
    found = cuda.runtime()
    assert found is not None, cuda.why_not()
    return found


@pytest.fixture
def streams(rt):
    """Two non-blocking streams, a blocking one and N bytes of device memory (zeros)."""
    made = [rt.stream(), rt.stream(), rt.stream(non_blocking=False)]
    ptr = rt.malloc(N)
    yield made, ptr
    for s in made:
        s.destroy()
    rt.free(ptr)


def test_the_simulated_runtime_is_found_through_the_environment(rt):
    assert cuda.why_not() is None
    assert rt.simulated and rt.devices == 1 and rt.device_count() == 1
    assert rt.path == SIM
    assert cuda.runtime() is rt  # found once per DLCONFORM_CUDART value


def test_without_a_library_there_is_no_runtime_and_why_not_says_so(monkeypatch, tmp_path):
    missing = str(tmp_path / "libcudart.so")
    monkeypatch.setenv(cuda.ENV, missing)
    assert cuda.runtime() is None
    reason = cuda.why_not()
    assert reason.startswith("no CUDA runtime: ") and missing in reason and "cannot be loaded" in reason


def test_a_runtime_without_a_device_is_no_runtime(monkeypatch, tmp_path):
    if not os.path.exists(SIM):
        pytest.skip("no simulated runtime: run `make build` first")
    copy = str(tmp_path / "libcudart.so")  # another path: a fresh instance, found afresh
    shutil.copy(SIM, copy)
    monkeypatch.setenv(cuda.ENV, copy)
    monkeypatch.setenv("DLCSIM_DEVICE_COUNT", "0")
    assert cuda.runtime() is None
    assert cuda.why_not().startswith("no CUDA device: ") and "no CUDA-capable device" in cuda.why_not()


def test_a_fill_is_seen_on_another_stream_only_after_an_event_wait(rt, streams):
    """STR-01: a consumer stream that does not wait reads the old bytes; one that waits on an
    event recorded after the fill reads the fill."""
    (producer, consumer, _), ptr = streams
    rt.slow_fill(producer.handle, ptr, N, 0x5A, 1 << 20)
    assert rt.read_on(consumer.handle, ptr, N) == bytes(N)
    assert not producer.idle()
    ev = rt.event()
    ev.record(producer.handle)
    assert not ev.done()
    rt.wait(consumer.handle, ev.handle)
    assert rt.read_on(consumer.handle, ptr, N) == b"\x5a" * N
    assert producer.idle() and ev.done()
    ev.destroy()


def test_the_legacy_stream_and_blocking_streams_wait_for_each_other(rt, streams):
    """STR-05, STR-06: 1 is the legacy default stream, 2 this thread's default stream (blocking);
    a non-blocking stream waits for neither."""
    (nonblocking, _, blocking), ptr = streams
    rt.slow_fill(blocking.handle, ptr, N, 1, 0)
    assert rt.read_on(cuda.LEGACY, ptr, N) == b"\x01" * N
    rt.slow_fill(nonblocking.handle, ptr, N, 2, 0)
    assert rt.read_on(cuda.LEGACY, ptr, N) == b"\x01" * N
    assert rt.copy_to_host(ptr, N) == b"\x01" * N  # cudaMemcpy is on the legacy stream
    nonblocking.synchronize()
    rt.slow_fill(cuda.PER_THREAD, ptr, N, 3, 0)
    assert rt.read_on(cuda.LEGACY, ptr, N) == b"\x03" * N
    rt.slow_fill(cuda.LEGACY, ptr, N, 4, 0)
    assert rt.read_on(nonblocking.handle, ptr, N) == b"\x03" * N
    assert rt.read_on(blocking.handle, ptr, N) == b"\x04" * N


def test_host_blocking_calls_are_counted(rt, streams):
    (producer, consumer, _), ptr = streams
    before = rt.host_syncs()
    ev = rt.event()
    rt.slow_fill(producer.handle, ptr, N, 9, 0)
    ev.record(producer.handle)
    rt.wait(consumer.handle, ev.handle)
    rt.copy_to_device(ptr, b"\x07" * N, stream=consumer.handle)
    producer.idle()
    ev.done()
    assert rt.host_syncs() == before  # nothing so far blocks the host
    assert rt.read_on(consumer.handle, ptr, N) == b"\x07" * N
    assert rt.host_syncs() == before + 1
    ev.synchronize()
    rt.synchronize()
    rt.copy_to_host(ptr, 1)
    assert rt.host_syncs() == before + 4
    ev.destroy()


def test_bad_handles_are_errors(rt, streams):
    (producer, _, _), ptr = streams
    dead = rt.stream()
    dead.destroy()
    for call in (dead.synchronize, dead.destroy, lambda: rt.read_on(dead.handle, ptr, N),
                 lambda: rt.slow_fill(dead.handle, ptr, N, 1, 0), lambda: rt.destroy_stream(cuda.LEGACY),
                 lambda: rt.destroy_stream(cuda.PER_THREAD), lambda: rt.synchronize(3)):
        with pytest.raises(cuda.CudaError) as err:
            call()
        assert err.value.code == 400 and "invalid resource handle" in str(err.value)
        assert rt.lib.cudaGetLastError() == 0  # the kit leaves no error behind for a library
    ev = rt.event()
    ev.destroy()
    with pytest.raises(cuda.CudaError, match="cudaEventRecord: invalid resource handle"):
        ev.record(producer.handle)
    with pytest.raises(cuda.CudaError, match="invalid argument"):
        rt.copy_to_host(ptr, N + 1)
    with pytest.raises(cuda.CudaError, match="invalid argument"):
        rt.free(ptr + 1)
    with pytest.raises(cuda.CudaError, match="invalid argument"):
        rt.slow_fill(producer.handle, ptr, N, 1, -1)
    assert rt.error_string(12345) == "unrecognized error code"


def test_read_elements_of_a_cuda_capsule_reads_device_memory(rt):
    ptr = rt.malloc(N)
    rt.copy_to_device(ptr, bytes(range(N)))
    f = kit.Forge(dtype="float32", shape=(2, 3), strides=(1, 2), byte_offset=4, data=ptr, device=(2, 0))
    host = kit.Forge(dtype="float32", shape=(2, 3), strides=(1, 2), byte_offset=4, buffer_size=N, fill=bytes(range(N)))
    expected = kit.read_elements(host.capsule())
    before = rt.host_syncs()
    assert kit.read_elements(f.capsule()) == expected
    assert rt.host_syncs() == before + 1  # one synchronous copy of the extent
    with kit.consume(f.capsule()) as h:
        assert h.read_elements() == expected
    managed = kit.Forge(dtype="float32", shape=(2, 3), strides=(1, 2), byte_offset=4, data=ptr, device=(13, 0))
    assert kit.read_elements(managed.capsule()) == expected
    rt.free(ptr)


def test_read_elements_waits_as_a_synchronous_copy_does(rt, streams):
    """The kit's read is cudaMemcpy: it sees the blocking streams' work, not a non-blocking
    stream's that no one waited for."""
    (nonblocking, _, blocking), ptr = streams
    f = kit.Forge(dtype="uint8", shape=(N,), data=ptr, device=(2, 0))
    rt.slow_fill(blocking.handle, ptr, N, 6, 0)
    assert kit.read_elements(f.capsule()) == b"\x06" * N
    rt.slow_fill(nonblocking.handle, ptr, N, 7, 0)
    assert kit.read_elements(f.capsule()) == b"\x06" * N
    nonblocking.synchronize()
    assert kit.read_elements(f.capsule()) == b"\x07" * N


def test_host_memory_claimed_as_cuda_is_refused_through_the_runtime(rt):
    f = kit.Forge(dtype="float32", shape=(4,), device=(2, 0))
    cap = f.capsule()
    with pytest.raises(ValueError, match="device type 2 through the CUDA runtime: cudaMemcpy: invalid argument"):
        kit.read_elements(cap)
    managed = kit.Forge(dtype="float32", shape=(4,), device=(13, 0))  # the runtime reads host memory too
    assert kit.read_elements(managed.capsule()) == managed.expected_elements()


def test_without_a_runtime_cuda_capsules_read_as_before(monkeypatch, tmp_path):
    """No runtime: CUDA memory is not read, managed memory is read from the host (as the C
    probe reads both)."""
    from dlconform import _probe

    monkeypatch.setenv(cuda.ENV, str(tmp_path / "missing.so"))
    f = kit.Forge(dtype="float32", shape=(4,), device=(2, 0))
    cap = f.capsule()  # held: a capsule dying with the refusal pending would take it (kit.forge, LOST)
    with pytest.raises(ValueError, match="^cannot read elements on device type 2 from the host$"):
        kit.read_elements(cap)
    with pytest.raises(ValueError, match="^cannot read elements on device type 2 from the host$"):
        _probe.read_elements(cap)
    managed = kit.Forge(dtype="float32", shape=(4,), device=(13, 0))
    cap = managed.capsule()
    assert kit.read_elements(cap) == managed.expected_elements() == _probe.read_elements(cap)
    assert cuda.runtime() is None


def test_importing_the_kit_loads_no_cuda_runtime():
    code = ("import sys\nfrom dlconform import kit\nassert 'dlconform.kit.cuda' not in sys.modules\n"
            "from dlconform.kit import cuda\n"
            "maps = open('/proc/self/maps').read()\nassert 'libcudart' not in maps, 'libcudart loaded'\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "harness"))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def _search(tmp_path, code, site=None):
    """Runs `code` after `from dlconform.kit import cuda` in a fresh interpreter with ENV unset
    (the kit searches as on a user's machine), `site` on its sys.path."""
    if not os.path.exists(SIM):
        pytest.skip("no simulated runtime: run `make build` first")
    env = {k: v for k, v in os.environ.items() if k != cuda.ENV}
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "harness")] + ([str(site)] if site else []))
    proc = subprocess.run([sys.executable, "-c", "from dlconform.kit import cuda\n" + code], env=env,
                          capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


#: a library under test loading a runtime (by its full path), then the kit's search
_LOAD_THEN_SEARCH = "import ctypes\nctypes.CDLL(%r)\nrt = cuda.runtime()\nprint(rt.path if rt else cuda.why_not())"


def _copy_sim(folder, name):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(str(folder), name)
    shutil.copy(SIM, path)
    return path


def test_a_runtime_a_library_loaded_is_the_one_used(tmp_path):
    """torch loads its libcudart by its RPATH, jax's plugin by its full path: on no loader path.
    The kit takes the one in the process (its path in /proc/self/maps), not a second copy."""
    theirs = _copy_sim(tmp_path / "site-packages" / "lib", "libcudart.so.12")
    out = _search(tmp_path, _LOAD_THEN_SEARCH % theirs)
    assert out.strip() == theirs


def test_a_runtime_from_pip_wheels_is_found_on_sys_path(tmp_path):
    """A machine whose CUDA came with wheels: nvidia/cu13/lib/libcudart.so.13 under sys.path."""
    site = tmp_path / "site"
    wheel = _copy_sim(site / "nvidia" / "cu13" / "lib", "libcudart.so.13")
    out = _search(tmp_path, "rt = cuda.runtime()\nprint(wheel in cuda.candidates(), rt.path if rt else cuda.why_not())"
                  .replace("wheel", repr(wheel)), site=site)
    assert out.split() == ["True", wheel]


def test_a_candidate_that_is_no_runtime_does_not_end_the_search(tmp_path):
    """A libcudart.so.13 that cannot serve (not a runtime here; a driver too old for it on a
    GPU machine) is passed over for the next: the wheel's."""
    site = tmp_path / "site"
    wheel = _copy_sim(site / "nvidia" / "cuda_runtime" / "lib", "libcudart.so.12")
    bogus = os.path.join(str(tmp_path), "libcudart.so.13")
    shutil.copy(_libm(), bogus)
    out = _search(tmp_path, _LOAD_THEN_SEARCH % bogus, site=site)
    assert out.strip() == wheel


def _libm():
    import ctypes.util

    name = ctypes.util.find_library("m")
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"):
        if name and os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    pytest.skip("no libm to stand for a library that is no CUDA runtime")


def test_a_runtime_the_environment_named_serves_only_while_it_names_it(tmp_path):
    """Loaded in this process for a run that named it (the simulation, for the tests), a runtime
    is no library's: a search with DLCONFORM_CUDART unset passes it over."""
    code = ("import os\nos.environ[cuda.ENV] = %r\nassert cuda.runtime().simulated\n"
            "del os.environ[cuda.ENV]\nrt = cuda.runtime()\nprint(rt.path if rt else 'none')" % SIM)
    assert _search(tmp_path, code).strip() != SIM


@pytest.fixture
def ptx_rt(monkeypatch, tmp_path):
    """A runtime whose slow_fill is the helper's PTX launched through the driver API
    (kit/cuda_ptx.py), as on a GPU machine without nvcc: the simulation's driver functions."""
    if not os.path.exists(SIM):
        pytest.skip("no simulated runtime: run `make build` first")
    copy = _copy_sim(tmp_path, "libcudart.so")  # a fresh Runtime, its helper chosen afresh
    monkeypatch.setenv(cuda.ENV, copy)
    monkeypatch.setenv(cuda.HELPER_ENV, "ptx")
    found = cuda.runtime()
    assert found is not None, cuda.why_not()
    return found


def test_the_ptx_fill_is_ordered_on_its_stream_and_writes_its_bytes(ptx_rt):
    from dlconform.kit.cuda_ptx import PtxFill

    producer, consumer = ptx_rt.stream(), ptx_rt.stream()
    ptr = ptx_rt.malloc(3 * N)
    try:
        ptx_rt.slow_fill(producer.handle, ptr + N, N, 0x15A, 1 << 20)  # byte's low 8 bits, as a kernel's u8 store
        assert isinstance(ptx_rt._slow_fill(), PtxFill)
        assert ptx_rt.read_on(consumer.handle, ptr, 3 * N) == bytes(3 * N)  # nothing waited: nothing seen
        ev = ptx_rt.event()
        ev.record(producer.handle)
        ptx_rt.wait(consumer.handle, ev.handle)
        assert ptx_rt.read_on(consumer.handle, ptr, 3 * N) == bytes(N) + b"\x5a" * N + bytes(N)
        ev.destroy()
        with pytest.raises(cuda.CudaError, match="invalid argument"):
            ptx_rt.slow_fill(producer.handle, ptr, N, 1, -1)
    finally:
        for s in (producer, consumer):
            s.destroy()
        ptx_rt.free(ptr)


def test_the_ptx_is_valid_for_the_gpus_of_this_toolkit(tmp_path):
    """The hand-written PTX compiles with ptxas (where a CUDA toolkit is: this project's machines
    have one without a GPU) for an Ampere and a Hopper GPU."""
    from dlconform.kit.cuda_ptx import PTX

    ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    if not os.path.exists(ptxas):
        pytest.skip("no ptxas here")
    src = tmp_path / "fill.ptx"
    src.write_text(PTX)
    for arch in ("sm_80", "sm_90"):
        p = subprocess.run([ptxas, "--gpu-name", arch, str(src), "-o", str(tmp_path / (arch + ".cubin"))],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, (arch, p.stderr)


def test_storage_of_a_cuda_capsule_is_read_through_the_runtime(rt):
    """kit.read_storage (DT-09's packed bytes) reads CUDA memory through the runtime, host memory
    from the host; a forge given CUDA memory never reads it from the host (expected_elements)."""
    from dlconform import _ref

    ptr = rt.malloc(N)
    rt.copy_to_device(ptr, bytes(range(N)))
    f = kit.Forge(dtype=(1, 4, 1), shape=(6,), byte_offset=4, data=ptr, device=(2, 0))
    assert kit.read_storage(f.capsule(), 3) == bytes([4, 5, 6])
    host = kit.Forge(dtype=(1, 4, 1), shape=(6,), byte_offset=4, buffer_size=N, fill=bytes(range(N)))
    assert kit.read_storage(host.capsule(), 3) == bytes([4, 5, 6]) and kit.read_storage(host.capsule(), 0) == b""
    for forge in (f, _ref.Forge(dtype=(1, 8, 1), shape=(6,), data=ptr, device=(2, 0))):
        with pytest.raises(ValueError, match="device type 2, which the host cannot read"):
            forge.expected_elements()
    rt.free(ptr)


def test_the_thread_stress_reads_device_hand_outs_through_its_reader(rt):
    """_probe.stress (test_threads.py) over CUDA memory: the C threads read each hand-out's
    elements through the `reader` the check gives (the runtime), and a hand-out whose elements
    differ from the tensor's is counted, as on the host; without a reader the threads cannot read
    device memory, and say so."""
    from dlconform import _probe, pyref
    from dlconform.kit import abi, capsules

    x = pyref.to_device(pyref.frombuffer(bytes(range(60)), "float32", (3, 5)))
    rt.synchronize()

    def reader(address):
        return capsules.read_tensor(abi.DLTensor.from_address(address))

    good = _probe.stress(x, bytes(range(60)), 4, 20, reader=reader)
    assert good["bad_values"] == 0 and good["errors"] == 0, good
    assert good["deleter_calls"] + good["null_deleters"] == good["handouts"] == 80
    wrong = _probe.stress(x, bytes(60), 2, 5, reader=reader)
    assert wrong["bad_values"] > 0 and wrong["first_bad"].startswith("at hand-out: read b'\\x00\\x01"), wrong
    blind = _probe.stress(x, bytes(range(60)), 1, 1)
    assert blind["bad_values"] > 0 and "expected" in blind["first_bad"], blind
    with pytest.raises(TypeError, match="reader must be None or a callable"):
        _probe.stress(x, bytes(60), 1, 1, reader=3)
