"""`eagle3-check run`: one request through the reference runner; text plus the stats line."""

from __future__ import annotations

import argparse
import json

from eagle3_check.cli.common import add_compile_args, add_program_args, add_runner_args
from eagle3_check.cli.shrink_flags import add_replay_args

HELP = """Run one request and print the text and the runner's stats line.

example:
  eagle3-check run --prompt "Hi"                     # SmolLM2-135M-Instruct (the smollm2-135m fixture)
  eagle3-check run --prompt "Count from one to ten." -k 4 --max-new-tokens 32 --fixture tiny-llama
  eagle3-check run --prompt "Hi" --device cuda --compile layer   # compiled target and draft steps, graphs
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run one request through the reference runner", description=HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompt", default=None, help="prompt text (the chat template is applied unless --raw)")
    p.add_argument("--prompt-file", default=None, help="read the prompt from a UTF-8 file")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    add_replay_args(p)
    add_program_args(p, default="the real fixture smollm2-135m", why=" (the `real` extra)", aoti=True)
    add_runner_args(p)
    add_compile_args(p)
    p.set_defaults(func=main)


def main(cfg) -> int:
    from eagle3_check.jobs import shrink_route as sr
    from eagle3_check.jobs.common.context import CheckContext
    from eagle3_check.jobs.common.world import prompt_text

    cfg, repro = sr.apply_repro(cfg)  # --repro FILE: its prompt ids, K, max new tokens, spec
    if repro is not None and repro.prompt_text is not None:
        prompt = repro.prompt_text  # the shrunk text, maybe empty: the template is the request
    else:
        prompt = None if cfg.shrink.prompt_ids else prompt_text(cfg)
    ctx = CheckContext(cfg)
    setup, resolved = ctx.setup, ctx.resolved
    sr.check_replay(cfg, repro, setup)
    ids = sr.given_prompt_ids(cfg, setup.tokenizer)
    prompt = list(ids) if ids is not None else prompt
    setup.info["run_options"] = resolved.to_json()
    result = ctx.loaded_runner.run(setup.program, setup.tokenizer, prompt, resolved.options)
    if cfg.json:
        print(json.dumps({**result.to_json(), "info": setup.info}, indent=2))
        return 0
    print(result.text)
    ms = result.method_ms
    print(
        f"\ntokens: {len(result.tokens)}  rounds: {result.rounds}  tau: {result.tau:.2f}  "
        f"stop: {result.stop_reason}  prefill: {ms['prefill']:.1f} ms  "
        f"verify: {ms['target_verify']:.1f} ms  draft: {ms['draft_decode']:.1f} ms"
    )
    print(resolved.line())
    if "program_shape" in setup.info:  # --target: max seq len and prefill range from the config (target_spec.py)
        print(setup.info["program_shape"]["summary"])
    for note in [*resolved.notes, *result.notes]:
        print(f"note: {note}")
    return 0
