"""The HTML report in a real browser: headless Chromium (Debian's `chromium` package) opens the
check page and the bench page from disk with every host name unresolvable (nothing may be
fetched), takes a screenshot, and dumps the DOM. The page logs nothing to the console, the
screenshot is a non-blank PNG with the plots' bars in it, and the key numbers are in the DOM.

Chromium prints a page's console messages to stderr with `--enable-logging=stderr` as lines
containing `CONSOLE`; the pages have no script, so any such line is a fault. A control page
that calls console.error proves the check sees one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from html_pages import Page, check_report

from eagle3_check.report.bench_report import bench_html
from eagle3_check.report.html_page import write_html
from eagle3_check.report.html_report import check_html

pytestmark = pytest.mark.browser

NAMES = ("chromium", "chromium-browser", "google-chrome")
BROWSER = next((shutil.which(n) for n in NAMES if shutil.which(n)), None)
BENCH = Path(__file__).resolve().parents[2] / "bench" / "results" / "h200.json"
BAR_BLUE = (31, 119, 180)  # matplotlib's first colour (C0, #1f77b4): every bar plot draws with it

needs_browser = pytest.mark.skipif(
    BROWSER is None, reason=f"needs headless Chromium (Debian: apt-get install chromium); found none of "
    f"{', '.join(NAMES)} on PATH")


def chromium(page: Path, out: Path, *mode: str) -> subprocess.CompletedProcess:
    """One headless run on `page`: its own profile, no GPU, no sandbox (CI runs as root), and
    every host name mapped to nowhere, so a page that needs the network shows it."""
    cmd = [BROWSER, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
           f"--user-data-dir={out / 'profile'}", "--host-resolver-rules=MAP * ~NOTFOUND",
           "--enable-logging=stderr", "--v=0", "--window-size=1200,2400", *mode, page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-2000:]}"
    return proc


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line]


def screenshot_pixels(page: Path, out: Path) -> tuple[int, int, int]:
    """(non-white pixels, pixels of the bar colour, all pixels) of a screenshot of `page`."""
    from PIL import Image  # a matplotlib dependency

    shot = out / "shot.png"
    proc = chromium(page, out, f"--screenshot={shot}")
    assert console_lines(proc.stderr) == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rgb = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int16).reshape(-1, 3)  # [pixels, 3]
    non_white = int((rgb != 255).any(axis=1).sum())
    blue = int((np.abs(rgb - np.array(BAR_BLUE)) <= 8).all(axis=1).sum())
    return non_white, blue, len(rgb)


@needs_browser
def test_check_page_renders_with_plots_and_its_numbers(tmp_path):
    report = check_report()
    page = write_html(tmp_path / "check.html", check_html(report.to_json()))
    non_white, blue, total = screenshot_pixels(page, tmp_path)
    assert non_white > total // 100, f"screenshot nearly blank: {non_white} of {total} pixels not white"
    assert blue > 500, f"no plot bars drawn: {blue} pixels of {BAR_BLUE}"
    proc = chromium(page, tmp_path, "--dump-dom")
    assert console_lines(proc.stderr) == []
    dom = Page(proc.stdout)
    c = report.counts()
    assert f"tau = {report.tau:.2f}" in dom.text
    assert f"requests: {c['identical']} identical, {c['tie']} tie, {c['fail']} fail (of {c['requests']})" in dom.text
    assert list(dom.rows("verdicts")) == ["same", "tied", "broke"]
    assert dom.rows("forensics-table")["broke"][2:5] == ["3", "999", "213"]  # index, runner, reference token
    assert len([t for t, _ in dom.tags if t == "svg"]) == 3


@needs_browser
def test_bench_page_renders_tokens_per_s(tmp_path):
    bench = json.loads(BENCH.read_text())
    page = write_html(tmp_path / "bench.html", bench_html(bench, BENCH.name))
    non_white, blue, total = screenshot_pixels(page, tmp_path)
    assert non_white > total // 100 and blue > 500
    proc = chromium(page, tmp_path, "--dump-dom")
    assert console_lines(proc.stderr) == []
    rows = Page(proc.stdout).rows("methods")
    assert {m: r[2] for m, r in rows.items()} == {m: f"{r['tokens_per_s']:.1f}" for m, r in bench["results"].items()}


@needs_browser
def test_the_console_check_sees_a_console_error(tmp_path):
    page = tmp_path / "control.html"
    page.write_text('<!DOCTYPE html><html><body><p>control</p><script>console.error("control-error")</script>'
                    "</body></html>")
    proc = chromium(page, tmp_path, "--dump-dom")
    assert any("control-error" in line for line in console_lines(proc.stderr)), proc.stderr[-2000:]
