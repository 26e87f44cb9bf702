"""Helpers for testing the harness itself: a pure-Python fake target and a fake-suite writer.

`dlconform.testing:FakeTarget` (both roles) and `dlconform.testing:ProducerOnly` can be used as
target specs; they need neither `_ref` nor any framework.
"""
import json
import os
import textwrap

from .targets.base import Target
from .targets.dtypes import itemsize, row_major_strides


class FakeTensor:
    def __init__(self, dtype, shape, data):
        self.dtype = dtype
        self.shape = tuple(shape)
        self.data = bytes(data)


class FakeTarget(Target):
    name = "fake"
    library = "fake"
    roles = frozenset({"producer", "consumer"})

    def versions(self):
        return {"fake": "1.0"}

    def dtypes(self):
        return ["uint8", "int32", "float32"]

    def make(self, dtype, shape, values):
        return FakeTensor(dtype, shape, values)

    def expected(self, x):
        return x.data

    def from_dlpack(self, obj, **kw):
        return obj

    def consumer_keywords(self):
        return frozenset({"device", "copy"})

    def describe(self, y):
        return {"ptr": 0, "shape": y.shape, "strides": row_major_strides(y.shape),
                "itemsize": itemsize(y.dtype), "readonly": False}


class ProducerOnly(FakeTarget):
    name = "fake-producer"
    roles = frozenset({"producer"})


def write_catalogue(folder, clauses):
    """clauses: {id: level} or a list of catalogue entries."""
    if isinstance(clauses, dict):
        entries = [{"id": cid, "group": cid.split("-")[0], "level": level, "binds": "both", "since": "test",
                    "source": "test", "needs": "cpu", "partial": False, "text": "clause %s" % cid}
                   for cid, level in clauses.items()]
    else:
        entries = list(clauses)
    path = os.path.join(folder, "clauses.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"schema": "dlconform-clauses/1", "clauses": entries}, f)
    return path


def write_suite(folder, files, clauses=None):
    """Writes test files {name: source} (dedented) and an optional catalogue into folder."""
    os.makedirs(folder, exist_ok=True)
    for name, source in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(source).lstrip("\n"))
    if clauses is not None:
        write_catalogue(folder, clauses)
    return folder
