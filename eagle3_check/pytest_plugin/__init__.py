"""The pytest plugin: `pytest --eagle3-pte model.pte` runs the edge suites, the prompt-set check
and the goldens as test items of the user's own run, and fixtures let them write their own cases.

Registered through the `pytest11` entry point (pyproject.toml). Importing this package costs
only pytest: nothing of eagle3_check loads until an option turns the plugin on (`--eagle3-pte`,
`--eagle3-fixture`, or the same keys, `eagle3_pte` ..., in the ini file). Without one nothing is
collected and the fixtures skip, naming the option they need.

What lives here: the options, markers, collection hook and fixtures (`__init__`), the lazily
built program, tokenizer, reference and the one runner of a test session (`state`, on a
`jobs.common.context.CheckContext`), what the session collects (`collected`), an item's run routed by
the runner's capabilities, never its kind (`runs`), a runner binary's option and its goldens (`binary`),
the test items with their failure texts (`items`), and the pytest-xdist scheduler that keeps a
baseline key's items on one worker (`workers`).

May import: program, runners, judge, suites, jobs (lazily, inside functions: test_layout checks that the
package's module level imports nothing of eagle3_check but the leaves)
"""

from __future__ import annotations

from pathlib import Path

import pytest

CMD = "command"  # an option whose value is a command line: its program path is resolved like a path
# key: (metavar, help, is a path (or CMD)). `--eagle3-KEY` on the command line, `eagle3_KEY` in the ini file.
OPTIONS: dict[str, tuple[str, str, bool | str]] = {
    "pte": ("FILE", "the ExecuTorch speculator program to test (turns the plugin on)", True),
    "data_path": ("FILE.ptd", "the .pte's external data file (an export with --external-data): loaded with it, "
                  "and passed to --eagle3-runner-bin as the seed's --data_path (or its {data_path})", True),
    "fixture": ("NAME", "an embedded fixture: without --eagle3-pte its eager program is tested (turns the "
                "plugin on); with it, its reference and tokenizer (default: the fixture the .pte's export "
                "sidecar names)", False),
    "target": ("DIR", "HF target directory of the reference (instead of a fixture's)", True),
    "tokenizer": ("FILE", "tokenizer.json (default: the fixture's or the target's)", True),
    "prompts": ("FILE", "prompt set JSON {\"prompts\": [{\"id\", \"text\"}]}, one item per prompt "
                "(default: the fixture's; 'none': no prompt items)", True),
    "suite": ("NAME", "the edge cases to collect: a suite, a case, 'edge' (all, the default) or 'none'", False),
    "goldens": ("PATH", "a golden file or directory (default: golden/ beside the package, when present; "
                "'none': no golden items)", True),
    "runner": ("MODULE:FACTORY", "the runner under test (default: the reference runner)", False),
    "runner_bin": ("CMD", "a runner binary under test instead (the seed runner's flags and output; `exec:` "
                   "optional): one process per request on --eagle3-pte's file, judged as `eagle3-check check "
                   "--runner exec:CMD` judges it", CMD),
    "request_timeout": ("S", "seconds one request may take, as `check --request-timeout` (default: 300 for a "
                        "plug-in --eagle3-runner or a binary, none for the reference runner); over it the item "
                        "fails (an in-process runner is abandoned, a binary's process group killed)", False),
    "baseline": ("FILE", "a metrics baseline (bench/baselines/metrics.json): one item per key in it, gated "
                 "exactly over the runs of that key's golden", True),
    "reference": ("hf|self", "greedy reference: hf (Transformers, the default) or self (the program's own "
                  "target methods: the fair one for a quantized .pte)", False),
    "max_new_tokens": ("N", "max new tokens of each prompt-set item and of eagle3_check_request (default 64)",
                       False),
    "dtype": ("float32|bfloat16", "the dtype of the fixture's eager program (default float32; a .pte runs its "
              "own); bfloat16 on a fixture the constants were not measured on is calibrated first "
              "(docs/calibration.md)", False),
    "numerics": ("normal|exact", "exact: the runner and the reference on shape-invariant kernels, the verdict "
                 "identity (tie tolerance 0, budget 0; docs/exact.md); an eager fixture program only", False),
}
MARKERS = {
    "eagle3": "an eagle3_check item (edge case, prompt or golden) collected by --eagle3-pte / --eagle3-fixture",
    "eagle3_suite": "an eagle3_check edge-suite case",
    "eagle3_prompt": "one request of the eagle3_check prompt-set check",
    "eagle3_golden": "one prompt of an eagle3_check golden, re-run and compared exactly",
    "eagle3_baseline": "one golden key of an eagle3_check metrics baseline, its golden's runs counted exactly",
}
NONE = "none"  # a value that turns a group of items off
STATE = pytest.StashKey[object]()
NEEDS = ("eagle3 fixtures need a program: pass --eagle3-pte FILE or --eagle3-fixture NAME "
         "(or eagle3_pte / eagle3_fixture in the ini file); neither is set")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("eagle3", "eagle3_check: test an EAGLE-3 speculator program")
    for key, (metavar, text, _) in OPTIONS.items():
        group.addoption(f"--eagle3-{key.replace('_', '-')}", dest=f"eagle3_{key}", default=None,
                        metavar=metavar, help=text)
        parser.addini(f"eagle3_{key}", text, default="")


