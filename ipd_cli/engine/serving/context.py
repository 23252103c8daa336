"""What every serving estimate resolves first: system, model, precisions and request shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.schema import PRECISIONS, Accelerator, Model, System, speculative_switch
from ipd_cli.engine import formulas as f
from ipd_cli.engine.inputs import Inputs
from ipd_cli.engine.trace import CLI, Trace
from ipd_cli.errors import InputError


@dataclass(frozen=True)
class ServingContext:
    """The catalog, the resolved names, and where values come from."""

    cat: Catalog
    name: str
    system: System
    acc: Accelerator
    mname: str
    model: Model
    trace: Trace
    origin: str  # workload file or command line

    @property
    def sorigin(self) -> str:
        return self.cat.origin("systems", self.name)

    @property
    def morigin(self) -> str:
        return self.cat.origin("models", self.mname)

    @property
    def vorigin(self) -> str:
        return self.cat.origin("serving", "decode_hbm_efficiency")

    @cached_property
    def inp(self) -> Inputs:
        """The reader of this context's catalog and trace (one per context: ~57k reads in ``ipd
        calibrate`` built one each)."""
        return Inputs(self.cat, self.trace)

    def take(self, label: str, field: str):
        """``serving.<field>`` (dotted into dicts: ``prefill_mfu.fp8``), in SI units, traced."""
        return self.inp.read(f"serving.{field}", label)

    def spec(self, label: str, field: str):
        """``accelerators.<accelerator>.<field>``, in SI units, traced."""
        return self.inp.read(f"accelerators.{self.system.accelerator}.{field}", label)

    def arch(self, label: str, field: str):
        """``models.<model>.<field>``, traced."""
        return self.inp.read(f"models.{self.mname}.{field}", label)


def context(cat: Catalog, hardware: str, model: str, origin: str = CLI) -> ServingContext:
    system = cat.system(hardware)
    return ServingContext(
        cat=cat,
        name=cat.canonical("systems", hardware),
        system=system,
        acc=cat.accelerator_of(system),
        mname=cat.canonical("models", model),
        model=cat.model(model),
        trace=Trace(cat.sources),
        origin=origin,
    )


# --- precisions ------------------------------------------------------------------------------------


def wider(a: str, b: str) -> str:
    """The wider of two precisions (fp4 < fp8 < bf16)."""
    return a if PRECISIONS.index(a) >= PRECISIONS.index(b) else b


def supported(acc: Accelerator, precision: str) -> str:
    """``precision``, or the next wider one the accelerator has a dense figure for (A100: no fp8)."""
    return next((p for p in PRECISIONS[PRECISIONS.index(precision) :] if acc.dense_tflops(p)), precision)


def narrowest(acc: Accelerator) -> str:
    """The narrowest precision the accelerator has a dense figure for."""
    return next(p for p in PRECISIONS if acc.dense_tflops(p) is not None)


def default_precision(cat: Catalog, acc: Accelerator) -> str:
    """The catalog's serving policy: a fixed precision (or the next wider supported), or 'narrowest'."""
    policy = cat.serving.default_precision
    return narrowest(acc) if policy == "narrowest" else supported(acc, policy)


def check_precision(
    ctx: ServingContext, precision: str, param: str, fix: Callable[[str], str] | None = None
) -> None:
    """A precision the accelerator runs; else an error naming the next wider one it has (``fix``:
    how to ask for it, after the reason; default ``; use `param` WIDER``)."""
    if precision not in PRECISIONS:
        raise InputError(f"unknown `{param}` '{precision}'; choose one of {', '.join(PRECISIONS)}")
    if ctx.acc.dense_tflops(precision) is None:
        wide = supported(ctx.acc, precision)
        how = fix(wide) if fix else f"; use `{param}` {wide}"
        raise InputError(f"{ctx.name} has no {precision} support (no dense {precision} figure){how}")


def precisions(ctx: ServingContext, precision: str | None, kv_precision: str | None) -> tuple[str, list[str]]:
    """The weight precision (asked for, or the catalog policy) and the KV precisions to search.

    An asked-for precision the hardware lacks is an error; the defaults adapt to the hardware.
    """
    weights = precision or default_precision(ctx.cat, ctx.acc)
    note = None if precision else f"catalog policy '{ctx.cat.serving.default_precision}' on {ctx.name}"
    ctx.trace.given("serving precision", weights, "", ctx.origin if precision else ctx.vorigin, note=note)
    check_precision(ctx, weights, "precision")
    if kv_precision is not None:
        check_precision(ctx, kv_precision, "kv_precision")
        kv = [kv_precision]
    else:
        kv = list(dict.fromkeys(supported(ctx.acc, p) for p in ctx.cat.serving.kv_precisions))
        kv = [p for p in kv if ctx.acc.dense_tflops(p) is not None] or [supported(ctx.acc, "bf16")]
    src = ctx.origin if kv_precision else ctx.vorigin
    ctx.trace.given("KV-cache precisions searched", ", ".join(kv), "", src)
    return weights, kv


# --- request shape ---------------------------------------------------------------------------------


