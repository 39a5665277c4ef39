"""Known third-party noise, silenced where it arises and nowhere else.

`third_party_quiet()` is a context manager for the few calls that raise noise a user cannot act
on: importing transformers' model code (it imports torchao, which logs "Failed to load" for
CUDA kernels on a CPU machine, and torch logs a deprecation of `register_constant` on Enums),
loading weights (transformers' "Loading weights" progress bar), `torch.export` (a FutureWarning
about `LeafSpec` from torch's own pytree code), lowering (executorch's
buffer-mutation UserWarning on the caches the export initialises, its resource deprecations)
and executorch's runtime import (its ExperimentalWarning). Inside the scope only those named
warnings are ignored and only those loggers raised to ERROR; on leaving, the warning filters, the logger levels and transformers'
progress-bar switch are what they were. Nothing is filtered process-wide: a UserWarning from the
user's own code (a plug-in runner, say) shows as Python shows it, through the CLI or the Python
API alike.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

# (category, message regex): each one seen from a library on the supported versions, never ours.
KNOWN_WARNINGS: tuple[tuple[type[Warning], str], ...] = (
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),  # torch.export, torch 2.13
    (Warning, r"This API is experimental"),  # executorch's ExperimentalWarning (portable_lib)
    (DeprecationWarning, r"`torch\.jit\.script_method` is deprecated"),  # executorch lowering
    (DeprecationWarning, r"(read_text|open_text|read_binary) is deprecated"),  # executorch's resources
    # executorch's emitter, on the caches it is told to initialise (InitializedMutableBufferPass)
    (UserWarning, r"Mutation on a buffer in the model is detected"),
)
# loggers that talk at import or load time: torchao ("Failed to load ..." CUDA kernels on CPU),
# torch's pytree (register_constant on Enums, from torchao's import), transformers (load notes)
NOISY_LOGGERS = ("torchao", "torch.utils._pytree", "transformers")


@contextmanager
def third_party_quiet() -> Iterator[None]:
    """Ignores KNOWN_WARNINGS, raises NOISY_LOGGERS to ERROR and turns transformers' progress bars
    off, for the duration of the block only (everything restored on exit, errors included).
    Filters that a library installs while imported inside the block (numpy's, sympy's) are kept:
    the scope takes its own filters away, not theirs."""
    levels = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    bars_were_on = _hf_bars(None)
    before = list(warnings.filters)
    added: list = []
    with warnings.catch_warnings():
        for category, message in KNOWN_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=category)
        ours = list(warnings.filters[:len(KNOWN_WARNINGS)])
        for name in NOISY_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)
        _hf_bars(False)
        try:
            yield
        finally:
            added = [f for f in warnings.filters if f not in before and f not in ours]
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)
            if bars_were_on:
                _hf_bars(True)
    for action, message, category, module, lineno in reversed(added):  # theirs, in their order
        warnings.filterwarnings(action, message=message.pattern if message else "", category=category,
                                module=module.pattern if module else "", lineno=lineno)


def _hf_bars(on: bool | None) -> bool:
    """transformers' progress bars: turned on / off (None: left alone); returns whether they were on."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return False

    was = hf_logging.is_progress_bar_enabled()
    if on is True:
        hf_logging.enable_progress_bar()
    elif on is False:
        hf_logging.disable_progress_bar()
    return was
