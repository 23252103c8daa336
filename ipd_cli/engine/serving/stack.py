"""The serving stack and its efficiencies on the system's accelerator family, and the draft.

A system serves with the default stack of its accelerator's family (``serving.families``) unless
the caller names one. Each efficiency is read from the stack's profile for that family
(``serving.stacks.<stack>.profiles.<family>.<field>``); a field the profile leaves out is read
from the profile it borrows from, recorded as an estimate that names the lender, else from the
reference value of the ``serving`` section. An accelerator in no family uses the reference values
(also recorded as estimates).
"""

from __future__ import annotations

from dataclasses import dataclass

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.schema import ReleaseProfile, StackProfile, borrowed_profile
from ipd_cli.errors import InputError, did_you_mean

from .context import ServingContext


@dataclass(frozen=True)
class Stack:
    """The stack a system serves with: its name, the accelerator family, and the chain of
    profiles (this one first, then the ones it borrows from)."""

    name: str
    family: str | None
    chain: tuple[tuple[str, str, StackProfile], ...]

    @property
    def borrowed_from(self) -> str | None:
        """'<stack> on <family>' when this stack has no value of its own for this family."""
        own = self.chain[0][2] if self.chain else None
        if own is None or own.borrow is None:
            return None if self.chain else "the reference values"
        st, fam, _ = self.chain[1]
        return f"{st} on {fam}"


REFERENCE = "reference"


def family_of(ctx: ServingContext) -> str | None:
    return accelerator_family(ctx.cat, ctx.system.accelerator)


def accelerator_family(cat: Catalog, accelerator: str) -> str | None:
    """The serving family (serving.families) that names the accelerator, or None."""
    return next((n for n, f in cat.serving.families.items() if accelerator in f.accelerators), None)


def resolve(ctx: ServingContext, stack: str | None) -> Stack:
    """The stack to serve with (asked for, or the family's default) and its profile chain."""
    sv = ctx.cat.serving
    family = family_of(ctx)
    # a stack asked for: its entry's file; the family's default: the family's (the catalog's origin)
    src = (
        ctx.cat.origin_of("serving", "stacks", stack)
        if stack
        else ctx.cat.origin_of("serving", "families", family or "")
    )
    if stack is None:
        if family is None:
            ctx.trace.given(
                "serving stack",
                REFERENCE,
                "",
                src,
                note=f"no serving stack is measured on {ctx.system.accelerator}: the reference efficiencies",
            )
            return Stack(REFERENCE, None, ())
        choice = sv.families[family].default_stack
        stack = choice.value
        ctx.inp.trace.given(
            "serving stack",
            stack,
            "",
            src,
            note=f"the best published stack on {family} ({choice.note or choice.source})",
        )
    else:
        if stack not in sv.stacks:
            raise InputError(f"unknown `stack` '{stack}'{did_you_mean(stack, sv.stacks)}")
        ctx.trace.given("serving stack", stack, "", ctx.origin)
    runs = sorted(n for n, st in sv.stacks.items() if family in st.profiles)
    if family is None or family not in sv.stacks[stack].profiles:
        where = f"{ctx.system.accelerator} ({family} family)" if family else ctx.system.accelerator
        choose = f"; stacks that run there: {', '.join(runs)}" if runs else ""
        raise InputError(f"`stack` {stack} has no measurement or profile for {where}{choose}")
    return chain_of(ctx.cat, stack, family)


def chain_of(cat: Catalog, stack: str, family: str) -> Stack:
    """``stack``'s profile chain on ``family`` (which it must have a profile for): its own profile,
    then the ones it borrows from."""
    sv = cat.serving
    chain = [(stack, family, sv.stacks[stack].profiles[family])]
    while chain[-1][2].borrow is not None:
        st, fam = borrowed_profile(chain[-1][0], chain[-1][2].borrow)
        chain.append((st, fam, sv.stacks[st].profiles[fam]))
    return Stack(stack, family, tuple(chain))


def first_setting(stack: Stack, field: str) -> tuple[str, str, StackProfile, str | None] | None:
    """The first profile of the stack's borrowing chain that sets ``field`` (``name.key``: that key
    of a per-precision table): its stack, family, profile and the borrowed note (None for the
    stack's own profile); None where no profile does."""
    i = _depth(stack, field)
    if i is None:
        return None
    st, fam, prof = stack.chain[i]
    lent = f"{stack.name} on {stack.family}: borrowed from {st} on {fam}" if i > 0 else None
    return st, fam, prof, lent


