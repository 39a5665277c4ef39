"""Runner profiles: the seed runner's rules as they changed along its stack, as data (DESIGN §2).

A profile says, for one version of the seed's `main.cpp`, what a request becomes: the K it runs
(`chain_k`), whether and how it chunks the prompt (`chunk_plan`), which prompt lengths are an
error (`prompt_error`), and which flags its `--help` lists (how a binary's profile is found,
`detect`). One table, read by the binary routes (`binary/`) and named in every report.

| profile | PR | K | prompt past max prefill | prompt longer than the chunk |
|---|---|---|---|---|
| runner-pr | #20156 (ac69057c9b) | get_chain_len, no flag | error | one prefill |
| k-runtime | #20345 (5ac44d4af1) | `--chain` (<= 0: get_chain_len), clamped to [1, 7] | error | one prefill |
| chunked-prefill | #20347 (16513493ec); `--prompt_file` #20348 (6d2645a8ac) | as k-runtime | chunked | chunked |

The chunk rule of chunked-prefill (main.cpp at 6d2645a8ac, `next_chunk`): chunk =
get_sliding_window when the program has it, else max_prefill / 2, then min(chunk, max_prefill);
each next chunk is min(remaining, chunk), or remaining - min_prefill when that would leave
0 < tail < min_prefill (`rules.prefill_chunks`). Every prompt longer than the chunk is chunked,
within max prefill too; L >= max_seq_len and L < min_prefill are errors. The K clamp of
k-runtime: K = --chain if > 0 else get_chain_len, then clamp(K, 1, 7) (verify M = K + 1 <= 8);
a K the program's target_verify cannot take is then the runtime's error, not the clamp's.

In-process runners declare their profile (`profile = NAME` on the runner; `declared`): ours
(`ReferenceRunner`) declares `design`, DESIGN §2 as written (K out of range and L past max prefill
are errors; `--chunked-prefill` chunks as #20347), and runs any profile it is given
(`--runner-profile NAME`, `RunnerProfile.request`); a plug-in that declares none is taken as the
newest. Reports name the profile and how it was found: declared, detected (a binary's --help) or given.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from eagle3_check.errors import InputError, OptionError
from eagle3_check.runners.rules import prefill_chunk_size, prefill_chunks

CLAMP = (1, 7)  # main.cpp from #20345 on: K clamped to [1, 7] (verify M = K + 1 <= 8)


@dataclass(frozen=True)
class RunnerProfile:
    name: str
    pr: str  # the pull request that introduced these rules
    commit: str  # the seed commit whose main.cpp they are read from
    chain_flag: bool  # `--chain` exists (K at runtime)
    chunks: bool  # prompts longer than the chunk are prefilled in chunks
    prompt_file: bool = False  # `--prompt_file` exists (the stack top, #20348)
    clamps: bool = True  # a K out of [1, 7] is clamped (False: DESIGN §2's error, the `design` profile)

    def chain_k(self, requested: int | None, chain_len: int) -> int:
        """The K this runner runs for `--chain=requested` (None: the flag not given).
        Examples (get_chain_len 4): runner-pr: always 4; k-runtime: None -> 4, 0 -> 4, -3 -> 4,
        6 -> 6, 8 -> 7."""
        if not self.chain_flag:
            return chain_len
        if not self.clamps:
            return chain_len if requested is None else requested
        k = requested if requested is not None and requested > 0 else chain_len
        return min(max(k, CLAMP[0]), CLAMP[1])

    def prompt_error(self, L: int, min_prefill: int, max_prefill: int, max_seq_len: int) -> str | None:
        """Why this runner refuses a prompt of L tokens (its error, in words), or None."""
        if self.chunks:
            if L >= max_seq_len:
                return f"L = {L} does not fit max_seq_len {max_seq_len}"
        elif L > max_prefill:
            return f"L = {L} exceeds max prefill {max_prefill} (this runner does not chunk)"
        if L < min_prefill:
            return f"L = {L} is below min prefill {min_prefill}"
        return None

    def chunk_plan(self, L: int, min_prefill: int, max_prefill: int, sliding_window: int | None) -> list[int]:
        """The prefill chunks this runner uses for a prompt of L tokens ([L]: one prefill)."""
        if not self.chunks:
            return [L]
        return prefill_chunks(L, max_prefill, min_prefill, sliding_window)

    def chunk_size(self, max_prefill: int, sliding_window: int | None) -> int | None:
        return prefill_chunk_size(max_prefill, sliding_window) if self.chunks else None

    def describe(self) -> str:
        return f"{self.name} ({self.pr}, {self.commit})"

    def request(self, options, md):
        """The options an in-process runner runs a request with under this profile (RunOptions, md:
        Metadata), or this profile's refusal: K by `chain_k` (runner-pr: a K other than get_chain_len
        is refused, it has no --chain); chunked-prefill chunks every request; the others refuse
        --chunked-prefill. `design` returns the options unchanged (DESIGN §2's own errors follow)."""
        if self.name == DESIGN_NAME:
            return options
        if not self.chain_flag and options.chain_len not in (None, md.chain_len):
            raise OptionError(f"chain length K = {options.chain_len} under runner profile {self.name} ({self.pr})",
                              f"K = get_chain_len = {md.chain_len} (this runner has no --chain)",
                              "drop -k, or pass --runner-profile k-runtime")
        if options.chunked_prefill and not self.chunks:
            raise OptionError(f"--chunked-prefill under runner profile {self.name} ({self.pr})",
                              "a profile that chunks (chunked-prefill, #20347)",
                              "drop --chunked-prefill, or pass --runner-profile chunked-prefill")
        k = self.chain_k(options.chain_len, md.chain_len)
        return replace(options, chain_len=None if k == md.chain_len else k, chunked_prefill=self.chunks)

    def info(self, found: str) -> dict:
        return {"name": self.name, "pr": self.pr, "commit": self.commit, "found": found}


RUNNER_PR = RunnerProfile("runner-pr", "#20156", "ac69057c9b", chain_flag=False, chunks=False)
K_RUNTIME = RunnerProfile("k-runtime", "#20345", "5ac44d4af1", chain_flag=True, chunks=False)
CHUNKED = RunnerProfile("chunked-prefill", "#20347", "6d2645a8ac", chain_flag=True, chunks=True, prompt_file=True)
DESIGN_NAME = "design"
DESIGN_RULES = RunnerProfile(DESIGN_NAME, "DESIGN §2", "rules 1-10", chain_flag=True, chunks=False, clamps=False)
PROFILES = {p.name: p for p in (RUNNER_PR, K_RUNTIME, CHUNKED, DESIGN_RULES)}
NEWEST = CHUNKED


def _innermost(runner):
    """The runner under its wrappers (a time limit's `.runner`)."""
    seen = 0
    while hasattr(runner, "runner") and seen < 8:
        runner, seen = runner.runner, seen + 1
    return runner


def declare(runner, name: str, flag: str = "--runner-profile") -> None:
    """`--runner-profile NAME` for an in-process runner: the profile its requests are judged by (our
    ReferenceRunner also runs by it)."""
    inner = _innermost(runner)
    profile_named(name, flag)
    inner.profile, inner.profile_found = name, f"given ({flag} {name})"


def declared(runner) -> tuple[RunnerProfile, str]:
    """An in-process runner's profile and how it was found: given (`declare`), declared by the
    runner (`profile = NAME`), else the newest."""
    inner = _innermost(runner)
    name = getattr(inner, "profile", None)  # an isolated runner: what its child said (runners/isolate/declared.py)
    if name is None and getattr(inner, "isolated", False):
        return NEWEST, getattr(inner, "profile_found", None) or "the newest: no profile declared"
    if name is None:
        return NEWEST, f"the newest: {type(inner).__name__} declares no profile"
    if isinstance(name, RunnerProfile):
        name = name.name
    prof = profile_named(str(name), f"{type(inner).__name__}.profile")
    return prof, getattr(inner, "profile_found", None) or f"declared ({type(inner).__name__}.profile = {name!r})"


def profile_named(name: str, flag: str = "--runner-profile") -> RunnerProfile:
    if name not in PROFILES:
        raise InputError(f"{flag} {name}", f"one of {', '.join(PROFILES)}", f"pass e.g. {flag} {NEWEST.name}")
    return PROFILES[name]


def detect(help_text: bytes) -> tuple[RunnerProfile, str] | None:
    """A binary's profile from its `--help` (gflags lists `-name (...)` per flag), with how it was
    found; None when the help lists no seed flag (not the seed's runner: give --runner-profile).
    --prompt_file: the stack top (chunks); --chain alone: K at runtime (#20345 and #20347 list the
    same flags, so a #20347 build without --prompt_file is taken as k-runtime: say so)."""
    if b"-model_path" not in help_text:
        return None
    if b"-prompt_file" in help_text:
        return CHUNKED, "--help lists --prompt_file (the stack top, #20348: chunked prefill)"
    if b"-chain " in help_text or b"-chain (" in help_text:
        return K_RUNTIME, ("--help lists --chain but not --prompt_file (#20345; a #20347 build lists the same "
                           "flags: give --runner-profile chunked-prefill for it)")
    return RUNNER_PR, "--help lists no --chain (the runner PR, #20156)"


def profile_info(runner) -> dict:
    """{name, pr, commit, found} of any runner: a binary's (detected or given) or an in-process one's."""
    if callable(getattr(runner, "profile_info", None)):
        return runner.profile_info()
    prof, found = declared(runner)
    return prof.info(found)