def request_shape(
    ctx: ServingContext,
    input_tokens: int | None,
    output_tokens: int | None,
    context_tokens: int | None = None,
) -> tuple[int, int, int]:
    """(new prompt tokens, output tokens, cached context tokens) of a request, checked against the
    model's context."""
    sv = ctx.cat.serving
    isl = int(input_tokens if input_tokens is not None else sv.default_input_tokens)
    osl = int(output_tokens if output_tokens is not None else sv.default_output_tokens)
    prefix = int(context_tokens or 0)
    for name, n in (("input_tokens", isl), ("output_tokens", osl)):
        if n <= 0:
            raise InputError(f"`{name}` must be a whole number of tokens above 0, got {n}")
    if prefix < 0:
        raise InputError(f"`context_tokens` must be a whole number of tokens, 0 or more, got {prefix}")
    if prefix + isl + osl > ctx.model.max_context:
        cached = f"`context_tokens` {prefix:,} + " if prefix else ""
        # a length the catalog's default gave is named by its path, not as the parameter (an input
        # review: `--set serving.default_input_tokens=1e12` blamed --input-tokens, never given)
        i_name = "`input_tokens`" if input_tokens is not None else "serving.default_input_tokens"
        o_name = "`output_tokens`" if output_tokens is not None else "serving.default_output_tokens"
        raise InputError(
            f"{ctx.mname} holds at most {ctx.model.max_context:,} tokens; a request of {cached}"
            f"{i_name} {isl:,} + {o_name} {osl:,} does not fit: shorten it, or serve a "
            "longer-context model"
        )
    src = ctx.origin if input_tokens is not None else ctx.vorigin
    ctx.trace.given("input tokens per request", isl, "tokens", src)
    src = ctx.origin if output_tokens is not None else ctx.vorigin
    ctx.trace.given("output tokens per request", osl, "tokens", src)
    if prefix:
        ctx.trace.given(
            "cached context tokens per request", prefix, "tokens", ctx.origin,
            note="earlier turns each request attends to: in its KV cache and its attention, not "
            "prefilled again (a scenario's carried context: (calls - 1) / 2 x (input + output))",
        )  # fmt: skip
    return isl, osl, prefix


SPECULATIVE_CHOICES = ("auto", "off", "on")


def speculative_pin(value) -> str | int | None:
    """The caller's speculative decoding pin: None or 'auto' (searched: off or any depth), 'off',
    'on' (any depth >= 1), or a draft depth (a whole number; 0 is off). Read as a workload's
    setting is (:func:`~ipd_cli.catalog.schema.speculative_switch`), but a bool is no pin here."""
    if not isinstance(value, bool):
        try:
            setting = speculative_switch(value)
        except ValueError:
            pass
        else:
            return None if setting in (None, "auto") else "off" if setting == 0 else setting
    raise InputError(
        "`speculative` is auto, off, on or a draft depth (0 is off; 1 and up, as far as the draft's "
        f"acceptance is measured), got {value!r}"
    )


# --- model memory ----------------------------------------------------------------------------------


def kv_bytes_per_token(arch: Model, kv_bytes: float) -> float:
    """KV-cache bytes per token of context: MLA latent + RoPE key, or GQA keys and values."""
    if arch.kv_lora_rank is not None:
        return f.kv_bytes_per_token_mla(
            arch.kv_layers, arch.kv_lora_rank, arch.qk_rope_head_dim or 0, kv_bytes
        )
    return f.kv_bytes_per_token_gqa(arch.kv_layers, arch.kv_heads, arch.head_dim, kv_bytes)


def routed_active_params(arch: Model) -> float:
    """Routed-expert parameters one token uses (its top-k of E experts); 0 for a dense model."""
    if not arch.is_moe:
        return 0.0
    _, routed, k_over_e = weight_split(arch, 1.0)
    return routed * k_over_e


def mla_down_params(arch: Model) -> float:
    """MLA's down-projections, all layers: the query latent's (q_a, hidden -> q_lora_rank; none
    where queries come from the hidden state) and the key-value latent's with the shared RoPE key
    (kv_a, hidden -> kv_lora_rank + rope dim). Every rank of an attention tensor-parallel group
    holds them whole and runs them on all of its tokens (vLLM's and SGLang's ``ReplicatedLinear``,
    TensorRT-LLM's ``fused_a``; the up- and output projections split). 0 without a latent. Every
    layer is taken to be an MLA layer (no catalog model mixes MLA with other mixers; a hybrid's
    would need the schema to say which layers attend)."""
    if arch.kv_lora_rank is None:
        return 0.0
    latents = (arch.q_lora_rank or 0) + arch.kv_lora_rank + (arch.qk_rope_head_dim or 0)
    return float(arch.layers * arch.hidden_size * latents)


def router_params(arch: Model) -> float:
    """The MoE routers, all routed layers: each a gate of ``experts`` logits from the hidden state
    (experts x hidden; a bias is negligible). Every rank of an attention tensor-parallel group holds
    its layer's whole and runs it on all of its tokens (vLLM's and SGLang's gate is a
    ``ReplicatedLinear``: the routing needs every expert's logit of every token), and checkpoints
    keep it unquantized (``router`` in ``checkpoint_wide``). 0 for a dense model."""
    return float(arch.routed_layers * arch.experts * arch.hidden_size) if arch.is_moe else 0.0


def held_whole_params(arch: Model) -> float:
    """Parameters every rank of an attention tensor-parallel group holds whole:
    :func:`mla_down_params` and :func:`router_params`."""
    return mla_down_params(arch) + router_params(arch)


def weight_split(arch: Model, bytes_per_weight: float) -> tuple[float, float, float]:
    """(dense bytes, routed-expert bytes, k/E); shared experts count as dense."""
    if not arch.is_moe:
        return arch.total_params * bytes_per_weight, 0.0, 1.0
    k_over_e = arch.experts_per_token / arch.experts
    routed = f.minimum(
        f.routed_expert_params(arch.total_params, arch.active_params, k_over_e), arch.total_params
    )
    return (arch.total_params - routed) * bytes_per_weight, routed * bytes_per_weight, k_over_e
