"""Python producers built on `_ref.Forge`.

`RecordingProducer` records how a consumer calls it and negotiates like a correct DLPack 1.3
producer; with `keep=True` it also keeps every capsule it hands out (`.capsules`), so that a
check can look at them after the import (renamed used_*?) and decide when they die. The
`forge` argument is one of:
  - a callable `f(versioned=bool) -> Forge` (e.g. `forges(shape=(3,))`, or the class `_ref.Forge`),
    called once per capsule kind;
  - a mapping `{"legacy": Forge, "versioned": Forge}`;
  - a single `_ref.Forge`, used for every capsule whatever was negotiated (its own kind).

This file imports nothing from dlconform when it loads: a bug report's standalone script
(dlconform.bugreport.standalone) inlines it after the kit, whose `_ref.Forge` it then forges with.
"""
from collections.abc import Mapping

KNOWN_KEYWORDS = ("stream", "max_version", "dl_device", "copy")


def _Forge():
    """dlconform's `_ref.Forge`; in a standalone script, which inlines this file, the script's
    `_ref.Forge` (the kit's)."""
    try:
        return _ref.Forge  # a standalone script's global
    except NameError:  # imported as dlconform.producers
        from . import _ref as ref

        return ref.Forge


def forges(**forge_kwargs):
    """A factory for RecordingProducer: `_ref.Forge(versioned=..., **forge_kwargs)`, one per kind."""
    made = {}

    def factory(versioned=True):
        if versioned not in made:
            made[versioned] = _Forge()(versioned=versioned, **forge_kwargs)
        return made[versioned]

    factory.made = made
    return factory


class RecordingProducer:
    """A producer that records `__dlpack_device__` / `__dlpack__` calls.

    - `.calls`: one dict of keywords per `__dlpack__` call (positional arguments under "args");
    - `.events`: method names in call order;
    - `.forges`: {"legacy"/"versioned": forge} used so far; `.last_kind`.
    Negotiation: max_version None or major 0 -> legacy capsule, major >= 1 -> versioned.
    `legacy_only`: an old producer whose `__dlpack__` takes only `stream` (TypeError otherwise).
    `versioned_only`: a producer that cannot export legacy capsules (BufferError when the
    consumer does not ask for >= 1.0).
    `keep`: `.capsules` holds every capsule handed out, each once (a forge makes a new capsule
    per call, so no capsule is handed out twice).
    """

    def __init__(self, forge, *, legacy_only=False, device=(1, 0), versioned_only=False, keep=False):
        if legacy_only and versioned_only:
            raise ValueError("legacy_only and versioned_only exclude each other")
        self._forge = forge
        self.legacy_only = legacy_only
        self.versioned_only = versioned_only
        self.device = tuple(device)
        self.keep = keep
        self.capsules = []
        self.calls = []
        self.events = []
        self.forges = {}
        self.last_kind = None

    def _record(self, args, kw):
        """Notes one __dlpack__ call: its keywords, positional arguments under "args"."""
        self.events.append("__dlpack__")
        record = dict(kw)
        if args:
            record["args"] = args
        self.calls.append(record)

    def _hand_out(self, capsule):
        if self.keep and not any(c is capsule for c in self.capsules):
            self.capsules.append(capsule)
        return capsule

    def _forge_for(self, versioned):
        kind = "versioned" if versioned else "legacy"
        f = self._forge
        if kind in self.forges:
            forge = self.forges[kind]
        elif isinstance(f, Mapping):
            forge = f[kind]
        elif isinstance(f, type) or (callable(f) and not hasattr(f, "capsule")):
            forge = f(versioned=versioned)  # a factory, or a Forge class: one forge per kind
        else:
            forge = f
        self.forges[kind] = forge
        self.last_kind = kind
        return forge

    def __dlpack_device__(self):
        self.events.append("__dlpack_device__")
        return self.device

    def __dlpack__(self, *args, **kw):
        self._record(args, kw)
        if args:
            raise TypeError("__dlpack__() takes keyword arguments only (%d positional given)" % len(args))
        unknown = [k for k in kw if k not in KNOWN_KEYWORDS]
        if unknown:
            raise TypeError("__dlpack__() got an unexpected keyword argument %r" % unknown[0])
        if self.legacy_only:
            extra = [k for k in kw if k != "stream"]
            if extra:
                raise TypeError("__dlpack__() got an unexpected keyword argument %r" % extra[0])
        stream = kw.get("stream")
        if stream is not None and self.device[0] == 1:
            raise BufferError("stream must be None for a CPU tensor (got %r)" % (stream,))
        dl_device = kw.get("dl_device")
        if dl_device is not None and tuple(dl_device) != self.device:
            raise BufferError("cannot export to device %r" % (dl_device,))
        if kw.get("copy") is not None and not isinstance(kw.get("copy"), bool):
            raise TypeError("copy must be None or a bool")
        max_version = kw.get("max_version")
        if max_version is not None:
            if not (isinstance(max_version, tuple) and len(max_version) == 2
                    and all(isinstance(v, int) for v in max_version)):
                raise TypeError("max_version must be a tuple of two ints (got %r)" % (max_version,))
        versioned = max_version is not None and max_version[0] >= 1 and not self.legacy_only
        if self.versioned_only and not versioned:
            raise BufferError("this producer exports only versioned (DLPack >= 1.0) capsules")
        return self._hand_out(self._forge_for(versioned).capsule())


