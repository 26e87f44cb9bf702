"""The matrix page (index.html) in a real browser: Debian's chromium, headless, driven by
playwright-core (matrix_browser.js) over a page served from localhost. Checks the filters, the
drill-down, keyboard access and both widths (1280 and 390 px); screenshots go to reports/out/.

Needs /usr/bin/chromium, node and playwright-core under reports/.browser: `make test-deps`
(probes/build-tools/deps.sh test) installs them, and `make test` runs it first. Skipped only
where they cannot be installed (not root); as root a missing part is an error.
"""
import functools
import http.server
import json
import os
import shutil
import subprocess
import threading

import pytest

from dlconform import REPO_DIR

import matrix_fixture

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
NODE_MODULES = os.path.join(REPO_DIR, "reports", ".browser", "node_modules")
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "matrix_browser.js")
SHOTS = os.path.join(REPO_DIR, "reports", "out")


def _missing():
    if not os.access(CHROMIUM, os.X_OK):
        return "chromium is not installed (%s; apt-get install chromium)" % CHROMIUM
    if not shutil.which("node"):
        return "node is not installed (apt-get install nodejs npm)"
    if not os.path.isdir(os.path.join(NODE_MODULES, "playwright-core")):
        return "playwright-core is not installed (npm install --prefix reports/.browser playwright-core)"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None and os.geteuid() != 0,
                                reason="%s; not root, so `make test-deps` cannot install it" % _missing())


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        self.server.seen.append(self.path)
        return super().do_GET()


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    assert _missing() is None, _missing() + ": run `make test-deps` (as root it installs them)"
    tmp = tmp_path_factory.mktemp("matrix")
    doc, errors, paths = matrix_fixture.build(tmp)
    assert len(errors) == 1  # the fixture's malformed file
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                          functools.partial(_Quiet, directory=os.path.dirname(paths["html"])))
    srv.seen = []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    os.makedirs(SHOTS, exist_ok=True)
    url = "http://127.0.0.1:%d/index.html" % srv.server_address[1]
    env = dict(os.environ, NODE_PATH=NODE_MODULES, CHROMIUM=CHROMIUM)
    try:
        proc = subprocess.run(["node", DRIVER, url, SHOTS], capture_output=True, text=True, env=env, timeout=240)
    finally:
        srv.shutdown()
        srv.server_close()
    assert proc.returncode == 0, "driver failed:\n" + proc.stderr[-4000:]
    obs = json.loads(proc.stdout.strip().splitlines()[-1])
    obs["served"] = list(srv.seen)
    obs["url"] = url
    return obs


def test_no_network_and_no_errors(observed):
    assert observed["console_errors"] == []
    assert set(observed["served"]) == {"/index.html"}
    assert all(u.split("#")[0] == observed["url"] for u in observed["requests"]), observed["requests"]


def test_page_shows_all_views(observed):
    w = observed["wide"]
    assert w["title"] == "DLPack compatibility matrix"
    assert w["rows"] >= 119 and w["libs"][0] == "ref" and {"numpy", "torch", "tvm_ffi"} <= set(w["libs"])
    assert w["interop_tables"] >= 3           # one per tier with interop records
    assert w["regressed"] > 0 and w["fixed"] > 0
    assert "sid" in w["banner"] and "build" in w["banner"]          # the failed tier
    assert "field 'results[0].verdict'" in w["banner"] or "results[0].verdict" in w["banner"]  # the rejected file
    assert w["page_overflow"] <= 0
    assert "undefined" not in w["legend"] and "error" in w["legend"]  # every verdict has its mark


