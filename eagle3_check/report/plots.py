"""The HTML report's plots: matplotlib figures (Agg, no pyplot state) rendered as inline SVG.

Each function takes plain numbers and returns one `<svg>...</svg>` string to paste into a page:
no file, no external reference (the XML prolog and DOCTYPE are cut; fonts stay `<text>`, so
the numbers on the axes are in the page's DOM). matplotlib is imported inside the functions,
so a module that only formats tables never pays for it; without matplotlib installed the
report is a one-line error naming the extra to install.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

from eagle3_check.errors import InputError

WIDTH, HEIGHT = 6.4, 3.0  # inches; the SVG scales with the page
MAX_LABELLED = 32  # bars that carry their value as a label (beyond it the labels overlap)


def _figure():
    try:
        import matplotlib
    except ImportError as e:
        raise InputError("an HTML report without matplotlib", "matplotlib importable (it draws the plots)",
                         "pip install matplotlib (the html extra: pip install -e '.[html]')") from e
    matplotlib.use("Agg")  # never a display backend: reports are written on headless machines
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH, HEIGHT))
    return fig, fig.add_subplot()


def _svg(fig) -> str:
    """The figure as an `<svg>` element: text as text, no prolog, no DOCTYPE."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    start, end = text.find("<metadata>"), text.find("</metadata>")  # RDF about matplotlib: not content
    return text[:start] + text[end + len("</metadata>"):] if 0 <= start < end else text


def _finish(ax, title: str, xlabel: str, ylabel: str, legend: bool) -> None:
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    if legend:
        ax.legend(fontsize=8)


def bars(title: str, ylabel: str, labels: Sequence[str], series: Mapping[str, Sequence[float]],
         xlabel: str = "", annotate: str = "{:.2f}") -> str:
    """Grouped bars: one group per label, one bar per series; each bar carries its value up to
    MAX_LABELLED bars (a NaN value: no bar, the words "no run" in its place).

    Worked example: labels ["a", "b"], series {"K=2": [1, 2], "K=4": [3, 4]} -> width 0.8/2 =
    0.4; K=2 bars at x = 0 - 0.2 and 1 - 0.2, K=4 bars at 0 + 0.2 and 1 + 0.2."""
    fig, ax = _figure()
    n = max(len(series), 1)
    width = 0.8 / n
    for s, (name, values) in enumerate(series.items()):
        if len(values) != len(labels):
            raise ValueError(f"plot series {name!r} has {len(values)} values for {len(labels)} labels")
        xs = [i - 0.4 + width * (s + 0.5) for i in range(len(labels))]
        drawn = ax.bar(xs, values, width, label=name)
        if len(labels) * n <= MAX_LABELLED:  # more labels overlap; the page's tables carry the values
            ax.bar_label(drawn, labels=[annotate.format(v) for v in values], fontsize=7)  # NaN: left blank
        for x, v in zip(xs, values):
            if v != v:  # NaN: nothing to draw; say so where the bar would stand
                ax.text(x, 0, "no run", rotation=90, ha="center", va="bottom", fontsize=7)
    tilt = len(labels) > 6 or sum(len(x) for x in labels) > 60  # labels that would overlap side by side
    ax.set_xticks(range(len(labels)), labels, rotation=30 if tilt else 0, ha="right" if tilt else "center",
                  fontsize=8)
    _finish(ax, title, xlabel, ylabel, legend=len(series) > 1)
    return _svg(fig)


def lines(title: str, xlabel: str, ylabel: str, series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
          ylim: tuple[float, float] | None = None) -> str:
    """One marked line per series, each given as (xs, ys)."""
    fig, ax = _figure()
    for name, (xs, ys) in series.items():
        if len(xs) != len(ys):
            raise ValueError(f"plot series {name!r} has {len(xs)} x values and {len(ys)} y values")
        ax.plot(xs, ys, marker="o", label=name)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # positions j are integers
    if ylim:
        ax.set_ylim(*ylim)
    _finish(ax, title, xlabel, ylabel, legend=len(series) > 1)
    return _svg(fig)


def scatter(title: str, xlabel: str, ylabel: str, points: Mapping[str, tuple[Sequence[float], Sequence[float]]],
            limit: Sequence[float] | None = None, limit_label: str = "") -> str:
    """Points per series; `limit` (one y per point of the first series, e.g. each tie's tolerance)
    drawn as short dashes over the same x."""
    fig, ax = _figure()
    for name, (xs, ys) in points.items():
        ax.scatter(xs, ys, s=18, label=name)
    if limit is not None and points:
        xs = next(iter(points.values()))[0]
        ax.scatter(xs, limit, marker="_", s=120, color="black", label=limit_label)
    _finish(ax, title, xlabel, ylabel, legend=bool(points))
    return _svg(fig)
