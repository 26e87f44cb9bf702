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