def test_filters(observed):
    w = observed["wide"]
    assert w["lib_filter"]["libs"] == ["numpy"]
    assert w["lib_filter"]["history"] == ["numpy"]
    assert w["lib_filter"]["interop_labels"]                      # rows where numpy is one side
    assert w["group_filter"]["clauses"] and all(c.startswith("CAP-") for c in w["group_filter"]["clauses"])
    assert w["fail_filter"]["every_row_failing"] and w["fail_filter"]["rows"] <= len(w["group_filter"]["clauses"])
    assert 0 < w["fail_all"]["rows"] < w["rows"] and w["fail_all"]["every_row_failing"]
    assert w["reset_rows"] == w["rows"]
    assert w["device_filter"]["libs"] == ["torch@cuda"] and w["device_filter"]["headline"] == ["torch@cuda"]
    assert 0 < w["device_filter"]["rows"] < w["rows"] and "device=cuda" in w["device_filter"]["hash"]
    assert "torch@cuda" not in w["device_cpu_libs"] and {"ref", "numpy", "torch"} <= set(w["device_cpu_libs"])


def test_drill_down(observed):
    w = observed["wide"]
    d = w["drill"]
    assert d["open"] and "FAIL" in d["title"]
    assert "Reproducer" in d["text"] and d["pres"] >= 1          # the reproducer
    assert "MUST" in d["text"] or "SHOULD" in d["text"]          # the clause, with its level
    assert "the check saw" in d["text"] or "capsule not renamed" in d["text"]  # the message
    assert not w["after_escape"]["open"] and w["focus_back"]
    assert w["has_conflict_cell"] and "sources disagree" in w["conflict"]["text"]
    assert w["interop_drill"]["open"] and "interop" in w["interop_drill"]["title"]
    assert "LAY-11" in w["interop_drill"]["text"] or "SEM-01" in w["interop_drill"]["text"]  # clause text too
    assert "MUST" in w["interop_drill"]["text"]


def test_keyboard(observed):
    w = observed["wide"]
    assert not w["tab_start"]["open"], "the page opened with its dialog open: %r" % w["tab_start"]
    assert "f-lib" in w["tab_order"] and "f-fail" in w["tab_order"]
    assert w["tab_order"][-1].startswith("BUTTON.c")
    k0, k1, k2 = w["arrows"]
    assert k0 and k1 and k2 and len({k0, k1, k2}) == 3
    assert w["enter"]["open"] and w["enter"]["active"] == "d-close"
    assert not w["enter_closed"]["open"]
    assert w["space"]["open"] and not w["space_closed"]["open"]


def test_narrow_390(observed):
    n = observed["narrow"]
    assert n["page_overflow"] <= 0                     # the page itself never scrolls sideways
    assert all(n["filters_visible"])
    assert n["font_px"] >= 12
    assert n["scroller"]["overflowX"] == "auto" and n["scroller"]["scroll"] > n["scroller"]["client"]
    assert n["fail_rows"] > 0
    assert n["drill"]["open"] and n["dialog_box"]["left"] >= 0 and n["dialog_box"]["right"] <= 391
    assert not n["after_escape"]["open"]


def test_headline_and_deep_link_to_a_finding(observed):
    """A new user: the headline at the top links to the library's findings; a finding opens its
    evidence and reproducer and puts a lasting anchor in the URL; that URL opens the same view."""
    d = observed["deep"]
    assert d["headline_libs"][0] == "ref" and {"numpy", "torch", "tvm_ffi"} <= set(d["headline_libs"])
    assert d["go_href"].startswith("#lib-") and d["go_href"][1:] in d["sections"]
    lib = d["go_href"][len("#lib-"):]
    assert d["chip"].startswith(lib + "-")                      # library-version-role-clause
    assert d["clicked"]["open"] and "Reproducer" in d["clicked"]["text"] and d["clicked"]["pres"] >= 1
    assert "open=" + d["chip"] in d["link"]
    assert d["followed"]["open"] and d["followed"]["title"] == d["clicked"]["title"]
    assert d["followed"]["text"] == d["clicked"]["text"]
    assert "open=" not in d["closed_hash"]                     # closing the dialog leaves the filters
    assert d["filters"] == ["numpy", "CAP", True] and d["filter_libs"] == ["numpy"]
    assert d["device_link"] == {"value": "cuda", "libs": ["torch@cuda"]}
    assert "lib=torch" in d["hash_after_select"] and "group=CAP" in d["hash_after_select"]
    assert d["bare"]["open"] and d["bare"]["title"] == d["clicked"]["title"]  # a bare #anchor works too
