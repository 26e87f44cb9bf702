"""The fuzzer's shared seeds (fuzz/corpus/seeds) as suite checks: every input the fuzz targets
start from is fed to the consumer and judged by the suite's rules (support/seeds.py), so a
class of finding fuzz-ci confirms on them shows in the suite too, on the same input.
harness/tests/test_seed_agreement.py holds these checks and the fuzz oracles to one verdict.
"""
import pytest

from dlconform.fuzz import record as R
from dlconform.verdicts import Unsupported
from support import repros as rp
from support import seeds as sd


def _params():
    for name, data in sd.seeds():
        rec = R.apply_offer(R.decode(data))
        if sd.offers_table_checks(rec):
            continue
        feeds = "invalid" if any(m == "invalid" for _, m, _ in sd.Input(data).reasons) else "valid"
        yield pytest.param(name, id=name, marks=[pytest.mark.clause(sd.Input(data).clause()),
                                                 pytest.mark.feeds(feeds)])


@pytest.mark.parametrize("seed_name", list(_params()))
@pytest.mark.role("consumer")
def test_consumer_shared_fuzz_seed(target, check, seed_name):
    """One shared seed: the reasons to refuse it, a legal export's values, the rename and exact
    deleter accounting, by the suite's rules."""
    data = dict(sd.seeds())[seed_name]
    check.repro(rp.setup(target, modules="_probe, _ref, REPO_DIR") + [
        "import sys; sys.path.insert(0, REPO_DIR + '/suites')  # the suite's own rules judge the seed",
        "from support import seeds as sd",
        "from dlconform.targets.loader import load",
        "T = load(%r)  # the target as the suite drives it" % (target.spec or target.name),
        "data = open(sd.SEEDS_DIR + '/%s', 'rb').read()" % seed_name,
        "found = [r for r in sd.judge(T, data) if r[1] != 'pass']",
        "for clause, verdict, message in found[:1]:",
        "    finding(clause, 'seed %s: %%s (%%s)' %% (message, verdict))" % seed_name])
    if not target.has_role("consumer"):
        raise Unsupported("not a consumer")
    inp = sd.Input(data)
    for clause, verdict, message in sd.judge(target, data):
        check.record(clause, verdict, "seed %s: %s" % (seed_name, message))
    check.record(inp.clause(), "pass", "")
