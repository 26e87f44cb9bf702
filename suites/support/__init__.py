"""Helpers of the suites, one module per job. Every test file imports them under these
aliases, and no other name means them:

    from support import attempts as tries     # consumer side: Attempt, forged capsules, deleter accounting
    from support import capsules as pycap     # capsule names, flags, versions, exports, ABI offsets
    from support import cuda as cu            # CUDA observed: a target's device, pending data, reads on a stream
    from support import dtypes as dty         # the dtype table (dlconform.targets.dtypes), element values
    from support import exchange as xa        # the C exchange API table of a producer
    from support import readings as rd        # catalogue readings that decide a verdict
    from support import repros as rp         # run_case: a case run as its own reproducer in a child
    from support import strategies as hh      # hypothesis strategies, shrinking a finding
    from support import tensors as tns        # producer side: native tensors, views, layouts
    from support.marks import consumer, producer   # a check's marks: @producer("CAP-01")

Verdicts are recorded through the `check` fixture only (check.refusal() holds the
clean-refusal rule); `readings` and `attempts` return what they saw, or record through the
`check` they are given.
"""
