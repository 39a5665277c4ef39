"""Seeded mutants of the reference runner: plausible bugs the harness must catch.

Each mutant is a plug-in runner factory: `eagle3-check check --runner
eagle3_check.mutants:emit_past_max_new` judges it like any user's runner. `eagle3-check
mutants` (`make mutants`) runs every mutant through `check` and the kill probes
(`probes.py`) on both data placements of the one runner loop (host lists; device buffers
over emulated CUDA graphs on CPU, real ones with --device cuda) and prints a kill table;
the score must be 100 % on both. A survivor prints its `needs`: the case the suites lack.

May import: program, run, reference, suites, gating, fixtures (never the CLI).

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""

from __future__ import annotations

from eagle3_check.mutants.engine import Mutant, StaleMutant, build_runner_class

OPTIONS = "eagle3_check.run.options"
PLACEMENT = "eagle3_check.run.placement"

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "accept_off_by_one", "acceptance compares proposal j with verify_ids[j + 1] (one position off)",
        "a draft right everywhere: every round must accept all K proposals",
        (("proposals[a] == v[a]", "proposals[a] == v[a + 1]"),),
    ),
    Mutant(
        "reseed_feature_off_by_one", "reseed uses verify feature rows 1..a+1 instead of 0..a",
        "a draft that is right only when fed the feature row of its own position",
        (("vfeat[:, : a + 1]", "vfeat[:, 1 : a + 2]"),),
    ),
    Mutant(
        "stop_not_truncating", "a stop token among accepted proposals does not end the round",
        "a stop token in the middle of a fully accepted round",
        (("                        reason = STOP\n                        break\n",
          "                        reason = STOP\n"),),
    ),
    Mutant(
        "emit_past_max_new", "emits one token past max new tokens",
        "max new tokens reached in the middle of a round",
        (("if len(out) >= max_new:", "if len(out) > max_new:"),),
    ),
    Mutant(
        "tau_counts_prefill", "tau counts the free prefill token: emitted / rounds",
        "a request whose tau is known exactly (toy draft right everywhere)",
        (("tau=(len(out) - 1) / rounds", "tau=len(out) / rounds"),),
    ),
    Mutant(
        "speculate_after_stop_bonus", "speculates although the prefill bonus is a stop token",
        "a request whose first token (the bonus) is a stop token",
        (("if bonus in stops.ids:\n            reason = STOP\n        elif max_new <= 1:",
          "if max_new <= 1:"),),
    ),
    Mutant(
        "metadata_defaulted", "a missing required metadata key is defaulted instead of failing",
        "a program missing each required metadata key",
        (("md = read_metadata(program.metadata())",
          'md = read_metadata({"get_chain_len": 4, "get_max_prefill_chunk": 128, '
          '"get_min_prefill_chunk": 1, "get_max_seq_len": 256, **program.metadata()})'),),
    ),
    Mutant(
        "prompt_truncated", "a prompt above max prefill is silently cut to its last max_prefill ids",
        "a prompt one token above max prefill must be an error",
        (("        L = len(ids)\n", "        ids = ids[-md.max_prefill :]\n        L = len(ids)\n"),),
    ),
    Mutant(
        "context_off_by_one", "the per-round context check allows anchor_pos + K == max_seq_len",
        "full acceptance landing anchor_pos + K exactly on max_seq_len",
        (("anchor_pos + k > md.max_seq_len - 1", "anchor_pos + k > md.max_seq_len"),),
    ),
    Mutant(
        "context_off_by_one_first_round", "the first-round context check allows L + K == max_seq_len",
        "a prompt with L + K == max_seq_len (the draft must not run)",
        (("elif L + k > md.max_seq_len - 1:", "elif L + k > md.max_seq_len:"),),
    ),
    Mutant(
        "stale_verify_positions", "verify positions live in an input buffer filled once, never "
        "updated in place (CPU stand-in for a CUDA graph input not refreshed)",
        "more than one verify round on a position-dependent target, or positions audited",
        (("            anchor_pos = L\n",
          "            anchor_pos = L\n            verify_pos = place.positions(L, k + 1)\n"),
         ("place.positions(anchor_pos, k + 1)", "verify_pos")),
    ),
    Mutant(
        "bos_twice", "BOS prepended twice (once by the prompt builder, once again by the runner)",
        "the prompt ids the runner used, compared with the ones the harness derives",
        (("else prompt_ids(tokenizer, prompt, options)",
          "else [options.bos_id, *prompt_ids(tokenizer, prompt, options)]"),),
    ),
    Mutant(
        "multi_token_stop_first_token", "a stop string that encodes to several tokens is added as "
        "its first token", "a multi-token stop string whose first token occurs in the output",
        (("        if len(enc) == 1:\n            ids.add(enc[0])\n        else:",
          "        if enc:\n            ids.add(enc[0])\n        if len(enc) != 1:"),),
        module=OPTIONS,
    ),
    Mutant(
        "program_eos_ignored", "the program's get_eos_ids are left out of the stop set",
        "a program whose get_eos_ids holds a token of the output",
        (("set(tokenizer.eos_ids) | set(md.eos_ids) | set(opts.stop_ids)",
          "set(tokenizer.eos_ids) | set(opts.stop_ids)"),),
        module=OPTIONS,
    ),
    Mutant(
        "max_new_not_capped_by_context", "max_new ignores max_seq_len - L",
        "full acceptance whose last round would emit a token at position max_seq_len",
        (("max_new = min(options.max_new_tokens, md.max_seq_len - L)",
          "max_new = options.max_new_tokens"),),
    ),
    Mutant(
        "last_proposal_never_accepted", "the acceptance loop stops at K - 1",
        "a draft right everywhere: a must reach K",
        (("while a < k and", "while a < k - 1 and"),),
    ),
    Mutant(
        "reseed_at_new_anchor", "reseed writes the draft cache from the new anchor position",
        "a draft that is right only at the positions its features belong to",
        (("vfeat[:, : a + 1], reseed_pos)", "vfeat[:, : a + 1], anchor_pos)"),),
    ),
    Mutant(
        "chain_feeds_first_g_row", "chain steps feed the first row of g instead of the last",
        "a round with a > 0 followed by chain steps that check their feature row",
        (("g[:, -1:]", "g[:, :1]"),),
    ),
    Mutant(
        "chain_position_off_by_one", "chain step j runs at position start + j instead of start + j - 1",
        "a draft that checks the position of the feature it is fed",
        (("start + j - 1)", "start + j)"),),
    ),
    Mutant(
        "corrected_dropped_on_full_accept", "when all K proposals are accepted the corrected "
        "(bonus) token is not emitted", "a fully accepted round",
        (("round_tokens = proposals[:a] + [v[a]]",
          "round_tokens = proposals[:a] + [v[a]] if a < k else list(proposals)"),),
    ),
    Mutant(
        "anchor_not_updated", "the verify window keeps the old anchor after a round (a stable "
        "input buffer, as a CUDA graph's, not refreshed)",
        "more than one verify round whose output is compared with the reference",
        (("                place.put(0, vids[:, a : a + 1])  # anchor = corrected\n", ""),),
    ),
    Mutant(
        "device_reseed_tokens_shifted", "the device reseed takes verify_ids[:, 1:a+2] instead of "
        "verify_ids[:, :a+1]", "a reseed followed by chain steps whose proposals depend on the tokens fed",
        (("return verify_ids[:, : len(round_tokens)]", "return verify_ids[:, 1 : len(round_tokens) + 1]"),),
        module=PLACEMENT, placements=("device",),
    ),
    Mutant(
        "device_read_includes_anchor", "the round's one read takes the anchor as proposal 0 "
        "(window read from slot 0 instead of 1)", "a round with a > 0 (acceptance must be counted)",
        (("proposals, v = host[1 : self.k + 1], host[self.k + 1 :]",
          "proposals, v = host[: self.k], host[self.k + 1 :]"),),
        module=PLACEMENT, placements=("device",),
    ),
)

BY_NAME = {m.name: m for m in MUTANTS}


def factory(name: str, placement: str = "host"):
    """A no-argument factory of the mutant runner `name` (what --runner calls) with the
    runner loop's data `placement` ("host" or "device", see eagle3_check.run.placement)."""
    mutant = BY_NAME[name]

    def make():
        return build_runner_class(mutant)(placement)

    make.__name__ = name
    make.__doc__ = mutant.bug
    return make


def __getattr__(name: str):  # `eagle3_check.mutants:<name>` is a plug-in runner factory
    if name in BY_NAME:
        return factory(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *BY_NAME])


__all__ = ["MUTANTS", "BY_NAME", "Mutant", "StaleMutant", "factory"]