def _depth(stack: Stack, field: str) -> int | None:
    """The index in the borrowing chain of the first profile that sets ``field`` (``name.key``:
    that key of a per-precision table), None where none does."""
    name, _, key = field.partition(".")
    for i, (_, _, prof) in enumerate(stack.chain):
        value = getattr(prof, name)
        if value is not None and (not key or key in value):
            return i
    return None


def nearer(stack: Stack, field: str, other: str) -> bool:
    """Whether the borrowing chain sets ``field`` in a profile no farther than the first that sets
    ``other`` (a stack's own value of a general field outranks a borrowed specific one)."""
    found, rival = _depth(stack, field), _depth(stack, other)
    return found is not None and (rival is None or found <= rival)


def read(
    ctx: ServingContext,
    stack: Stack,
    label: str,
    field: str,
    reference: str | None,
    instead_of: str | None = None,
):
    """``field`` of the stack's profile (or the profile it borrows from), else the reference
    ``serving.<reference>`` (None: no reference; returns None). ``instead_of``: the field (``name.key``)
    this value stands in for, whose table the chain holds for other keys only; then recorded as an
    estimate that says so."""
    stand_in = _stand_in(stack, field, instead_of)
    found = first_setting(stack, field)
    if found is not None:
        st, fam, _, lent = found
        lent = "; ".join(n for n in (stand_in, lent) if n) or None
        return ctx.inp.read(f"serving.stacks.{st}.profiles.{fam}.{field}", label, borrowed=lent)
    if reference is None:
        return None
    if stack.chain:
        lent = f"{stack.name} on {stack.family}: not measured{_elsewhere(stack, field)}, the reference value"
    else:
        lent = f"no serving stack is measured on {ctx.system.accelerator}: the reference value"
    lent = "; ".join(n for n in (stand_in, lent) if n)
    return ctx.inp.read(f"serving.{reference}", label, borrowed=lent)


def _stand_in(stack: Stack, field: str, instead_of: str | None) -> str | None:
    """'sglang on cdna4: grouped_gemm_hbm_efficiency not measured at fp8 (its value is for fp4
    only), so decode_hbm_efficiency' where the chain holds ``instead_of``'s table for other keys."""
    if instead_of is None or not (elsewhere := _elsewhere(stack, instead_of)):
        return None
    name = instead_of.partition(".")[0]
    return f"{stack.name} on {stack.family}: {name} not measured{elsewhere}, so {field}"


def _elsewhere(stack: Stack, field: str) -> str:
    """' at fp8 (its value is for fp4 only)' where the chain holds ``field``'s table for other keys."""
    name, _, key = field.partition(".")
    held = sorted({k for _, _, prof in stack.chain for k in (getattr(prof, name) or {})}) if key else []
    return f" at {key} (its value is for {', '.join(held)} only)" if held else ""


def _setting(ctx: ServingContext, stack: Stack, label: str, field: str, shown=lambda v: v):
    """A sourced choice (name or yes/no) of the stack's profile or the one it borrows from, traced
    (``shown``: how the trace prints it), or None where no profile of the chain sets it."""
    found = first_setting(stack, field)
    if found is None:
        return None
    lender, _, prof, lent = found
    choice = getattr(prof, field)
    note = "; ".join(n for n in (choice.note, lent) if n) or None
    origin = ctx.cat.origin_of("serving", "stacks", lender)  # the stack whose profile sets it
    ctx.trace.given(
        label, shown(choice.value), "", origin, note=note, source=choice.source, estimate=lent is not None
    )
    return choice.value


def attention_min_precision(ctx: ServingContext, stack: Stack) -> str:
    """The narrowest precision the stack's attention math runs at on this family (its profile, the
    profile it borrows from, else the reference ``serving.attention_min_precision``), traced."""
    label = "attention math: narrowest precision"
    value = _setting(ctx, stack, label, "attention_min_precision")
    if value is not None:
        return value
    origin = ctx.cat.origin("serving", "attention_min_precision")
    return ctx.trace.given(label, ctx.cat.serving.attention_min_precision, "", origin)


def two_batch_overlap(ctx: ServingContext, stack: Stack) -> bool:
    """Whether the stack overlaps a prompt's expert dispatch and combine with the other half of the
    batch's compute on this family (its profile or the one it borrows from; default no), traced."""
    label = "prefill two-batch overlap"
    value = _setting(ctx, stack, label, "two_batch_overlap", lambda v: "yes" if v else "no")
    if value is not None:
        return bool(value)
    note = f"{stack.name} on {stack.family}: no source says it overlaps a prompt's all-to-all"
    ctx.trace.given(label, "no", "", ctx.cat.origin_of("serving", "stacks", stack.name), note=note)
    return False


