"""The C files of probes/ref and of fuzz call each other one way only.

Each file is compiled to an object with the Makefile's flags; nm says which external
symbols it defines and which it uses. A file calls another when it uses a symbol the other
defines: that file-level call graph must have no cycle. probes/ref/ref.h lists its files
bottom-up, and the calls must respect that order.
"""
import concurrent.futures
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "build" / "include" / "dlpack" / "dlpack.h"

# Prints the compilers and flags the Makefile builds with: _ref's (CFLAGS_STRICT,
# PY_INCLUDES, MODULE_FLAGS) and the fuzz targets' (FUZZ_CFLAGS, FUZZ_PY_CFLAGS).
PRINT_FLAGS = (
    "dlc-print-flags:\n"
    "\t$(info $(CC))\n"
    "\t$(info $(CFLAGS_STRICT) $(PY_INCLUDES) $(MODULE_FLAGS))\n"
    "\t$(info $(FUZZ_CC))\n"
    "\t$(info $(FUZZ_CFLAGS) $(FUZZ_PY_CFLAGS))\n"
    "\t@:\n"
)


def makefile_builds():
    """{"ref": (compiler, flags), "fuzz": (compiler, flags)} as the Makefile has them."""
    out = subprocess.run(
        ["make", "-s", "--no-print-directory", "-f", "Makefile", "-f", "-", "dlc-print-flags"],
        input=PRINT_FLAGS, cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    cc, ref_flags, fuzz_cc, fuzz_flags = out[:4]
    # Objects, not the shared module; no LTO, whose objects hold bytecode nm cannot read.
    ref_flags = [f for f in shlex.split(ref_flags) if f != "-shared" and not f.startswith("-flto")]
    # mutator.c needs an engine; the libFuzzer one is what fuzz.mk builds with.
    fuzz_flags = shlex.split(fuzz_flags) + ["-DDLC_ENGINE_LIBFUZZER"]
    return {"ref": (cc, ref_flags), "fuzz": (fuzz_cc, fuzz_flags)}


def symbols(obj):
    """(defined, used): the external symbols an object file defines and those it uses."""
    out = subprocess.run(["nm", "-P", "-g", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        name, kind = line.split()[:2]
        (used if kind == "U" else defined).add(name)
    return defined, used


def call_graph(sources, compiler, flags, out_dir):
    """{file name: set of the other files it calls}, from each source's object file."""
    def compile_one(src):
        obj = out_dir / (src.name + ".o")
        r = subprocess.run([compiler, *flags, "-c", str(src), "-o", str(obj)], cwd=ROOT,
                           capture_output=True, text=True)
        assert r.returncode == 0, f"{src} does not compile:\n{r.stderr}"
        return src.name, symbols(obj)

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        tables = dict(pool.map(compile_one, sources))
    owner = {sym: name for name, (defined, _) in tables.items() for sym in defined}
    return {name: {owner[s] for s in used if s in owner} - {name}
            for name, (_, used) in tables.items()}


def find_cycle(graph):
    """A list of files [a, b, ..., a] that call each other round, or None."""
    state, path = {}, []

    def visit(node):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_find_cycle_finds_a_circle_and_only_a_circle():
    assert find_cycle({"a.c": {"b.c"}, "b.c": {"c.c"}, "c.c": {"a.c"}}) == \
        ["a.c", "b.c", "c.c", "a.c"]
    assert find_cycle({"a.c": {"b.c", "c.c"}, "b.c": {"c.c"}, "c.c": set()}) is None


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    if not HEADER.exists():
        pytest.skip("no dlpack.h: run `make build` first")
    builds = makefile_builds()
    out = {}
    for part, folder in (("ref", "probes/ref"), ("fuzz", "fuzz")):
        compiler, flags = builds[part]
        if not shutil.which(compiler):
            out[part] = None  # fuzz.mk's clang is not installed here
            continue
        sources = sorted((ROOT / folder).glob("*.c"))
        out[part] = call_graph(sources, compiler, flags, tmp_path_factory.mktemp(part))
    return out


@pytest.mark.parametrize("part", ["ref", "fuzz"])
def test_files_call_each_other_one_way(graphs, part):
    graph = graphs[part]
    if graph is None:
        pytest.skip(f"the compiler the Makefile builds {part} with is not installed")
    assert any(graph.values()), f"{part}: no file calls another; nm read nothing"
    cycle = find_cycle(graph)
    assert cycle is None, f"{part}: the files call each other in a circle: " + " -> ".join(cycle)


def test_ref_h_lists_every_file_below_the_files_that_call_it(graphs):
    """ref.h's opening comment names each probes/ref/*.c once, callees first."""
    comment = (ROOT / "probes/ref/ref.h").read_text().split("*/", 1)[0]
    listed = re.findall(r"\b(\w+\.c)\b", comment)
    graph = graphs["ref"]
    assert sorted(listed) == sorted(graph), "ref.h's file list is not the files of probes/ref"
    place = {name: i for i, name in enumerate(listed)}
    late = [f"{a} calls {b}" for a in listed for b in sorted(graph[a]) if place[b] > place[a]]
    assert not late, "ref.h lists a file above one it calls: " + "; ".join(late)
