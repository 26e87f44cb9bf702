"""Producers with forged C exchange API tables, for the consumer-side XAPI checks.

Suite support (test_exchange_api.py as `xf`, routes.py, seeds.py):
`forged(tensor, type_table=..., instance_table=...)` wraps a `_ref.Tensor` in an object of a
fresh class: `__dlpack__` and `__dlpack_device__` delegate to the tensor (and count the
`__dlpack__` calls), and `__dlpack_c_exchange_api__` is the capsule of an `_ref.ApiForge` set
on the class (type_table) and/or on the instance only (instance_table). The forge's
trampolines unwrap the object through its `_dlconform_tensor` attribute, so a consumer that
uses the table gets the reference's own behaviour, and `forge.calls` says which functions it
called.

`handout_producer(forge, table)` is a `RecordingProducer(forge, keep=True)` whose class
offers `table`: its `managed_tensor_from_py_object_no_sync` hands out the tensors of the
producer's versioned capsules as they are (renamed used_*), so a consumer's exchange-API
path meets any forged metadata, and `__dlpack__` hands out the same tensors.

`consumer_uses_tables(target)` is the tensor of the consumer checks, Unsupported unless the
consumer uses a valid forged table; `import_ok` is one import and whether its values are right.
"""
from dlconform import kit
from dlconform.kit import RecordingProducer

from .dtypes import safe_values

ATTR = "__dlpack_c_exchange_api__"


def forged(tensor, type_table=None, instance_table=None):
    """An object exporting `tensor`; each table is an `_ref.ApiForge` or None."""
    ns = {
        "__init__": lambda self, t: setattr(self, "_dlconform_tensor", t),
        "__dlpack__": _dlpack,
        "__dlpack_device__": lambda self: self._dlconform_tensor.__dlpack_device__(),
        "dlpack_calls": 0,
    }
    if type_table is not None:
        ns[ATTR] = type_table.capsule()
    cls = type("ForgedXapiTensor", (), ns)
    obj = cls(tensor)
    if instance_table is not None:
        setattr(obj, ATTR, instance_table.capsule())
    return obj


def _dlpack(self, **kw):
    type(self).dlpack_calls += 1
    return self._dlconform_tensor.__dlpack__(**kw)


def used_table(forge):
    """True when a consumer called any function of forge's slot."""
    return any(forge.calls.values())


def handout_producer(forge, table, **kw):
    """A RecordingProducer(forge, keep=True, **kw) whose type offers `table` (an
    `_ref.ApiForge`) handing out the tensor of a new versioned capsule per call."""
    cls = type("HandoutProducer", (RecordingProducer,), {ATTR: table.capsule(), "_dlconform_handout": _handout})
    return cls(forge, keep=True, **kw)


def _handout(self):
    """The versioned capsule managed_tensor_from_py_object_no_sync takes its tensor from."""
    return self._hand_out(self._forge_for(True).capsule())


def consumer_uses_tables(target):
    """A float32 (2, 3) _ref.Tensor for the forged producers; Unsupported unless target.from_dlpack
    uses a valid forged type table."""
    from dlconform import _ref  # here, not at the top: routes and seeds use this module without it

    a = _ref.ApiForge(0)
    x = _ref.Tensor("float32", (2, 3), data=safe_values("float32", (2, 3)))
    try:
        target.from_dlpack(forged(x, type_table=a))
    except Exception as e:  # noqa: BLE001
        raise kit.Unsupported("%s.from_dlpack refused a producer with a valid forged table: %s: %s"
                              % (target.name, type(e).__name__, e))
    if not used_table(a):
        raise kit.Unsupported("%s.from_dlpack does not use the C exchange API" % target.name)
    return x


def import_ok(target, obj, x, **kw):
    """(result or None, exception or None, values equal?)"""
    y, e = kit.attempt(lambda: target.from_dlpack(obj, **kw))
    if e is not None:
        return None, e, False
    try:
        same = target.expected(y) == x.tobytes()
    except Exception:  # noqa: BLE001
        same = True
    return y, None, same
