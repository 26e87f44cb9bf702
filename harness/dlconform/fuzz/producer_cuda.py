"""The producer target's CUDA mode in Python (producer-NAME@cuda): the twin of
fuzz/producer_cuda.c, whose header states the rules and why. producer_oracles uses it for
reproducers; fuzz/tests/test_oracle_agreement.py holds the two together.
"""
from . import devmem
from . import record as R

S_NONE, S_VALID, S_ZERO, S_BELOW, S_STR = range(5)
D_SAME, D_HOST, D_FOREIGN, D_CPU_ID, D_NONE_NAMED = range(5)
REFUSE_ALLOWED, REFUSE_ANY, REFUSE_DEVICE, REFUSE_COPY = range(4)
READ_NONE, READ_HOST, READ_DEVICE = range(3)


class Mode:
    """The mode of one reproducer: the runtime (devmem.runtime(), Unavailable without one) and
    the target's own non-blocking stream, a consumer's."""

    def __init__(self):
        self.rt = devmem.runtime()
        self.stream = self.rt.stream(non_blocking=True).handle

    def stream_value(self, v):
        """dlc_pcuda_stream: an int above 2 is the target's stream."""
        return self.stream if v > 2 else v

    # ---- the record's cases
    @staticmethod
    def stream_case(rec):
        if not rec["kw"] & R.KW["stream"] or rec["stream_kind"] % 3 == 0:
            return S_NONE
        if rec["stream_kind"] % 3 == 2:
            return S_STR
        v = rec["stream"]
        return S_ZERO if v == 0 else S_BELOW if v < -1 else S_VALID

    @staticmethod
    def device_case(rec):
        if not rec["kw"] & R.KW["dl_device"]:
            return D_SAME
        dev_type, dev_id = rec["kw_device"]
        if dev_id < 0 or dev_type not in R.KNOWN_DEVICES:
            return D_NONE_NAMED
        if (dev_type, dev_id) == (R.CUDA, 0):
            return D_SAME
        if dev_type == R.CPU:
            return D_HOST if dev_id == 0 else D_CPU_ID
        return D_FOREIGN

    @staticmethod
    def copy_false(rec):
        return bool(rec["kw"] & R.KW["copy"]) and rec["copy"] % 3 == 1

    def refusal_rule(self, rec):
        s, d = self.stream_case(rec), self.device_case(rec)
        if s in (S_STR, S_ZERO, S_BELOW) or d in (D_NONE_NAMED, D_CPU_ID) or (d == D_HOST and s != S_NONE):
            return REFUSE_ANY
        if d == D_HOST and self.copy_false(rec):
            return REFUSE_COPY
        if d in (D_HOST, D_FOREIGN):
            return REFUSE_DEVICE
        return REFUSE_ALLOWED

    # ---- oracles
    def arguments(self, b, rec):
        """dlc_pcuda_arguments."""
        s, d = self.stream_case(rec), self.device_case(rec)
        if s == S_STR:
            b.fail("STR-02", "__dlpack__ accepted stream='stream' for a CUDA tensor (a stream is an int)")
        elif s == S_BELOW:
            b.fail("STR-02", "__dlpack__ accepted stream=<int below -1> for a CUDA tensor (invalid argument: it "
                   "names no CUDA stream)")
        elif s == S_ZERO:
            b.fail("STR-08", "__dlpack__ accepted stream=0 for a CUDA tensor (invalid argument: producers should "
                   "refuse it as ambiguous)")
        if d == D_HOST and self.copy_false(rec):
            b.fail("CPY-05", "__dlpack__ exported dl_device=(1, 0) of a CUDA tensor with copy=False")
        if d == D_HOST and s != S_NONE:
            b.fail("STR-12", "__dlpack__ accepted a stream other than None with dl_device=(1, 0) (invalid argument: "
                   "for kDLCPU the stream must be None)")
        if d == D_NONE_NAMED:
            b.fail("DEV-05", "__dlpack__ accepted dl_device=(%d, %d), which names no device" % rec["kw_device"])
        if d == D_CPU_ID:
            b.fail("DEV-05", "__dlpack__ accepted dl_device=(1, %d) for a CUDA tensor (ambiguous: a CPU device id "
                   "that is not zero)" % rec["kw_device"][1])

    def placed(self, b, rec, device, versioned, flags, clause):
        """dlc_pcuda_placed: where the export's elements are to be read (READ_*)."""
        d = self.device_case(rec)
        if d in (D_NONE_NAMED, D_CPU_ID):
            return READ_NONE
        want = (R.CUDA, 0) if d == D_SAME else (R.CPU, 0) if d == D_HOST else tuple(rec["kw_device"])
        if tuple(device) != want:
            asked = bool(rec["kw"] & R.KW["dl_device"])
            clause = "STR-12" if d == D_HOST else "DEV-05" if asked else clause
            b.fail(clause, "the export of a CUDA tensor%s is on (%d, %d), not (%d, %d)" % (
                (" for the dl_device asked" if asked else "",) + tuple(device) + want))
            return READ_NONE
        if d == D_HOST and versioned and not flags & R.IS_COPIED:
            b.fail("FLG-04", "the host copy of dl_device=(1, 0) lacks IS_COPIED")
        return READ_DEVICE if d == D_SAME else READ_HOST if d == D_HOST else READ_NONE

    def read_stream(self, rec):
        """dlc_pcuda_read_stream: the stream a consumer that passed the record's stream reads on,
        or 0 (none: a read after the whole device)."""
        s = self.stream_case(rec)
        if s == S_NONE:
            return 1
        if s != S_VALID or rec["stream"] == -1:
            return 0
        return self.stream if rec["stream"] > 2 else rec["stream"]

    def stream_clause(self, rec):
        """dlc_pcuda_stream_clause."""
        if self.stream_case(rec) == S_NONE:
            return "STR-04"
        return {1: "STR-05", 2: "STR-06"}.get(rec["stream"], "STR-07")

    def read_on(self, stream, address, nbytes):
        """dlc_devmem_read_on: nbytes at a device address as a consumer on `stream` reads them (a
        copy enqueued there, then that stream synchronised); None when the runtime refused."""
        from ..kit.cuda import CudaError

        try:
            return self.rt.read_on(stream, address, nbytes)
        except CudaError:
            return None

    def settled(self, address, nbytes):
        """dlc_devmem_read_settled: nbytes at a device address, after the whole device ran what it
        holds; None when the runtime failed (not the producer's failure)."""
        from ..kit.cuda import CudaError

        try:
            self.rt.synchronize()
            return self.rt.copy_to_host(address, nbytes)
        except CudaError:
            return None

    def after(self, b, rec):
        """dlc_pcuda_after: STR-11 when the record passed the target's stream."""
        from ..kit.cuda import CudaError

        if self.stream_case(rec) != S_VALID or rec["stream"] <= 2:
            return
        try:
            self.rt.idle(self.stream)
            return
        except CudaError:
            pass
        self.stream = self.rt.stream(non_blocking=True).handle
        b.fail("STR-11", "the consumer's stream died in __dlpack__ or with its capsule")
