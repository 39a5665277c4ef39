"""Seeded mutants of the reference runner: plausible bugs the harness must catch.

Each mutant is a plug-in runner factory: `eagle3-check check --runner
eagle3_check.mutants:emit_past_max_new` judges it like any user's runner. `eagle3-check
mutants` (`make mutants`) runs every mutant through `check` and the kill probes
(`probes.py`) on both data placements of the one runner loop (host lists; device buffers
over emulated CUDA graphs on CPU, real ones with --device cuda) and prints a kill table;
the score must be 100 % on both. A survivor prints its `needs`: the case the suites lack.

May import: program, runners, judge, suites, jobs, fixtures (never the CLI).

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""

from __future__ import annotations

from eagle3_check.mutants.engine import Mutant, StaleMutant, build_runner_class

OPTIONS = "eagle3_check.runners.options"
PLACEMENT = "eagle3_check.runners.placement"

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
    # issue 20: stop sources in isolation
    Mutant(
        "tokenizer_eos_ignored", "the tokenizer's EOS is left out of the stop set (only the program's list counts)",
        "a program without get_eos_ids whose tokenizer's EOS occurs in the output (stop-set/tokenizer-eos)",
        (("set(tokenizer.eos_ids) | set(md.eos_ids) | set(opts.stop_ids)", "set(md.eos_ids) | set(opts.stop_ids)"),),
        module=OPTIONS,
    ),
    Mutant(
        "program_eos_not_replacing", "the program's get_eos_ids are added to the tokenizer's EOS instead of "
        "replacing it", "a tokenizer EOS in the output that the program's list does not name "
        "(stop-set/tokenizer-eos-shadowed)",
        (("    if md.eos_ids:  # the program's list replaces the tokenizer's: its EOS stays only where named again\n"
          "        ids -= set(tokenizer.eos_ids) - set(md.eos_ids) - set(opts.stop_ids)\n", ""),),
        module=OPTIONS,
    ),
    Mutant(
        "eos_id_ignored", "--eos-id is not added to the stop set", "an eos id alone that occurs in the output "
        "(stop-set/eos-id)", (("        ids.add(opts.eos_id)\n", "        pass\n"),), module=OPTIONS,
    ),
    Mutant(
        "stop_token_looked_up", "the stop string is looked up as a vocabulary key instead of encoded",
        "a stop string that encodes to one token but is no key, and a key that encodes to several "
        "(stop-set/stop-token-not-key, stop-set/vocab-key-multi)",
        (("        if len(enc) == 1:\n            ids.add(enc[0])\n",
          "        if tokenizer.token_to_id(opts.stop_token) is not None:\n"
          "            ids.add(tokenizer.token_to_id(opts.stop_token))\n"),),
        module=OPTIONS,
    ),
    # prompt text at its edges
    Mutant(
        "prompt_stripped", "the prompt text is stripped of leading / trailing whitespace before the template",
        "a prompt with leading or trailing whitespace (options/leading-space)",
        (("else prompt_ids(tokenizer, prompt, options)", "else prompt_ids(tokenizer, prompt.strip(), options)"),),
    ),
    Mutant(
        "prompt_whitespace_collapsed", "runs of whitespace in the prompt (newlines, tabs) collapse to one space",
        "a prompt with newlines or tabs inside (options/inner-newlines)",
        (("else prompt_ids(tokenizer, prompt, options)",
          'else prompt_ids(tokenizer, " ".join(prompt.split()), options)'),),
    ),
    # reported stats nothing read
    Mutant(
        "text_without_bonus", "the run's text decodes the tokens after the bonus",
        "the run's text compared with the decode of its tokens",
        (("text=decode_checked(tokenizer, out),", "text=decode_checked(tokenizer, out[1:]),"),),
    ),
    Mutant(
        "accepted_capped_by_budget", "the reported a of a round is capped by the tokens max new still allows",
        "a last round cut by max new tokens after more accepted proposals than it emits, its a audited "
        "against the recorded target_verify",
        (("accepted.append(a)", "accepted.append(min(a, max_new - len(out)))"),),
    ),
    Mutant(
        "max_new_reported_uncapped", "the reported max_new is max_new_tokens, not capped by max_seq_len - L",
        "a request whose max new tokens the context caps, its max_new audited (context/cap-1-past)",
        (("max_new=max_new,", "max_new=options.max_new_tokens,"),),
    ),
    # graph-owned output lifetimes (caught on CPU through EagerBackend(reuse_outputs=True))
    Mutant(
        "chunk_features_not_copied", "chunked prefill keeps each chunk's feature output without a copy "
        "(the next prefill overwrites it before the seed reads it)",
        "chunked prefill on a program whose prefill outputs are graph-owned, the seed's features audited",
        (("features.append(feature.clone() if len(chunks) > 1 else feature)", "features.append(feature)"),),
    ),
    Mutant(
        "proposals_kept_as_views", "the host window keeps each proposal as a view of the draft output and "
        "reads it at verify time (after later chain steps overwrote it)",
        "chain steps on a program whose draft outputs are graph-owned, the verify window audited",
        (("self.win[j] = int(ids.reshape(-1)[-1])", "self.win[j] = ids.reshape(-1)[-1]"),
         ("return torch.tensor([self.win[lo:hi]])", "return torch.tensor([[int(x) for x in self.win[lo:hi]]])"),
         ("return self.win[1:], verify_ids.reshape(-1).tolist()",
          "return [int(x) for x in self.win[1:]], verify_ids.reshape(-1).tolist()")),
        module=PLACEMENT, placements=("host",),
    ),
    # issue 28: the seed's stack-top runner (ac69057c9b, 6d2645a8ac) reseeds before it checks the room left
    Mutant(
        "reseed_before_room_check", "after a round the draft is reseeded and chained before the context check, "
        "so the chain writes draft KV positions past max_seq_len (the seed's stack-top binary: 'Index 48 is out "
        "of bounds' on max_seq_len 48, L 32, K 4)",
        "a run whose last verify fits the context and whose next anchor does not (options/trailing-space on "
        "max_seq_len 48), its draft positions audited",
        (("                if anchor_pos + k > md.max_seq_len - 1:\n                    reason = CONTEXT\n"
          "                    break\n                self._mark(\"draft\")\n", "                self._mark(\"draft\")\n"),
         ("                chain(re_ids, g, anchor_pos)\n",
          "                chain(re_ids, g, anchor_pos)\n                if anchor_pos + k > md.max_seq_len - 1:\n"
          "                    reason = CONTEXT\n                    break\n")),
    ),
    # state carried between requests
    Mutant(
        "device_positions_sized_once", "the device placement allocates its positions buffer once, sized by the "
        "first request's max_seq_len, and keeps it for every later request",
        "a small program first, then a larger one, on one runner (the state suite; `edge` runs it first, the "
        "gate meets it through the toy program)",
        (("        self.slots = torch.arange(max_seq_len, device=self.dev)\n",
          "        if \"first_slots\" not in DevicePlacement.__dict__:  # sized by the first request, kept\n"
          "            DevicePlacement.first_slots = torch.arange(max_seq_len, device=self.dev)\n"
          "        self.slots = DevicePlacement.first_slots\n"),),
        module=PLACEMENT, placements=("device",),
    ),
    Mutant(
        "placement_kept_across_requests", "the runner keeps its data placement (window, positions) from its "
        "first request, sized by that program's K and max_seq_len",
        "programs of different specs in one process, a small one first (the state suite)",
        (("place = self.placement(program, md.max_seq_len, k, vocab)",
          'place = self.__dict__.setdefault("_place", self.placement(program, md.max_seq_len, k, vocab))'),),
    ),
    # issue 31: the chunk plan and the window; a device window that reads draft outputs late
    Mutant(
        "chunk_plan_ignores_window", "the chunk plan ignores the program's sliding window (chunk = max prefill // 2)",
        "chunked prefill on a program whose window differs from max prefill / 2 (chunked-prefill/window-*, "
        "chunked-prefill/toy-window-*)",
        (("self.plan(L, md.max_prefill, md.min_prefill, md.sliding_window)",
          "self.plan(L, md.max_prefill, md.min_prefill, None)"),),
    ),
    Mutant(
        "device_window_kept_as_views", "the device window keeps each proposal as a view of the draft output and "
        "assembles itself at verify time (after later chain steps overwrote the draft's output buffer)",
        "chain steps on a program whose draft outputs are graph-owned (check, golden verify), acceptance audited",
        (("        self.buf[:, j : j + 1].copy_(ids.reshape(1, -1)[:, -1:])\n",
          '        self.__dict__.setdefault("views", {})[j] = ids.reshape(1, -1)[:, -1:]\n'),
         ("        return self.buf[:, lo:hi]\n",
          '        return torch.cat([self.__dict__.get("views", {}).get(j, self.buf[:, j : j + 1])\n'
          "                          for j in range(lo, hi)], dim=1)\n"),
         ("host = torch.cat([self.buf, verify_ids.to(self.dev)], dim=1)",
          "host = torch.cat([self.window(0, self.k + 1), verify_ids.to(self.dev)], dim=1)")),
        module=PLACEMENT, placements=("device",),
    ),
    # issue 50: K on a program whose verify range is narrower than [1, 7], the runner-PR's K, text ending in
    # whitespace (each declares the profile whose rule it breaks: the suites judge it by that profile)
    Mutant(
        "k_clamped_to_program_range", "under k-runtime, K is clamped into the program's verify range instead of "
        "[1, 7] (a K the program cannot take silently runs as the nearest one it can)",
        "a program whose verify range is narrower than [1, 7] and a K past it (verify-range/2-5-k5: the right "
        "runner refuses, this one runs K 4)",
        (("    profile = DESIGN_NAME  #", '    profile = "k-runtime"  #'),
         ("options = profile_named(self.profile).request(options, md)  #",
          "options = profile_named(self.profile).request(options, md)\n        options = _dc.replace(options, "
          "chain_len=None if options.chain_len is None else min(max(options.chain_len, md.k_range[0]), "
          "md.k_range[1]))  #"),
         ("import time\n", "import dataclasses as _dc\nimport time\n")),
    ),
    Mutant(
        "runner_pr_ignores_k", "under runner-pr, a K asked for is ignored: it runs get_chain_len whatever -k says",
        "a K other than get_chain_len under runner-pr, expected refused (chain/lo, verify-range/2-5-k1)",
        (("    profile = DESIGN_NAME  #", '    profile = "runner-pr"  #'),
         ("options = profile_named(self.profile).request(options, md)  #",
          "options = profile_named(self.profile).request(_dc.replace(options, chain_len=None), md)  #"),
         ("import time\n", "import dataclasses as _dc\nimport time\n")),
    ),
    Mutant(
        "rounds_one_more", "reports one round more than it ran (tau recomputed to match: still within "
        "ceil((N - 1) / (K + 1)) <= R <= N - 1)",
        "rounds and tau held to the call log (in process) and to our runner's (a binary: runners/binary/acceptance.py)",
        (("        rounds = len(accepted)\n", "        rounds = len(accepted) + (1 if accepted else 0)\n"),),
    ),
    Mutant(
        "text_rstripped", "the run's reported text has its trailing whitespace (spaces, newline, tab) stripped",
        "an output whose text ends in whitespace, its text compared with the decode of its tokens "
        "(options/ends-in-*, toy:text-ends-in-whitespace)",
        (("text=decode_checked(tokenizer, out),", "text=decode_checked(tokenizer, out).rstrip(),"),),
    ),
)

BY_NAME = {m.name: m for m in MUTANTS}


def factory(name: str, placement: str = "host"):
    """A no-argument factory of the mutant runner `name` (what --runner calls) with the
    runner loop's data `placement` ("host" or "device", see eagle3_check.runners.placement)."""
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
