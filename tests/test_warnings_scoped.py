"""Warnings are scoped to where they arise (issue 16 part 7): the CLI hides no warning
process-wide, a UserWarning from the user's own code shows, and the Python API is as quiet as
the CLI about the known third-party noise of our own imports and loads (eagle3_check/quiet.py)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from eagle3_check.quiet import KNOWN_WARNINGS, NOISY_LOGGERS, third_party_quiet

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "TRANSFORMERS_VERBOSITY")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(cwd), *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600)


def test_the_scope_ignores_only_the_known_warnings_and_restores_everything():
    category, message = KNOWN_WARNINGS[0]
    text = "`isinstance(treespec, LeafSpec)` is deprecated, use ..."
    assert category is FutureWarning and __import__("re").search(message, text)
    before = list(warnings.filters), {n: logging.getLogger(n).level for n in NOISY_LOGGERS}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError), third_party_quiet():
            warnings.warn(text, FutureWarning, stacklevel=1)  # known: ignored
            warnings.warn("a user's own warning", UserWarning, stacklevel=1)  # unknown: shown
            assert logging.getLogger("torchao").level == logging.ERROR
            raise RuntimeError("left by an error: still restored")
        warnings.warn(text, FutureWarning, stacklevel=1)  # outside the scope: shown again
    assert [(w.category, str(w.message)) for w in seen] == [(UserWarning, "a user's own warning"),
                                                            (FutureWarning, text)]
    assert (list(warnings.filters), {n: logging.getLogger(n).level for n in NOISY_LOGGERS}) == before


def test_filters_a_library_installs_inside_the_scope_are_kept():
    with warnings.catch_warnings():
        with third_party_quiet():
            warnings.filterwarnings("ignore", message="a library's own filter", category=RuntimeWarning)
        assert any(f[1] is not None and f[1].pattern == "a library's own filter" for f in warnings.filters)
        assert not any(f[1] is not None and f[1].pattern == KNOWN_WARNINGS[0][1] for f in warnings.filters)


def test_the_python_api_is_quiet_and_leaves_the_process_filters_alone(tmp_path):
    """Loading a program and the HF reference and running one request through the API prints
    nothing (no torchao / torch deprecation noise, no loading bar), ignores no warning category
    process-wide and leaves logger levels and transformers' progress-bar switch as they were."""
    code = (
        "import logging, sys, warnings\n"
        "filters = list(warnings.filters)\n"
        "from eagle3_check.fixtures.registry import load_fixture\n"
        "from eagle3_check.program.eager import EagerBackend\n"
        "from eagle3_check.judge.hf import HFReference\n"
        "from eagle3_check.runners.loop import ReferenceRunner\n"
        "from eagle3_check.runners.options import RunOptions\n"
        "from eagle3_check.tokenizer import Tokenizer\n"
        "fx = load_fixture('tiny-llama')\n"
        "program = EagerBackend.from_fixture(fx, 'cpu', 'float32')\n"
        "HFReference(fx.target_dir)\n"
        "run = ReferenceRunner().run(program, Tokenizer.load(fx.tokenizer_path), 'Hi', RunOptions(max_new_tokens=3))\n"
        "from transformers.utils import logging as hf_logging\n"
        "broad = [f for f in warnings.filters if f not in filters and f[0] == 'ignore' and f[1] is None\n"
        "         and f[3] is None and issubclass(UserWarning, f[2])]\n"
        "assert not broad, f'a warning category ignored process-wide: {broad}'\n"
        "assert hf_logging.is_progress_bar_enabled(), 'transformers progress bars left off'\n"
        "assert logging.getLogger('torchao').level == logging.NOTSET, 'torchao logger level left changed'\n"
        "print(len(run.tokens))\n"
    )
    proc = _python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "3" and proc.stderr == "", proc.stderr


def test_a_user_warning_from_a_plug_in_runner_and_after_the_cli_still_shows(tmp_path):
    (tmp_path / "warn_runner.py").write_text(
        "import warnings\n"
        "from eagle3_check.runners.loop import ReferenceRunner\n"
        "class WarnRunner:\n"
        "    def run(self, program, tokenizer, prompt, options):\n"
        "        warnings.warn('from my runner', UserWarning)\n"
        "        return ReferenceRunner().run(program, tokenizer, prompt, options)\n"
    )
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}]}))
    code = (
        "import warnings\n"
        "from eagle3_check.cli import main\n"
        f"rc = main(['check', '--fixture', 'tiny-llama', '--runner', 'warn_runner:WarnRunner', '--prompts', {str(prompts)!r},\n"
        "           '--max-new-tokens', '4', '--no-progress', '--in-process'])\n"  # isolated: its stderr is the report's
        "warnings.warn('after the CLI', UserWarning)\n"
        "print('rc', rc)\n"
    )
    proc = _python(code, tmp_path)
    assert "rc 0" in proc.stdout, proc.stdout + proc.stderr
    assert "UserWarning: from my runner" in proc.stderr, proc.stderr
    assert "UserWarning: after the CLI" in proc.stderr, proc.stderr
