"""Hypothesis strategies shared by the suites (shapes, strides and views), and the glue
that lets a hypothesis body shrink a finding and record it.

Everything drawn is plain data (names, tuples, ints); building tensors is the job of the
tests and the target adapters. Strides are in elements, byte offsets in bytes.

- `shapes()`: shapes with zero-size and 0-d cases; `high_ndim_shapes()`: ndim up to 32 with
  a small element count.
- `strides_for(shape)`: strides for a given shape: row-major, transposed, stepped, negative,
  odd strides on size-1 dims.
- `views()`: `View(shape, strides, byte_offset, buffer_size, itemsize)` over a buffer that
  covers the view's extent exactly (plus padding), for forged capsules.
- `view_ops(ndim)`: a list of native view operations (transpose/slice/flip) to apply to a
  target's tensor.
- `settings_bounded`: the suite-wide bounded, deterministic hypothesis settings; a body adds its
  own `@hypothesis.seed(...)` so that editing its text does not change the examples drawn.
- `explore(check, case, target, strategy, ...)`: runs a module-level case function on drawn
  examples; a fail-level finding shrinks to the smallest failing example, whose records are
  recorded and which becomes the check's reproducer.
- The depth of a run (`dlconform run --examples N --seed S`, or the environment variables
  DLCONFORM_EXAMPLES and DLCONFORM_SEED, which reach the checks in their processes): every
  exploration draws N examples instead of its own bound (at most 20), and S mixes into each
  exploration's seed, so a CI job can search deeper and elsewhere on every run while a finding
  stays reproducible from its example alone.
"""
import os
import sys
from collections import namedtuple

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from dlconform.kit.check import Unsupported


def shapes(min_ndim=0, max_ndim=4, max_side=5, allow_zero=True, max_numel=512):
    """Shapes, 0-d and zero-size included; the element count stays under max_numel."""
    side = st.integers(0 if allow_zero else 1, max_side)

    def small(shape):
        n = 1
        for s in shape:
            n *= max(s, 1)
        return n <= max_numel

    return st.lists(side, min_size=min_ndim, max_size=max_ndim).map(tuple).filter(small)


def high_ndim_shapes(min_ndim=17, max_ndim=32):
    """ndim up to 32: mostly size-1 dims, a few of size 2 or 0, so numel stays tiny."""
    return st.lists(st.sampled_from((1, 1, 1, 2)), min_size=min_ndim, max_size=max_ndim).flatmap(
        lambda dims: st.one_of(st.just(tuple(dims)), st.integers(0, len(dims) - 1).map(
            lambda i: tuple(dims[:i]) + (0,) + tuple(dims[i + 1:]))))


@st.composite
def strides_for(draw, shape, allow_negative=True):
    """Element strides for `shape`: a permuted compact base layout, stepped per dim, optionally
    negated, with arbitrary (odd, negative, zero-like) strides on size-1 dims."""
    ndim = len(shape)
    if ndim == 0:
        return ()
    order = draw(st.permutations(range(ndim)))
    steps = [draw(st.sampled_from((1, 1, 2, 3))) for _ in range(ndim)]
    strides = [0] * ndim
    acc = 1
    for d in reversed(order):  # the last in `order` varies fastest
        strides[d] = acc * steps[d]
        acc *= max(shape[d], 1) * steps[d]
    for d in range(ndim):
        if shape[d] == 1:
            strides[d] = draw(st.sampled_from((strides[d], 1, 7, 13, -5, 0)))
            if not allow_negative and strides[d] < 0:
                strides[d] = -strides[d]
        elif allow_negative and draw(st.booleans()) and draw(st.booleans()):
            strides[d] = -strides[d]
    return tuple(strides)


