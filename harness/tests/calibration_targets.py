"""The targets of the calibration run (test_calibration.py): ref or pyref with one built-in
fault on, in the role of the fault's side only.

Spec: `harness/tests/calibration_targets.py:ref__NAME` or `...:pyref__NAME`. A fault breaks
one side, so only the checks of that side may count it as caught: a producer fault that
upsets a consumer check (through the forged producers, which share ref's code) would be
charged to the consumer. The checks of the other side record `unsupported` and cost nothing.
"""
from dlconform import _ref, pyref
from dlconform.targets.pyref_target import PyrefTarget
from dlconform.targets.ref import RefTarget

BASES = {
    "ref": (RefTarget, lambda name: _ref.FAULT_SIDES[name]),
    "pyref": (PyrefTarget, lambda name: pyref.FAULTS[name].side),
}


def __getattr__(attr):
    base, _, fault = attr.partition("__")
    if base not in BASES or not fault:
        raise AttributeError(attr)
    cls, side_of = BASES[base]

    def factory():
        target = cls(fault=fault)
        target.roles = frozenset({side_of(fault)})
        return target

    return factory