def host_per_sequence(ctx: ServingContext, stack: Stack) -> tuple[float, bool]:
    """The host's time per decode step and sequence of a scheduler rank (seconds; 0 where no profile
    of the chain prices it) and whether the stack runs it while the GPU runs another step (its
    profile or the one it borrows from; default no), traced where priced."""
    host = read(ctx, stack, "host time per sequence and step", "host_us_per_sequence", None)
    if not host:
        return 0.0, False
    label = "host loop overlaps the GPU's step"
    value = _setting(ctx, stack, label, "host_overlaps_gpu", lambda v: "yes" if v else "no")
    if value is None:
        note = f"{stack.name} on {stack.family}: no source says its host loop overlaps the GPU"
        ctx.trace.given(label, "no", "", ctx.cat.origin_of("serving", "stacks", stack.name), note=note)
    return float(host), bool(value)


def attention_dp_context_timeout_steps(ctx: ServingContext, stack: Stack) -> float:
    """The most decode steps the stack's attention-DP balance holds a new prompt for (its profile or
    the one it borrows from; 0 where no profile of the chain runs one), traced where priced."""
    label = "attention-DP balance: a prompt's longest wait (steps)"
    steps = read(ctx, stack, label, "attention_dp_context_timeout_steps", None)
    return float(steps or 0.0)


def prompt_stall_s(ctx: ServingContext, stack: Stack, release: str | None, precision: str) -> float:
    """The least seconds an aggregated instance's iteration holding a prompt takes under the stack's
    ``release`` (None: no release picked, none) at weight ``precision``: the release's measured
    stall on this family, traced; 0 where it measured none there (traced, saying so)."""
    if release is None:
        return 0.0
    prof = release_profile(ctx, stack, release)
    label = f"prompt stall per aggregated iteration ({stack.name} {release})"
    if prof is not None and precision in (prof.prompt_stall_ms or {}):
        return _release_value(ctx, stack, release, "prompt_stall_ms", precision, label)
    held = sorted(prof.prompt_stall_ms or {}) if prof is not None else []
    where = f"at {precision} (measured at {', '.join(held)} only)" if held else f"on {stack.family}"
    note = f"{stack.name} {release}: no prompt stall measured {where}; a prompt costs its physics alone"
    ctx.trace.given(label, 0.0, "ms", ctx.cat.origin_of("serving", "stacks", stack.name), note=note)
    return 0.0


def _unknown_release(
    release: str, stack: str, known: dict, where: str = "", field: str = "stack_release"
) -> str:
    listed = ", ".join(known) or "none"
    return (
        f"unknown `{field}` '{release}' for {stack}{where}; releases measured apart: {listed} "
        "(leave it out for the stack's profile)"
    )


def _system_stack(cat: Catalog, hardware: str, stack: str | None) -> tuple[str | None, str]:
    """``hardware``'s serving family and the stack it serves with (``stack``, else the family's
    default; the reference where no family names its accelerator)."""
    family = accelerator_family(cat, cat.system(hardware).accelerator)
    if stack is None:
        stack = cat.serving.families[family].default_stack.value if family else REFERENCE
    return family, stack


def check_release(
    cat: Catalog,
    hardware: str,
    release: str,
    stack: str | None = None,
    fields: tuple[str, str] = ("stack", "stack_release"),
) -> None:
    """Refuse, before any estimate, a ``release`` that the serving stack ``hardware`` serves with
    (``stack``, else its family's default) does not hold, in one line naming the ones it does (a
    comparison's scenario runs its stages first and would refuse it only after them). ``fields``:
    the names the stack and the release were given by (an RL workload's ``generation_stack`` and
    ``generation_stack_release``)."""
    family, stack = _system_stack(cat, hardware, stack)
    if stack not in cat.serving.stacks:  # a misspelt stack is that, not a release it lacks
        raise InputError(f"unknown `{fields[0]}` '{stack}'{did_you_mean(stack, cat.serving.stacks)}")
    known = cat.serving.stacks[stack].releases
    if release not in known:
        where = f" (the serving stack of {cat.canonical('systems', hardware)})"
        raise InputError(_unknown_release(release, stack, known, where, fields[1]))


