"""Plug-in runners: `check --runner module:factory` judges a runner from a user's own module."""

import json
import re
from pathlib import Path

import pytest

from eagle3_check.cli import main
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.plugin import load_runner

PAGE = Path(__file__).resolve().parents[2] / "docs" / "plugin-runners.md"


def readme_example() -> str:
    """The `my_runner.py` example of the plug-in runners page (docs/plugin-runners.md), verbatim."""
    m = re.search(r"```python\n# my_runner.py\n(.*?)```", PAGE.read_text(), re.S)
    assert m, "docs/plugin-runners.md lost its plug-in runner example"
    return m.group(1)


@pytest.mark.parametrize("spec", ["reference", "eagle3_check.runners.loop:ReferenceRunner"])
def test_the_reference_runner_is_one_plug_in(spec):
    assert isinstance(load_runner(spec), ReferenceRunner)


def test_readme_example_runs_through_check(capsys, monkeypatch, tmp_path):
    (tmp_path / "my_runner.py").write_text(readme_example())
    monkeypatch.syspath_prepend(str(tmp_path))
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}]}))
    rc = main(["check", "--fixture", "tiny-llama", "--runner", "my_runner:make_runner", "--prompts", str(prompts),
               "--max-new-tokens", "6", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["passed"] is True
    assert report["info"]["runner"] == "my_runner:make_runner"


def test_a_runner_whose_self_report_lies_fails_check(capsys, monkeypatch, tmp_path):
    (tmp_path / "liar.py").write_text(
        "from eagle3_check.runners.loop import ReferenceRunner\n"
        "class Liar(ReferenceRunner):\n"
        "    def run(self, *a):\n"
        "        r = super().run(*a)\n"
        "        r.tau += 1.0\n"
        "        return r\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}]}))
    rc = main(["check", "--fixture", "tiny-llama", "--runner", "liar:Liar", "--prompts", str(prompts), "--max-new-tokens", "6", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1 and report["requests"][0]["verdict"]["message"].startswith("stats: tau =")
