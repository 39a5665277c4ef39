"""Two requests at once: our own runner on the program and on a twin that shares its weights.

`check` runs one request after another, each on one core (the CLI sets one torch thread: a one-row
decode gains little from more). On a machine with a second core, `runs_ahead` runs the prompt set
two requests at a time when both sides are ours: our own runner (`ReferenceRunner`) on our eager
program on CPU. One thread runs requests on the program itself, the other on its twin
(`copy.deepcopy` with the parameters in the memo, as judge/shared.py copies the reference: the
same weight tensors, its own KV caches and output buffers), each taking the next request not yet
taken, the longest prompts first (so that the last to finish is a short one: SmolLM2's check has one
prompt of 825 tokens among fifteen of 31 to 55); the caller reads the observations in prompt order
(`observe(i)` waits for request i), so the verdicts, their order and the report are the serial
run's. Only the times differ.

Why the twin's runs are the program's, bit for bit: a run starts on whatever its program's caches
hold and overwrites the slots it uses; every slot it has not written is masked (it is past the
query position, or a window leaves it out: program/kv_window.py), and a masked slot adds exactly 0
to attention, whatever it holds. So a request's calls compute the same values on either program,
after any other request (pinned: tests/jobs/check/test_twin_runs.py, check's report with and without).

Both threads run `guarded_run` at once, so its stdout capture is shared for the block
(runners/shared_output.py): output still fails the run that wrote it, and any run beside it.
Everything else runs serially, as before: a plug-in, an isolated runner or a binary (its code is the
user's: one request at a time, as it was judged), a `.pte`, AOTI or CUDA program, a quantized or
`--devices` program, `--exact` (its kernels are installed process-wide, for the one runner), `--reference
self` (the reference decodes on the program itself, while the requests ahead would run on it), several
torch threads (the runner uses the cores already), one core, a prompt set of one request, or a twin
that would not fit twice over in the memory available now (`twin_bytes`: its KV caches and a second
prefill's transient tensors; SmolLM2: ~0.3 GB).
"""

from __future__ import annotations

import copy
import os
import threading
import time

TWINS = 2  # requests at once: the 2-core machine's cores (the reference's scoring thread shares them)


def concurrent_runs(program, runner, requests: int, reference=None) -> int:
    """How many requests run at once: TWINS where both sides are ours and a second core is free
    (module doc), else 1; 1 too where `reference` decodes on `program` itself (`--reference self`)."""
    import torch

    from eagle3_check.exact.mode import exact_active
    from eagle3_check.program.eager import EagerBackend
    from eagle3_check.runners.loop import ReferenceRunner

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    ours = type(runner) is ReferenceRunner and type(program) is EagerBackend
    plain = ours and program.device.type == "cpu" and program.placement is None \
        and not getattr(program, "quantized_layers", None)
    on_program = getattr(reference, "program", None) is program  # its scoring would share the caches
    if not plain or on_program or exact_active() or torch.get_num_threads() > 1 or cores < 2 or requests < 2:
        return 1
    from eagle3_check.resources import host_available

    return TWINS if 2 * twin_bytes(program) < host_available() else 1


def twin_bytes(program) -> int:
    """What a twin adds: its buffers (the KV caches) and the transient tensors of a second prefill as
    long as the program takes (resources.prefill_estimate), in the program's dtype."""
    from eagle3_check.resources import prefill_estimate

    m = program.module
    buffers = sum(b.numel() * b.element_size() for b in m.buffers())
    cfg = m.target.model.config.get_text_config(decoder=True)
    elem = next(m.parameters()).element_size()
    return buffers + prefill_estimate(cfg, program.spec.max_prefill, program.spec.max_seq_len, elem, "target config")


def twin(program):
    """An eager program with its own caches and output buffers over the same weight tensors."""
    return copy.deepcopy(program, memo={id(p): p for p in program.module.parameters()})


