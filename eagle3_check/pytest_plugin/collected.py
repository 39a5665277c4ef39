"""What a session collects: the prompt set, the edge cases, the goldens of its program's fixture and the
metrics baseline's keys, each with why it cannot run here where it cannot.

`Collected` is a part of `state.Eagle3State`: it reads the state's `settings`, `cfg`, `fixture`,
`fixture_name` and `capabilities`, and loads nothing but the files it names (prompt sets, goldens, the
baseline) until an item runs.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from eagle3_check.errors import InputError

NONE = "none"  # a value that turns a group of items off


class Collected:
    @cached_property
    def prompts(self) -> list:
        """The prompt set: --eagle3-prompts, else the fixture's ([] with 'none')."""
        from eagle3_check.fixtures.registry import load_prompts

        p = self.settings["prompts"]
        if p == NONE:
            return []
        if p:
            return load_prompts(p)
        if self.fixture is None:
            raise InputError("--eagle3-target without --eagle3-prompts", "a prompt set JSON file",
                             "pass --eagle3-prompts FILE (or --eagle3-prompts none)")
        return self.fixture.prompts()

    @property
    def prompts_path(self) -> Path:
        """The file the prompt set comes from (the fixture's, registry.Fixture.prompts_path)."""
        if self.settings["prompts"] not in (None, NONE):
            return Path(self.settings["prompts"])
        return self.fixture.prompts_path

    def cases(self) -> list:
        from eagle3_check.suites import suite_cases

        name = self.settings["suite"] or "edge"
        return [] if name == NONE else suite_cases(name)

    @cached_property
    def _golden_files(self) -> list:
        """[(path, Golden)] of every golden given (--eagle3-goldens, default golden/), any fixture."""
        from eagle3_check.jobs.golden.file import golden_root, load_golden
        from eagle3_check.jobs.golden.verify import golden_paths

        g = self.settings["goldens"]
        if g == NONE or (g is None and not golden_root().is_dir()):
            return []
        return [(path, load_golden(path)) for path in golden_paths([g] if g else [])]

    def goldens(self) -> list:
        """[(path, Golden, why it cannot run here or None)] of this program's fixture."""
        if self.fixture is None:
            return []
        return [(path, g, self._unavailable(g.key)) for path, g in self._golden_files
                if g.key.fixture == self.fixture_name]

    def _unavailable(self, key) -> str | None:
        from eagle3_check.jobs.golden.verify import mode_skip, unavailable

        why = unavailable(key, self.settings["pte"]) or mode_skip(key, self.cfg_numerics)
        if why is None and not self.settings["pte"] and (key.device, key.dtype) != ("cpu", self.cfg.dtype):
            why = f"a golden for {key.device} {key.dtype}; this eager program runs cpu {self.cfg.dtype}"
        return why

    @property
    def cfg_numerics(self) -> str:
        return "exact" if self.cfg.exact else "normal"

    @cached_property
    def baseline_path(self) -> Path | None:
        b = self.settings["baseline"]
        return Path(b) if b else None

    @cached_property
    def baseline(self) -> dict[str, dict]:
        """The metrics baseline's entries (golden key stem -> metrics); {} without --eagle3-baseline."""
        from eagle3_check.jobs.golden.metrics import load_baseline

        return load_baseline(self.baseline_path) if self.baseline_path else {}

    def baseline_golden(self, stem: str) -> tuple:
        """(Golden or None, why the key's metrics cannot be gated here or None)."""
        from eagle3_check.jobs.golden.file import golden_root

        g = self.settings["goldens"]
        where = "--eagle3-goldens none" if g == NONE else g or str(golden_root())
        golden = next((gold for _, gold in self._golden_files if gold.key.stem == stem), None)
        if golden is None:
            return None, f"no golden {stem} among the goldens given ({where}): nothing to count"
        if golden.key.fixture != self.fixture_name:
            return golden, f"a golden of fixture {golden.key.fixture}; this program is {self.fixture_name}"
        if not self.capabilities.call_log:  # the baseline counts program calls: a runner must show them
            from eagle3_check.jobs.golden.binary import METRICS_NOT_GATED

            return golden, METRICS_NOT_GATED
        return golden, self._unavailable(golden.key)
