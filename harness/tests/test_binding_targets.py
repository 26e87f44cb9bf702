"""The nanobind and onnxruntime targets where they cannot load: the host has neither nanobind-dev
(so no dlconform._nanobind glue) nor onnxruntime. They run in the sid tier (harness/tiers)."""
import importlib.util

import pytest

from dlconform.targets import loader


@pytest.mark.parametrize("name, module", [("nanobind", "dlconform._nanobind"), ("onnxruntime", "onnxruntime")])
def test_builtin_and_skipped_with_a_reason_where_missing(name, module):
    assert name in loader.BUILTIN and loader.BUILTIN[name][2] == module
    if importlib.util.find_spec(module) is not None:
        pytest.skip("%s imports here: the tier runs check it" % module)
    info = loader.probe(name)
    assert not info["ok"] and module in info["reason"]