class CapsuleProducer(RecordingProducer):
    """Hands out the one capsule it was given, whatever the consumer asks (e.g. a capsule that
    another consumer already owns, CAP-04); records the calls like RecordingProducer."""

    def __init__(self, capsule, device=(1, 0)):
        super().__init__(None, device=device)
        self.capsule = capsule

    def __dlpack__(self, *args, **kw):
        self._record(args, kw)
        return self.capsule


def legacy_producer(forge, **kw):
    """An old producer: `__dlpack__(stream=None)` only, legacy capsules (VER-06)."""
    return RecordingProducer(forge, legacy_only=True, **kw)


#: device types with a stream concept in the array API (STR-01, STR-09; oneAPI: STR-15)
KDL_CUDA = 2
KDL_ROCM = 10
KDL_ONEAPI = 14


class StreamDeviceProducer(RecordingProducer):
    """A producer that claims a device with streams (CUDA, ROCm, oneAPI) but has no such
    memory: it records every `__dlpack__` call like RecordingProducer, then refuses with
    BufferError (ERR-01), so the consumer's keywords can be seen without a GPU.

    `host_copies=True`: a request with `dl_device=(1, 0)` and `copy` not False is served
    with a host copy (a versioned capsule with IS_COPIED, or legacy) as a producer that can
    copy to the host would (DEV-06, CPY-06); `copy=False` with `dl_device=(1, 0)` is
    BufferError (CPY-05). Without it every request is refused.
    """

    REFUSAL = "dlconform StreamDeviceProducer: no memory on device %r"

    def __init__(self, device, *, host_copies=False, **forge_kwargs):
        forge_kwargs.setdefault("shape", (2, 3))
        super().__init__(forges(flags=2, **forge_kwargs), device=device)
        self._legacy_forge = None
        self._forge_kwargs = forge_kwargs
        self.host_copies = host_copies

    def __dlpack__(self, *args, **kw):
        self._record(args, kw)
        if args:
            raise TypeError("__dlpack__() takes keyword arguments only")
        dl_device = kw.get("dl_device")
        to_host = dl_device is not None and tuple(dl_device) == (1, 0)
        if to_host and self.host_copies:
            if kw.get("copy") is False:
                raise BufferError("dl_device=(1, 0) needs a copy but copy=False (CPY-05)")
            mv = kw.get("max_version")
            if mv is not None and mv[0] >= 1:
                return self._forge_for(True).capsule()
            if self._legacy_forge is None:
                self._legacy_forge = _Forge()(versioned=False, **self._forge_kwargs)
            return self._legacy_forge.capsule()
        raise BufferError(self.REFUSAL % (self.device,))


class CopyingProducer(RecordingProducer):
    """RecordingProducer that honours `copy=True` as a correct producer must (CPY-01): the
    export then comes from a second forge (same element bytes, other memory; IS_COPIED on
    versioned capsules). `.original` / `.copies`: the forges of the two kinds of export."""

    def __init__(self, **forge_kwargs):
        forge_kwargs.setdefault("shape", (2, 3))
        self.original = forges(**forge_kwargs)
        self.copies = forges(**dict(forge_kwargs, flags=2))
        super().__init__(self.original)

    def __dlpack__(self, *args, **kw):
        cap = super().__dlpack__(*args, **kw)
        if kw.get("copy") is True:
            versioned = self.last_kind == "versioned"
            del cap  # its destructor gives the original struct back
            return self.copies(versioned=versioned).capsule()
        return cap
