"""fuzz-ci's results.json (dlconform.fuzz.ci.merge_results) describes its run as `dlconform run`
does: the environment, and the fuzzed target's library versions, so merged fuzz records carry
their library's version."""
import json

import pytest

from dlconform.fuzz import ci
from dlconform.records import Record

numpy = pytest.importorskip("numpy")


def test_fuzz_results_name_the_environment_and_the_target_versions(tmp_path):
    rec = Record(target="numpy", role="consumer", clause="LAY-09", verdict="crash", message="fuzz (signal): x",
                 test="fuzz:numpy:0123456789ab", duration=1.0)
    ci.merge_results(str(tmp_path), "numpy", [rec], "numpy")
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["environment"]["libraries"]["numpy"] == numpy.__version__
    assert doc["environment"]["python"]["version"]
    assert doc["targets"]["numpy"]["versions"] == {"numpy": numpy.__version__}
    ci.merge_results(str(tmp_path), "validator", [], None)     # no library: the environment stays
    again = json.loads((tmp_path / "results.json").read_text())
    assert again["environment"] == doc["environment"] and again["targets"]["validator"]["versions"] == {}
