"""Issue 30's binary probe end to end: a runner binary printing `[ids] 99999` (outside the 512-id
vocabulary) fails that request with the id named, the JSON report and the JUnit file are written, and
`check` exits 1 (a finding), never 2 (a user error blaming the tokenizer). The fake is a shell script
(no Python start) printing the seed's stdout; the `.pte` is the session's export (conftest.py).
The library-level judge of the same line is tests/runners/isolate/test_isolation_probes.py."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.cli import main  # noqa: E402

pytestmark = [pytest.mark.pte, pytest.mark.slow]  # a probed .pte load and the HF reference: ~30 s

FAKE = """#!/bin/sh
printf 'Prompt tokens: 23, chain K=4, max_new=8\\nhello\\n'
printf '[timing] verify=3ms draft=2ms over 2 rounds (0.5 / 0.3 ms per round)\\n\\n'
printf -- '--- EAGLE-3 speculative decode ---\\ngenerated 3 tokens in 2 rounds (tau=1.000)\\n'
echo '[ids] 5,7,99999' >&2
"""


def test_a_binary_printing_ids_outside_the_vocabulary_fails_with_the_report_written(pte_path, tmp_path, capsys):
    fake = tmp_path / "ids.sh"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}, {"id": "count", "text": "One two"}]}))
    junit = tmp_path / "check.xml"
    rc = main(["check", "--runner", f"exec:{fake}", "--pte", str(pte_path), "--prompts", str(prompts),
               "--max-new-tokens", "8", "--json", "--junit", str(junit), "--no-progress"])
    out = capsys.readouterr()
    assert rc == 1 and "Traceback" not in out.err, out.err
    report = json.loads(out.out)
    assert report["passed"] is False
    for r in report["requests"]:
        assert r["verdict"]["status"] == "fail"
        assert r["verdict"]["message"].startswith("output: [ids] id 99999 at index 2 is outside the vocabulary "
                                                  "(ids 0..511)"), r["verdict"]["message"]
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert len(cases) == 2 and all(c.find("failure") is not None for c in cases)