def release_unpriced_note(
    cat: Catalog,
    hardware: str,
    release: str | None,
    precision: str | None,
    stack: str | None = None,
    disaggregated: bool = False,
) -> str | None:
    """One line for stderr where the stack's ``release`` (as :func:`check_release` finds the stack)
    holds no value on ``hardware``'s family at weight ``precision``: the estimate is then the
    stack's profile alone, which only an assumptions row said (a newcomer audit: ``--stack-release
    1.1.0rc2`` on H100 was accepted and changed nothing). On a ``disaggregated`` point, what the
    release prices there (:func:`_disaggregated_release_note`). None where it prices the point."""
    if release is None or precision is None:
        return None
    family, stack = _system_stack(cat, hardware, stack)
    held = cat.serving.stacks[stack].releases if stack in cat.serving.stacks else {}
    if release not in held:
        return None
    measured = {
        fam: sorted({p for field in RELEASE_FIELDS for p in (getattr(prof, field) or {})})
        for fam, prof in held[release].profiles.items()
    }
    system = cat.canonical("systems", hardware)
    if precision in measured.get(family or "", []):
        if not disaggregated or family is None:
            return None
        return _disaggregated_release_note(cat, stack, release, family, precision, system)
    where = "; ".join(f"{fam} at {', '.join(precs)}" for fam, precs in measured.items() if precs)
    return (
        f"{stack} {release} prices nothing on {system} ({family or 'no accelerator family'}) at "
        f"{precision}: it was measured on {where or 'no family'} only; the estimate is {stack}'s "
        "profile alone"
    )


def _disaggregated_release_note(
    cat: Catalog, stack: str, release: str, family: str, precision: str, system: str
) -> str | None:
    """What a release priced on this family and precision prices on a disaggregated point: its
    prompt stall applies to aggregated instances only (point.py), and its floor per layer wherever
    the stack's floor applies (physics.py), which is a prompt's own latency to its first token and
    not the decode pool where the stack measured that pool's own floor. None where the release's
    floor prices the decode pool too (a review: the note said nothing on a disaggregated point,
    where the release moved the time to first token alone)."""
    prof = cat.serving.stacks[stack].releases[release].profiles[family]
    floor = precision in (prof.step_overhead_us_per_layer or {})
    pool_floor = "disaggregated_step_overhead_us_per_layer"
    if floor and not nearer(chain_of(cat, stack, family), pool_floor, "step_overhead_us_per_layer"):
        return None
    head = f"{stack} {release} on {system} at {precision}, a disaggregated deployment:"
    if not floor:
        return (
            f"{head} it prices nothing there (its prompt stall applies to aggregated instances only); "
            f"the estimate is {stack}'s profile alone"
        )
    stall = (
        " and its prompt stall applies to aggregated instances only"
        if precision in (prof.prompt_stall_ms or {})
        else ""
    )
    return (
        f"{head} the decode pool keeps {stack}'s own floor{stall}, so the release moves only each "
        "prompt's own time to its first token (ttft_s, through its floor per layer)"
    )


RELEASE_FIELDS = tuple(f for f in ReleaseProfile.model_fields if f != "note")  # what a release prices


def release_floor(ctx: ServingContext, stack: Stack, release: str | None, precision: str) -> float | None:
    """The floor per decode step and layer of an aggregated instance under the stack's ``release``
    at weight ``precision`` (seconds), traced, where the release holds one fitted on this family at
    that precision; None otherwise (the stack's profile floor applies)."""
    if release is None:
        return None
    prof = release_profile(ctx, stack, release)
    if prof is None or precision not in (prof.step_overhead_us_per_layer or {}):
        return None
    label = f"per-step overhead per layer ({stack.name} {release})"
    return _release_value(ctx, stack, release, "step_overhead_us_per_layer", precision, label)


def _release_value(
    ctx: ServingContext, stack: Stack, release: str, field: str, precision: str, label: str
) -> float:
    """The release's ``field`` at ``precision`` on the stack's family (SI units), traced as ``label``."""
    at = f"releases.{release}.profiles.{stack.family}.{field}.{precision}"
    return float(ctx.inp.read(f"serving.stacks.{stack.name}.{at}", label))


def release_profile(ctx: ServingContext, stack: Stack, release: str) -> ReleaseProfile | None:
    """The stack's ``release`` profile on this family (None: the release measured nothing here);
    a release the stack does not list is an input error."""
    known = ctx.cat.serving.stacks[stack.name].releases if stack.chain else {}
    if release not in known:
        raise InputError(_unknown_release(release, stack.name, known))
    return known[release].profiles.get(stack.family or "")