def read_settings(config: pytest.Config) -> dict[str, str | None]:
    """Each key's value: the command line's, else the ini file's (None: unset). Paths are made
    absolute against where they were given: the invocation directory, or the ini file's; for a
    command (CMD) that directory is kept as `KEY_dir` (its program path is resolved when parsed)."""
    out: dict[str, str | None] = {}
    for key, (_, _, is_path) in OPTIONS.items():
        value, base = config.getoption(f"eagle3_{key}"), Path(config.invocation_params.dir)
        if value is None:
            value = str(config.getini(f"eagle3_{key}") or "").strip() or None
            base = config.inipath.parent if config.inipath else config.rootpath
        if is_path == CMD:
            out[f"{key}_dir"] = str(base)
        elif value is not None and is_path and value != NONE:
            value = str(base / value)
        out[key] = value
    return out


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    if not config.pluginmanager.hasplugin("xdist"):  # the items' xdist_group mark, known under --strict-markers
        config.addinivalue_line("markers", "xdist_group(name): pytest-xdist's --dist loadgroup group (unused here)")
    settings = read_settings(config)
    if not (settings["pte"] or settings["fixture"]):
        return  # off: nothing below runs, nothing of eagle3_check is imported
    from eagle3_check.errors import Eagle3CheckError
    from eagle3_check.pytest_plugin.state import Eagle3State

    try:
        config.stash[STATE] = Eagle3State.from_settings(settings)
    except Eagle3CheckError as e:
        raise pytest.UsageError(f"eagle3: {e}") from None


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    """The tie rule the items were judged by, as `check`'s report names it (judge/tie_rule.py): the
    built-in constants, a calibration of the target (measured in this session or read from the cache),
    or exact mode's identity; only where an item judged by it ran."""
    state = config.stash.get(STATE, None)
    rule = state.judged_rule() if state is not None else None
    if rule is not None:
        terminalreporter.write_line(f"eagle3: tie rule: {rule.source}")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is not None:
        state.close()


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselect
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    state = config.stash.get(STATE, None)
    if state is None:
        return
    from eagle3_check.errors import Eagle3CheckError
    from eagle3_check.pytest_plugin.items import collect

    try:
        items.extend(collect(session, state))
    except Eagle3CheckError as e:
        raise pytest.UsageError(f"eagle3: {e}") from None


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # a hook of pytest-xdist, when it is installed
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadgroup`: a baseline key's golden prompts and its baseline item on one worker (workers.py)."""
    state = config.stash.get(STATE, None)
    if state is None or config.getvalue("dist") != "loadgroup":
        return None  # xdist's own scheduler
    from eagle3_check.errors import Eagle3CheckError
    from eagle3_check.pytest_plugin.workers import make_scheduler

    try:
        stems = set(state.baseline)
    except Eagle3CheckError:  # a bad baseline: the workers' collection reports it
        return None
    return make_scheduler(config, log, stems)


def _state(request: pytest.FixtureRequest):
    state = request.config.stash.get(STATE, None)
    if state is None:
        pytest.skip(NEEDS)
    return state


def _get(request: pytest.FixtureRequest, attr: str):
    """A built part of the session's state; a user error fails the fixture with its one line."""
    from eagle3_check.errors import Eagle3CheckError

    try:
        return getattr(_state(request), attr)
    except Eagle3CheckError as e:
        pytest.fail(f"eagle3: {e}", pytrace=False)


@pytest.fixture(scope="session")
def eagle3_program(request):
    """The program under test (the .pte, or the fixture's eager program): `SpeculatorProgram`."""
    return _get(request, "program")


@pytest.fixture(scope="session")
def eagle3_tokenizer(request):
    """The tokenizer the program is run with (`eagle3_check.tokenizer.Tokenizer`)."""
    return _get(request, "tokenizer")


@pytest.fixture(scope="session")
def eagle3_reference(request):
    """The greedy reference: `score(prompt_ids, tokens)`, `greedy(prompt_ids, n, stop_ids)`."""
    return _get(request, "reference")


@pytest.fixture
def eagle3_check_request(request):
    """`eagle3_check_request(text, **run_options) -> Verdict`: runs one request through the runner
    under test (the runner binary's `ExecVerdict` with --eagle3-runner-bin) and judges every emitted
    position against the reference, as `eagle3-check check` does. Options are `RunOptions` fields
    (max_new_tokens, chain_len, stop_ids, raw, ...). `Verdict.status` is pass, tie or fail;
    `Verdict.message` the forensics."""
    from eagle3_check.errors import Eagle3CheckError

    state = _state(request)

    def check(prompt, **options):
        try:
            return state.check_request(prompt, **options).verdict
        except Eagle3CheckError as e:
            pytest.fail(f"eagle3: {e}", pytrace=False)

    return check
