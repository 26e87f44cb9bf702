"""A check's marks in one line: the clauses it judges, the role it judges them for, what it
feeds the library (valid input unless `feeds` says otherwise).

    @producer("CAP-01")                     # pytest.mark.clause("CAP-01"), pytest.mark.role("producer")
    @consumer("LAY-10", feeds="invalid")    # ... role("consumer"), pytest.mark.feeds("invalid")

They are pytest's own marks, which the plugin reads (dlconform.pytest_plugin: item_clauses,
item_role, item_feeds); a test marked by hand is the same to it. `interop_params`: the cases of
the interop checks, each producer's in a runner lane of their own."""
import importlib.util

import pytest

from .tensors import INTEROP_DTYPES, INTEROP_LAYOUTS


def _role(role):
    def marks(*clauses, feeds=None):
        applied = [pytest.mark.clause(*clauses), pytest.mark.role(role)]
        applied += [pytest.mark.feeds(feeds)] if feeds is not None else []

        def apply(fn):
            for mark in applied:
                fn = mark(fn)
            return fn
        return apply
    marks.__name__ = marks.__qualname__ = role
    marks.__doc__ = "Marks a %s check of `clauses` (feeding `feeds`, valid when None)." % role
    return marks


producer, consumer = _role("producer"), _role("consumer")


def interop_params(producers, lane):
    """pytest params of the interop cases, (producer, layout, dtype), of each (producer spec,
    module it needs) of `producers` whose module is installed; a producer's cases share the
    runner lane `lane` + its spec (pytest.mark.lane_group), so that each child loads the
    producer once."""
    return [pytest.param((p, layout, dtype), id="%s-%s-%s" % (p, layout, dtype),
                         marks=pytest.mark.lane_group(lane + p))
            for p, module in producers if _installed(module) for layout in INTEROP_LAYOUTS for dtype in INTEROP_DTYPES]


def _installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
