"""Draws docs/grafana/fencelock.json's panels from a real run's scrapes, as a page for a browser
to photograph (scripts/dashboard-picture): each panel's expression evaluated over the scrapes,
as Prometheus would over the same samples.

    python3 dashboard.py SCRAPES DASHBOARD.json OUT.html

SCRAPES is what the `dashboard_load` example prints: Prometheus text after each line
`# SCRAPE <ms since the epoch>`. The expressions may take four shapes, the dashboard's:
`sum by (L) (M)`, `sum by (L) (rate(M[..]))`, `sum by (L) (increase(M[..]))` and
`histogram_quantile(Q, sum by (le, L) (rate(M_bucket[..])))`; any other is an error.
"""

import html
import json
import re
import sys

WINDOW_MS = 5000  # the rate window ($__rate_interval at a 1 s scrape)
COLOURS = ["#73bf69", "#f2cc0c", "#5794f2", "#ff780a", "#f2495c", "#b877d9", "#8ab8ff", "#fade2a"]
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
SHAPES = [
    ("gauge", re.compile(r"^sum by \((\w+)\) \((\w+)\)$")),
    ("rate", re.compile(r"^sum by \((\w+)\) \(rate\((\w+)\[[^\]]+\]\)\)$")),
    ("increase", re.compile(r"^sum by \((\w+)\) \(increase\((\w+)\[[^\]]+\]\)\)$")),
    ("quantile", re.compile(
        r"^histogram_quantile\(([0-9.]+), sum by \(le, (\w+)\) \(rate\((\w+)_bucket\[[^\]]+\]\)\)\)$")),
]


def scrapes(path):
    """[(ms, [(name, {labels}, value)])] in order."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# SCRAPE "):
                out.append((int(line.split()[2]), []))
            elif line and not line.startswith("#") and out:
                m = SAMPLE.match(line)
                if not m:
                    raise SystemExit(f"not a sample: {line!r}")
                labels = dict(LABEL.findall(m.group(2) or ""))
                out[-1][1].append((m.group(1), labels, float(m.group(3))))
    if len(out) < 3:
        raise SystemExit(f"{path}: {len(out)} scrapes; at least 3 are needed")
    return out


def summed(samples, name, by, keep=()):
    """name's samples summed by label `by` (and the labels in `keep`): {key: value}."""
    out = {}
    for n, labels, v in samples:
        if n == name:
            key = tuple([labels.get(by, "")] + [labels.get(k, "") for k in keep])
            out[key] = out.get(key, 0.0) + v
    return out


def at_window(data, i):
    """The index of the scrape a window before scrape i (the first if none)."""
    t = data[i][0]
    j = i
    while j > 0 and t - data[j - 1][0] <= WINDOW_MS:
        j -= 1
    return j


def quantile(q, buckets):
    """Prometheus's histogram_quantile over [(le, cumulative count)]."""
    buckets = sorted(buckets)
    total = buckets[-1][1] if buckets else 0
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if le == float("inf"):
                return lower
            if count == below:
                return le
            return lower + (le - lower) * (rank - below) / (count - below)
        lower, below = le, count
    return lower


def series(expr, data):
    """{legend: [(ms, value or None)]} of one panel's expression over the scrapes."""
    for kind, shape in SHAPES:
        m = shape.match(expr)
        if m:
            break
    else:
        raise SystemExit(f"an expression this page cannot draw: {expr}")
    out = {}
    for i in range(1, len(data)):
        t, now = data[i]
        j = at_window(data, i)
        seconds = (t - data[j][0]) / 1000.0
        if kind == "gauge":
            by, name = m.groups()
            values = {k[0]: v for k, v in summed(now, name, by).items()}
        elif kind in ("rate", "increase"):
            by, name = m.groups()
            old = summed(data[j][1], name, by)
            values = {}
            for k, v in summed(now, name, by).items():
                delta = max(0.0, v - old.get(k, 0.0))
                values[k[0]] = delta / seconds if kind == "rate" else delta
        else:
            q, by, name = float(m.group(1)), m.group(2), m.group(3)
            new = summed(now, name + "_bucket", by, ("le",))
            old = summed(data[j][1], name + "_bucket", by, ("le",))
            per = {}
            for (label, le), v in new.items():
                bound = float("inf") if le == "+Inf" else float(le)
                per.setdefault(label, []).append((bound, v - old.get((label, le), 0.0)))
            values = {label: quantile(q, b) for label, b in per.items()}
        for legend, v in values.items():
            out.setdefault(legend or "(all)", []).append((t, v))
    return out


