"""The reference's scoring beside the runner: the second core scores while the first runs.

`check` runs a request, then the HF reference scores it (one teacher-forced forward), then the
next request runs. On the 2-core machine the reference's forwards can run on the other core
while the runner runs the next request: `lane(reference, runner)` gives a `ThreadLane` (a
second thread that scores every request submitted, the requests waiting when it wakes several
a forward: judge/packed.score_many, bit-identical to one at a time) when both
sides are ours: our own runner (`ReferenceRunner`, which writes nothing into the program's
weights while the reference shares them, judge/shared.py) and an HF reference. Anything else
(a plug-in in this process, the self reference, which calls the program the runner uses) gets
an `InlineLane`: scored on submit, as before. Either way the scores are the same and the
verdicts are taken in prompt order in the calling thread (jobs/check/prompt_set.py).

The scoring thread computes with the caller's torch thread count (set in the thread: OpenMP's
count is per thread), so its kernels are the ones the caller's forward would use.
"""

from __future__ import annotations

import threading
import time


class InlineLane:
    """Scores each request when it is submitted (`reference.score`)."""

    threaded = False

    def __init__(self, reference):
        self.reference = reference
        self.done: dict = {}

    def submit(self, key, prompt_ids: list[int], tokens: list[int]) -> None:
        t0 = time.perf_counter()
        self.done[key] = (self.reference.score(prompt_ids, tokens), time.perf_counter() - t0)

    def ready(self, key) -> bool:
        return key in self.done

    def result(self, key):
        """(Scores, seconds spent scoring it)."""
        return self.done.pop(key)

    def close(self) -> None:
        pass


class ThreadLane(InlineLane):
    """Scores the submitted requests on a daemon thread, those waiting when it wakes in one call of
    `judge.packed.score_many`; `result` waits for a request's scores (and raises what scoring raised)."""

    threaded = True

    def __init__(self, reference):
        super().__init__(reference)
        import torch

        self.threads = torch.get_num_threads()
        self.waiting: list = []
        self.closed = False
        self.cv = threading.Condition()
        self.thread = threading.Thread(target=self._work, name="eagle3-reference", daemon=True)
        self.thread.start()

    def submit(self, key, prompt_ids: list[int], tokens: list[int]) -> None:
        with self.cv:
            self.waiting.append((key, list(prompt_ids), list(tokens)))
            self.cv.notify_all()

    def ready(self, key) -> bool:
        with self.cv:
            return key in self.done

    def result(self, key):
        with self.cv:
            self.cv.wait_for(lambda: key in self.done)
            got = self.done.pop(key)
        if isinstance(got, BaseException):
            raise got
        return got

    def close(self) -> None:
        """Stops the thread after the forward it is in (the caller's block, --exact's kernels, ends after it)."""
        with self.cv:
            self.closed = True
            self.cv.notify_all()
        self.thread.join()

    def _work(self) -> None:
        import torch

        from eagle3_check.judge.packed import score_many

        torch.set_num_threads(self.threads)
        while True:
            with self.cv:
                self.cv.wait_for(lambda: self.waiting or self.closed)
                if self.closed:
                    return
                batch, self.waiting = self.waiting, []
            t0 = time.perf_counter()
            try:
                scores = score_many(self.reference, [(p, t) for _, p, t in batch])
            except BaseException as e:  # an InputError (weights changed) or a crash: raised where it is read
                scores = [e] * len(batch)
            rows = [len(p) + len(t) for _, p, t in batch]
            spent = time.perf_counter() - t0
            with self.cv:  # a pack's time shared out by rows
                for (key, _, _), s, n in zip(batch, scores, rows):
                    self.done[key] = s if isinstance(s, BaseException) else (s, spent * n / sum(rows))
                self.cv.notify_all()


def lane(reference, runner) -> InlineLane:
    """A `ThreadLane` where both sides are ours (module doc), else an `InlineLane`."""
    from eagle3_check.judge.hf import HFReference
    from eagle3_check.runners.loop import ReferenceRunner

    if type(runner) is ReferenceRunner and isinstance(reference, HFReference):
        return ThreadLane(reference)
    return InlineLane(reference)