class Serial:
    """Each request observed when it is asked for (the serial path): `observe(i)` -> (Observation, seconds)."""

    def __init__(self, program, runner, tokenizer, prompts, options):
        self.args = program, runner, tokenizer, prompts, options

    def observe(self, i: int):
        """Request i through the seam: a runner that returns ids gets the prompt's ids where it has them
        (`Prompt.request`), one that takes text (a binary) its text."""
        from eagle3_check.runners.in_process import as_runner

        program, runner, tokenizer, prompts, options = self.args
        seam = as_runner(runner)
        request = prompts[i].request() if seam.capabilities.token_ids else prompts[i].text
        t0 = time.perf_counter()
        obs = seam.observe(program, tokenizer, request, options, what=f"'{prompts[i].id}'")
        return obs, time.perf_counter() - t0

    def close(self) -> None:
        pass


class Twins(Serial):
    """The requests run ahead on TWINS threads, the program and its twins (module doc)."""

    def __init__(self, program, runner, tokenizer, prompts, options, sizes: list[int] | None = None, n: int = TWINS):
        import torch

        from eagle3_check.runners.shared_output import shared_output

        super().__init__(program, runner, tokenizer, prompts, options)
        # the order requests are taken in: longest prompt first (`sizes`: each request's prompt length)
        self.order = sorted(range(len(prompts)), key=lambda i: -sizes[i]) if sizes else list(range(len(prompts)))
        self.programs = [program] + [twin(program) for _ in range(n - 1)]
        self.runners = [runner] + [copy.copy(runner) for _ in range(n - 1)]  # each its own tokenizer copy (crash.py)
        self.done: dict[int, tuple] = {}
        self.next = 0
        self.stop = False
        self.cv = threading.Condition()
        self.threads_n = torch.get_num_threads()
        self.grad = torch.is_grad_enabled()
        self.output = shared_output()
        self.output.__enter__()
        self.started = threading.Barrier(n + 1)  # every thread exists before any run: none is another's stray
        self.threads = [threading.Thread(target=self._work, args=(j,), name=f"eagle3-runner-{j}", daemon=True)
                        for j in range(n)]
        for t in self.threads:
            t.start()
        self.started.wait()

    def _take(self) -> int | None:
        with self.cv:
            if self.stop or self.next >= len(self.args[3]):
                return None
            self.next += 1
            return self.order[self.next - 1]

    def _work(self, j: int) -> None:
        import torch

        from eagle3_check.runners.in_process import as_runner

        torch.set_num_threads(self.threads_n)  # per thread: the caller's count, so the caller's kernels
        torch.set_grad_enabled(self.grad)
        self.started.wait()
        _, _, tokenizer, prompts, options = self.args
        seam = as_runner(self.runners[j])
        while (i := self._take()) is not None:
            t0 = time.perf_counter()
            try:
                got = (seam.observe(self.programs[j], tokenizer, prompts[i].request(), options,
                                    what=f"'{prompts[i].id}'"), time.perf_counter() - t0)
            except BaseException as e:  # noqa: BLE001 - raised where it is read (a harness error, Ctrl-C's)
                got = e
            with self.cv:
                self.done[i] = got
                self.cv.notify_all()

    def observe(self, i: int):
        with self.cv:
            self.cv.wait_for(lambda: i in self.done)
            got = self.done.pop(i)
        if isinstance(got, BaseException):
            raise got
        return got

    def close(self) -> None:
        """No new request starts; the ones under way finish; the shared capture ends."""
        with self.cv:
            self.stop = True
        for t in self.threads:
            t.join()
        self.output.__exit__(None, None, None)


def runs_ahead(program, runner, tokenizer, prompts, options, parallel: bool, sizes: list[int] | None = None,
               reference=None) -> Serial:
    """`Twins` where asked (`parallel`) and `concurrent_runs` allows, else `Serial`; close() it after.
    `sizes`: each request's prompt length (the longest run first); `reference`: what scores the runs."""
    if parallel and concurrent_runs(program, runner, len(prompts), reference) > 1:
        return Twins(program, runner, tokenizer, prompts, options, sizes)
    return Serial(program, runner, tokenizer, prompts, options)
