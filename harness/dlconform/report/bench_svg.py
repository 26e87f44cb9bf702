"""bench.svg: the performance chart, a self-contained inline SVG (no scripts, fonts or links),
so the same text can be written to a file or pasted into the matrix HTML.

Log-scale vertical bars, one group per library, one colour per path; on every bar a dark tick
marks ref's figure for the same path (ref is the reference line), and a dashed line marks the
no-op baseline.
"""
import math
from xml.sax.saxutils import escape

# (figure id, legend); "from_dlpack:own" is the library's own from_dlpack on its own tensor
PATHS = (
    ("noop", "no-op C call"),
    ("xapi_dltensor", "C API dltensor_from"),
    ("xapi_managed", "C API managed + deleter"),
    ("xapi_lookup_managed", "C API lookup + managed"),
    ("dlpack_legacy", "__dlpack__() legacy"),
    ("dlpack_versioned", "__dlpack__ versioned"),
    ("from_dlpack:own", "own from_dlpack(x)"),
    ("x3:from_dlpack:own", "own from_dlpack, 3 args"),
)
COLORS = ("#9e9e9e", "#1b9e77", "#d95f02", "#e6ab02", "#7570b3", "#e7298a", "#66a61e", "#a6761d")


def _value(t, fid):
    if fid.endswith("from_dlpack:own"):
        fid = fid.replace("own", t.get("own_consumer") or "?")
    f = (t.get("figures") or {}).get(fid) or {}
    return f.get("ns") if f.get("status") == "ok" and f.get("ns", 0) > 0 else None


def render(perf):
    targets = {k: v for k, v in (perf or {}).get("targets", {}).items() if v.get("status") == "ran"}
    values = [_value(t, fid) for t in targets.values() for fid, _ in PATHS]
    values = [v for v in values if v]
    w, h, left, top, bottom = 960, 440, 70, 30, 110
    plot_h = h - top - bottom
    out = ['<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11" role="img" aria-label="DLPack exchange overhead">'
           % (w, h, w, h), '<rect width="100%" height="100%" fill="#ffffff"/>']
    if not values:
        out += ['<text x="20" y="40">no benchmark figures</text>', "</svg>"]
        return "\n".join(out) + "\n"
    lo = 10 ** math.floor(math.log10(min(values)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    if hi <= lo:
        hi = lo * 10

    def y(v):
        return top + plot_h * (1 - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)))

    out.append('<text x="%d" y="18" font-size="13">Exchange overhead per tensor, ns (log scale); %s</text>'
               % (left, escape((perf.get("machine") or {}).get("cpu") or "")))
    d = lo
    while d <= hi * 1.0001:
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#dddddd"/>' % (left, w - 10, y(d), y(d)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (
            left - 4, y(d) + 4, ("%g ns" % d) if d < 1000 else ("%g us" % (d / 1000))))
        d *= 10
    ref = targets.get("ref")
    n = max(len(targets), 1)
    group_w = (w - left - 10) / n
    bar_w = min(14.0, (group_w - 16) / len(PATHS))
    for gi, (spec, t) in enumerate(targets.items()):
        x0 = left + gi * group_w + (group_w - bar_w * len(PATHS)) / 2
        for pi, (fid, legend) in enumerate(PATHS):
            v = _value(t, fid)
            x = x0 + pi * bar_w
            if v is None:
                out.append('<text x="%.1f" y="%.1f" font-size="8" fill="#999999" text-anchor="middle">-</text>'
                           % (x + bar_w / 2, top + plot_h - 2))
                continue
            out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">'
                       '<title>%s %s: %.3g ns</title></rect>'
                       % (x + 1, y(v), bar_w - 2, top + plot_h - y(v), COLORS[pi], escape(spec), escape(legend), v))
            rv = _value(ref, fid) if ref else None
            if rv is not None:
                out.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#000000" stroke-width="2">'
                           '<title>ref: %.3g ns</title></line>' % (x, x + bar_w, y(rv), y(rv), rv))
        versions = ", ".join("%s" % v for v in (t.get("versions") or {}).values())[:28]
        cx = left + gi * group_w + group_w / 2
        out.append('<text x="%.1f" y="%.1f" text-anchor="middle" font-size="12">%s</text>' % (
            cx, top + plot_h + 16, escape(spec)))
        out.append('<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555555">%s</text>' % (
            cx, top + plot_h + 30, escape(versions)))
    base = perf.get("baseline_ns")
    if base and lo <= base <= hi:
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#444444" stroke-dasharray="4 3"/>'
                   % (left, w - 10, y(base), y(base)))
    ly = h - bottom + 50
    for pi, (fid, legend) in enumerate(PATHS):
        lx = left + (pi % 4) * 215
        yy = ly + (pi // 4) * 16
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>' % (lx, yy - 9, COLORS[pi]))
        out.append('<text x="%d" y="%d">%s</text>' % (lx + 14, yy, escape(legend)))
    yy = ly + 34
    out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#000000" stroke-width="2"/>'
               % (left, left + 12, yy - 4, yy - 4))
    out.append('<text x="%d" y="%d">ref, same path (the reference)</text>' % (left + 16, yy))
    out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#444444" stroke-dasharray="4 3"/>'
               % (left + 215, left + 227, yy - 4, yy - 4))
    out.append('<text x="%d" y="%d">no-op baseline; figures comparable within one run on one machine only</text>'
               % (left + 231, yy))
    out.append("</svg>")
    return "\n".join(out) + "\n"