def svg(panel, lines, t0, t1):
    """One panel as SVG."""
    w, h, left, top, bottom = 460, 250, 56, 30, 48
    plot_w, plot_h = w - left - 12, h - top - bottom
    values = [v for pts in lines.values() for _, v in pts if v is not None]
    top_value = max(values) if values else 1.0
    top_value = top_value * 1.1 if top_value > 0 else 1.0
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")

    def x(t):
        return left + plot_w * (t - t0) / max(1, t1 - t0)

    def y(v):
        return top + plot_h * (1 - v / top_value)

    def shown(v):
        if unit == "s":
            return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.1f} s"
        return f"{v:.0f}" if v >= 10 else f"{v:.1f}"

    parts = [f'<svg width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">',
             f'<rect width="{w}" height="{h}" rx="4" fill="#181b1f" stroke="#2c3235"/>',
             f'<text x="10" y="20" fill="#ccccdc" font-size="13" font-weight="600">'
             f'{html.escape(panel["title"])}</text>']
    for k in range(5):
        v = top_value * k / 4
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#2c3235"/>')
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" fill="#8e8e8e" font-size="10" '
                     f'text-anchor="end">{shown(v)}</text>')
    for k in range(0, int((t1 - t0) / 1000) + 1, 10):
        tx = x(t0 + k * 1000)
        parts.append(f'<text x="{tx:.1f}" y="{top + plot_h + 14}" fill="#8e8e8e" font-size="10" '
                     f'text-anchor="middle">{k}s</text>')
    legend_x = left
    for n, (legend, pts) in enumerate(sorted(lines.items())):
        colour = COLOURS[n % len(COLOURS)]
        path, pen = [], "M"
        for t, v in pts:
            if v is None:
                pen = "M"
                continue
            path.append(f"{pen}{x(t):.1f},{y(v):.1f}")
            pen = "L"
        parts.append(f'<path d="{" ".join(path)}" fill="none" stroke="{colour}" stroke-width="1.6"/>')
        parts.append(f'<rect x="{legend_x}" y="{h - 16}" width="10" height="3" fill="{colour}"/>')
        parts.append(f'<text x="{legend_x + 14}" y="{h - 11}" fill="#ccccdc" font-size="10">'
                     f'{html.escape(legend)}</text>')
        legend_x += 20 + 6 * len(legend)
    parts.append("</svg>")
    return "".join(parts)


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    data = scrapes(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        dashboard = json.load(f)
    t0, t1 = data[0][0], data[-1][0]
    cells = []
    for panel in dashboard["panels"]:
        lines = series(panel["targets"][0]["expr"], data)
        cells.append(svg(panel, lines, t0, t1))
    page = ('<!doctype html><html><head><meta charset="utf-8"><style>'
            'body{margin:0;background:#111217;font-family:Inter,Helvetica,Arial,sans-serif}'
            'h1{color:#ccccdc;font-size:16px;font-weight:500;margin:12px 16px 4px}'
            'div{display:grid;grid-template-columns:repeat(3,460px);gap:8px;padding:8px 16px}'
            '</style></head><body>'
            f'<h1>{html.escape(dashboard["title"])}: {len(data)} scrapes of a real run, 1 s apart</h1>'
            f'<div>{"".join(cells)}</div></body></html>')
    with open(sys.argv[3], "w", encoding="utf-8") as f:
        f.write(page)


if __name__ == "__main__":
    main()
