"""The fuzzer's shared seeds (fuzz/corpus/seeds) as suite checks: every input the fuzz targets
start from is fed to the consumer and judged by the suite's rules (support/seeds.py), so a
class of finding fuzz-ci confirms on them shows in the suite too, on the same input.
harness/tests/test_fuzz_flow_back.py holds these checks and the fuzz oracles to one verdict.
"""
import pytest

from dlconform.fuzz import record as R
from support import seedrules as sr
from support import seeds as sd


def _params():
    for name, data in sd.seeds():
        if sd.offers_table_checks(R.apply_offer(R.decode(data))):
            continue
        feeds = "invalid" if any(m == "invalid" for _, m, _ in sd.Input(data).reasons) else "valid"
        yield pytest.param(name, id=name, marks=[pytest.mark.clause(sd.Input(data).clause()),
                                                 pytest.mark.feeds(feeds)])


def judge_seed(target, check, seed_name, facts):
    """The rules on one seed read into `facts` (support/seeds.py: Input.facts), as literals."""
    for clause, verdict, message in sr.judge(facts, target):
        check.record(clause, verdict, "seed %s: %s" % (seed_name, message))


@pytest.mark.parametrize("seed_name", list(_params()))
@pytest.mark.role("consumer")
def test_consumer_shared_fuzz_seed(target, check, seed_name):
    """One shared seed: the reasons to refuse it, a legal export's values, the rename and exact
    deleter accounting, by the suite's rules."""
    inp = sd.Input(dict(sd.seeds())[seed_name])
    args = {"seed_name": seed_name, "facts": inp.facts(target)}
    check.set_case(judge_seed, args)
    judge_seed(target, check, **args)
    check.record(inp.clause(), "pass", "")
