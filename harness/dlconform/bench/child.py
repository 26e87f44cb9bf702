"""The benchmark's child: measures one target in this process and prints one JSON line
(`python3 -m dlconform.bench --child SPEC`). A framework that crashes here costs only its
own figures; the parent (bench/__init__.py) aggregates."""
import argparse
import json
import sys

CONSUMERS = ("ref", "numpy", "torch", "tvm_ffi")
SHAPE = (8, 8)  # float32; the exchange cost does not depend on the size (zero-copy)


def _consumer(name):
    import importlib

    if name == "ref":
        from .. import _ref

        return _ref.from_dlpack
    mod = importlib.import_module(name)
    return getattr(mod, "from_dlpack")


def _own_consumer(spec, target):
    if spec == "ref" or spec.startswith("ref:"):
        return "ref"
    name = getattr(getattr(target, "module", None), "__name__", None) or spec
    return name.split(".")[0]


def _one_line(e):
    text = str(e).strip().splitlines()
    return "%s: %s" % (type(e).__name__, text[0] if text else "")


def child(spec, batches, target_ms, warmup_ms):
    """Measures spec in this process; a dict (see reports/README.md, `performance`)."""
    import gc

    from .. import _probe
    from ..targets.loader import load

    target = load(spec)
    out = {"spec": spec, "versions": {k: str(v) for k, v in (target.versions() or {}).items()},
           "figures": {}, "cache": {}, "notes": []}
    n = SHAPE[0] * SHAPE[1]
    xs = tuple(target.make("float32", SHAPE, bytes(4 * n)) for _ in range(3))
    x = xs[0]
    own = out["own_consumer"] = _own_consumer(spec, target)
    figs = out["figures"]

    def measure(fid, op, objs, arg=None):
        try:
            r = _probe.bench(op, objs, arg, batches=batches, target_ms=target_ms, warmup_ms=warmup_ms)
            figs[fid] = {"batch": r["batch"], "samples": r["samples"]}
        except NotImplementedError as e:
            figs[fid] = {"status": "unsupported", "reason": _one_line(e)}
        except Exception as e:
            figs[fid] = {"status": "error", "reason": _one_line(e)}

    def unsupported(fid, why):
        figs[fid] = {"status": "unsupported", "reason": why}

    gc.collect()
    gc.disable()  # no collection inside a timed batch; every object here is freed by refcount
    measure("noop", "noop", ())
    # __dlpack__, legacy and versioned, and whether repeated exports share one struct
    for fid, kw in (("dlpack_legacy", {}), ("dlpack_versioned", {"max_version": (1, 3)})):
        try:
            c1, c2 = x.__dlpack__(**kw), x.__dlpack__(**kw)
            i1, i2 = _probe.inspect(c1), _probe.inspect(c2)
            out["cache"][fid] = i1["pointer"] == i2["pointer"]
            if fid == "dlpack_versioned" and i1["kind"] != "versioned":
                out["notes"].append("__dlpack__(max_version=(1, 3)) returns a %s capsule" % i1["kind"])
            del c1, c2
        except Exception as e:
            unsupported(fid, _one_line(e))
            continue
        measure(fid, fid, (x,))
    three_dlpack = "dlpack_versioned" if "samples" in figs.get("dlpack_versioned", {}) else "dlpack_legacy"
    if "samples" in figs.get(three_dlpack, {}):
        measure("x3:" + three_dlpack, three_dlpack, xs)
    # from_dlpack, per consumer
    for name in CONSUMERS:
        fid = "from_dlpack:" + name
        try:
            fn = _consumer(name)
            fn(x)  # once: a consumer that refuses this producer is reported, not timed
        except Exception as e:
            unsupported(fid, _one_line(e))
            continue
        measure(fid, "from_dlpack", (x,), fn)
        if name == own and "samples" in figs[fid]:
            measure("x3:" + fid, "from_dlpack", xs, fn)
    # the C exchange API
    info = _probe.exchange_api(x)
    if not info or info.get("form") != "capsule" or not info.get("functions"):
        why = "no usable __dlpack_c_exchange_api__ capsule (%s)" % (
            "absent" if not info else "form %s, version %s" % (info.get("form"), info.get("version")))
        for fid in ("xapi_lookup", "xapi_managed", "xapi_dltensor", "xapi_stream", "xapi_alloc",
                    "xapi_lookup_managed"):
            unsupported(fid, why)
    else:
        api = info["pointer"]
        try:
            h1, h2 = _probe.xapi_managed_from(api, x)[1], _probe.xapi_managed_from(api, x)[1]
            if h1 is not None and h2 is not None:
                out["cache"]["xapi_managed"] = h1.pointer == h2.pointer
                h1.release()
                h2.release()
        except Exception as e:
            out["notes"].append("cache check of the C API failed: %s" % _one_line(e))
        if info.get("on_type"):
            measure("xapi_lookup", "xapi_lookup", (x,))
            measure("xapi_lookup_managed", "xapi_lookup_managed", (x,))
            measure("x3:xapi_lookup_managed", "xapi_lookup_managed", xs)
        else:
            unsupported("xapi_lookup", "the table is not on the type")
        measure("xapi_managed", "xapi_managed", (x,), api)
        measure("x3:xapi_managed", "xapi_managed", xs, api)
        measure("xapi_dltensor", "xapi_dltensor", (x,), api)
        measure("xapi_stream", "xapi_stream", (), api)
        measure("xapi_alloc", "xapi_alloc", (), api)
    if own == "ref":
        from .. import _ref

        measure("xapi_managed_uncached", "xapi_managed", (x,), _ref.UNCACHED_EXCHANGE_API)
    gc.enable()
    return out


def main(argv):
    p = argparse.ArgumentParser(prog="dlconform.bench")
    p.add_argument("--child", required=True)
    p.add_argument("--batches", type=int, default=21)
    p.add_argument("--target-ms", type=float, default=2.0)
    p.add_argument("--warmup-ms", type=float, default=20.0)
    a = p.parse_args(argv)
    from ..targets.base import TargetError

    try:
        res = child(a.child, a.batches, a.target_ms, a.warmup_ms)
        res["status"] = "ran"
    except TargetError as e:
        res = {"spec": a.child, "status": "skipped", "reason": str(e) or "unavailable"}
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()
    return 0