def extent(shape, strides):
    """(lo, hi) in elements relative to the first element: every element lies in [lo, hi)."""
    if any(n == 0 for n in shape):
        return 0, 0
    lo = hi = 0
    for n, s in zip(shape, strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + 1


View = namedtuple("View", "shape strides byte_offset buffer_size itemsize")


@st.composite
def views(draw, itemsize=4, min_ndim=0, max_ndim=4, max_side=4, allow_negative=True, allow_zero=True,
          odd_offset=False):
    """A strided view over a buffer: byte_offset puts the first element inside the buffer so
    that every element, negative strides included, lies in [0, buffer_size)."""
    shape = draw(shapes(min_ndim, max_ndim, max_side, allow_zero))
    strides = draw(strides_for(shape, allow_negative))
    lo, hi = extent(shape, strides)
    pad = draw(st.integers(0, 3))
    first = -lo + pad  # elements before the first element
    extra = draw(st.integers(0, 7)) if odd_offset else 0  # bytes, breaks element alignment
    byte_offset = first * itemsize + extra
    buffer_size = byte_offset + max(hi, 0) * itemsize + draw(st.integers(0, 3)) * itemsize
    return View(tuple(shape), tuple(strides), byte_offset, max(buffer_size, 1), itemsize)


def view_ops(ndim, allow_flip=True, max_ops=3):
    """Native view operations: ("transpose", perm), ("slice", dim, start, stop, step),
    ("flip", dim). Slices use steps and possibly empty ranges; flips give negative strides."""
    if ndim == 0:
        return st.just([])
    op = st.one_of(
        st.permutations(range(ndim)).map(lambda p: ("transpose", tuple(p))),
        st.tuples(st.just("slice"), st.integers(0, ndim - 1), st.integers(0, 2), st.sampled_from((None, 1, 3, 5)),
                  st.sampled_from((1, 2, 3))),
        *([st.tuples(st.just("flip"), st.integers(0, ndim - 1))] if allow_flip else []),
    )
    return st.lists(op, min_size=0, max_size=max_ops)


#: the environment variables of a deeper run (dlconform run --examples, --seed)
EXAMPLES_ENV, SEED_ENV = "DLCONFORM_EXAMPLES", "DLCONFORM_SEED"


def _env_int(name):
    """The positive int (examples) or int (seed) an environment variable gives; None unset."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError("%s=%r is not an integer" % (name, text)) from None
    if name == EXAMPLES_ENV and value < 1:
        raise ValueError("%s=%r: the examples per exploration must be at least 1" % (name, text))
    return value


def examples(max_examples):
    """The examples an exploration draws: its own bound (at most 20), or the run's depth."""
    deeper = _env_int(EXAMPLES_ENV)
    return deeper if deeper is not None else min(max_examples, 20)


def run_seed(seed):
    """An exploration's seed with the run's (DLCONFORM_SEED) mixed in; `seed` as it is when the
    run names none."""
    extra = _env_int(SEED_ENV)
    if extra is None:
        return seed
    return ((seed or 0) ^ (extra * 0x9E3779B97F4A7C15)) & ((1 << 128) - 1)


def settings_bounded(max_examples=20, **kw):
    """Bounded and reproducible: derandomized, no deadline, no example database; as many
    examples as examples() says."""
    return settings(max_examples=examples(max_examples), derandomize=True, deadline=None, database=None,
                    report_multiple_bugs=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
                    **kw)


# ---------------------------------------------------------------------------- exploring a case
class Finding(Exception):
    """Raised inside a hypothesis example for a fail-level finding, so that the example shrinks."""

    def __init__(self, records, args):
        super().__init__("; ".join("%s %s: %s" % r for r in records))
        self.records, self.args_ = records, args


def _at_recursion_limit(fn, limit):
    def inner(*args, **kwargs):
        raised = sys.getrecursionlimit()
        sys.setrecursionlimit(limit)
        try:
            return fn(*args, **kwargs)
        finally:
            sys.setrecursionlimit(raised)

    return inner


def explore(check, case, target, strategy, max_examples=20, seed=None, **fixed):
    """Runs the case function `case(target, check, **fixed, **drawn)` on examples drawn from
    `strategy` (a strategy of argument dicts). A fail-level finding shrinks to the smallest
    failing example, whose records are recorded and which becomes the check's reproducer
    (check.set_case); warn-level records are recorded as they come, each with its example as the
    reproducer of its clause (Check.found). `case` must be a module-level function: the reproducer
    calls it with the example's arguments as literals. `seed` fixes the examples drawn. The
    examples run at the recursion limit of the process: hypothesis raises it while it draws, and
    the library under test must see the process as it is."""
    unsupported, ran = [], []

    @settings_bounded(max_examples)
    @given(strategy)
    def body(drawn):
        args = dict(fixed, **drawn)
        check.set_case(case, args)
        sub = check.child()
        try:
            case(target, sub, **args)
        except Unsupported as e:  # this example only (a shape the adapter cannot make): the others go on
            unsupported.append(str(e))
            return
        ran.append(True)
        for clause, why in sub.unreached.items():
            check.unreached.setdefault(clause, []).extend(why)
        if any(v in ("fail", "crash") for _, v, _ in sub.records):
            raise Finding(sub.records, args)
        for rec in sub.records:
            if rec[1] != "pass":
                check.record(*rec)

    seed = run_seed(seed)
    if seed is not None:
        body = hypothesis_seed(seed)(body)
    body.hypothesis.inner_test = _at_recursion_limit(body.hypothesis.inner_test, sys.getrecursionlimit())
    try:
        body()
    except Finding as f:
        check.set_case(case, f.args_)
        for rec in f.records:
            check.record(*rec)
        return
    check.set_case(None)
    if unsupported and not ran:  # no example could be made: the check does not apply
        raise Unsupported(unsupported[0])
