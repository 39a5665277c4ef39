"""What an isolated runner declares, carried across the process boundary (issue 47).

In process the harness reads one declaration off the runner object: its profile (`profile = NAME`
on the runner class or instance, or `--runner-profile NAME` given to it: `runners.profiles.declared`).
The stop set is the tokenizer's and the program's (`runners.options.stop_set`), never the runner's, and
no other attribute of a runner is read. Isolated, the plug-in lives in the child, so:

- the child applies a given `--runner-profile` to its runner (`declarations(runner, given)`: our
  ReferenceRunner, or a copy of it, then runs by that profile, as in process), reads the profile it
  ends up with, and says it in its "ready" message: {"profile": NAME or None, "class": NAME};
- the parent validates that message (`profile_of`: a known profile name, a class name that is an
  identifier) and `IsolatedRunner.profile` answers `declared()` as the runner object would in process.

Worked example: a plug-in whose class says `profile = "design"`, isolated -> ready message
{"profile": "design", "class": "MyRunner"} -> the suites judge it by `design`, reported as
"declared (MyRunner.profile = 'design'), read in its own process".
"""

from __future__ import annotations

from eagle3_check.runners.isolate.wire import WireError

CLASS_CHARS = 80  # a class name longer than this is cut in the report's "found"


def declarations(runner, given: str | None) -> dict:
    """The child's side: `given` applied (`--runner-profile`), then the runner's profile read as
    `runners.profiles.declared` reads it in process (an unknown name is that function's InputError)."""
    from eagle3_check.runners.profiles import _innermost, declare, declared

    if given:
        declare(runner, given)
    inner = _innermost(runner)
    name = getattr(inner, "profile", None)
    prof = declared(runner)[0] if name is not None else None  # validates the name, as in process
    return {"profile": prof.name if prof else None, "class": type(inner).__name__[:CLASS_CHARS]}


def profile_of(msg: dict, given: str | None) -> tuple[str | None, str]:
    """The parent's side: (profile name or None, how it was found) from the child's "ready" message,
    validated; a message that is not what `declarations` sends is a WireError."""
    from eagle3_check.runners.profiles import PROFILES

    name, cls = msg.get("profile"), msg.get("class")
    if not isinstance(cls, str) or not cls.isidentifier():
        raise WireError(f"the ready message's class is {cls!r:.60}; expected a class name")
    if name is not None and (not isinstance(name, str) or name not in PROFILES):
        raise WireError(f"the ready message's profile is {name!r:.60}; expected one of {', '.join(PROFILES)}")
    if given:
        if name != given:
            raise WireError(f"the runner's process runs profile {name!r:.60}; it was given {given!r}")
        return name, f"given (--runner-profile {given})"
    if name is None:
        return None, f"the newest: {cls} declares no profile"
    return name, f"declared ({cls}.profile = {name!r}), read in its own process"
