"""Parallelism-plan search for training: enumerate plans as numpy columns, drop what cannot run,
evaluate the step of :mod:`ipd_cli.engine.trainstep` over the whole grid, keep the best.

The grid (see /work/shared/design/search.md). Micro columns: tensor ``tp`` (divisors of the
attention heads up to 64, inside one scale-up domain: its per-layer collectives do not cross
NICs), context ``cp`` (powers of two leaving chunks of at least 1,024 tokens), pipeline ``pp``
(divisors of the layers and powers of two; the last stage may hold fewer layers), interleaving
``vp`` (divisors of the layers per stage, no empty model chunk: see ``max_chunks``), pipeline
schedule ``sched`` (1F1B, or DualPipe on an even pp without interleaving), expert ``ep``
(divisors of the routed experts, folded into tp x cp x dp as Megatron does), micro-batch size
``mbs``, rank placement ``order``. Per
micro row: the data-parallel degree ``dp`` with the micro-batches per step ``mb`` (the global
batch is dp x mb x mbs sequences); per plan, the fastest recompute policy (none, selective,
full, offload to host) and sharding stage (ZeRO 0-2, FSDP) that fit in memory.

The search is exact branch and bound: micro rows in order of a lower bound on their seconds per
token (deadline mode: on their GPUs), a chunk at a time, until no remaining row can win.

The global batch stays within the model's recipe batch (``models.<m>.training_global_batch_tokens``,
else the DeepSeek LLM rule from the training FLOPs); a larger batch needs more tokens to reach the
same loss: by McCandlish et al. (arXiv 1812.06162) tokens E = E_min (1 + B / B_noise), so with the
recipe batch taken as B_noise a batch B above it costs (1 + B / B_recipe) / 2 times the tokens.
A smaller batch gets no credit. The search minimises seconds per useful token; GPUs a plan leaves
idle still count (GPU-seconds = step time x GPUs given).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ipd_cli.catalog.catalog import Catalog
from ipd_cli.catalog.schema import FP8_RECIPES, Accelerator, Model
from ipd_cli.errors import InfeasibleError, InputError, counted, gb_text

from . import formulas as f
from . import search as sr
from . import trainstep as ts
from .inputs import Inputs

RECOMPUTE = ("none", "selective", "full", "offload")  # policies 0-3; from ts.SET_BASE on: module sets
SCHEDULES = ("1f1b", "dualpipe")  # the pipeline schedules, by their ``sched`` column value
DISPATCHERS = ("alltoall", "deepep")  # MoE token dispatch, by its ``disp`` column value
# MoE token routing (not searched: a run's numerics, dropless unless pinned): every token reaches its
# k experts, or padded token drop at a capacity factor (Megatron-Core's moe_expert_capacity_factor
# with moe_pad_expert_input_to_capacity: each expert computes exactly its capacity, dropping the
# tokens beyond it and padding the rest; it changes what the model learns)
ROUTINGS = ("dropless", "token-drop")
SWITCH = ("off", "on")  # the 1F1B expert overlap (``a2ao``) and CUDA graphs (``graph``), by column value
POLICIES = (0, 1, 2, 3)
ZERO_STAGES = (0, 1, 2, 3)  # ZeRO-0 (plain data parallel) to FSDP
PIN_KEYS = {
    "tp": "tp",
    "cp": "cp",
    "pp": "pp",
    "vp": "vp",
    "interleave": "vp",
    "ep": "ep",
    "dp": "dp",
    "mbs": "mbs",
    "micro_batch": "mbs",
    "gbs": "gbs",
    "global_batch": "gbs",
    "recompute": "rc",
    "zero": "zero",
    "order": "order",
    "schedule": "sched",
    "dispatcher": "disp",
    "a2a_overlap": "a2ao",
    "cuda_graphs": "graph",
    "routing": "drop",  # not searched: a run's numerics, dropless unless pinned
    "fp8_recipe": "f8r",  # not searched: a run's numerics, tensorwise unless pinned
    # not searched: userbuffers where the recipe has them (efficiency.training_tp_userbuffers) unless
    # pinned off (TransformerEngine's NCCL path, or a stack without userbuffers: Megatron-LM 2022)
    "tp_comm_overlap": "tpo",
}
MIN_CP_CHUNK = 1024  # context parallelism below this many tokens per GPU is not enumerated
MICRO_BATCHES = (1, 2, 3, 4, 6, 8, 12, 16)
MAX_TP = 64
MB_OPTIONS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


# the columns pinned by name: (the pin's key, the names by column value)
NAMED = {
    "rc": ("recompute", RECOMPUTE),
    "sched": ("schedule", SCHEDULES),
    "disp": ("dispatcher", DISPATCHERS),
    "a2ao": ("a2a_overlap", SWITCH),
    "graph": ("cuda_graphs", SWITCH),
    "drop": ("routing", ROUTINGS),
    "f8r": ("fp8_recipe", FP8_RECIPES),
    "tpo": ("tp_comm_overlap", SWITCH),
}
RUN_PINS = ("drop", "f8r", "tpo")  # pins that price the step (in x) and constrain no layout


def parse_plan(text: str | None) -> dict[str, int]:
    """``tp=4,pp=8,vp=4,recompute=selective,zero=1`` (or ``fsdp``) as column pins."""
    pins: dict[str, int] = {}
    for item in (text or "").replace(" ", "").split(","):
        if not item:
            continue
        key, sep, value = ("zero", "=", "3") if item.lower() == "fsdp" else item.partition("=")
        col = PIN_KEYS.get(key.lower())
        if not sep or col is None:
            raise InputError(
                f"`plan` item '{item}': give KEY=VALUE with KEY one of {', '.join(sorted(set(PIN_KEYS)))}"
            )
        pin = _pin_value(col, value.lower(), item)
        if col in pins and pins[col] != pin:  # 'tp=4,tp=8': the last one silently won
            raise InputError(f"`plan` item '{item}': {key.lower()} is pinned twice; give it once")
        pins[col] = pin
    if pins.get("sched") == 1 and (pins.get("vp", 1) != 1 or pins.get("pp", 2) % 2):
        raise InputError("`plan`: schedule=dualpipe runs an even pp and no interleaving (vp=1)")
    if pins.get("sched") == 1 and all(k in pins for k in ("gbs", "dp", "pp")):
        # deepseek-ai/DualPipe runs an even count of at least 2 x pp micro-batches (a review: this
        # read "degrees or global batch do not divide")
        m = pins["gbs"] / (pins["dp"] * pins.get("mbs", 1))
        if m < 2 * pins["pp"] or (m == int(m) and int(m) % 2):
            raise InputError(
                f"`plan`: schedule=dualpipe runs an even number of micro-batches per replica, at "
                f"least 2 x pp = {2 * pins['pp']}: gbs={pins['gbs']} over dp={pins['dp']}"
                f"{' x mbs=' + str(pins['mbs']) if 'mbs' in pins else ''} gives {m:g}"
            )
    if pins.get("drop") == 1 and pins.get("disp") == DISPATCHERS.index("deepep"):
        # NeMo's MegatronTokenDropCallback asserts the alltoall dispatcher (nemo-token-drop)
        raise InputError("`plan`: routing=token-drop runs the alltoall dispatcher (padded to capacity)")
    if pins.get("a2ao") == 1 and (
        pins.get("sched") == 1 or (pins.get("pp", 1) > 1 and pins.get("vp", 2) == 1)
    ):
        raise InputError("`plan`: a2a_overlap=on runs 1F1B without a pipeline (pp=1) or interleaved (vp>1)")
    return pins


def check_moe_pins(pins: dict[str, int], is_moe: bool, model: str) -> None:
    """Pins that need routed experts (ep > 1, the DeepEP dispatcher, the expert all-to-all overlap)
    on a dense model are refused (they were taken as 'nothing divides')."""
    if is_moe:
        return
    moe = [
        k
        for k, on in (
            (f"ep={pins.get('ep', 1)}", pins.get("ep", 1) > 1),
            ("dispatcher=deepep", pins.get("disp") == DISPATCHERS.index("deepep")),
            ("a2a_overlap=on", pins.get("a2ao") == 1),
            ("cuda_graphs=off", pins.get("graph") == 0),  # on, like alltoall, is what a dense step runs
            ("routing=token-drop", pins.get("drop") == 1),
        )
        if on
    ]
    if moe:
        raise InputError(
            f"`plan` {', '.join(moe)}: {model} is dense (no routed experts); expert parallelism, the "
            "dispatcher, the all-to-all overlap, CUDA graphs over the routing and token drop apply to MoE "
            "models"
        )


def recompute_name(rc: int) -> str:
    """A recompute policy as ``--plan recompute=`` takes it: ``none``, ``selective``, ``full``,
    ``offload`` or a module set, ``mla_up_proj+mlp``."""
    if rc < ts.SET_BASE:
        return RECOMPUTE[rc]
    return "+".join(recompute_modules(rc))


def recompute_modules(rc: int) -> list[str]:
    """The Megatron-Core modules a module-set policy recomputes (none for the other policies)."""
    return [m for m, on in zip(ts.MODULES, ts.module_bits(rc), strict=True) if on]


def parse_recompute(value: str, item: str) -> int:
    """``selective`` (or none, full, offload), or Megatron-Core modules joined by '+'."""
    if value in RECOMPUTE:
        return RECOMPUTE.index(value)
    names = value.split("+")
    unknown = [n for n in names if n not in ts.MODULES]
    if unknown or len(set(names)) < len(names):  # 'mlp+', '+mlp' (an empty name), 'mlp+mlp'
        unknown = unknown or [n for n in names if names.count(n) > 1][:1]
        raise InputError(
            f"`plan` item '{item}': recompute is one of {', '.join(RECOMPUTE)}, or modules joined by '+' "
            f"from {', '.join(ts.MODULES)} (Megatron-Core's recompute_modules)"
            + f"; unknown or repeated: {', '.join(repr(n) for n in unknown)}"
        )
    return ts.SET_BASE + sum(2**i for i, m in enumerate(ts.MODULES) if m in names)


def fp8_recipe(pins: dict[str, int], precision: str) -> str | None:
    """The FP8 recipe of a run at ``precision`` (the plan's fp8_recipe pin, else tensorwise); None
    off fp8, where each precision has one recipe."""
    return FP8_RECIPES[pins.get("f8r", 0)] if precision == "fp8" else None


def check_recipe_pin(
    pins: dict[str, int],
    precision: str,
    requested: str,
    gpu: tuple[str, Accelerator],
    field: str = "precision",
) -> None:
    """An FP8 recipe pinned on a run that trains at another ``precision`` is refused (it would
    change nothing), unless fp8 was ``requested`` and the GPU runs BF16 instead (noted, not
    refused; ``field``: the parameter that asks); an FP4 run that falls back to FP8 takes it. So is
    MXFP8 on a GPU without microscaling tensor cores (``gpu``: its catalog name and entry). The MX
    formats (OCP MX: MXFP8, MXFP6, MXFP4) arrive with FP4 in the same generation (Blackwell, CDNA
    4), so a GPU without a dense FP4 figure has none (TransformerEngine runs MXFP8 on Blackwell
    only: te-fp8-recipes)."""
    if "f8r" not in pins:
        return
    recipe = FP8_RECIPES[pins["f8r"]]
    if precision != "fp8" and requested == "fp8":
        return
    if precision != "fp8":
        raise InputError(
            f"`plan` fp8_recipe={recipe}: the run trains at {precision}; an FP8 recipe applies to "
            f"`{field}` fp8"
        )
    if recipe == "mxfp8" and gpu[1].dense_tflops("fp4") is None:
        raise InputError(
            f"`plan` fp8_recipe=mxfp8: {gpu[0]} has no microscaling (MX) tensor cores (they come "
            "with FP4: Blackwell, CDNA 4); pin tensorwise, delayed or blockwise"
        )


def check_recompute_pins(pins: dict[str, int], x: dict, model: str) -> None:
    """A pinned module the model lacks (moe_act on a dense model, mla_up_proj without MLA, mlp
    where every layer is MoE) is refused: it would recompute nothing."""
    has = ts.module_applies(x)
    missing = [m for m in recompute_modules(pins.get("rc", 0)) if not has[m]]
    if missing:
        raise InputError(
            f"`plan` recompute={recompute_name(pins['rc'])}: {model} has no {', '.join(missing)} to "
            "recompute (moe_act, moe and shared_experts need routed or shared experts, mla_up_proj "
            "MLA attention, mlp dense FFN layers)"
        )


def _pin_value(col: str, value: str, item: str) -> int:
    if col == "rc":
        return parse_recompute(value, item)
    if col in NAMED:
        key, names = NAMED[col]
        if value not in names:
            raise InputError(f"`plan` item '{item}': {key} is one of {', '.join(names)}")
        return names.index(value)
    if col == "zero" and value == "fsdp":
        return 3
    try:  # 1e9 and 4.0 are whole numbers too (an input review: gbs=1e9 was "not a whole number")
        x = float(value)
        n = int(x) if x.is_integer() else int(value)
    except (ValueError, OverflowError):
        raise InputError(f"`plan` item '{item}': expected a whole number") from None
    low, high = (0, 3) if col == "zero" else (0, 1) if col == "order" else (1, None)
    if n < low or (high is not None and n > high):
        allowed = f"{low}-{high}" if high is not None else f"a whole number >= {low}"
        raise InputError(f"`plan` item '{item}': out of range (give {allowed})")
    return n


# --- inputs ----------------------------------------------------------------------------------------


def model_inputs(inp: Inputs, cat: Catalog, model: str) -> dict[str, Any]:
    """The model's shape as the step needs it: parameters per layer by kind, widths, counts."""
    arch = cat.model(model)
    m = f"models.{cat.canonical('models', model)}"
    x = {
        "layers": inp.read(f"{m}.layers", "layers"),
        "hidden": inp.read(f"{m}.hidden_size", "hidden size"),
        "vocab": inp.read(f"{m}.vocab_size", "vocabulary"),
        "active": inp.read(f"{m}.active_params", "active parameters"),
        "total": inp.read(f"{m}.total_params", "total parameters"),
        **attention_shape(arch),
        "attn_share": arch.kv_layers / arch.layers,
        # sliding-window layers (the rest of the layers where the model names a window) and their window
        "band_share": (arch.layers - arch.kv_layers) / arch.layers * (arch.sliding_window is not None),
        "window": float(arch.sliding_window or 0),
        "experts": float(arch.experts),
        "topk": float(arch.experts_per_token) * arch.is_moe,
        "shared": float(arch.shared_experts) * arch.is_moe,
        "is_moe": float(arch.is_moe),
        "moe_share": arch.routed_layers / arch.layers,
        "act_width": 3.0 if arch.gated_ffn else 2.0,
        # routed experts whose output bias is added after their GEMM, and whose gated input is
        # clamped before the activation (gpt-oss): eager memory-bound passes (expert_extra_values)
        "expert_bias": float(arch.expert_biases and arch.is_moe),
        "glu_clamp": float(arch.glu_clamp is not None and arch.is_moe),
        "bias_values": 0.0,
        "clamp_values": 0.0,
        "tied": arch.tied_embeddings,
        "ffn_given": arch.ffn_hidden_size,
        "expert_ffn_given": arch.moe_ffn_hidden_size,
        "routed_layers": arch.routed_layers,
    }
    if x["expert_bias"]:  # read where the model has them: the inputs list names what the step used
        x["bias_values"] = inp.read(
            "efficiency.moe_expert_bias_values", "expert output-bias traffic per routed copy"
        )
    if x["glu_clamp"]:
        x["clamp_values"] = inp.read(
            "efficiency.glu_clamp_values", "expert input-clamp traffic per routed copy"
        )
    if arch.training_global_batch_tokens is not None:
        x["recipe_batch"] = inp.read(f"{m}.training_global_batch_tokens", "recipe global batch")
    return x


def attention_shape(arch: Model) -> dict[str, Any]:
    """An attention layer's widths as :func:`mixer_params` reads them, beside ``hidden``."""
    return {
        "heads": arch.attention_heads,
        # the KV heads a TP rank splits (MLA: one key and value per query head after the latent)
        "kv_heads": arch.kv_heads or arch.attention_heads,
        "attn_dim": arch.attention_heads * arch.head_dim,  # the attention output (MLA: v heads)
        # query, key and value widths per token: GQA keys and values per KV head; MLA up-projects
        # a key per query head, its q/k heads the non-RoPE part + the RoPE part (192 against 128)
        "q_width": arch.attention_heads * arch.qk_head_dim,
        "qk_head_dim": float(arch.qk_head_dim),  # a score's matmul depth (attention_head_share)
        "k_width": (arch.kv_heads or arch.attention_heads) * arch.qk_head_dim,
        "v_width": (arch.kv_heads or arch.attention_heads) * arch.head_dim,
        "q_lora": float(arch.q_lora_rank or 0),  # MLA latents (0: not MLA, or queries from h)
        "kv_lora": float(arch.kv_lora_rank or 0),
        "rope": float(arch.qk_rope_head_dim or 0) * (arch.kv_lora_rank is not None),  # MLA's shared RoPE key
    }


def mixer_params(x: dict):
    """Attention parameters of one layer from its widths: GQA/MHA the q, k, v and output
    projections; MLA the query down- and up-projections (or one projection from the hidden state
    where there is no query latent), the key-value down-projection to the latent and the RoPE key,
    its up-projection to the keys' non-RoPE part and the values, and the output projection."""
    h, q, k, v, ql, kvl, r = (
        x[n] for n in ("hidden", "q_width", "k_width", "v_width", "q_lora", "kv_lora", "rope")
    )
    out = x["attn_dim"] * h
    if not kvl:
        return h * (q + k + v) + out
    query = h * ql + ql * q if ql else h * q
    return query + h * (kvl + r) + kvl * (k - x["heads"] * r + v) + out


def mla_kv_up_params(x: dict):
    """MLA's key-value up-projection in one layer (:func:`mixer_params`' widths): the latent to the
    keys' non-RoPE part and the values, ``kv_b_proj`` (DeepSeek-V3: 512 x 128 x (128 + 128)); 0
    without a latent."""
    return x["kv_lora"] * (x["k_width"] - x["heads"] * x["rope"] + x["v_width"])


# not a measured value: a guard for an entry whose embeddings (vocab x hidden, untied twice) would
# leave the layers nothing of the active count (a what-if model with a small hidden size and a
# large vocabulary); the layers keep this share of the active parameters
MIN_BODY_SHARE = 0.05


def shape(x: dict) -> dict[str, float]:
    """Parameters per layer by kind, consistent with the catalog's active and total counts: the
    routed experts from total - active, the FFN from its width, the mixer (attention, or what a
    hybrid layer holds instead) as the rest of the active parameters."""
    L, h, nmat, routed_layers = x["layers"], x["hidden"], x["act_width"], x["routed_layers"]
    embeddings = x["vocab"] * h * (1.0 if x["tied"] else 2.0)
    body = f.maximum(x["active"] - embeddings, MIN_BODY_SHARE * x["active"])
    routed = f.routed_expert_params(x["total"], x["active"], x["topk"] / x["experts"]) if x["is_moe"] else 0.0
    p_expert = routed / (routed_layers * x["experts"]) if x["is_moe"] else 0.0
    expert_ffn = x["expert_ffn_given"] or (p_expert / (nmat * h) if x["is_moe"] else 0.0)
    p_shared = x["shared"] * p_expert
    per_moe_layer = x["topk"] * p_expert + p_shared
    dense_layers = L - routed_layers
    if x["ffn_given"]:
        p_ffn = nmat * h * x["ffn_given"]
        p_mix = (body - dense_layers * p_ffn - routed_layers * per_moe_layer) / L
    else:
        p_mix = mixer_params(x)
        rest = f.maximum(body - L * p_mix - routed_layers * per_moe_layer, 0.0)
        p_ffn = rest / max(dense_layers, 1)
        if not dense_layers:  # every layer routed: active parameters beyond the experts' and the
            # mixer's widths run in every layer (a what-if active count), not in a dense FFN no
            # layer has, so the step's FLOPs follow active_params as the MFU's do
            p_mix, p_ffn = p_mix + rest / L, 0.0
    return {
        "p_mix": f.maximum(p_mix, 0.0),
        "p_ffn": p_ffn,
        "ffn": p_ffn / (nmat * h),
        "p_expert": p_expert,
        "p_shared": p_shared,
        "expert_ffn": expert_ffn,
        "routed_params": routed,
        "dense_params": x["total"] - routed,
        "embedding_params": embeddings,  # the input embedding and, untied, the LM head
    }


def step_params(y: dict) -> Any:
    """The parameters one token's GEMMs pass through, from :func:`shape`: the LM head (the input
    embedding is a lookup, no GEMM), every layer's mixer, the dense layers' FFN and the routed
    layers' top-k and shared experts."""
    L, routed = y["layers"], y["routed_layers"]
    experts = routed * (y["topk"] * y["p_expert"] + y["p_shared"])
    return y["vocab"] * y["hidden"] + L * y["p_mix"] + (L - routed) * y["p_ffn"] + experts


def hardware_inputs(
    inp: Inputs, cat: Catalog, hardware: str, precision: str, pins: dict[str, int] | None = None
) -> dict[str, Any]:
    """Peaks, GEMM curves, bandwidths and memory of the system's accelerator, and the efficiencies
    (an FP8 run's GEMMs at its recipe's share: ``pins``' fp8_recipe, else tensorwise)."""
    system = cat.system(hardware)
    acc = f"accelerators.{system.accelerator}"
    spath = f"systems.{cat.canonical('systems', hardware)}"
    x = {
        "low_peak": inp.read(f"{acc}.{precision}_dense_tflops", f"{precision} dense peak"),
        "bf16_peak": inp.read(f"{acc}.bf16_dense_tflops", "bf16 dense peak"),
        "low_max": _gemm_share(inp, cat, system.accelerator, precision),
        "bf16_max": _gemm_share(inp, cat, system.accelerator, "bf16"),
        "train_share": _training_share(inp, cat, system.accelerator),
        "low_recipe": inp.read(
            f"efficiency.training_gemm.{precision}.recipe_share", f"{precision} recipe share"
        ),
        "bf16_recipe": inp.read("efficiency.training_gemm.bf16.recipe_share", "bf16 recipe share"),
        "call_s": inp.read("efficiency.gemm_call_overhead_us", "GEMM call overhead"),
        "low_share": inp.read(f"efficiency.low_precision_gemm_share.{precision}", "low-precision GEMM share"),
        "attn_eff": inp.read("efficiency.attention_efficiency", "attention efficiency"),
        "attn_ref_dim": inp.read("efficiency.attention_reference_head_dim", "attention reference head dim"),
        "attn_half_share": inp.read(
            "efficiency.attention_half_head_share", "attention efficiency at half the reference head dim"
        ),
        "band_eff": inp.read(
            "efficiency.attention_sliding_window_efficiency", "sliding-window attention efficiency"
        ),
        "attn_bwd_ratio": inp.read(
            "efficiency.attention_backward_flops_ratio", "attention backward / forward"
        ),
        "hbm_bw": inp.read(f"{acc}.hbm_tb_per_s", "HBM bandwidth"),
        "hbm_eff": inp.read("efficiency.elementwise_hbm_efficiency", "memory-bound HBM efficiency"),
        "hbm": inp.read(f"{acc}.hbm_gib", "HBM capacity"),
        "usable": inp.read("efficiency.hbm_usable_fraction", "usable HBM share"),
        "up_bidir": inp.read(f"{acc}.scale_up_gb_per_s_bidir", "scale-up bandwidth (bidirectional)"),
        "up_eff": inp.read("efficiency.scale_up_link_efficiency", "scale-up link efficiency"),
        "out": inp.read(cat.scale_out_path(hardware), "scale-out bandwidth"),
        "out_eff": inp.read("efficiency.scale_out_link_efficiency", "scale-out link efficiency"),
        "host_bw": _host_link(inp, cat, hardware),
        "host_shared": 1.0 - _host_link_dedicated(inp, cat, hardware),
        "host_memory": _host_memory(inp, cat, hardware),
        # read, so that the inputs list them (a sweep over the domain was told it changed nothing)
        "domain": float(inp.read(f"{spath}.scale_up_domain", "scale-up domain")),
        "per_system": float(inp.read(f"{spath}.accelerators", "GPUs per system (node or rack)")),
    }
    x["fp8_recipe_share"] = 1.0  # the recipe of an FP8 run (other precisions have one recipe each)
    x["fp8_gather_bytes"] = 0.0  # none: the weights' all-gather sends weight_bytes (derive)
    x["fp8_transpose_bytes"] = 0.0  # the FP8 transpose a per-tensor FP8 tensor keeps on a TN-only GPU
    x["fp8_any_layout"] = 0.0  # whether the GPU's FP8 GEMMs take any layout (then: no transpose)
    pins = pins or {}
    recipe = fp8_recipe(pins, precision)
    x["weight_cache_bytes"] = inp.read(
        f"efficiency.training_weight_cache_bytes.{recipe or precision}",
        f"quantized weight copy bytes per parameter ({recipe or precision})",
    )
    key = recipe or precision

    def per_recipe(table: str, label: str) -> Any:
        """This run's entry of a by-recipe efficiency table (bf16, fp4 or the FP8 recipe)."""
        return inp.read(f"efficiency.{table}.{key}", f"{label} ({key} recipe)")

    # the sequence-parallel gathers' widths and whether userbuffers overlap them (trainstep): where
    # the recipe's quantizers have them, unless the plan pins tp_comm_overlap=off
    x["tp_ub"] = 0.0
    if pins.get("tpo", 1) == 1:
        x["tp_ub"] = per_recipe("training_tp_userbuffers", "tensor-parallel userbuffers overlap")
        if "tpo" in pins and x["tp_ub"] != 1:
            raise InputError(
                f"`plan` tp_comm_overlap=on: the {key} recipe's quantizers have no userbuffers overlap "
                f"(efficiency.training_tp_userbuffers.{key} = {x['tp_ub']:g}); drop the pin or give "
                "tp_comm_overlap=off"
            )
    x["sp_gather_bytes"] = per_recipe(
        "training_sp_gather_bytes", "sequence-parallel input gather bytes per value"
    )
    x["sp_grad_gather_bytes"] = per_recipe(
        "training_sp_grad_gather_bytes", "sequence-parallel output-gradient gather bytes per value"
    )
    x["amax_syncs"] = per_recipe(
        "training_amax_reductions", "tensor-parallel amax all-reduces per quantized GEMM input"
    )
    if recipe is not None:
        x["fp8_recipe_share"] = inp.read(
            f"efficiency.training_fp8_recipe_share.{recipe}", f"FP8 GEMM share kept by the {recipe} recipe"
        )
        x["fp8_gather_bytes"] = per_recipe(
            "training_fp8_param_gather_bytes", "weight all-gather bytes per parameter"
        )
        # a per-tensor FP8 tensor keeps a transpose beside it on a GPU whose FP8 GEMMs are TN only
        x["fp8_transpose_bytes"] = per_recipe(
            "training_fp8_transpose_bytes", "FP8 transpose bytes per value on a TN-only GPU"
        )
        any_layout = f"{acc}.fp8_gemm_any_layout"
        if inp.has(any_layout):
            x["fp8_any_layout"] = inp.read(any_layout, "FP8 GEMMs in any operand layout")
    x.update(routing_inputs(inp, pins))
    x["cast_bytes"] = 0.0
    if precision != "bf16":
        x["cast_bytes"] = inp.read(f"serving.bytes_per_weight.{precision}", f"{precision} bytes per value")
    # the HBM bytes a value's cast to the GEMM precision moves (an amax pass, the read, both usages'
    # writes), a TN-only GPU's transpose added in derive
    x["cast_traffic"] = per_recipe("training_cast_bytes", "cast traffic bytes per value")
    return x


def routing_inputs(inp: Inputs, pins: dict[str, int]) -> dict[str, Any]:
    """The routed experts' work per balanced token (``capacity``: each expert computes and receives
    its capacity, capacity factor x its balanced share, padded) and the share of their GEMM rate the
    path keeps (``drop_share``): 1 and 1 for dropless routing, whose benchmarks force-balance the
    experts; a token-drop run (plan routing=token-drop) reads both from the catalog."""
    if pins.get("drop", 0) == 0:
        return {"capacity": 1.0, "drop_share": 1.0}
    e = "efficiency"
    return {
        "capacity": inp.read(f"{e}.moe_capacity_factor", "expert capacity factor (padded token drop)"),
        "drop_share": inp.read(f"{e}.moe_token_drop_share", "expert GEMM rate share on the token-drop path"),
    }


def training_share_path(cat: Catalog, accelerator: str) -> str:
    """The path of the training share that applies: the accelerator's own, else the default."""
    if accelerator in cat.efficiency.training_share_by_accelerator:
        return f"efficiency.training_share_by_accelerator.{accelerator}"
    return "efficiency.training_share"


def _training_share(inp: Inputs, cat: Catalog, accelerator: str) -> Any:
    path = training_share_path(cat, accelerator)
    own = path != "efficiency.training_share"
    fitted = cat.efficiency.training_share_fitted_on
    return inp.read(
        path,
        "GEMM share kept in training",
        borrowed=None if own else _borrowed(accelerator, fitted, "fitted on"),
    )


def _borrowed(accelerator: str, covered: list[str], how: str) -> str | None:
    """The note of a default that stands in for an accelerator it was not measured or fitted on
    (none where it was, or where the catalog does not say; an accelerator's own entry is read
    instead of the default, so ``covered`` matters only for the default)."""
    if not covered or accelerator in covered:
        return None
    return f"{how} {', '.join(covered)}, not {accelerator}"


def _host_link(inp: Inputs, cat: Catalog, hardware: str) -> Any:
    path = f"systems.{cat.canonical('systems', hardware)}.host_link_gb_per_s"
    if inp.has(path):
        return inp.read(path, "host link (activation offload)")
    return inp.read("rl.default_host_link_gb_per_s", "host link (activation offload)")


def _host_link_dedicated(inp: Inputs, cat: Catalog, hardware: str) -> Any:
    """1 where the host link carries host copies alone (NVLink-C2C: Grace, Vera); 0 where the
    system does not say so: the GPU's PCIe link, which an HGX node's GPU shares with its NIC
    through one switch."""
    path = f"systems.{cat.canonical('systems', hardware)}.host_link_dedicated"
    return inp.read(path, "host link carries host copies alone") if inp.has(path) else 0.0


def _host_memory(inp: Inputs, cat: Catalog, hardware: str) -> Any:
    """Host memory per GPU for activation offload; none declared: no offload."""
    path = f"systems.{cat.canonical('systems', hardware)}.host_memory_gb"
    if not inp.has(path):
        return 0.0
    return inp.read(path, "host memory (activation offload)") / cat.system(hardware).accelerators


def _gemm_share(inp: Inputs, cat: Catalog, accelerator: str, precision: str) -> Any:
    table = cat.efficiency.training_gemm_max_share_by_accelerator.get(accelerator, {})
    label = f"largest-GEMM share of peak ({precision})"
    if precision in table:
        return inp.read(f"efficiency.training_gemm_max_share_by_accelerator.{accelerator}.{precision}", label)
    curve = cat.efficiency.training_gemm.get(precision)  # type: ignore[call-overload]
    covered = curve.max_share_measured_on if curve is not None else []
    return inp.read(
        f"efficiency.training_gemm.{precision}.max_share",
        label,
        borrowed=_borrowed(accelerator, covered, "measured on"),
    )


def step_inputs(inp: Inputs, precision: str) -> dict[str, Any]:
    """Bytes per parameter and value, overlaps, goodput and the default-batch rule (``precision``:
    the run's GEMM precision, which sets the MoE all-to-all's width)."""
    e = "efficiency"
    x = {
        "weight_bytes": inp.read(f"{e}.weight_bytes_per_param", "weight bytes per parameter"),
        "state_bytes": inp.read(f"{e}.training_bytes_per_param", "training state per parameter"),
        "optim_bytes": inp.read(f"{e}.optimizer_bytes_per_param", "optimizer bytes per parameter"),
        "optim_step_bytes": inp.read(f"{e}.optimizer_step_bytes_per_param", "optimizer step traffic"),
        "act_bytes": inp.read(f"{e}.activation_bytes_per_value", "activation bytes per value"),
        "logits_bytes": inp.read(f"{e}.logits_bytes_per_value", "logit bytes per value"),
        "loss_passes": inp.read(f"{e}.loss_passes_per_logit", "loss passes per logit"),
        "tp_overlap": inp.read(f"{e}.tp_comm_overlap", "tensor-parallel comm hidden"),
        "a2a_overlap": inp.read(f"{e}.moe_a2a_overlap", "all-to-all hidden behind compute"),
        "moe_eager_s": inp.read(f"{e}.moe_eager_layer_ms", "host-bound time of an MoE layer run eagerly"),
        "step_fixed_s": inp.read(f"{e}.training_step_overhead_ms", "fixed time of a training step"),
        "overlap_tax": inp.read(f"{e}.overlap_tax", "compute lost to overlapped collectives"),
        "goodput": inp.read(f"{e}.training_goodput", "scale efficiency (training goodput)"),
        "lat_up": inp.read("serving.collective_latency_us_scale_up", "collective latency (scale-up)"),
        "lat_out": inp.read("serving.collective_latency_us_scale_out", "collective latency (scale-out)"),
        "batch_coef": inp.read(f"{e}.default_batch_coefficient", "default batch coefficient"),
        "batch_exp": inp.read(f"{e}.default_batch_exponent", "default batch exponent"),
    }
    # a BF16 run dispatches and combines its tokens at the activations' width; the catalog's
    # all-to-all width is the low-precision recipe's (FP8 dispatch, BF16 combine: a review found it
    # charged to BF16 runs too, 25 % fewer bytes than they send)
    x["a2a_bytes"] = (
        x["act_bytes"]
        if precision == "bf16"
        else inp.read(f"{e}.moe_a2a_bytes_per_value", "all-to-all bytes per value")
    )
    return x


def derive(x: dict) -> dict[str, Any]:
    """Rates and shapes from the raw inputs (plain numbers: one physics point)."""
    y = dict(x)
    y.update(shape(x))
    if "deadline_days" in x:  # deadline mode prices whole systems: groups that do not tile strand GPUs
        y[WHOLE_SYSTEMS] = 1.0
    y["low_rate"] = x["low_peak"] * x["low_max"] * x["train_share"] * x["low_recipe"] * x["fp8_recipe_share"]
    y["bf16_rate"] = x["bf16_peak"] * x["bf16_max"] * x["train_share"] * x["bf16_recipe"]
    y["hbm_rate"] = x["hbm_bw"] * x["hbm_eff"]
    # fused attention at the model's head dim: a narrow head keeps less of the reference's rate
    y["attn_eff"] = x["attn_eff"] * f.attention_head_share(
        x["qk_head_dim"], x["attn_ref_dim"], x["attn_half_share"]
    )
    y["up_bw"] = x["up_bidir"] / 2.0 * x["up_eff"]
    y["out_bw"] = x["out"] * x["out_eff"]
    y["hbm_cap"] = x["hbm"] * x["usable"]
    y["host_cap"] = x["host_memory"] * x["usable"]
    y["grad_bytes"] = x["state_bytes"] - x["weight_bytes"] - x["optim_bytes"]
    # the weights a GPU keeps whole: the parameters and the recipe's cached quantized copy
    # (a GPU whose FP8 GEMMs take any layout keeps a per-tensor FP8 weight's data without its
    # transpose: an FP8 value's bytes at the least, whatever weight_bytes_per_param a what-if sets)
    fp8_value = f.minimum(x["weight_bytes"], x["cast_bytes"])
    weights = f.maximum(x["weight_bytes"] - x["fp8_transpose_bytes"] * x["fp8_any_layout"], fp8_value)
    y["weight_mem_bytes"] = weights + x["weight_cache_bytes"]
    # the data-parallel weight all-gather's width: an FP8 recipe's (hardware_inputs), else the weights';
    # never more than the weights hold (`--set efficiency.weight_bytes_per_param=1`: FP8 weights)
    fp8_gather = f.minimum(x["fp8_gather_bytes"], x["weight_bytes"])
    y["gather_bytes"] = ts.ifelse(x["fp8_gather_bytes"] > 0, fp8_gather, x["weight_bytes"])
    low = x["cast_bytes"] > 0
    # a cast's HBM traffic a value (efficiency.training_cast_bytes), with the transpose a TN-only GPU
    # writes beside a per-tensor FP8 tensor
    y["cast_bytes"] = low * (x["cast_traffic"] + x["fp8_transpose_bytes"] * (1.0 - x["fp8_any_layout"]))
    phi = x["low_share"] * low  # GEMM inputs saved for the backward in the GEMM's format
    y["low_saved"] = phi
    y["gemm_in_bytes"] = phi * x["cast_bytes"] + (1.0 - phi) * x["act_bytes"]
    # the MFU's FLOPs: 6 x the active parameters, or the parameters the step's GEMMs run where the
    # shapes hold more than the count declares (attention widths and experts do not shrink with an
    # active_params override: the MFU then counts what the step runs)
    y["fpt_params"] = f.maximum(x["active"], step_params(y))
    y["fpt"] = f.training_flops_per_token(
        y["fpt_params"],
        x["layers"],
        x["seq"],
        x["q_width"] * x["attn_share"],
        x["attn_dim"] * x["attn_share"],
    ) + 3.0 * f.band_attention_flops_per_token_fwd(
        x["layers"] * x["band_share"], x["seq"], x["window"], x["q_width"], x["attn_dim"]
    )
    # the micro terms of module-set recompute policies, where one can be asked for: the search does
    # not enumerate them, so only a pin brings them in (no pins given: one plan, compute them)
    y["module_sets"] = "pins" not in x or x["pins"].get("rc", 0) >= ts.SET_BASE
    if "recipe_batch" not in x:
        flops = y["fpt"] * x["tokens"]
        y["recipe_batch"] = x["batch_coef"] * flops ** x["batch_exp"]
    return y


# --- the grid ----------------------------------------------------------------------------------------


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending (trial division up to its square root: an RL trainer's
    global batch of millions of sequences took seconds per call counting to n, a fuzzing review)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _axis(pins: dict, key: str, values: list[int]) -> list[int]:
    return [pins[key]] if key in pins else values


def _allowed(pins: dict, key: str, values: list[int]) -> list[int]:
    """The pinned value where it is one of ``values`` (none where it is not: the pin stays unmet,
    and the search names the nearest plan), else all of them."""
    return [v for v in values if v == pins[key]] if key in pins else values


def max_chunks(layers: int) -> int:
    """The most model chunks (pp x vp) a model of ``layers`` layers splits into, none of them empty:
    one a layer, plus one for the embedding and one for the loss, which Megatron counts as layers of
    the split (``account_for_embedding_in_pipeline_split``, ``..._loss_...``: Megatron-Bridge runs
    Llama 3.1 405B's 126 layers on PP16 VP8, 128 chunks)."""
    return layers + 2


def pipeline_pairs(layers: int, cap: int, pins: dict, moe: bool = False) -> list[tuple[int, int, int, int]]:
    """(pp, vp, sched, a2ao) tuples: pp divides the layers or is a power of two; vp divides the layers
    per stage under 1F1B, with pp x vp at most ``max_chunks`` (no empty model chunk); DualPipe
    (sched 1) takes an even pp and no interleaving; an MoE model's 1F1B may overlap its expert
    all-to-all (a2ao 1) without a pipeline or interleaved (Megatron's combined 1F1B:
    ``combined_1f1b_schedule_for_no_pipelining`` / ``..._for_interleaved``)."""
    pows = [2**k for k in range(12) if 2**k <= layers]
    pps = _axis(pins, "pp", sorted({*divisors(layers), *pows}))
    pairs = []
    for pp in (p for p in pps if p <= min(cap, layers)):  # no stage without a layer
        per_stage = math.ceil(layers / pp)
        vps = [1] if pp == 1 else [v for v in divisors(per_stage) if v <= 32]
        for sched in _axis(pins, "sched", [0, 1]):
            if sched == 1:
                pairs += [(pp, 1, 1, 0)] if pp % 2 == 0 and 1 in _axis(pins, "vp", [1]) else []
                continue
            # a pinned vp > 1 pairs only with a pipeline (interleaving splits its stages)
            for vp in (
                v for v in _axis(pins, "vp", vps) if (v == 1 or pp > 1) and pp * v <= max_chunks(layers)
            ):
                can = moe and (pp == 1 or vp > 1)  # on where it can run: it never hides less than off
                pairs += [(pp, vp, 0, a) for a in _axis(pins, "a2ao", [1] if can else [0]) if a == 0 or can]
    return pairs


def context_degrees(seq: int) -> list[int]:
    """The context-parallel degrees the grid enumerates: powers of two that split the sequence into
    2 x cp equal chunks (Megatron's load-balanced CP) of at least MIN_CP_CHUNK / 2 tokens each."""
    return [
        c for c in (2**k for k in range(8)) if c == 1 or (seq % (2 * c) == 0 and seq // c >= MIN_CP_CHUNK)
    ]


def tensor_degrees(x: dict) -> list[int]:
    """The tensor-parallel degrees that split the model's layers evenly (Megatron-Core's rules,
    :func:`formulas.tensor_parallel_splits`): TP5 on Llama 4 Maverick's 40 heads left its 8 KV
    heads and 16,384-wide FFN unsplittable (a capacity planner's review)."""
    heads, kv, ffn = int(x["heads"]), int(x["kv_heads"]), int(x["ffn_given"] or 0)
    expert = int(x.get("expert_ffn_given") or 0)  # the routed experts split over TP too (ETP = TP)
    return [t for t in divisors(heads) if f.tensor_parallel_splits(t, heads, kv, ffn) and expert % t == 0]


def micro_grid(x: dict, cap: int, pins: dict) -> sr.Columns:
    """Every (tp, cp, pp, vp, sched, ep, mbs, order) a plan on at most ``cap`` GPUs can take."""
    import numpy as np

    seq, layers = int(x["seq"]), int(x["layers"])
    tps = [t for t in tensor_degrees(x) if t <= min(MAX_TP, cap, x["domain"])]
    cps = context_degrees(seq)
    eps = [e for e in divisors(int(x["experts"])) if e <= cap] if x["is_moe"] else [1]
    moe = bool(x["is_moe"])
    pairs = pipeline_pairs(layers, cap, pins, moe)
    if not pairs and not any(k in pins for k in ("pp", "vp", "sched", "a2ao")):
        pairs = [(1, 1, 0, 0)]  # a pinned pipeline no cluster this size can run stays unmet (no plan)
    axes = {
        "tp": _allowed(pins, "tp", tps),
        # a pinned CP may pad the sequence to its chunks, but gives each rank two of them at least
        # (no CP, any sequence: one token's left no plan at all)
        "cp": [c for c in _axis(pins, "cp", cps) if c == 1 or 2 * c <= seq],
        "ep": _allowed(pins, "ep", eps),
        "mbs": _axis(pins, "mbs", list(MICRO_BATCHES)),
        "order": _axis(pins, "order", [0, 1]),
        # node-deduplicated dispatch sends a token once per other domain its experts reach, plain
        # all-to-all once per copy bound off the domain (k x the off-domain share, at least as many
        # for k = 8 and every span tried), so the search takes it where the expert group crosses
        # domains unless pinned (below): searching both would double the grid
        "disp": _axis(pins, "disp", [0]),
        # CUDA graphs over the MoE layer's routing and preprocessing only save time: on unless pinned
        "graph": _axis(pins, "graph", [1]),
    }
    key = (repr(axes), repr(pairs), cap, "order" in pins)
    if key not in _GRIDS:  # systems of one model share it (the domain only bounds tp)
        if len(_GRIDS) >= 8:
            _GRIDS.pop(next(iter(_GRIDS)))
        _GRIDS[key] = _grid(axes, np.array(pairs, dtype=float).reshape(-1, 4), cap, "order" in pins)
    out = dict(_GRIDS[key])

    def held(name: str, of: Any, make: Callable[[], Any]) -> Any:
        """A column that depends on the grid and ``of`` alone, made once (read-only): systems of
        one model and domain size (a comparison's) share it."""
        at = (key, name, repr(of))
        if at not in _PLACED:
            if len(_PLACED) >= 24:
                _PLACED.pop(next(iter(_PLACED)))
            _PLACED[at] = make()
            _PLACED[at].flags.writeable = False
        return _PLACED[at]

    # the model's layers per stage, computed once for every use
    out["Ls"] = held("Ls", x["layers"], lambda: ts.stage_layers(out, x))
    # the GPUs of a domain its groups fill: once per domain size
    out["dom"] = held("dom", x["domain"], lambda: ts.placed_domain(out, x))
    # DeepEP where a token crosses domains (inside one it changes nothing); token drop pads on alltoall
    if moe and "disp" not in pins and pins.get("drop", 0) == 0:
        out["disp"] = held("disp", x["domain"], lambda: (ts.ep_span(out) > x["domain"]).astype(float))
    return out


_GRIDS: dict[tuple, sr.Columns] = {}  # micro grids by their axes, read-only
# their columns that read a model or system input too (``Ls``, ``dom``: ts.placed_domain, ``disp``)
# by grid, column and that input, read-only
_PLACED: dict[tuple, Any] = {}


def _grid(axes: dict, pairs: Any, cap: int, order_pinned: bool) -> sr.Columns:
    """The product of the axes and the (pp, vp, sched, a2ao) ``pairs`` (the first axis varies
    slowest), less the combinations no cluster of ``cap`` GPUs runs. The rules read the tensor,
    context, pipeline, expert and order axes alone, so they are tested on those axes broadcast
    against each other, and only the rows kept are built: the rows and numbers of the product
    filtered, without the whole product's columns. The product's rows run as (a, m, b): ``a`` over
    the axes before mbs (tp, cp, pv, ep), ``m`` over mbs, ``b`` over those after it (order, disp,
    graph); a row is kept where its (a, b) is, for every m. So a column of the ``a`` axes is each
    ``a``'s value repeated for its rows (mbs count x its kept b), mbs's each m repeated for the b
    its ``a`` keeps, and only the ``b`` axes' columns are taken through the whole mask (issue 16:
    the product's row numbers, unravelled per axis and gathered, cost 50 ms on the 10T grid)."""
    import numpy as np

    names = ("tp", "cp", "pv", "ep", "mbs", "order", "disp", "graph")
    vals = {k: np.asarray(axes[k], dtype=float) for k in names if k != "pv"}
    vals["pv"] = np.arange(len(pairs))
    shape = tuple(len(vals[k]) for k in names)

    def axis(k: str, v: Any = None) -> Any:
        """The axis ``k``'s values (or ``v``, one per value of it) shaped to broadcast over the product."""
        at = [1] * len(names)
        at[names.index(k)] = shape[names.index(k)]
        return (vals[k] if v is None else v).reshape(at)

    tp, cp, ep, order, pp = axis("tp"), axis("cp"), axis("ep"), axis("order"), axis("pv", pairs[:, 0])
    keep = tp * cp * pp <= cap
    keep = keep & ((order == 0) | (pp > 1) | order_pinned)
    keep = keep & (ep <= tp * cp * (cap // (tp * cp * pp).clip(1)))
    split = names.index("mbs")
    a_shape, m, b_shape = shape[:split], shape[split], shape[split + 1 :]
    n_a, n_b = int(np.prod(a_shape)), int(np.prod(b_shape))
    kept = np.broadcast_to(keep, (*a_shape, 1, *b_shape)).reshape(n_a, n_b)  # (a, b) kept
    per_a = np.count_nonzero(kept, axis=1)  # b kept per a: each a has m times as many rows
    a_at = dict(zip(names[:split], np.unravel_index(np.arange(n_a), a_shape), strict=True))
    of_a = {k: vals[k][a_at[k]] for k in names[:split] if k != "pv"}
    pv = a_at["pv"]
    of_a["pp"], of_a["vp"], of_a["sched"], of_a["a2ao"] = pairs[pv].T
    of_a["a2ao"] = np.where(of_a["ep"] > 1, of_a["a2ao"], 0.0)  # no expert all-to-all to overlap without EP
    out = {k: np.repeat(v, m * per_a) for k, v in of_a.items()}
    out["mbs"] = np.repeat(np.tile(vals["mbs"], n_a), np.repeat(per_a, m))
    b_at = dict(zip(names[split + 1 :], np.unravel_index(np.arange(n_b), b_shape), strict=True))
    rows = np.broadcast_to(kept[:, None, :], (n_a, m, n_b))
    for k in names[split + 1 :]:
        v = vals[k][b_at[k]]
        out[k] = np.full(len(out["tp"]), v[0]) if len(v) == 1 else np.broadcast_to(v, (n_a, m, n_b))[rows]
    out = {
        k: out[k] for k in ("tp", "cp", "ep", "mbs", "order", "disp", "graph", "pp", "vp", "sched", "a2ao")
    }
    for v in out.values():
        v.flags.writeable = False
    return out


def _aligned(mb, P: sr.Columns, up: bool = False):
    """Micro-batch counts a schedule can run: interleaved, multiples of pp (at least pp); DualPipe,
    even counts of at least 2 pp (deepseek-ai/DualPipe asserts both)."""
    import numpy as np

    dual = ts.dualpipe(P)
    step = np.where(P["vp"] > 1, P["pp"], np.where(dual, 2.0, 1.0))
    least = np.where(dual, 2.0 * P["pp"], step)
    n = np.ceil(mb / step) if up else np.floor(mb / step)
    return np.maximum(n * step, least)


def dp_candidates(P: sr.Columns, x: dict, gpus: int, pins: dict) -> tuple[Any, Any]:
    """(dp, mb) candidates per micro row, as n x K matrices (nan: no candidate): the most replicas
    the GPUs hold (:func:`most_replicas`) at the recipe batch and one step beyond, and for each
    micro-batch count the replicas the batch allows."""
    import numpy as np

    d_max = most_replicas(P, gpus, x)[:, None]
    if "dp" in pins:
        d_max = np.where(d_max >= pins["dp"], float(pins["dp"]), np.nan)
    seqs = x["recipe_batch"] / x["seq"] / P["mbs"][:, None]  # sequences of mbs the recipe batch holds
    if "gbs" in pins:
        d = np.array(divisors(int(pins["gbs"])), dtype=float)[None, :] + 0 * d_max
        mb = pins["gbs"] / (d * P["mbs"][:, None])
        ok = (mb == np.floor(mb)) & (d <= d_max)
        ok &= ~ts.dualpipe(_bcast(P)) | ((mb % 2 == 0) & (mb >= 2.0 * P["pp"][:, None]))
    else:
        opts = _aligned(np.array(MB_OPTIONS, dtype=float)[None, :], _bcast(P))
        d_fit = np.minimum(d_max, np.floor(seqs / opts))
        per_replica = np.floor(seqs / np.maximum(d_max, 1.0))  # (no replica: no candidate, below)
        cap = _aligned(per_replica, _bcast(P))
        beyond = _aligned(per_replica + 1.0, _bcast(P), up=True)
        d = np.concatenate([d_max, d_max, d_fit], axis=1)
        mb = np.concatenate([cap, beyond, opts + 0 * d_fit], axis=1)
        ok = d >= 1
    if "dp" in pins:
        ok &= d == pins["dp"]
    return np.where(ok, d, np.nan), mb


def most_replicas(P: sr.Columns, gpus: float, x: dict | None = None) -> Any:
    """The most replicas ``gpus`` GPUs hold for each micro row: floor(gpus / (tp cp pp)), rounded
    down to whole steps of :func:`_replica_step` (tp cp dp a multiple of ep), leaving the GPUs
    beyond idle (89 GPUs at tp 1, ep 2: 88 replicas, not 89, which no expert grouping runs); on
    whole systems (``x``, deadline mode), only the GPUs its groups tile (:func:`usable_gpus`)."""
    import numpy as np

    step = _replica_step(P)
    gpus = usable_gpus(P, x, gpus) if x is not None else gpus
    return np.floor(np.floor(gpus / (P["tp"] * P["cp"] * P["pp"])) / step) * step


# Deadline mode prices whole systems, all of whose GPUs a plan would use: a group that fits in a
# scale-up domain but does not tile it (TP8 x CP2 = 16 GPUs in a 72-GPU NVL72 rack) would straddle
# two domains for some of its copies, its collectives over the NICs, and a synchronous step waits
# for the slowest. A plan there uses the GPUs its groups tile (64 of 72) and the rest stay idle,
# paid (a user review: the 10T GB200 headline plan used all 72 with 16-GPU groups). A fixed GPU
# count is a job's GPUs, placed in whole groups on as many domains as that takes (MLPerf's GB200
# runs use 64 of each rack's 72), so nothing is stranded there.
WHOLE_SYSTEMS = "whole_systems"


domain_atom = ts.domain_atom  # (kept here beside the placement it sizes)


def _tile(gpus: Any, atom: Any) -> Any:
    """Whole copies of ``atom`` GPUs in ``gpus``."""
    import numpy as np

    return np.floor(gpus / atom) * atom


def usable_gpus(P: sr.Columns, x: dict, gpus: Any) -> Any:
    """The GPUs a plan can use: all of them, or on whole systems (deadline mode) each whole
    domain's tile (:func:`~ipd_cli.engine.trainstep.placed_domain`) and whole copies of the atom in
    a partial domain."""
    import numpy as np

    if not x.get(WHOLE_SYSTEMS):
        return gpus
    dom, atom = x["domain"], domain_atom(P, x)
    return np.floor(gpus / dom) * _tile(dom, atom) + _tile(np.mod(gpus, dom), atom)


def systems_gpus(P: sr.Columns, x: dict, used: Any) -> Any:
    """The GPUs of the whole systems a plan using ``used`` GPUs takes: its domains' tiles filled
    (deadline mode), rounded up to whole systems."""
    import numpy as np

    per = x["per_system"]
    if not x.get(WHOLE_SYSTEMS):
        return np.ceil(used / per) * per
    return spanned_gpus(P, x, used)


def spanned_gpus(P: sr.Columns, x: dict, used: Any) -> Any:
    """The GPUs of the whole systems ``used`` GPUs span when placed in whole copies of the plan's
    in-domain groups, each domain holding its tile (:func:`~ipd_cli.engine.trainstep.placed_domain`):
    832 GPUs of 64-GPU groups take 13 NVL72 racks."""
    import numpy as np

    per = x["per_system"]
    atom = domain_atom(P, x)
    tile = _tile(x["domain"], atom)
    full = np.floor(used / np.maximum(tile, 1.0))
    rest = used - full * tile  # whole atoms (used and the tile are multiples of it)
    gpus = full * x["domain"] + np.ceil(rest / atom) * atom
    return np.where(tile > 0, np.ceil(gpus / per) * per, np.inf)


def _placement_matters(cols: sr.Columns, x: dict):
    """Pipeline-first placement only where it puts some group on another tier than the default."""
    inner = ts.in_domain(cols, x)
    # the default placement's own domain fill (the grid's ``dom`` column is the plan's placement)
    outer = ts.in_domain({**{k: v for k, v in cols.items() if k != "dom"}, "order": 0 * cols["order"]}, x)
    differs = (inner["ep"] != outer["ep"]) | (inner["dp"] != outer["dp"]) | (inner["pp"] != outer["pp"])
    return (cols["order"] == 0) | differs


def _bcast(P: sr.Columns) -> sr.Columns:
    return {"vp": P["vp"][:, None], "pp": P["pp"][:, None], "sched": P["sched"][:, None]}


def _repeats(d: Any, mb: Any) -> Any:
    """[row, candidate]: the (d, mb) pair repeats an earlier candidate of its row (nan repeats
    nothing). A stable sort of each row by (d, mb) puts equal pairs next to each other, the
    earliest first."""
    import numpy as np

    order = np.lexsort((mb, d), axis=1)
    ds, ms = np.take_along_axis(d, order, axis=1), np.take_along_axis(mb, order, axis=1)
    same = np.zeros(d.shape, dtype=bool)
    same[:, 1:] = (ds[:, 1:] == ds[:, :-1]) & (ms[:, 1:] == ms[:, :-1])
    out = np.empty_like(same)
    np.put_along_axis(out, order, same, axis=1)
    return out


def expand(P: sr.Columns, x: dict, gpus: int, pins: dict, least: Any = None) -> sr.Columns:
    """Macro rows: each micro row with its (dp, mb) candidates; ``row`` indexes the micro row.
    ``least``: per micro row, the fewest replicas its plans may take (a candidate on fewer is
    not built: the same rows, in the same order, as dropping it from the macro rows after)."""
    cols = _candidates(P, x, gpus, pins, least)
    return sr.take(cols, _buildable(cols, x, pins))


def _candidates(P: sr.Columns, x: dict, gpus: int, pins: dict, least: Any = None) -> sr.Columns:
    """Each micro row's distinct (dp, mb) candidates (:func:`dp_candidates`; on at least ``least``
    replicas), a row each, ``row`` indexing the micro row: :func:`expand`'s before its tests."""
    import numpy as np

    d, mb = dp_candidates(P, x, gpus, pins)
    n, k = d.shape
    ok = ~np.isnan(d)
    if "gbs" not in pins:  # (a pinned batch: a row's degrees are the batch's divisors, none repeats)
        ok &= ~_repeats(d, mb)
    if least is not None:
        ok &= d >= least[:, None]
    row = np.repeat(np.arange(n), k)[ok.reshape(-1)]
    cols = {k2: v[row] for k2, v in P.items()}
    cols.update(dp=d[ok], mb=mb[ok], row=row)
    return cols


def _buildable(cols: sr.Columns, x: dict, pins: dict) -> Any:
    """Which (micro row, dp, mb) candidates ``cols`` are plans :func:`expand` builds."""
    return _runnable(cols) & (_placement_matters(cols, x) | ("order" in pins))


def _runnable(cols: sr.Columns) -> Any:
    """The candidates whose expert groups tile their replicas and whose schedule runs their
    micro-batch count (:func:`_buildable` less the placement test, which alone reads the domain)."""
    return ((cols["tp"] * cols["cp"] * cols["dp"]) % cols["ep"] == 0) & schedulable(cols)


# the micro columns :func:`dp_candidates` and :func:`_runnable` read besides ``mbs`` (one they
# read that this lacks raises KeyError)
_RUN_COLS = ("tp", "cp", "pp", "vp", "sched", "ep")


def rows_with_plans(P: sr.Columns, x: dict, gpus: int, pins: dict) -> Any:
    """Which micro rows ``P`` may have a plan :func:`expand` builds (at any ``least``): a (dp, mb)
    candidate whose expert groups tile and whose schedule runs (:func:`_runnable`). A row with
    none is never evaluated, so its terms need not be priced: two thirds of an RL trainer's
    search grid (issue 16). The test reads only :data:`_RUN_COLS` and ``mbs``, so it runs once
    per micro-batch size on each group of runs of rows alike in what it reads of the rest
    (:func:`_alike`; the grid's mbs, order, disp and graph axes vary fastest), not per row; on
    whole systems the GPUs usable also read the placement, and every row is kept."""
    import numpy as np

    n = len(P["tp"])
    if n == 0 or x.get(WHOLE_SYSTEMS):
        return np.ones(n, dtype=bool)
    # a micro grid's columns are the process's read-only arrays (:func:`micro_grid`), shared by the
    # searches of one model and cap (another system, HBM or bandwidth): the mask is kept for them
    cols = tuple(P[c] for c in (*_RUN_COLS, "mbs"))
    key = (gpus, tuple(sorted(pins.items())), x["recipe_batch"], x["seq"])
    return sr.kept_for(_WITH_PLANS, cols, key, lambda: _with_plans(P, x, gpus, pins))


_WITH_PLANS: dict[tuple, tuple] = {}  # rows_with_plans' masks of the micro grids, read-only


def _with_plans(P: sr.Columns, x: dict, gpus: int, pins: dict) -> Any:
    """:func:`rows_with_plans`' mask, computed."""
    import numpy as np

    n = len(P["tp"])
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for c in _RUN_COLS:
        new[1:] |= P[c][1:] != P[c][:-1]
    first = np.flatnonzero(new)
    one, group = _alike(P, first)
    sizes = np.array(sorted(_axis(pins, "mbs", list(MICRO_BATCHES))), dtype=float)
    Q = {c: np.repeat(P[c][one], len(sizes)) for c in _RUN_COLS}
    Q["mbs"] = np.tile(sizes, len(one))
    cols = _candidates(Q, x, gpus, pins)
    has = np.zeros(len(Q["mbs"]), dtype=bool)
    has[cols["row"][_runnable(cols)]] = True
    return has[group[np.cumsum(new) - 1] * len(sizes) + np.searchsorted(sizes, P["mbs"])]


def _alike(P: sr.Columns, rows: Any) -> tuple[Any, Any]:
    """The rows ``rows`` of ``P`` grouped by what :func:`dp_candidates` and :func:`_runnable` read
    of them besides ``mbs`` (off whole systems): tp x cp (the replicas' GPUs, the expert groups'
    tiling), pp, whether vp > 1 (an interleaved schedule's micro-batch counts), sched and ep; one
    row of each group (the row numbers of ``P``), and each row's group. A micro grid's runs of rows
    come in ~7x fewer such groups (12,628 runs, 1,670 groups on the 10T MoE grid of 2,048 GPUs)."""
    import numpy as np

    Q = {c: P[c][rows] for c in _RUN_COLS}
    group = np.zeros(len(rows), dtype=np.intp)
    for v in (Q["tp"] * Q["cp"], Q["pp"], Q["vp"] > 1, Q["sched"], Q["ep"]):
        values, at = sr.distinct(v, inverse=True)
        group = sr.distinct(group * len(values) + at, inverse=True)[1]  # (numbered afresh: < len(rows))
    one = np.empty(int(group.max()) + 1, dtype=np.intp)
    one[group] = rows
    return one, group


def schedulable(P: sr.Columns) -> Any:
    """Plans whose micro-batch count their pipeline schedule can run (:func:`_aligned` builds such
    counts; a pinned global batch or micro-batch count can give others): interleaved 1F1B a
    multiple of pp, at least pp (Megatron's interleaved schedule runs micro-batches in groups of
    pp); DualPipe an even count of at least 2 pp."""
    dual = ts.dualpipe(P)
    mb, pp = P["mb"], P["pp"]
    interleaved = (P["vp"] > 1) & ~dual
    return (~interleaved | ((mb % pp == 0) & (mb >= pp))) & (~dual | ((mb % 2 == 0) & (mb >= 2 * pp)))


# --- evaluation and search -------------------------------------------------------------------------


def fits_memory(out: dict, x: dict) -> Any:
    """The plan's GPU memory fits in HBM and what it offloads fits in host memory."""
    return (out["memory_bytes"] <= x["hbm_cap"]) & (out["host_bytes"] <= x["host_cap"])


def batch_penalty(tokens_per_step, x: dict):
    """Tokens needed for the same loss relative to the recipe batch: 1 up to it, (1 + B / B_r) / 2
    beyond (McCandlish et al.: E = E_min (1 + B / B_noise), B_noise taken as the recipe batch)."""
    return f.maximum(1.0, (1.0 + tokens_per_step / x["recipe_batch"]) / 2.0)


@dataclass
class Searched:
    """Evaluated plans: macro columns, their step outputs, the feasibility masks, the objective."""

    cols: sr.Columns
    out: dict[str, Any]
    space: sr.Space
    seconds_per_token: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.space)


def index_terms(t: dict, rows) -> dict[str, Any]:
    """Micro terms at ``rows`` (tuples hold one array per recompute policy or module; a plain number
    is the same for every row)."""

    def at(a: Any) -> Any:  # (np.ndim's dispatch costs more than the gather of a few rows)
        return a[rows] if getattr(a, "ndim", 0) else a

    return {k: tuple(at(a) for a in v) if isinstance(v, tuple) else at(v) for k, v in t.items()}


def options(pins: dict, key: str, values: tuple[int, ...]) -> tuple[int, ...]:
    return (pins[key],) if key in pins else values


def sets_pinned(pins: dict) -> bool:
    """Whether a search's plans can take a module-set recompute policy: one pinned (the search
    enumerates none, :data:`POLICIES`)."""
    return max(options(pins, "rc", POLICIES)) >= ts.SET_BASE


def policy_terms(terms: dict, pins: dict) -> dict[str, Any]:
    """Micro terms ``terms`` without the module-set policies' (:data:`~ipd_cli.engine.trainstep.
    SET_TERMS`) where the search's plans can take none (:func:`sets_pinned`): nothing reads them
    then, and the searches gather the terms they pass on row by row (issue 16: 22 of a plan's 48
    term columns, where the grid holds every term)."""
    if sets_pinned(pins):
        return terms
    return {k: v for k, v in terms.items() if k not in ts.SET_TERMS}


def evaluate(macro: sr.Columns, terms: dict, x: dict, pins: dict) -> dict[str, Any]:
    """The step of every macro row under its best recompute policy and sharding stage: the fastest
    combination that fits in HBM (the most memory-saving one where none fits). Sharding only costs
    time (ZeRO-2 and FSDP add collectives), so for each recompute policy the least sharding that
    fits is the one to price. ``terms``: :func:`~ipd_cli.engine.trainstep.micro_terms` of the rows."""
    import numpy as np

    n = len(macro["dp"])
    shards = macro["dp"] * macro["cp"] > 1
    zs = options(pins, "zero", ZERO_STAGES)
    rcs = options(pins, "rc", POLICIES)
    held, sizes = ts.params_per_gpu(macro, x), ts.dp_groups(macro)  # (the step's too: not again)
    state = ts.state_by_stage(macro, x, zs, held, sizes)  # the state per GPU of each row, each stage
    terms = policy_terms(terms, pins)  # (the policies' terms alone: fewer columns stacked)
    best = np.full(n, np.inf)
    fallback = options(pins, "rc", (2,))[-1]  # the policy of a row no policy fits
    rc_of = np.full_like(best, float(fallback))
    zero_of = np.full_like(best, float(zs[-1]))
    weighted = bool(x.get("forward_weight", 0.0))  # an RL trainer's log-prob passes run on the plan too
    fwd_of, won, j_of = np.full_like(best, np.nan), np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64)
    # the policies a pass prices together, as a table (policies x rows): the same numbers row by
    # row as a pass per policy, in fewer calls where the rows are few
    per = max(1, STACKED // max(n, 1))
    groups = [rcs[i : i + per] for i in range(0, len(rcs), per)]
    # what no policy or stage changes of a row's step, priced once where several passes price it
    plan = ts.plan_terms(macro, x, held, sizes) if len(groups) > 1 else None
    priced = []  # each pass's first policy, policies, the rows it priced (None: a table) and their step
    none: Any = None  # the rows no policy fits, where the one pass priced them at the fallback too
    flight_of = ts.in_flight(macro)  # (micro-batches in flight: the same under every policy and stage)
    plain = plain_inputs(x)  # (plain inputs: a subset of the rows can be priced alone)
    for first, group in zip(range(0, len(rcs), per), groups, strict=True):
        k = len(group)
        # a stacked pass prices its policies as a table (policies x rows): the plans' columns and
        # terms broadcast along the policies rather than gathered for each (issue 16: the gathers
        # were a quarter of a small evaluate), every pair priced (gathering the pairs that fit cost
        # more than pricing the others); a pass of one policy prices its rows that fit, alone
        rc: Any = np.array(group, dtype=float)[:, None] if k > 1 else group[0]
        shape = (k, n) if k > 1 else (n,)
        mm = ts.with_recompute(terms, rc)
        z_k, found_k, known = _stage_fits(rc, mm, state, shards, flight_of, x, pins, shape)
        fit = found_k
        if k == 1 and first and plain:  # nor the rows a policy priced before beats already
            fit = found_k & ~_beaten(macro, mm, x, best)
            fit &= ~_kept_anyway(group[0], won & (rc_of == 0), zero_of, z_k, known[1])
        unfit = ~found_k.any(axis=0) if k == len(rcs) > 1 else None
        if unfit is not None and unfit.any() and plain:
            # and the step of the rows no policy fits, at the fallback policy and the last stage
            # (the plan they keep: z_k and the bytes known hold that stage there), priced here
            # with the others rather than in a step of their own (a row's step depends on that
            # row alone)
            none = unfit
        if k > 1:
            rows: Any = None
            sub, sub_mm, z_rows, shared, plan_at = macro, mm, z_k, (held, sizes), plan
        else:
            rows = np.flatnonzero(fit)  # the step of the rows that fit, only
            whole = len(rows) == n
            sub = macro if whole else {c: v[rows] for c, v in macro.items()}
            z_rows = z_k if whole else z_k[rows]
            known = tuple(v if whole or not np.ndim(v) else v[rows] for v in known)
            sub_mm = mm if whole else index_terms(mm, rows)
            shared = (held, sizes) if whole else (_held_at(held, rows), _held_at(sizes, rows))
            plan_at = plan if whole else _plan_at(plan, rows)
        out = ts.step({**sub, "rc": rc, "zero": z_rows}, sub_mm, x, known, shared, plan_at)
        out["penalty"] = batch_penalty(out["tokens_per_step"], x)
        spt = _per_token(out["step_s"], out)
        fwd: Any = np.nan
        if weighted:  # forward passes depend on the sharding stage, not the recompute policy
            sub_terms = terms if sub is macro else index_terms(terms, rows)
            fwd = ts.forward_seconds({**sub, "zero": z_rows}, sub_terms, x, plan_at)
            spt = spt + _forward_share(fwd, out, x)
        if k > 1:  # (the table's pairs that fit: their numbers; the others' ignored)
            spt_k, fwd_k = np.where(fit, spt, np.inf), np.where(fit, fwd, np.nan)
        else:
            spt_k, fwd_k = np.full(n, np.inf), np.full(n, np.nan)
            spt_k[rows] = spt
            if weighted:
                fwd_k[rows] = fwd
        del out["penalty"]  # (not taken from the pass: the chosen rows' is priced again)
        priced.append((first, k, rows, out))
        spt_k, fwd_k, found_k, z_k = (v.reshape(k, n) for v in (spt_k, fwd_k, found_k, z_k))
        for j, policy in enumerate(group):  # in policy order: a tie keeps the earlier policy
            better = found_k[j] & (spt_k[j] < best)
            best = np.where(better, spt_k[j], best)
            rc_of, zero_of = np.where(better, policy, rc_of), np.where(better, z_k[j], zero_of)
            fwd_of, won = np.where(better, fwd_k[j], fwd_of), won | better
            j_of = np.where(better, first + j, j_of)
    macro.update(rc=rc_of, zero=zero_of)
    chosen = np.where(won, j_of, rcs.index(fallback))  # each row's policy (or the fallback)
    if len(groups) == 1 and len(rcs) > 1:
        # each row's terms under its policy, priced in the one pass already (the table's row of it)
        mm_of = _policy_rows(mm, chosen, n)
    else:
        mm_of = ts.with_recompute(terms, rc_of)
    # each row's step is priced already, at its policy and stage (a row no policy fits: at the
    # fallback's, where the pass priced those rows: as a step of their own would, numbers that are
    # all per-row arrays)
    lone = none is not None and (won | none).all() and all(np.ndim(v) for v in out.values())
    if len(groups) == 1 and (won.all() or lone):
        out = _finished(_policy_rows(out, chosen, n), mm_of, x)
    else:
        out = _priced_steps(priced, macro, mm_of, x, j_of, won, plain, plan)
    if weighted:
        rest = np.flatnonzero(~won)  # rows no policy fits: their forward under the default stage
        if len(rest):
            sub = {k: v[rest] for k, v in macro.items()}
            fwd_of[rest] = ts.forward_seconds(sub, index_terms(terms, rest), x, _plan_at(plan, rest))
        out["forward_s"] = fwd_of
        out["objective"] = out["seconds_per_token"] + _forward_share(out["forward_s"], out, x)
    return out


STACKED = 8192  # rows :func:`evaluate` prices in one pass where it can (recompute policies, stages)


def _stage_fits(
    rc: Any, mm: dict, state: dict, shards: Any, flight: Any, x: dict, pins: dict, shape: tuple
) -> tuple[Any, Any, tuple]:
    """:func:`evaluate`'s memory fit of a pass of policies ``rc`` (a number, or a column of them
    against the rows: a table of ``shape``; ``mm``: the terms under them): the least sharding
    stage of :func:`~ipd_cli.engine.trainstep.state_by_stage`'s ``state`` that fits in HBM and
    host memory (the last stage where none does), whether one does, and the (state, host,
    activation peak, kept activation) bytes there, which the step's memory reads (``shards``: the
    rows whose data-parallel group is more than one GPU; ``flight``: their micro-batches in flight)."""
    import numpy as np

    zs = list(state)  # (in the order of the stages)
    # (given the micro-batches in flight, the memory below reads no plan column but rc)
    Q = {"rc": rc}
    kept = ts.kept_activation_bytes(Q, mm, flight)
    acts, rest = ts.activation_peak_bytes(Q, mm, flight), ts.unsendable_bytes(Q, mm, kept, flight)
    z_k, found = np.full(shape, float(zs[-1])), np.zeros(shape, dtype=bool)
    state_of: Any = None  # the state bytes at the stage chosen (where one fits)
    host_of: Any = None  # and the host bytes
    for z in reversed(zs):  # the last assignment is the least sharding that fits
        host = ts.offloaded_bytes(Q, mm, x["hbm_cap"] - state[z] - rest, flight)
        ok = (state[z] + acts <= x["hbm_cap"]) & (host <= x["host_cap"])
        if "zero" not in pins:  # nothing to shard: ZeRO-0; something: ZeRO-1 is as fast and smaller
            ok &= (z > 0) == shards
        z_k, found = np.where(ok, z, z_k), found | ok
        state_of = state[z] if state_of is None else np.where(ok, state[z], state_of)
        host_of = host if host_of is None else np.where(ok, host, host_of)
    return z_k, found, (state_of, host_of, acts, kept)


def _beaten(P: sr.Columns, mm: dict, x: dict, best: Any) -> Any:
    """Rows of :func:`evaluate`'s pass of one recompute policy (``P``: the plans; ``mm``: their
    terms under it) whose seconds per token under it cannot come below ``best`` (the policies
    before it, priced already): its step is never the better one, so it is not priced (issue 16:
    on the 522,040 plans of Qwen3-30B-A3B on 288 GB200, a policy after the first won 2 to 3 % of the
    rows it fits; this skips 80 % of full recompute's steps, 20 % of selective's). A step takes at
    least (mb + (pp - 1) / vp) (fwd + bwd) + the fixed time: each micro-batch's forward and
    backward, which the offload transfer, the pipeline sends and the chunks the 1F1B expert overlap
    leaves unpaired only lengthen (where the overlap's gain is not negative), its 1F1B bubble of
    (pp - 1) / vp of them, and data-parallel, tensor-parallel gradient and optimizer seconds that
    are not negative; DualPipe's bubble is no such multiple, so its rows are all priced. The bound
    sits a relative 1e-9 below that (the step's own sums round a few ulps apart): a row within it
    of ``best`` is priced, so a tie is settled as before."""
    import numpy as np

    tokens = P["dp"] * P["mb"] * P["mbs"] * x["seq"]
    least_s = (P["mb"] + (P["pp"] - 1.0) / P["vp"]) * (mm["fwd_s"] + mm["bwd_s"]) + x["step_fixed_s"]
    floor = penalised_per_token(least_s, tokens, x)
    plain = ~np.asarray(ts.dualpipe(P)) & (np.asarray(mm["a2a_gain_s"]) >= 0.0)
    return plain & (floor * (1.0 - 1e-9) > best)


def _kept_anyway(policy: int, kept: Any, kept_zero: Any, zero: Any, host: Any) -> Any:
    """Rows of :func:`evaluate`'s pass of ``policy`` where it is activation offload (3) and no
    recompute (policy 0, which the rows ``kept`` took, at stage ``kept_zero``) wins already: offload
    at the same stage (``zero``) sending nothing to the host (``host``, bytes per GPU, not above 0)
    (another policy: none). Such a plan runs as keeping its activations does
    (:func:`~ipd_cli.engine.trainstep.offload_terms`: no transfer): the two policies' terms differ
    in the activation bytes kept and sent alone, which then set the memory, not the time: the same
    seconds per token, a tie the earlier policy keeps, so it is not priced (issue 16: offload fits
    nearly every plan and won 3 % of them on a 522,040-plan grid; its pass priced them all)."""
    return (policy == 3) & kept & (zero == kept_zero) & ~(host > 0.0)


plain_inputs = ts.plain_inputs  # (kept here beside the passes that read it)


def _priced_steps(
    priced: list, macro: sr.Columns, mm: dict, x: dict, j_of: Any, won: Any, plain: bool, plan: Any = None
) -> dict[str, Any]:
    """:func:`finish` of ``macro`` (its recompute and sharding chosen; ``mm``: the terms under
    them) where :func:`evaluate`'s passes (``priced``) have the step of each row a policy won
    (``won``, policy ``j_of``) already: those taken from their pass, the others' priced (a row's
    step depends on that row alone: the numbers a step over every row gives). A pass that gave a
    plain number, or another dtype, for an output, or inputs held as arrays (one value per row, a
    plan priced at sampled inputs, ``plain`` False: :func:`plain_inputs`): every row priced again.
    ``plan``: :func:`~ipd_cli.engine.trainstep.plan_terms` of ``macro``, where :func:`evaluate` has it."""
    import numpy as np

    if not plain:
        return finish(macro, mm, x)
    pieces = []  # (rows, their step)
    for first, k, rows, out in priced:
        at = np.flatnonzero(won & (j_of >= first) & (j_of < first + k))
        if not len(at):
            continue
        if rows is None:  # a stacked pass's table: at each row's policy
            pieces.append((at, _policy_rows(out, j_of[at] - first, len(won), at)))
        else:  # a pass of one policy: at each row's place among the rows it priced
            pieces.append((at, index_terms(out, np.searchsorted(rows, at))))
    rest = np.flatnonzero(~won)
    if len(rest):
        priced_rest = ts.step(sr.take(macro, rest), index_terms(mm, rest), x, plan=_plan_at(plan, rest))
        pieces.append((rest, priced_rest))
    keys = list(pieces[0][1]) if pieces else []
    kinds = {(c, np.ndim(p[1][c]), np.asarray(p[1][c]).dtype) for p in pieces for c in keys}
    if not pieces or len(kinds) != len(keys) or any(d != 1 for _, d, _ in kinds):
        return finish(macro, mm, x)
    out = {}
    for c in keys:
        out[c] = np.empty(len(won), dtype=pieces[0][1][c].dtype)
        for at, step in pieces:
            out[c][at] = step[c]
    return _finished(out, mm, x)


def _policy_rows(table: dict, j: Any, n: int, rows: Any = None) -> dict[str, Any]:
    """The entries of a stacked pass's table (:func:`evaluate`: policies x ``n`` rows) at policy
    ``j[i]`` of each row ``rows[i]`` (every row, in order, where None): an entry no policy changes
    (a number, or an array of the rows' own) taken at the rows, as it is where they are all rows."""
    import numpy as np

    cols = np.arange(n) if rows is None else rows
    flat = j * n + cols  # (the pairs' places in the table's rows laid end to end: one index each)

    def at(v: Any) -> Any:
        if np.ndim(v) == 2:  # (a column of one policy's number, (policies x 1): at each row's)
            return v.reshape(-1)[flat if v.shape[1] == n else j]
        return v if rows is None or not np.ndim(v) else v[rows]

    return {c: at(v) for c, v in table.items()}


def objective(out: dict) -> Any:
    """What plans are ranked by: seconds per token, with an RL trainer's log-prob passes where it
    has them (``out``: :func:`evaluate`'s)."""
    return out.get("objective", out["seconds_per_token"])


def _per_token(seconds: Any, out: dict) -> Any:
    """``seconds`` of a step per token it trains, with the batch penalty (``out``: the step's)."""
    return seconds * out["penalty"] / out["tokens_per_step"]


def penalised_per_token(seconds: Any, tokens: Any, x: dict) -> Any:
    """:func:`_per_token` of a step of ``tokens`` tokens before its outputs exist (the bounds':
    :func:`_beaten`, :func:`plan_lower_bound`, :func:`sizes_plan_bound`)."""
    return seconds * batch_penalty(tokens, x) / tokens


def _forward_share(forward_s: Any, out: dict, x: dict) -> Any:
    """What ``x['forward_weight']`` forward-only passes per training pass add to a plan's seconds
    per token (an RL trainer: its log-prob passes per PPO epoch, on the same plan)."""
    return _per_token(x["forward_weight"] * forward_s, out)


def finish(P: sr.Columns, mm: dict, x: dict, held: Any = None) -> dict[str, Any]:
    """The step outputs of plans whose every column is set (the single-point path too; ``held``:
    :func:`~ipd_cli.engine.trainstep.params_per_gpu` of ``P``, where the caller has it)."""
    shared = None if held is None else (held, ts.dp_groups(P))
    return _finished(ts.step(P, mm, x, shared=shared), mm, x)


def _plan_at(plan: Any, rows: Any) -> Any:
    """:func:`~ipd_cli.engine.trainstep.plan_terms` of a plan table at its rows ``rows`` (None where
    the caller has none)."""
    return None if plan is None else index_terms(plan, rows)


def _held_at(held: tuple, rows: Any) -> tuple:
    """:func:`~ipd_cli.engine.trainstep.params_per_gpu` (or :func:`~ipd_cli.engine.trainstep.
    dp_groups`) of a plan table at its rows ``rows``: each array taken there, a number as it is."""
    import numpy as np

    return tuple(v[rows] if np.ndim(v) else v for v in held)


def _finished(out: dict, mm: dict, x: dict) -> dict[str, Any]:
    """:func:`finish` given the step's outputs ``out``."""
    out.update({k: v for k, v in mm.items() if k not in out})
    out["penalty"] = batch_penalty(out["tokens_per_step"], x)
    out["seconds_per_token"] = _per_token(out["step_s"], out)
    return out


def memory_lower_bound(P: sr.Columns, m: dict, x: dict, cap: float, pins: dict):
    """Bytes per GPU no plan built on a micro row goes below: one micro-batch's activations and
    logits, and the state on the most replicas under the sharding stage that holds least there
    (FSDP's two gathered layers, with a recipe's cached weight copy, can outweigh what ZeRO 0-2
    keep on a stage of few layers: a review found this bound above real plans while it took FSDP
    for the least, 2026-12-05)."""
    import numpy as np

    runs = _runs(P, x, STATE_KEYS)  # the state reads those columns alone: each run's priced once
    Q = P if runs is None else {k: P[k][runs[0]] for k in STATE_KEYS if k in P}
    most = np.floor(cap / (Q["tp"] * Q["cp"] * Q["pp"]))
    if "dp" in pins:
        most = np.minimum(most, pins["dp"])
    states = ts.state_by_stage({**Q, "dp": np.maximum(most, 1.0)}, x, options(pins, "zero", ZERO_STAGES))
    state = np.min(list(states.values()), axis=0)
    state = state if runs is None else state[runs[1]]
    acts = [ts.activation_floor(m, rc) for rc in options(pins, "rc", POLICIES)]
    return state + np.min(acts, axis=0) + m["logits_bytes"]


def _micro(x: dict, cap: float, pins: dict) -> tuple[sr.Columns, dict, Any]:
    """The micro grid, its terms and its exposed tensor-parallel seconds
    (:func:`~ipd_cli.engine.trainstep.tp_exposed_both`, which :func:`grid_terms` prices once for
    the grid: the rows a search evaluates take theirs from it, :func:`row_terms`) for clusters up
    to ``cap`` GPUs, kept in ``x`` so a deadline search and the fixed search after it build them
    once (the grid of a smaller cap is a subset)."""
    import numpy as np

    store = x.setdefault("_micro", {})
    key = tuple(sorted(pins.items()))
    if key not in store or store[key][0] < cap:
        P = micro_grid(x, int(cap), pins)
        tp = ts.tp_exposed_both(P, x)
        store[key] = (cap, P, grid_terms(P, x, tp, sets_pinned(pins)), tp)
    big, P, m, tp = store[key]
    if big == cap:
        return P, m, tp
    rows = np.flatnonzero(within_cap(P, cap))
    return sr.take(P, rows), index_terms(m, rows), _tp_at(tp, rows)


def _tp_at(tp: Any, rows: Any) -> Any:
    """A grid's exposed tensor-parallel seconds (:func:`_micro`'s, :func:`_sizes_grid`'s) at ``rows``."""
    return index_terms({"tp": tp}, rows)["tp"]


def grid_terms(P: sr.Columns, x: dict, tp_both: Any = None, sets: bool = True) -> dict[str, Any]:
    """The micro terms a search reads over a whole grid (its bounds and memory tests:
    :data:`~ipd_cli.engine.trainstep.BOUND_TERMS`; every term where a module-set policy can be
    pinned, whose activation floor needs them); :func:`chunk_terms` gives the rest for the rows a
    search evaluates. Priced a block of rows at a time (:func:`~ipd_cli.engine.search.by_blocks`),
    but the exposed tensor-parallel seconds once for the grid: they read a few columns of a row
    (:data:`~ipd_cli.engine.trainstep.TP_KEYS`), whose few hundred distinct combinations every
    block would price again (:func:`~ipd_cli.engine.trainstep.tp_exposed_both`): the same numbers
    (``tp_both``: those seconds, where the caller has them). ``sets``: whether the search's plans
    can take a module-set policy (:func:`sets_pinned`); where not, the bounds' terms alone (their
    activation floor reads no others: every term is priced for the rows evaluated, :func:`row_terms`,
    as where ``x`` asks for the bounds' alone)."""
    import numpy as np

    bounds_only = not (sets and x.get("module_sets", True))
    tp, tp_bwd = ts.tp_exposed_both(P, x) if tp_both is None else tp_both
    if np.ndim(tp) != 1 or np.ndim(tp_bwd) != 1:  # (a number: nothing to cut into blocks)
        return ts.micro_terms(P, x, bounds_only, (tp, tp_bwd))
    return sr.by_blocks(
        lambda Pb, Tb: ts.micro_terms(Pb, x, bounds_only, (Tb["tp"], Tb["tp_bwd"])),
        P,
        {"tp": tp, "tp_bwd": tp_bwd},
    )


def has_every_term(m: dict) -> bool:
    """Whether grid terms ``m`` (:func:`grid_terms`) hold every micro term, not only the bounds'
    (:data:`~ipd_cli.engine.trainstep.BOUND_TERMS`, which have no ``redo_s``)."""
    return "redo_s" in m


def row_terms(
    sub: sr.Columns, m: dict, idx: Any, x: dict, tp_both: Any = None, sets: bool = True
) -> dict[str, Any]:
    """Every micro term of the micro rows ``idx`` (``sub``: those rows of a grid whose terms are
    ``m``: :func:`grid_terms`): taken from ``m`` where it has them all, else computed on ``sub``
    (``tp_both``: the grid's :func:`~ipd_cli.engine.trainstep.tp_exposed_both`, taken at ``idx``
    rather than priced again for the rows: a row's value depends on that row alone; ``sets``:
    :func:`grid_terms`', where not: the module-set terms are not priced)."""
    if has_every_term(m):
        return index_terms(m, idx)
    y = x if sets or not x.get("module_sets", True) else {**x, "module_sets": False}
    if tp_both is None:
        return ts.micro_terms(sub, y)
    return ts.micro_terms(sub, y, tp_both=_tp_at(tp_both, idx))


def chunk_terms(sub: sr.Columns, m: dict, idx: Any, rows: Any, x: dict) -> dict[str, Any]:
    """Every micro term of the macro rows ``rows`` of the micro rows ``sub`` (rows ``idx`` of a
    grid whose terms are ``m``: :func:`grid_terms`): taken from ``m`` where it has them all, else
    computed on ``sub`` (a row's terms depend on that row alone: the same numbers)."""
    if has_every_term(m):
        return index_terms(m, idx[rows])
    return index_terms(ts.micro_terms(sub, x), rows)


def within_cap(P: sr.Columns, cap: float) -> Any:
    """Micro rows a cluster of ``cap`` GPUs can hold (experts folded into tp x cp x dp)."""
    import numpy as np

    tc = P["tp"] * P["cp"]
    return (tc * P["pp"] <= cap) & (P["ep"] <= tc * np.floor(cap / (tc * P["pp"])))


def _fitting_micro(
    x: dict, cap: float, pins: dict, micro: tuple | None = None
) -> tuple[sr.Columns, dict, Any]:
    """The micro grid, its terms and exposed tensor-parallel seconds (:func:`_micro`; ``micro``: a
    subset of them to search instead), without rows whose activations alone overflow HBM."""
    import numpy as np

    if micro is None:
        P, m, tp = _micro(x, cap, pins)
    else:
        rows = np.flatnonzero(within_cap(micro[0], cap))
        P, m, tp = sr.take(micro[0], rows), index_terms(micro[1], rows), _tp_at(micro[2], rows)
    keep = memory_fit_rows(P, m, x, cap, pins)
    return sr.take(P, keep), index_terms(m, keep), _tp_at(tp, keep)


def memory_fit_rows(P: sr.Columns, m: dict, x: dict, cap: float, pins: dict) -> Any:
    """Row numbers (cheaper than a mask per column) of the micro rows whose activations alone do not
    overflow HBM; every row where none fits, so the masks then say why nothing runs."""
    import numpy as np

    keep = np.flatnonzero(memory_lower_bound(P, m, x, cap, pins) <= x["hbm_cap"])
    return keep if len(keep) else np.arange(len(P["tp"]))


def lower_bound_seconds_per_token(P: sr.Columns, m: dict, x: dict, gpus: float, pins: dict, fsdp: Any = None):
    """No plan built on a micro row beats this. With G tokens per step on at most d_max replicas,
    seconds per token >= t_mb (1 / (d_max mbs S) + w / G) x penalty(G), t_mb = fwd + bwd + FSDP's
    exposure and w = (pp - 1) / vp x (fwd + bwd) / t_mb the bubble in micro-batch times (the
    bubble runs no FSDP gathers: :func:`plan_lower_bound`; no data-parallel or optimizer time);
    minimised over G >= one micro-batch per replica in closed form (G = B, or the stationary point
    beyond B). ``fsdp``: :func:`fsdp_lower_bound` of the rows where the caller has it already."""
    import numpy as np

    if fsdp is None:
        fsdp = fsdp_lower_bound(P, m, x, pins)
    t = m["fwd_s"] + m["bwd_s"]
    replicas = np.maximum(most_replicas(P, gpus, x), 1.0)
    B = x["recipe_batch"]
    g0 = replicas * P["mbs"] * x["seq"]
    u, w = 1.0 / g0, ts.bubble_bound(P) * (t / (t + fsdp))  # (as before where fsdp is 0: t / t is 1)
    start = np.maximum(g0, B)
    below = np.where(g0 <= B, u + w / B, np.inf)
    gs = np.maximum(np.sqrt(w * B / u), start)
    beyond = (u + w / gs) * (1.0 + gs / B) / 2.0
    per_token = np.minimum(below, beyond)
    if "gbs" in pins:  # the global batch is given: at least one micro-batch per replica, (mb + w) of them
        seqs = pins["gbs"] / P["mbs"]
        mb = np.ceil(seqs / np.minimum(replicas, np.floor(seqs)))
        per_token = (mb + w) / (pins["gbs"] * x["seq"]) * batch_penalty(pins["gbs"] * x["seq"], x)
    return (t + fsdp) * per_token


CHUNK = 2048  # micro rows expanded and evaluated at a time
PART = 256  # micro rows of a deadline search's chunk solved at a time, in order of their systems_need


def search_fixed(
    x: dict,
    gpus: int,
    pins: dict,
    keep: int = 1,
    exhaustive: bool = False,
    bar: float = math.inf,
    micro: tuple | None = None,
    tight: bool = True,
) -> Searched:
    """The plans on at most ``gpus`` GPUs, evaluated. Branch and bound: micro rows in order of their
    lower bound, a chunk at a time, until no remaining row can beat the ``keep``-th best plan found,
    or ``bar`` (the seconds per token of a plan known to run: nothing slower is evaluated)
    (``exhaustive``: evaluate every plan). Within a chunk, a plan is evaluated only where its own
    bound (:func:`plan_lower_bound`, ``tight``) is within the bar too: the plans it drops could not
    have tied the ``keep`` best (issue 16: the fixed search after a deadline search evaluated 8,549
    plans to find the one of them within its bar). ``space.feasible`` marks the plans that run."""
    import numpy as np

    P, m, tp = _fitting_micro(x, gpus, pins, micro)
    sets = sets_pinned(pins)
    fsdp = fsdp_lower_bound(P, m, x, pins)
    lb = lower_bound_seconds_per_token(P, m, x, gpus, pins, fsdp)
    order = np.argsort(lb, kind="stable")
    parts, best_found, known, skipped = [], np.empty(0), bar, False
    alone = plain_inputs(x)  # (inputs held as arrays, one value per row: the rows priced together)
    tight = tight and alone  # (the row's bound alone)
    for start in range(0, len(order), len(order) if exhaustive else CHUNK):
        idx = order[start : start + (len(order) if exhaustive else CHUNK)]
        if lb[idx[0]] > bar:
            break
        idx = idx[~(lb[idx] > bar)]  # nor the chunk's rows past the bar
        sub = sr.take(P, idx)
        t = row_terms(sub, m, idx, x, tp if alone else None, sets)  # every term of each micro row
        M = expand(sub, x, gpus, pins)
        if tight and bar < np.inf:  # nor the plans whose own step cannot come within the bar
            near = np.flatnonzero(~(plan_lower_bound(M, *_step_floor(sub, t, x, fsdp[idx]), x) > bar))
            skipped |= len(near) < len(M["dp"])
            M = sr.take(M, near)
            if not len(near):
                continue
        out = evaluate(M, index_terms(t, M["row"]), x, pins)
        fits = fits_memory(out, x)
        parts.append((M, out, fits))
        found = np.concatenate([best_found, out["seconds_per_token"][fits]])
        best_found = np.partition(found, keep - 1)[:keep] if len(found) > keep else found
        bar = min(known, best_found.max() if len(best_found) >= keep else np.inf)
    if skipped and not (len(best_found) >= keep and best_found.max() <= known):
        # fewer than ``keep`` plans within the bar given: the best ones found sit past it, where
        # the plans skipped could have been among them (and are, evaluated with nothing skipped)
        return search_fixed(x, gpus, pins, keep, exhaustive, known, micro, tight=False)
    return _joined(parts)


def _step_floor(P: sr.Columns, t: dict, x: dict, fsdp: Any) -> tuple[Any, Any, Any, Any]:
    """What every plan of the micro rows ``P`` takes (``t``: every micro term of each; ``fsdp``:
    their :func:`fsdp_lower_bound`): (seconds a micro-batch, FSDP's exposed seconds a micro-batch,
    the bubble in micro-batches, seconds a step), with what :func:`_step_extras` adds."""
    per_mb, per_step = _step_extras(P, t, x)(fsdp)
    return t["fwd_s"] + t["bwd_s"] + per_mb, fsdp, ts.bubble_bound(P), per_step


def plan_lower_bound(M: sr.Columns, t_mb: Any, fsdp: Any, w: Any, per_step: Any, x: dict) -> Any:
    """No plan of the macro rows ``M`` that fits beats this many seconds per token: a step of at least
    (mb + w) t_mb, mb FSDP exposures and ``per_step`` (:func:`_step_floor` of each plan's micro
    row, ``M['row']``; FSDP's gathers run with each micro-batch, not in the bubble:
    :func:`~ipd_cli.engine.trainstep.dp_exposed_seconds`), on its dp mb mbs S tokens, with their
    batch penalty."""
    row, mb = M["row"], M["mb"]
    tokens = M["dp"] * mb * M["mbs"] * x["seq"]
    step = (mb + w[row]) * t_mb[row] + mb * fsdp[row] + per_step[row]
    return penalised_per_token(step, tokens, x)


def _joined(parts: list) -> Searched:
    import numpy as np

    if not parts:
        return Searched(
            {"tp": np.empty(0)}, {"seconds_per_token": np.empty(0)}, sr.Space({"tp": np.empty(0)})
        )
    cols = {k: np.concatenate([p[0][k] for p in parts]) for k in parts[0][0]}
    out = {k: np.concatenate([_spread(p[1][k], p[2].shape) for p in parts]) for k in parts[0][1]}
    space = sr.Space(cols)
    space.require("fits in HBM", np.concatenate([p[2] for p in parts]))
    return Searched(cols, out, space, objective(out))


def _spread(v: Any, shape: tuple) -> Any:
    """``v`` as an array of ``shape`` (a plain number: every row's value)."""
    import numpy as np

    return v if np.shape(v) == shape else np.broadcast_to(v, shape)


def best_row(s: Searched) -> int | None:
    """The feasible plan with the fewest seconds per useful token (ties: less memory)."""
    if len(s) == 0:
        return None
    return sr.best(-s.seconds_per_token, s.space.feasible, -s.out["memory_bytes"])


def top_rows(s: Searched, n: int) -> list[int]:
    """The n best feasible plans, best first."""
    import numpy as np

    if len(s) == 0:
        return []
    idx = np.flatnonzero(s.space.feasible)
    order = np.lexsort((s.out["memory_bytes"][idx], s.seconds_per_token[idx]))
    return [int(i) for i in idx[order[:n]]]


# --- deadline mode: the fewest GPUs (whole systems) that finish in time -----------------------------


def _replica_step(P: sr.Columns) -> Any:
    """Replica counts must keep tp x cp x dp a multiple of ep: dp in steps of ep / gcd(ep, tp cp)."""
    import numpy as np

    tc = (P["tp"] * P["cp"]).astype(np.int64)
    ep = P["ep"].astype(np.int64)
    return (ep // np.gcd(ep, tc)).astype(float)


def solve_replicas(M: sr.Columns, terms: dict, x: dict, rate: float, pins: dict) -> dict[str, Any]:
    """Set each row's dp to the fewest replicas whose throughput, after the batch penalty, reaches
    ``rate`` tokens/s (dp q >= rate (1 + G / B) / 2 beyond the recipe batch B, q the tokens/s of one
    replica), and its micro-batches to fill its share (``fill``) of the recipe batch at that dp.
    q moves with dp and mb: three fixed-point rounds at the recompute and sharding first chosen,
    then steps down a replica grain at a time while the row still reaches the rate and fits (a
    user review: the rounds can settle above the fewest: 10T MoE on GB200 TP16 CP2 PP128 at 31
    days jumped 20 -> 30 replicas, a fixed point, where 24, with more micro-batches each and a
    smaller bubble, reach the rate: 138,240 GPUs where 110,592 do); the final choice at the solved
    plan."""
    import numpy as np

    grain = _replica_step(M)
    refill = "mb" not in pins and "gbs" not in pins
    # a row whose dp and micro-batches did not move gives the step it gave (each row's step
    # depends on that row alone): only the rows that moved are priced again, where ``x`` holds
    # plain numbers (a plan priced at sampled inputs has one row per input value: every row)
    alone = plain_inputs(x)
    out = evaluate(M, terms, x, pins)
    mm = ts.with_recompute(terms, M["rc"])  # the recompute chosen: the rounds and steps keep it
    held = ts.params_per_gpu(M, x)  # (what each GPU holds: no replica count changes it)
    for r in range(3):
        dp = np.maximum(np.ceil(np.minimum(_replicas_needed(M, out, x, rate), 1e9) / grain), 1.0) * grain
        mb = _fill({**M, "dp": dp}, x) if refill else M["mb"]
        moved = np.flatnonzero((dp != M["dp"]) | (mb != M["mb"])) if r and alone else None
        M["dp"], M["mb"] = dp, mb
        out = finish(M, mm, x, held) if moved is None else _refinished(out, M, mm, x, moved, held)
    # steps down: a row that does not step down stays as it was, so its next trial is the one it
    # failed (the same numbers): each step tries only the rows that stepped down the last
    rows = np.arange(len(grain))
    for i in range(STEPS_DOWN):  # at the recompute and sharding chosen, as the rounds
        if alone and 1 < STEPS_DOWN - i and len(rows) * (STEPS_DOWN - i) <= FEW_TRIED:
            _stepped_down(M, mm, x, rate, grain, rows, STEPS_DOWN - i, refill, held)
            break
        g, dp = grain[rows], M["dp"][rows]
        trial = {**sr.take(M, rows), "dp": np.maximum(dp - g, g)}
        if refill:
            trial["mb"] = _fill(trial, x)
        t_out = finish(trial, index_terms(mm, rows), x, _held_at(held, rows))
        down = (trial["dp"] < dp) & fits_memory(t_out, x)
        down &= _replicas_needed(trial, t_out, x, rate) <= trial["dp"] * (1 + 1e-9)
        if not np.any(down):
            break
        at = np.flatnonzero(down)
        M["dp"], M["mb"] = M["dp"].copy(), M["mb"].copy()
        M["dp"][rows[at]], M["mb"][rows[at]] = trial["dp"][at], trial["mb"][at]
        rows = rows[at] if alone else rows
    out = evaluate(M, terms, x, pins)
    return _stepped_up(M, out, terms, x, rate, pins, refill) if alone else out


def _stepped_down(
    M: sr.Columns,
    mm: dict,
    x: dict,
    rate: float,
    grain: Any,
    rows: Any,
    k: int,
    refill: bool,
    held: Any = None,
) -> None:
    """:func:`solve_replicas`' last ``k`` steps down of the rows ``rows`` in one pass: each row at
    one to ``k`` replica grains fewer (the counts the steps try, each the last less a grain, down to
    a grain), its micro-batches refilled, and kept at the last of the first steps that all fit and
    reach the rate (where a step fails, the steps after it are not taken): the plan the step-by-step
    loop leaves, as a row's step depends on that row alone. ``M``'s dp and mb are updated (``held``:
    :func:`~ipd_cli.engine.trainstep.params_per_gpu` of ``M``, where the caller has it)."""
    import numpy as np

    n = len(rows)
    g, dps = grain[rows], [M["dp"][rows]]
    for _ in range(k):
        dps.append(np.maximum(dps[-1] - g, g))
    at = np.tile(rows, k)
    trial = {**sr.take(M, at), "dp": np.concatenate(dps[1:])}
    if refill:
        trial["mb"] = _fill(trial, x)
    t_out = finish(trial, index_terms(mm, at), x, None if held is None else _held_at(held, at))
    down = (trial["dp"] < np.concatenate(dps[:-1])) & fits_memory(t_out, x)
    down &= _replicas_needed(trial, t_out, x, rate) <= trial["dp"] * (1 + 1e-9)
    # each row's steps taken: those before the first of its steps that fails
    steps = np.argmin(np.vstack([down.reshape(k, n), np.zeros((1, n), dtype=bool)]), axis=0)
    moved = np.flatnonzero(steps)
    if not len(moved):
        return
    j = (steps[moved] - 1) * n + moved  # each moved row's last step, in the pass
    M["dp"], M["mb"] = M["dp"].copy(), M["mb"].copy()
    M["dp"][rows[moved]], M["mb"][rows[moved]] = trial["dp"][j], trial["mb"][j]


# the replicas solve_replicas tries for a row over HBM, smallest first (the first that fits and
# reaches the rate is kept): one to eight replica grains more than the rate's, then 2 to 16 times
# them (rounded up to the grain) where that is more
STEPS_UP = (1, 2, 3, 4, 5, 6, 7, 8)
STEPS_UP_TIMES = (2.0, 3.0, 4.0, 8.0, 16.0)


def _stepped_up(
    M: sr.Columns, out: dict, terms: dict, x: dict, rate: float, pins: dict, refill: bool
) -> dict[str, Any]:
    """:func:`solve_replicas`' rows that reach the rate but do not fit in HBM, with the fewest
    replicas that fit and still reach the rate: ZeRO and FSDP shard the state over the replicas,
    and each replica holds fewer micro-batches, so the memory per GPU never grows with them. The
    rungs (:data:`STEPS_UP` grains more, then :data:`STEPS_UP_TIMES` as many) find a count that
    fits; where that is a multiple's, a bisection between it and the rung below finds the fewest,
    to the replica grain. Found by a property run: a generous deadline's rate needs few replicas,
    and the rows it left over HBM were dropped, so a later deadline took more GPUs than an earlier
    one (H200, the 10T model on 1.9T tokens: 1,344 GPUs at 1,401 days, 1,488 at 2,101; MI300X,
    Llama 3.1 405B on 145B tokens: 40 at 1,375 days, 48 at 2,063 while the steps were multiples of
    the rate's replicas alone). ``M`` and ``out`` are updated for the rows that step up."""
    import numpy as np

    rows = np.flatnonzero(~fits_memory(out, x))
    grain, base = _replica_step(M)[rows], M["dp"][rows]
    last = base + STEPS_UP[-1] * grain  # past the grains: multiples, where they are more
    tries = [base + k * grain for k in STEPS_UP]
    tries += [np.maximum(np.ceil(base * k / grain) * grain, last) for k in STEPS_UP_TIMES]

    trials: list[tuple[dict, dict]] = []  # every trial's plan and step, in order
    src = np.full(len(rows), -1)  # per row: the trial that set its ``hi``, and the row's index there
    src_at = np.full(len(rows), -1)

    def tried(at: Any, dp: Any) -> Any:
        """Rows ``at`` (positions in ``rows``) at ``dp`` replicas: whether each fits and reaches the
        rate (the plan and its step kept in ``trials``)."""
        trial = {**sr.take(M, rows[at]), "dp": dp}
        if refill:
            trial["mb"] = _fill(trial, x)
        t_out = evaluate(trial, index_terms(terms, rows[at]), x, pins)
        trials.append((trial, t_out))
        reaches = _replicas_needed(trial, t_out, x, rate) <= dp * (1 + 1e-9)
        return fits_memory(t_out, x) & reaches

    def kept(pos: Any, dp: Any, j: Any) -> None:
        """Rows ``pos`` fit at ``dp``: the last trial's entries ``j`` of them."""
        hi[pos], src[pos], src_at[pos] = dp, len(trials) - 1, j

    lo = base.copy()  # per row: a count that does not fit (the rung below the one that does)
    hi = np.full(len(rows), np.inf)  # the fewest found that fits
    left = np.arange(len(rows))  # positions in ``rows`` of those still over HBM
    for i, dp in enumerate(tries):
        if not len(left):
            break
        k = len(tries) - i
        if k > 1 and len(left) * k <= FEW_TRIED:  # the rungs left of the few rows left, in one pass
            dps = np.stack([t[left] for t in tries[i:]])  # (rung, row)
            ok = tried(np.tile(left, k), dps.reshape(-1)).reshape(k, len(left))
            first, hit = np.argmax(ok, axis=0), ok.any(axis=0)  # each row's first rung that fits
            cols = np.arange(len(left))
            kept(left[hit], dps[first[hit], cols[hit]], first[hit] * len(left) + cols[hit])
            failed = ~hit | (first > 0)  # the rung before the first that fits (or the last) failed
            before = np.where(hit, first - 1, k - 1)[failed]
            lo[left[failed]] = dps[before, cols[failed]]
            break
        ok = tried(left, dp[left])
        kept(left[ok], dp[left][ok], np.flatnonzero(ok))
        lo[left[~ok]] = dp[left][~ok]
        left = left[~ok]
    found = np.flatnonzero(np.isfinite(hi))
    # between a multiple's rung and the rung below: bisect to the grain
    gap = found[hi[found] - lo[found] > grain[found] * (1 + 1e-9)]
    while len(gap):
        gap = _bisected(gap, lo, hi, grain, tried, kept)
    if len(found):
        at = rows[found]
        trial, t_out = _gathered(trials, src[found], src_at[found])
        if trial is None:  # a step with a number or mixed types for an output: priced again
            tried(found, hi[found])
            trial, t_out = trials[-1]
        for c in ("dp", "mb", "rc", "zero"):
            M[c] = np.array(M[c], dtype=float, copy=True)
            M[c][at] = trial[c]
        out = _written(out, t_out, at)
    return out


# rows :func:`_stepped_up` prices at once where the rows left are few: every rung left of them, or
# the next levels of their bisection, in one pass (a row's step depends on that row alone, so the
# rows' numbers are the ones the rung-by-rung, level-by-level passes give; a pass costs a fixed
# ~1 ms plus ~3 us a row, so up to this many rows cost less than the two or more passes they stand for)
FEW_TRIED = 384


def _bisected(gap: Any, lo: Any, hi: Any, grain: Any, tried: Any, kept: Any) -> Any:
    """The next levels of :func:`_stepped_up`'s bisection of rows ``gap`` (``lo`` fails, ``hi``
    fits; both updated): as many levels as :data:`FEW_TRIED` rows allow (at least one), each row's
    midpoints on every path those levels can take priced in one pass, then walked as the
    level-by-level bisection walks them. The rows whose gap is still above a grain are returned."""
    import numpy as np

    n = len(gap)
    g = grain[gap]
    # (no row's bisection goes deeper than log2 of its gap in grains, rounded up)
    deepest = max(1, int(np.ceil(np.log2(np.max((hi[gap] - lo[gap]) / g)))) + 1)
    levels = 1
    while levels < deepest and n * (2 ** (levels + 1) - 1) <= FEW_TRIED:
        levels += 1
    # the tree of (lo, hi) states per row: level l holds 2^l states, state s's children 2s (fits:
    # hi = mid) and 2s + 1 (does not: lo = mid); a state whose gap is within a grain, and all
    # below it, are closed (not priced)
    a, b, parent = lo[gap][None, :], hi[gap][None, :], np.ones((1, n), dtype=bool)
    opens, mids = [], []
    for _ in range(levels):
        opened = parent & (b - a > g * (1 + 1e-9))
        mid = a + np.floor((b - a) / g / 2.0) * g
        opens.append(opened)
        mids.append(mid)
        a = np.stack([a, mid], axis=1).reshape(-1, n)
        b = np.stack([mid, b], axis=1).reshape(-1, n)
        parent = np.repeat(opened, 2, axis=0)
    where = [np.nonzero(o) for o in opens]  # (state, row) pairs priced, level by level
    pos = np.concatenate([gap[w[1]] for w in where])
    dps = np.concatenate([m[w] for m, w in zip(mids, where, strict=True)])
    ok = tried(pos, dps)
    # each priced pair's index in the pass, as a (state, row) table per level
    index, start = [], 0
    for o, w in zip(opens, where, strict=True):
        t = np.full(o.shape, -1)
        t[w] = start + np.arange(len(w[0]))
        index.append(t)
        start += len(w[0])
    s = np.zeros(n, dtype=np.int64)  # each row's state at the level walked
    cols, walking = np.arange(n), np.ones(n, dtype=bool)
    for lv in range(levels):
        walking &= opens[lv][s, cols]  # (a row whose state closed has ended: its index is stale)
        live = np.flatnonzero(walking)
        if not len(live):
            break
        j = index[lv][s[live], live]
        fit = ok[j]
        r = gap[live]
        kept(r[fit], dps[j[fit]], j[fit])
        lo[r[~fit]] = dps[j[~fit]]
        s[live] = 2 * s[live] + (~fit)
    return gap[hi[gap] - lo[gap] > grain[gap] * (1 + 1e-9)]


def _gathered(trials: list, which: Any, at: Any) -> tuple[Any, Any]:
    """The plans and steps of rows ``at`` of trials ``which`` (one entry a row), as one plan and one
    step (None, None where a step holds a number, or another dtype, for an output)."""
    import numpy as np

    used = np.unique(which)
    keys = list(trials[used[0]][1])
    out: dict[str, Any] = {}
    plan: dict[str, Any] = {}
    for table, cols, into in ((0, ("dp", "mb", "rc", "zero"), plan), (1, keys, out)):
        for c in cols:
            parts = [trials[u][table].get(c) for u in used]
            if any(p is None or np.ndim(p) != 1 for p in parts) or len({p.dtype for p in parts}) != 1:
                return None, None
            v = np.empty(len(which), dtype=parts[0].dtype)
            for u, p in zip(used, parts, strict=True):
                mine = which == u
                v[mine] = p[at[mine]]
            into[c] = v
    if any(list(trials[u][1]) != keys for u in used):
        return None, None
    return plan, out


def _written(out: dict, sub: dict, rows: Any) -> dict[str, Any]:
    """``out`` with the rows ``rows`` of its columns replaced by ``sub``'s values (new arrays)."""
    import numpy as np

    new = dict(out)
    for k, v in sub.items():
        if np.ndim(out[k]):
            new[k] = np.array(out[k], copy=True)
            new[k][rows] = v
    return new


def _refinished(out: dict, M: sr.Columns, mm: dict, x: dict, rows: Any, held: Any = None) -> dict[str, Any]:
    """:func:`finish` of ``M`` where only the rows ``rows`` changed since ``out`` was: those rows
    priced again and written over their old values (``held``: as :func:`finish` takes it)."""

    if not len(rows):
        return out
    at = None if held is None else _held_at(held, rows)
    return _written(out, finish(sr.take(M, rows), index_terms(mm, rows), x, at), rows)


STEPS_DOWN = 4  # replica grains solve_replicas tries below its fixed point


def _replicas_needed(M: sr.Columns, out: dict, x: dict, rate: float) -> Any:
    """Replicas that reach ``rate`` tokens/s at each row's throughput per replica now (beyond the
    recipe batch B the batch penalty asks dp q >= rate (1 + G / B) / 2); inf where none can."""
    import numpy as np

    B = x["recipe_batch"]
    per = M["mb"] * M["mbs"] * x["seq"]  # tokens per replica and step
    q = out["tokens_per_step"] / M["dp"] / out["step_s"]
    plain = rate / q
    room = q - rate * per / (2.0 * B)
    beyond = np.where(room > 0, rate / (2.0 * np.where(room > 0, room, 1.0)), np.inf)
    return np.where(plain * per <= B, plain, beyond)


def _fill(M: sr.Columns, x: dict) -> Any:
    """Micro-batches per replica that fill ``M['fill']`` of the recipe batch at M's dp (above 1:
    one count more than fills it)."""
    import numpy as np

    full = x["recipe_batch"] / (M["dp"] * M["mbs"] * x["seq"])
    up = M["fill"] > 1
    mb = np.where(up, np.floor(full) + 1.0, np.floor(full * M["fill"]))
    return (
        _aligned(np.maximum(mb, 1.0), M, up=False)
        if not np.any(up)
        else np.where(up, _aligned(np.maximum(mb, 1.0), M, up=True), _aligned(np.maximum(mb, 1.0), M))
    )


def replicas_for_memory(P: sr.Columns, m: dict, x: dict, pins: dict) -> Any:
    """Fewest replicas d with which some sharding stage brings a micro row's memory under HBM (inf:
    never). Per stage z the state is fixed_z + shardable_z / d (ZeRO-1 shards the optimizer state,
    ZeRO-2 and the gradients, FSDP and the weights, but holds two gathered layers), so d >=
    shardable_z / (HBM - fixed_z - activations - logits); the least over the stages."""
    import numpy as np

    acts = [ts.activation_floor(m, rc) for rc in options(pins, "rc", POLICIES)]
    return replicas_for_state(P, x, pins, x["hbm_cap"] - np.min(acts, axis=0) - m["logits_bytes"])


def replicas_for_state(P: sr.Columns, x: dict, pins: dict, free: Any) -> Any:
    """Fewest replicas d with which some sharding stage brings a micro row's training state under
    ``free`` bytes per GPU (:func:`replicas_for_memory`; with ``free`` the whole HBM, no activations:
    a lower bound that needs no micro terms). What a stage keeps whole and what it shards read only
    :data:`STATE_KEYS` of a row, so over a grid (runs of rows that differ in the micro-batch size
    and rank order alone) each run's are priced once (:func:`_runs`): the same numbers."""
    import numpy as np

    runs = _runs(P, x, STATE_KEYS)
    if runs is None:
        return _least_replicas(_state_split(P, x, pins), free)
    first, run = runs
    split = _state_split({k: P[k][first] for k in STATE_KEYS if k in P}, x, pins)
    if np.ndim(free) == 0:
        return _least_replicas(split, free)[run]
    return _least_replicas([(fixed[run], shardable[run]) for fixed, shardable in split], free)


STATE_KEYS = ("tp", "cp", "pp", "vp", "ep", "sched", "Ls")  # the columns _state_split reads


def _state_split(P: sr.Columns, x: dict, pins: dict) -> list[tuple[Any, Any]]:
    """Per sharding stage z (ZeRO-1 shards the optimizer state, ZeRO-2 and the gradients, FSDP and
    the weights, but holds two gathered layers): the training state per GPU a row keeps whole
    (fixed_z) and what shards over its replicas (shardable_z, at one replica)."""
    import numpy as np

    dense, expert = ts.params_per_gpu(P, x)
    g_dense, g_expert = ts.dp_groups({**P, "dp": np.ones_like(P["tp"])})  # the groups at one replica
    total = dense + expert
    at_one = dense / g_dense + expert / g_expert  # parameters a GPU keeps of what shards, at one replica
    gathered = 2.0 * total / ts.stage_layers(P, x) * x["weight_mem_bytes"]  # FSDP's two layers in flight
    w, g, o, wm = x["weight_bytes"], x["grad_bytes"], x["optim_bytes"], x["weight_mem_bytes"]
    per_stage = {0: (wm + g + o, 0.0), 1: (wm + g, o), 2: (wm, g + o), 3: (0.0, w + g + o)}
    plain = ts.plain_weight_bytes(P, x)  # kept whole at weight_bytes (ts.state_bytes)
    split = []
    for z in options(pins, "zero", ZERO_STAGES):
        kept, sharded = per_stage[z]
        split.append((kept * total + (z == 3) * gathered + (z < 3) * plain, sharded * at_one))
    return split


def _least_replicas(split: list[tuple[Any, Any]], free: Any) -> Any:
    """The fewest replicas, over the stages of :func:`_state_split`, that bring the state under
    ``free`` bytes per GPU (d >= shardable_z / (free - fixed_z)); inf: none."""
    import numpy as np

    need = np.full(len(split[0][0]), np.inf)
    for fixed, shardable in split:
        room = free - fixed
        d = np.where(shardable > 0, shardable / np.where(room > 0, room, 1.0), 1.0)
        need = np.minimum(need, np.where(room >= 0, np.maximum(d, 1.0), np.inf))
    return need


def _runs(P: sr.Columns, x: dict, keys: tuple[str, ...]) -> tuple[Any, Any] | None:
    """(each run's first row, each row's run) of the runs of consecutive rows of ``P`` that agree
    on the columns ``keys`` (a grid's rows differ in its fastest axes first), or None where that
    does not pay or does not hold: few rows or runs of about one row, or inputs held as arrays
    (one value per row)."""
    import numpy as np

    cols = [P[k] for k in keys if k in P]
    n = ts.rows_apart(cols, x)
    if not n:
        return None
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for c in cols:
        new[1:] |= c[1:] != c[:-1]
    run = np.cumsum(new) - 1
    if 2 * (int(run[-1]) + 1) > n:
        return None
    return np.flatnonzero(new), run


def wall_seconds(x: dict, seconds_per_token: Any) -> Any:
    """The run's wall time at ``seconds_per_token`` (its tokens over the goodput)."""
    return x["tokens"] * seconds_per_token / x["goodput"]


MEETS_TOLERANCE = 1e-9  # relative: a wall time this far over a deadline meets it (a float's last bits)


def meets(wall_s: Any, seconds: float) -> Any:
    """Whether a wall time meets a deadline of ``seconds`` (to the last bits of a float)."""
    return wall_s <= seconds * (1 + MEETS_TOLERANCE)


def search_deadline(x: dict, seconds: float, pins: dict, max_gpus: float) -> Searched:
    """Plans with the replicas that meet the deadline, by branch and bound on a lower bound of the
    GPUs each micro row needs (for the rate, and for memory); ``out['gpus']`` holds each plan's GPUs
    in whole systems. Micro rows are taken in order of that bound (``need``), a chunk at a time,
    until no row left can need fewer GPUs than the best plan found (:class:`_NeedOrder`: the order
    is built for the rows a cheaper bound cannot rule out, and grown when the search reaches its
    end). Within a chunk, a row is evaluated only where :func:`systems_need` (a tighter bound, from
    every term of the row) is within the bar too: the rows it drops could not have tied the plan
    found (issue 16: most of a large grid's rows past the first chunk need more systems)."""
    import numpy as np

    rate = x["tokens"] / (seconds * x["goodput"])
    P, m, tp = _micro(x, max_gpus, pins)
    sets = sets_pinned(pins)
    rows = _NeedOrder(P, m, x, rate, pins, max_gpus)
    parts, bar = [], np.inf
    tight = plain_inputs(x)  # (inputs held as arrays, one value per row: the order's bound alone)
    bound = np.zeros(len(P["tp"]))  # each row's systems_need, where computed (0: not)
    for start in range(0, len(P["tp"]), CHUNK):
        limit = min(bar, max_gpus)
        pos = rows.prefix(start + CHUNK, limit)
        if start >= len(pos) or not rows.need[pos[start]] <= limit:
            break
        idx = pos[start : start + CHUNK]
        idx = idx[~(rows.need[idx] > limit)]  # nor the chunk's rows past the bar
        sub = sr.take(P, idx)
        t = row_terms(sub, m, idx, x, tp if tight else None, sets)  # every term of each row
        if tight:  # nor the rows whose steps' whole systems cannot come within the bar
            bound[idx] = systems_need(sub, t, x, rate, pins)
        # the rows in order of that bound, a part at a time: the plans the first parts find set the
        # bar that skips the rest (issue 16: most of a first chunk's rows need more than its best)
        order = np.argsort(bound[idx], kind="stable") if tight else np.arange(len(idx))
        step = PART if tight else max(len(order), 1)
        for at in range(0, len(order), step):
            pick = order[at : at + step]
            pick = pick[~(bound[idx[pick]] > min(bar, max_gpus))]
            if not len(pick):
                continue
            M = _deadline_rows(sr.take(sub, pick), rows.d_low[idx[pick]], x, pins)
            M = sr.take(M, schedulable(M))  # a pinned micro-batch count some schedules cannot run
            M["row"] = pick[M["row"]]  # (the chunk's row)
            out = solve_replicas(M, index_terms(t, M["row"]), x, rate, pins)
            gpus = systems_gpus(M, x, M["tp"] * M["cp"] * M["pp"] * M["dp"])
            wall = wall_seconds(x, out["seconds_per_token"])
            ok = fits_memory(out, x) & meets(wall, seconds) & (gpus <= max_gpus)
            parts.append((M, {**out, "gpus": gpus, "wall_s": wall}, ok))
            if np.any(ok):
                bar = min(bar, float(gpus[ok].min()))
    s = _joined(parts)
    near = rows.known()  # every row that could need fewer GPUs than the bar, in grid order
    # GPUs below any plan of each row that meets the deadline: ``need``, and ``systems`` where a chunk
    # computed its systems_need (every row whose need is within the bar; else 0)
    s.extra = {
        "micro": (sr.take(P, near), index_terms(m, near), _tp_at(tp, near)),
        "need": rows.need[near],
        "systems": bound[near],
    }
    return s


class _NeedOrder:
    """The micro rows of a deadline search in order of ``need`` (GPUs: :func:`replicas_lower_bound`
    times tp cp pp) among the rows whose activations fit (:func:`memory_fit_rows`), ties in grid
    order, computed only as far as the search reads it. :func:`need_floor` bounds ``need`` from
    below at a fraction of its cost, so once the rows whose floor is at most ``tau`` are computed,
    the order of the rows whose need is at most ``tau`` is exact (``need`` of a row depends on that
    row alone); ``tau`` grows when the search asks for more. Where none of those rows fits, every
    row is computed, as the plain search does (which then keeps every row)."""

    def __init__(self, P: sr.Columns, m: dict, x: dict, rate: float, pins: dict, cap: float):
        import numpy as np

        self.P, self.m, self.x, self.rate, self.pins, self.cap = P, m, x, rate, pins, cap
        floor = sr.by_blocks(lambda Pb, mb: need_floor(Pb, mb, x, rate, pins), P, m)
        self.floor = np.where(np.isnan(floor), -np.inf, floor)  # no bound: computed first
        n = len(floor)
        self.need, self.d_low = np.full(n, np.inf), np.full(n, np.inf)
        self.done = np.zeros(n, dtype=bool)  # rows whose fit (and need, where they fit) is known
        self.fits = np.zeros(n, dtype=bool)
        self.tau = -np.inf
        self.order = np.empty(0, dtype=np.int64)  # the rows with need <= tau, in order

    def prefix(self, count: int, limit: float) -> Any:
        """The order's first ``count`` rows, or all of it where that holds every row whose need is
        at most ``limit``."""
        import numpy as np

        n = len(self.floor)
        while len(self.order) < count and self.tau < limit:
            ask = min(n, 4 * max(count, int(np.sum(self.done))))
            at = float(np.partition(self.floor, ask - 1)[ask - 1]) if ask < n else np.inf
            self._grow(min(at, limit))
        if len(self.order) < count and self.tau < np.inf:
            # past the rows computed, the plain order holds rows of need > tau, then any of need
            # NaN: those can reach a chunk only where fewer than ``count`` rows have a number
            fitting = self.fits & ~np.isnan(self.need)
            if np.sum(fitting) < count:
                self._whole()
        return self.order

    def _grow(self, tau: float) -> None:
        import numpy as np

        if tau >= np.max(self.floor):
            tau = np.inf
        rows = np.flatnonzero(~self.done & (self.floor <= tau))
        P, m = sr.take(self.P, rows), index_terms(self.m, rows)
        fits = memory_lower_bound(P, m, self.x, self.cap, self.pins) <= self.x["hbm_cap"]
        self.done[rows], self.fits[rows] = True, fits
        if not np.any(self.fits):  # none fits so far: the search then runs every row
            return self._whole() if tau == np.inf else self._grow(np.inf)
        on = np.flatnonzero(fits)
        P, m = sr.take(P, on), index_terms(m, on)
        d_low = replicas_lower_bound(P, m, self.x, self.rate, self.pins)
        self.d_low[rows[on]] = d_low
        self.need[rows[on]] = P["tp"] * P["cp"] * P["pp"] * d_low
        self._settle(tau)

    def _whole(self) -> None:
        """Every row, as the plain search: the fitting rows (all where none fits), then their need."""
        import numpy as np

        keep = memory_fit_rows(self.P, self.m, self.x, self.cap, self.pins)
        P, m = sr.take(self.P, keep), index_terms(self.m, keep)
        d_low = replicas_lower_bound(P, m, self.x, self.rate, self.pins)
        self.need[:], self.d_low[:] = np.inf, np.inf
        self.d_low[keep], self.need[keep] = d_low, P["tp"] * P["cp"] * P["pp"] * d_low
        self.done[:], self.fits[:] = True, False
        self.fits[keep] = True
        self._settle(np.inf)

    def _settle(self, tau: float) -> None:
        import numpy as np

        self.tau = tau
        rows = np.flatnonzero(self.fits)
        if tau < np.inf:
            rows = rows[self.need[rows] <= tau]
        self.order = rows[np.argsort(self.need[rows], kind="stable")]

    def known(self) -> Any:
        """Every fitting row whose need is at most ``tau``, in grid order."""
        import numpy as np

        return np.sort(self.order)


def fsdp_lower_bound(P: sr.Columns, m: dict, x: dict, pins: dict, memory: Any = None) -> Any:
    """Exposed FSDP gathers per micro-batch for rows whose weights alone do not fit unsharded (they
    must run FSDP): the weights' gathers (forward and backward) and the gradients' reduce-scatter
    (backward) beyond what the forward and backward hide, on the fewest replicas that hold the
    state (the shards' group is dp x cp: one replica shards over its context-parallel ranks), whose
    rings are the shortest a plan of the row can run (a ring's time grows with its group; until a
    review, 2026-12-05, they were priced on the most replicas, the longest, and the bound sat above
    real plans' times). ``memory``: :func:`replicas_for_memory` of the rows where the caller has it."""
    import numpy as np

    dense, expert = ts.params_per_gpu(P, x)
    acts = np.min([ts.activation_floor(m, rc) for rc in POLICIES], axis=0)
    weights = (dense + expert) * x["weight_mem_bytes"] + ts.plain_weight_bytes(P, x)
    must = weights + acts + m["logits_bytes"] > x["hbm_cap"]
    if pins.get("zero", 3) != 3:
        return 0.0 * must
    fewest = replicas_for_memory(P, m, x, pins) if memory is None else memory
    fewest = np.where(np.isfinite(fewest), np.maximum(fewest, 1.0), 1.0)
    rs, ag = ts.dp_seconds({**P, "dp": fewest}, x, (dense, expert))  # placement does not read dp
    exposed = np.maximum(0.0, ag - m["fwd_s"]) + np.maximum(0.0, ag + rs - m["bwd_s"])
    return np.where(must, exposed, 0.0)


def best_rate(d, t_mb, per_seq, w, B):
    """Tokens/s ``d`` replicas can reach at most: micro-batches of ``t_mb`` seconds, a bubble of ``w``
    of them per step, the batch penalty beyond ``B`` tokens, over every micro-batch count (relaxed
    to real numbers). Within the recipe batch the most micro-batches win; beyond it the best count
    is sqrt(w m1), m1 the count that fills the recipe batch."""
    import numpy as np

    m1 = B / (d * per_seq)
    within = np.where(m1 >= 1.0, B / ((m1 + w) * t_mb), 0.0)
    mb = np.maximum(np.sqrt(w * m1), np.maximum(m1, 1.0))
    beyond = 2.0 * d * per_seq / t_mb * mb / ((mb + w) * (1.0 + mb / m1))
    return np.maximum(within, beyond)


def replicas_lower_bound(
    P: sr.Columns, m: dict, x: dict, rate: float, pins: dict, more: Extras | None = None
) -> Any:
    """Fewest replicas a micro row could meet ``rate`` tokens/s with (:func:`best_rate` grows with
    the replicas), and at least the replicas that hold its state. Bracketed between the replicas
    that would meet the rate with no bubble (d mbs S / t_mb tokens/s) and, where one exists, the
    closed-form count that meets it within the recipe batch (B / ((B / (d mbs S) + w) t_mb) = rate);
    then bisection in log space, keeping the lower end (a lower bound, to 0.1 % or better): as
    many halvings as the widest bracket any row can have needs (:func:`widest_bracket`), so each
    row's bound depends on that row alone. ``more``: as :func:`replicas_bracket` takes it."""
    b = replicas_bracket(P, m, x, rate, pins, more)
    return bisect_replicas(b, _bisections(widest_bracket(x)))


Extras = Callable[[Any], tuple[Any, Any]]  # a micro row's FSDP bound -> (seconds a micro-batch, a step)


def replicas_bracket(
    P: sr.Columns, m: dict, x: dict, rate: float, pins: dict, more: Extras | None = None, known: Any = None
) -> dict[str, Any]:
    """:func:`replicas_lower_bound` before its bisection: the replicas that hold the state, and for
    the rows that hold it and reach the rate (``live``) the bracket (``lo``, ``hi``: log replicas)
    and what :func:`best_rate` needs. ``more``: seconds every micro-batch and every step take
    beyond the bound's (:func:`_step_extras`; a step's seconds of its own count as bubble). The
    bubble, in micro-batch times t_mb, runs no FSDP gathers (:func:`plan_lower_bound`): a step of
    mb micro-batches takes at least mb t_mb + w (t_mb - fsdp) + its own seconds. ``known``: the
    ``memory`` and ``fsdp`` (:func:`fsdp_lower_bound`) of a bracket of the same rows, where the
    caller has them."""
    import numpy as np

    memory = replicas_for_memory(P, m, x, pins) if known is None else known["memory"]
    per_seq = P["mbs"] * x["seq"]
    fsdp = fsdp_lower_bound(P, m, x, pins, memory) if known is None else known["fsdp"]
    t_mb = m["fwd_s"] + m["bwd_s"] + fsdp
    per_step = 0.0
    if more is not None:
        per_mb, per_step = more(fsdp)
        t_mb = t_mb + per_mb
    w = ts.bubble_bound(P) * ((t_mb - fsdp) / t_mb) + per_step / t_mb
    B = x["recipe_batch"]
    lo = np.log(np.maximum(rate * t_mb / per_seq, 1.0))
    room = B / (rate * t_mb) - w  # micro-batches per step left within the recipe batch, at the rate
    d_within = np.where(room > 0, B / (per_seq * np.where(room > 0, room, 1.0)), np.inf)
    within_ok = d_within <= B / per_seq  # at least one micro-batch per replica
    hi = np.where(within_ok, np.log(np.maximum(d_within, np.exp(lo))), lo + np.log(2.0) * 40)
    reach = within_ok | (best_rate(np.exp(hi), t_mb, per_seq, w, B) >= rate)
    live = np.flatnonzero(reach & np.isfinite(memory))  # rows that hold their state and reach the rate
    return {
        "memory": memory, "fsdp": fsdp, "live": live, "lo": lo[live], "hi": hi[live], "t_mb": t_mb[live],
        "per_seq": per_seq[live], "w": w[live], "B": B, "rate": rate,
    }  # fmt: skip


def bisect_replicas(b: dict[str, Any], steps: int) -> Any:
    """The lower end of each live bracket of :func:`replicas_bracket` after ``steps`` bisections
    (inf where a row is not live), and at least the replicas that hold the state."""
    import numpy as np

    lo, hi, t_mb, per_seq, w, B, rate = b["lo"], b["hi"], b["t_mb"], b["per_seq"], b["w"], b["B"], b["rate"]
    d = np.full(len(b["memory"]), np.inf)
    for _ in range(steps):
        mid = (lo + hi) / 2.0
        ok = best_rate(np.exp(mid), t_mb, per_seq, w, B) >= rate
        lo, hi = np.where(ok, lo, mid), np.where(ok, mid, hi)
    d[b["live"]] = np.exp(lo)
    return np.maximum(d, b["memory"])


def _step_extras(P: sr.Columns, t: dict, x: dict) -> Extras:
    """What every plan of a micro row takes beyond :func:`replicas_bracket`'s step, (m + w) t_mb, as
    a function of the row's FSDP bound: (seconds a micro-batch, seconds a step). Every step pays the
    fixed time (``step_fixed_s``). Megatron's 1F1B expert overlap (``a2a_gain_s``, :func:`~ipd_cli.
    engine.trainstep.unpaired_share`) loses its gain on the chunks that run alone: every
    micro-batch's without a pipeline's interleaving or DualPipe (pp > 1, vp 1: no chunk is paired),
    and otherwise a step's worth of micro-batches that no micro-batch count goes below: one without
    a pipeline (the first forward and last backward); interleaved, a warmup of W = 2 (pp - 1) +
    (vp - 1) pp + 1 chunks of 1/vp, or all mb vp where fewer, and mb >= pp (the schedule's
    groups: :func:`_aligned`), so min(W, mb vp) / vp >= pp since W >= pp vp; DualPipe,
    min(1.5 pp - 1, mb) >= 1.5 pp - 1 of them (mb >= 2 pp). (Until issue 16's review, one
    micro-batch's worth in every case.) A row whose bound prices FSDP gathers gets no more: the
    gathers hide behind those chunks' all-to-alls (:func:`~ipd_cli.engine.trainstep.step`), so the
    two cannot be added."""
    import numpy as np

    gain = np.maximum(t["a2a_gain_s"], 0.0)  # (a recompute policy adds to it, never takes)
    dual = np.asarray(ts.dualpipe(P))
    alone = (P["pp"] > 1) & (P["vp"] == 1) & ~dual
    pp = P["pp"]
    units = np.where(dual, 1.5 * pp - 1.0, np.where(pp == 1, 1.0, np.where(P["vp"] > 1, pp, 1.0)))

    def more(fsdp: Any) -> tuple[Any, Any]:
        lost = np.where(fsdp > 0, 0.0, gain)
        return np.where(alone, lost, 0.0), np.where(alone, 0.0, units * lost) + x["step_fixed_s"]

    return more


def _step_floors(P: sr.Columns, t: dict, x: dict, more: Extras, d: Any) -> Extras:
    """``more`` (:func:`_step_extras`) with the time every step of a micro row on at least ``d``
    replicas takes beyond it: the tensor-parallel gradient all-reduce
    (:func:`~ipd_cli.engine.trainstep.tp_grad_seconds`, the row's alone) and a floor of the
    data-parallel time the step cannot hide (:func:`~ipd_cli.engine.trainstep.dp_exposed_seconds`)
    at ``d`` replicas (the rings' seconds rs and ag grow with the group: the plan's are at least
    these): the last layer's bucket (rs + ag) / Ls under every stage (FSDP's mb (2 ag + rs) / Ls is
    more), and, on a row whose bound prices no FSDP gathers, the share min(1, tax) of rs and ag
    that any overlap window leaves (exposed(c, w) = max(0, c - w) + tax min(c, w) >= min(1, tax) c;
    ZeRO-2 and FSDP expose each at least once). A row with FSDP's bound keeps the bucket alone (its
    gathers' exposure is in the bound already)."""
    import numpy as np

    at = {**P, "dp": np.where(np.isfinite(d), np.maximum(d, 1.0), 1.0)}
    rs, ag = ts.dp_seconds(at, x)
    bucket = (rs + ag) / t["stage_layers"]
    hidden = min(1.0, x["overlap_tax"]) * (rs + ag)
    tp_grad = ts.tp_grad_seconds(P, x)

    def floors(fsdp: Any) -> tuple[Any, Any]:
        per_mb, per_step = more(fsdp)
        return per_mb, per_step + tp_grad + bucket + np.where(fsdp > 0, 0.0, hidden)

    return floors


# systems_need's rounding of its replicas bound up to a whole grain. NEED_MARGIN (relative) takes the
# bound down first, so that a row whose plans meet the deadline only within MEETS_TOLERANCE, or whose
# bound lands a float's last bits above a whole grain, is not rounded up a grain: 1,000 times
# meets()'s tolerance, and safe at any size, since a lower bound taken lower only skips fewer rows.
# REPLICAS_CAP clips the bound (inf where no plan reaches the rate; those rows are set back to inf)
# to a finite count, far above any cluster (MAX_CLUSTER GPUs) and below 2^53, so float64 still holds
# each whole number the rounding gives.
NEED_MARGIN = 1e-6
REPLICAS_CAP = 1e15


def systems_need(P: sr.Columns, t: dict, x: dict, rate: float, pins: dict) -> Any:
    """GPUs, in whole systems, below every plan of each micro row that meets ``rate`` tokens/s
    (``t``: every micro term of the rows, :func:`~ipd_cli.engine.trainstep.micro_terms`): the
    replicas of :func:`replicas_lower_bound` with the time :func:`_step_extras` adds, then again
    with the floors of :func:`_step_floors` at those replicas (the plans run on more: issue 16,
    the rows solved past the first chunk all ended above the bar, by their data-parallel time
    among others), rounded up to a whole step of replicas (:func:`_replica_step`) and to the
    systems they span (:func:`systems_gpus`, which grows with the GPUs used). inf where no plan
    reaches the rate."""
    import numpy as np

    more, steps = _step_extras(P, t, x), _bisections(widest_bracket(x))
    b = replicas_bracket(P, t, x, rate, pins, more)
    d = bisect_replicas(b, steps)  # (replicas_lower_bound's)
    d = np.maximum(
        d, bisect_replicas(replicas_bracket(P, t, x, rate, pins, _step_floors(P, t, x, more, d), b), steps)
    )
    grain = _replica_step(P)
    # (a plan meets the deadline to the last bits of a float: a margin below the bisection's end)
    dp = np.ceil(np.minimum(d, REPLICAS_CAP) * (1.0 - NEED_MARGIN) / grain) * grain
    used = P["tp"] * P["cp"] * P["pp"] * np.maximum(dp, grain)
    return np.where(np.isfinite(d), systems_gpus(P, x, used), np.inf)


def _bisections(width: float) -> int:
    """Bisections that narrow a bracket ``width`` wide (in log replicas) to 1e-3 (at most 24)."""
    import numpy as np

    if not np.isfinite(width):  # a bracket past any float (1e300 tokens): bisect to the end
        return 24
    return min(int(np.ceil(np.log2(max(width, 1e-3) / 1e-3))), 24)


def widest_bracket(x: dict) -> float:
    """No row's bracket in :func:`replicas_lower_bound` is wider: 40 doublings where no count
    within the recipe batch meets the rate, else from the no-bubble count (at least one replica)
    to the most replicas of one sequence the recipe batch holds (with a margin for rounding)."""
    return max(40.0 * math.log(2.0), math.log(max(x["recipe_batch"] / x["seq"], 1.0))) + 1e-6


def need_floor(P: sr.Columns, m: dict, x: dict, rate: float, pins: dict) -> Any:
    """GPUs below the ``need`` of :func:`search_deadline` (tp cp pp times
    :func:`replicas_lower_bound`) at a fraction of its cost: no micro row's memory test, exposed
    FSDP gathers or bisection. With t = fwd + bwd (at most t_mb), a row needs at least the
    replicas of the no-bubble rate (d mbs S / t tokens/s), the replicas that hold its training
    state with no activations (:func:`replicas_for_state`), and the fewer of: the closed-form
    count within the recipe batch (B / ((B / (d mbs S) + w) t) = rate, while B / (d mbs S) >= 1),
    and beyond it the count where :func:`best_rate`'s bound over every real micro-batch count,
    2 (B / t) s^2 / (1 + sqrt(w) s)^2 with s^2 = d mbs S / B, reaches the rate. Less a margin for
    the bisection's 1e-3 and for rounding."""
    import numpy as np

    per_seq = P["mbs"] * x["seq"]
    t = m["fwd_s"] + m["bwd_s"]
    w = ts.bubble_bound(P)
    B = x["recipe_batch"]
    room = B / (rate * t) - w
    within = np.where(room > 0, B / (per_seq * np.where(room > 0, room, 1.0)), np.inf)
    within = np.where(within <= B / per_seq, within, np.inf)
    k = np.sqrt(2.0 * B / (t * rate)) - np.sqrt(w)
    beyond = np.where(k > 0, B / (per_seq * np.where(k > 0, k, 1.0) ** 2), np.inf)
    rate_d = np.maximum(np.maximum(rate * t / per_seq, 1.0), np.minimum(within, beyond) * np.exp(-2e-3))
    state_d = replicas_for_state(P, x, pins, x["hbm_cap"])
    return P["tp"] * P["cp"] * P["pp"] * np.maximum(rate_d, state_d) * (1.0 - 1e-9)


def _deadline_rows(P: sr.Columns, d_low: Any, x: dict, pins: dict) -> sr.Columns:
    """Each micro row twice: micro-batches filling the recipe batch, or just beyond it (re-derived as
    dp is solved); dp starts at the row's lower bound."""
    import numpy as np

    fills = (1.0,) if "mb" in pins or "gbs" in pins else (1.0, 2.0)
    n = len(P["tp"])
    row = np.repeat(np.arange(n), len(fills))
    cols = {key: v[row] for key, v in P.items()}
    cols.update(dp=np.maximum(np.ceil(np.minimum(d_low, 1e9)), 1.0)[row], fill=np.tile(fills, n), row=row)
    cols["mb"] = np.full(len(row), float(pins.get("mb", 1))) if "mb" in pins else _fill(cols, x)
    return cols


# --- results: the chosen plan, named ----------------------------------------------------------------

PLAN_COLS = (
    "tp",
    "cp",
    "pp",
    "vp",
    "ep",
    "dp",
    "mbs",
    "mb",
    "rc",
    "zero",
    "order",
    "sched",
    "disp",
    "a2ao",
    "graph",
)
ZERO_NAMES = ("", ", ZeRO-1", ", ZeRO-2", ", FSDP")


def plan_of(s: Searched, i: int) -> dict[str, int]:
    return plan_of_cols({k: s.cols[k][i] for k in PLAN_COLS})


def plan_of_cols(cols: dict[str, float]) -> dict[str, int]:
    """A plan's fields from one row's columns as plain numbers (the 1F1B expert overlap named only
    where its schedule pairs a chunk with another micro-batch's and there is an all-to-all to
    hide: :func:`~ipd_cli.engine.trainstep.unpaired_share` below 1)."""
    p = {k: int(cols[k]) for k in PLAN_COLS}
    p["a2ao"] = int(a2a_overlap_named(p))  # one mb: 1
    return p


def a2a_overlap_named(p: Any) -> Any:
    """Whether a plan's 1F1B expert overlap is named (numbers or arrays of plans): asked for, with an
    all-to-all to hide (EP > 1) and a schedule that pairs a chunk with another micro-batch's
    (:func:`~ipd_cli.engine.trainstep.unpaired_share` below 1)."""
    return (p["a2ao"] == 1) & (p["ep"] > 1) & (ts.unpaired_share(p) < 1.0)


def plan_name(p: dict[str, int]) -> str:
    """``TP4 PP8 (interleave 4) DP64 EP8 CP2, mbs 1, selective recompute, ZeRO-1`` (policy 0:
    ``no recompute``); a MoE plan run without CUDA graphs over its routing says so."""
    stages = f" (interleave {p['vp']})" if p["vp"] > 1 else " (DualPipe)" if p.get("sched") == 1 else ""
    parts = [f"TP{p['tp']}", f"PP{p['pp']}{stages}"]
    parts.append(f"DP{p['dp']}")
    if p["ep"] > 1:
        how = [
            name for name, on in (("DeepEP", p.get("disp") == 1), ("a2a overlap", p.get("a2ao") == 1)) if on
        ]
        parts.append(f"EP{p['ep']}" + (f" ({', '.join(how)})" if how else ""))
    if p["cp"] > 1:
        parts.append(f"CP{p['cp']}")
    names = ("no recompute", "selective recompute", "full recompute", "activations offloaded to host")
    sets = p["rc"] >= ts.SET_BASE
    memory = f"selective recompute ({', '.join(recompute_modules(p['rc']))})" if sets else names[p["rc"]]
    text = f"{' '.join(parts)}, mbs {p['mbs']}, {memory}{ZERO_NAMES[p['zero']]}"
    text += ", pipeline inside the scale-up domain" if p["order"] == 1 else ""
    return text + (", no CUDA graphs" if p.get("graph", 1) == 0 and p["ep"] > 1 else "")


def routing_text(pins: dict) -> str:
    """What a plan's name adds for its MoE routing: nothing for dropless routing (the default), else
    ``, padded token drop`` (the routing is a run pin, not a plan column)."""
    return ", padded token drop" if pins.get("drop", 0) == 1 else ""


def pins_text(pins: dict) -> str:
    names = {v: k for k, v in PIN_KEYS.items() if k in ("tp", "cp", "pp", "vp", "ep", "dp", "mbs", "gbs")}
    names.update({col: key for col, (key, _) in NAMED.items()})
    text = {col: values for col, (_, values) in NAMED.items()}

    def value(k: str, v: int) -> Any:
        return recompute_name(v) if k == "rc" else text[k][v] if k in text else v

    return ",".join(f"{names.get(k, k)}={value(k, v)}" for k, v in pins.items())


@dataclass
class Choice:
    """One evaluated plan: its columns and step outputs as plain numbers."""

    plan: dict[str, int]
    out: dict[str, float]
    gpus: int  # GPUs paid for (the cluster; a plan may leave some idle)

    @property
    def gpus_used(self) -> int:
        p = self.plan
        return p["tp"] * p["cp"] * p["pp"] * p["dp"]

    @property
    def name(self) -> str:
        return plan_name(self.plan)


def choice(s: Searched, i: int, gpus: int) -> Choice:
    out = {k: float(v[i]) for k, v in s.out.items() if not isinstance(v, tuple)}
    return Choice(plan_of(s, i), out, gpus)


@dataclass
class Found:
    """The chosen plan, the runners-up (best first) and how many plans were evaluated."""

    best: Choice
    top: list[Choice]
    evaluated: int
    # deadline mode: the wall seconds of the fastest plans on the cluster that ``top`` leaves out
    # because they miss the deadline (runners-up asked for and not listed)
    missed_wall_s: tuple[float, ...] = ()


def find_fixed(x: dict, gpus: int, pins: dict, top: int = 1, label: str = "GPUs") -> Found:
    """The fastest plan on a cluster of ``gpus`` GPUs (it may leave some idle)."""
    s = search_fixed(x, gpus, pins, keep=max(top, 1))
    b = best_row(s)
    if b is None:
        raise InfeasibleError(no_plan_message(x, s, gpus, pins, label))
    return Found(choice(s, b, gpus), [choice(s, i, gpus) for i in top_rows(s, top)], len(s))


def find_deadline(x: dict, seconds: float, pins: dict, max_gpus: float, top: int = 1) -> Found:
    """The fewest GPUs, in whole systems, with a plan that meets the deadline; then the fastest plan
    on that cluster."""
    import numpy as np

    if "gbs" in pins or "dp" in pins:  # the grid is small: enumerate it on an unbounded cluster
        s = search_fixed(x, int(max_gpus), pins, exhaustive=True)
        used = s.cols["tp"] * s.cols["cp"] * s.cols["pp"] * s.cols["dp"]
        s.out["gpus"] = systems_gpus(s.cols, x, used)
        s.out["wall_s"] = wall_seconds(x, s.seconds_per_token)
        s.space.require("meets the deadline", meets(s.out["wall_s"], seconds))
    else:
        s = search_deadline(x, seconds, pins, max_gpus)
    ok = s.space.feasible
    if not np.any(ok):
        return None  # type: ignore[return-value]
    idx = np.flatnonzero(ok)
    i = int(idx[np.lexsort((s.out["wall_s"][idx], s.out["gpus"][idx]))[0]])
    gpus = int(s.out["gpus"][i])
    # the fastest plan on that cluster: the deadline's plan runs there, so nothing slower is searched;
    # a faster one meets the deadline too, so its micro row needs at most that many GPUs (``need``,
    # and the systems_need of the rows the search priced: those it would skip at that bar)
    known, micro = (float(s.seconds_per_token[i]), None) if top <= 1 else (math.inf, None)
    if known < math.inf and "micro" in s.extra:
        near = (s.extra["need"] <= gpus) & ~(s.extra["systems"] > gpus)
        P, m, tp = s.extra["micro"]
        micro = sr.take(P, near), index_terms(m, near), _tp_at(tp, near)
    f = search_fixed(x, gpus, pins, keep=max(top, 1), bar=known, micro=micro)
    b = best_row(f)
    best = choice(f, b, gpus) if b is not None else None
    if best is None or best.out["seconds_per_token"] > s.seconds_per_token[i]:
        best = choice(s, i, gpus)
    # the runners-up that meet the deadline too (a fresh-eyes audit: `--plans` listed plans of 90.02
    # to 91.09 days for a 90-day deadline, unmarked)
    walls = {j: float(wall_seconds(x, f.seconds_per_token[j])) for j in top_rows(f, top)}
    kept = [j for j, wall in walls.items() if meets(wall, seconds)]
    missed = tuple(wall for j, wall in walls.items() if j not in kept)
    return Found(best, [choice(f, j, gpus) for j in kept], len(f) + len(s), missed)


def min_gpus_for_memory(x: dict) -> int:
    """The smallest cluster that can hold the training state: weights, gradients and optimizer state
    sharded over every GPU (FSDP) plus one sequence's full-recompute checkpoints (a lower bound: the
    weights at the fewer of their bytes kept whole, ``weight_mem_bytes``, and sharded, where a GPU
    whose FP8 GEMMs take any layout keeps per-tensor FP8 weights whole at 1 B, a review)."""
    spared = max(0.0, x["weight_bytes"] - x["weight_mem_bytes"])
    per_param = x["state_bytes"] - spared
    state = x["total"] * per_param + x["seq"] * x["hidden"] * x["layers"] * x["act_bytes"]
    return max(1, math.ceil(state / x["hbm_cap"]))


def no_plan_message(x: dict, s: Searched, gpus: int, pins: dict, label: str) -> str:
    """Why nothing runs, and the nearest plan that does (fewest pins dropped)."""
    import numpy as np

    where = f"on {counted(gpus, label)}"
    first: list[dict] = []
    routing = routing_text(pins)  # the nearest plan routes as the run does (a code review)
    # the FP8 recipe and the TP overlap price the step (in x), they constrain no layout: named
    # neither as a pin a plan failed nor as one to drop
    pins = {k: v for k, v in pins.items() if k not in RUN_PINS}
    if len(s) == 0:
        broken = pin_rule(x, pins)
        if broken is not None:
            why, moved = broken
            first = [moved]
        else:
            why = cluster_rule(gpus, pins, label) or "degrees or global batch do not divide"
        what = f"no plan{' with `plan` ' + pins_text(pins) if pins else ''} fits {where}: {why}"
    else:
        least = float(np.min(s.out["memory_bytes"]))
        what = (
            f"no plan{' with `plan` ' + pins_text(pins) if pins else ''} fits {where}: the smallest "
            f"needs {gb_text(least)} GB per GPU, {gb_text(x['hbm_cap'])} GB usable"
        )
    near = nearest_plan(x, gpus, pins, first)
    if near is not None:
        return f"{what}; nearest feasible plan: {near}{routing}"
    need = smallest_cluster(x, gpus)
    if need is None:
        return f"{what}; no cluster holds it: give a smaller model or more memory per GPU"
    return f"{what}; the training state needs at least {counted(need)}; got `gpus` {gpus:,}"


MAX_CLUSTER = 100_000_000  # GPUs: the largest cluster smallest_cluster asks about
SMALLEST_CLUSTER_STEPS = 3  # steps of 1.25x above the memory floor before it asks the largest


def smallest_cluster(x: dict, gpus: int) -> int | None:
    """The fewest GPUs with a plan that fits (more GPUs only add plans): from the memory floor,
    grow by a quarter until one fits, then bisect."""
    import numpy as np

    def fits(n: int) -> bool:
        return bool(np.any(search_fixed(x, n, {}).space.feasible))

    lo, hi = max(gpus, min_gpus_for_memory(x) - 1), max(gpus + 1, min_gpus_for_memory(x))
    tries = 0
    while not fits(hi):
        lo, hi, tries = hi, math.ceil(hi * 1.25), tries + 1
        # where a few steps above the memory floor hold nothing, the largest cluster is asked once:
        # a state no cluster holds (0.9 GB usable per GPU for the 10T MoE) took ~29 searches, 23 s
        if hi > MAX_CLUSTER or (tries == SMALLEST_CLUSTER_STEPS and not fits(MAX_CLUSTER)):
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def pin_rule(x: dict, pins: dict) -> tuple[str, dict] | None:
    """The rule of the grid a pinned degree breaks on any cluster (tensor parallelism inside one
    scale-up domain, at most MAX_TP, splitting the heads, KV heads and FFN evenly; expert parallelism dividing
    the routed experts; context parallelism at most half the sequence; no more pipeline stages than
    layers, no more model chunks pp x vp than
    ``max_chunks``), and the pins with that degree moved
    to the nearest value the rule allows below it; None where every pinned degree is one the grid
    has."""
    heads, domain, layers = int(x["heads"]), int(x["domain"]), int(x["layers"])
    tp = pins.get("tp")
    if tp is not None:
        allowed = [t for t in tensor_degrees(x) if t <= min(MAX_TP, domain)]
        if tp not in allowed:
            kv, ffn = int(x["kv_heads"]), int(x["ffn_given"] or 0)
            expert = int(x.get("expert_ffn_given") or 0)
            if tp > domain:
                why = (
                    f"tensor parallelism stays inside one scale-up domain ({domain:,} GPUs here), "
                    f"tp={tp} does not"
                )
            elif tp > MAX_TP:
                why = f"tensor parallelism goes up to tp={MAX_TP}"
            elif heads % tp:
                why = f"tensor parallelism divides the {heads} attention heads, tp={tp} does not"
            elif kv % tp and tp % kv:
                why = (
                    f"tensor parallelism divides the {kv} KV heads or is a multiple of them, "
                    f"tp={tp} is neither"
                )
            elif ffn % tp:
                why = f"tensor parallelism divides the FFN width {ffn:,}, tp={tp} does not"
            else:
                why = f"tensor parallelism divides the expert FFN width {expert:,}, tp={tp} does not"
            return why, {**pins, "tp": max(t for t in allowed if t <= tp)}
    ep = pins.get("ep")
    if ep is not None and x["is_moe"] and int(x["experts"]) % ep:
        why = f"expert parallelism divides the {int(x['experts'])} routed experts, ep={ep} does not"
        return why, {**pins, "ep": max(e for e in divisors(int(x["experts"])) if e <= ep)}
    cp, seq = pins.get("cp"), int(x["seq"])
    if cp is not None and 2 * cp > seq:  # load-balanced CP: two chunks of each sequence per rank
        why = (
            f"context parallelism gives each rank two chunks of the {seq:,}-token sequence: "
            f"cp={cp} is more than half of it"
        )
        return why, {**pins, "cp": max(c for c in context_degrees(seq) if c <= cp)}
    pp = pins.get("pp")
    if pp is not None and pp > layers:
        why = f"every pipeline stage holds a layer: pp={pp} is more than the {layers} layers"
        return why, {**pins, "pp": layers}
    vp, most = pins.get("vp"), max_chunks(layers)
    if vp is not None and vp > 1 and pp == 1:
        return "interleaving splits each pipeline stage: vp > 1 needs pp >= 2", {**pins, "vp": 1}
    stages = pins.get("pp", 2)  # unpinned: the smallest pipeline that interleaves
    if vp is not None and stages * vp > most:
        why = (
            "every model chunk holds a layer (the embedding and the loss count as one each): "
            f"pp x vp = {stages} x {vp} = {stages * vp:,} is more than the {layers} layers + 2"
        )
        fits = [v for v in divisors(math.ceil(layers / stages)) if stages * v <= most]
        return why, {**pins, "vp": max(fits)}
    return None


def cluster_rule(gpus: int, pins: dict, label: str = "GPUs") -> str | None:
    """Where the pinned degrees need more GPUs than the cluster has: tp x cp x pp (x dp) > gpus."""
    need = math.prod(pins.get(k, 1) for k in ("tp", "cp", "pp", "dp"))
    if need <= gpus:
        return None
    pinned = ", ".join(f"{k}={pins[k]:,}" for k in ("tp", "cp", "pp", "dp") if k in pins)
    return f"tp x cp x pp x dp is at least {counted(need, label)} ({pinned}), more than the {gpus:,} given"


def nearest_plan(x: dict, gpus: int, pins: dict, first: list[dict] | None = None) -> str | None:
    """The best plan that keeps ``first``'s pins (each tried in turn), else all pins but one (each
    tried in turn), else the best unpinned one."""
    tries = [{k: v for k, v in pins.items() if k != drop} for drop in pins] + [{}] if pins else []
    tries = [*(first or []), *tries]
    for kept in tries:
        s = search_fixed(x, gpus, kept)
        b = best_row(s)
        if b is not None:
            return plan_name(plan_of(s, b))
    return None


# --- every cluster size at once: the fastest plan on at most T GPUs, for all T up to a cap ---------


@dataclass
class BySize:
    """Feasible plans sorted by the GPUs they use, with the fastest among the first k (a plan that
    runs on u GPUs runs on any cluster of T >= u, leaving T - u idle): the best plan of every
    cluster size up to the cap, from one search."""

    s: Searched
    used: Any  # GPUs each feasible plan uses, ascending
    rows: Any  # rows[k]: the fastest plan among those using at most used[k] GPUs

    def best(self, gpus: float) -> int | None:
        """The row of the fastest plan on ``gpus`` GPUs, or None when none fits."""
        import numpy as np

        k = int(np.searchsorted(self.used, gpus, side="right")) - 1
        return None if k < 0 else int(self.rows[k])

    @property
    def min_gpus(self) -> int | None:
        """The smallest cluster with a plan that fits."""
        return int(self.used[0]) if len(self.used) else None

    def compact(self) -> BySize:
        """The same answers (:meth:`best`, :attr:`min_gpus`, and the plans at the rows :meth:`best`
        gives) from the plans :meth:`best` can give alone, renumbered, and the last entry of each
        GPU count (the one its lookup lands on): a table a process keeps, at a few kB where the
        whole search held 0.1 to 30 MB."""
        import numpy as np

        if len(self.used) == 0:
            return self
        last = np.flatnonzero(np.append(self.used[1:] != self.used[:-1], True))
        keep, rows = np.unique(self.rows[last], return_inverse=True)
        s = self.s
        cols = {k: v[keep] for k, v in s.cols.items()}
        out = {k: v[keep] for k, v in s.out.items()}
        spt = None if s.seconds_per_token is None else s.seconds_per_token[keep]
        return BySize(Searched(cols, out, sr.Space(cols), spt), self.used[last], rows.reshape(-1))


def search_sizes(x: dict, cap: int, pins: dict) -> BySize:
    """The fastest plan on every cluster size up to ``cap`` GPUs, for a pinned global batch (an RL
    trainer: ``gbs`` in pins, so every plan moves the same tokens per step). Branch and bound over
    micro rows in order of their lower bound at ``cap``: each row's plans take a data-parallel
    degree d that divides the batch, at least the replicas that hold its state, so they use
    tp cp pp d GPUs and take at least t_mb (ceil(gbs / (d mbs)) + w) / tokens seconds per token;
    a row is dropped once, for every such d, that bound is no better than the best plan already
    found on that many GPUs (which is at least as good as the best on any larger cluster). The
    bound falls as d grows, so a row's best bound is at its largest degree and its fewest GPUs at
    its smallest: that test runs on every pending row, the one per degree only on the survivors.
    Within a chunk, a plan is evaluated only where it could hold its state and its own bound
    (:func:`sizes_plan_bound`) is within the best found on its GPUs (issue 16: two thirds of the
    plans priced did not fit in HBM)."""
    import numpy as np

    P, m, deg, memory, tp_both = _sizes_grid(x, cap, pins)
    sets = sets_pinned(pins)
    fsdp = fsdp_lower_bound(P, m, x, pins, memory)
    lb = lower_bound_seconds_per_token(P, m, x, cap, pins, fsdp)
    base = P["tp"] * P["cp"] * P["pp"]
    gbs = float(pins["gbs"])
    terms = sizes_row_terms(P, m, fsdp, x, gbs)

    def bound(d, rows):  # seconds per token (objective) no plan of the rows on d replicas beats
        return sizes_row_bound(terms, d, rows)

    rows = np.arange(len(base))
    lb_min, gpus_min = bound(deg.top, rows), base * deg.least  # the best bound, and the fewest GPUs
    order = rows[np.argsort(lb, kind="stable")]
    # the GPUs used, tp cp pp d, are looked up per distinct tp cp pp (a handful) and degree, not
    # per row and degree
    bases = sr.distinct(base)
    parts: list = []
    used, best = np.empty(0), np.empty(0)  # GPUs used, ascending, and the best plan on so many

    def kept(cand: Any) -> Any:
        """Whether each row of ``cand`` could still beat the best plan found: first against the
        best on its fewest GPUs, then per degree (an unusable degree's bound is inf)."""
        k = np.searchsorted(used, gpus_min[cand], side="right") - 1
        ok = lb_min[cand] < np.where(k >= 0, best[np.maximum(k, 0)], np.inf)
        live = cand[ok]
        lb_of = np.where(deg.usable(live), bound(deg.ds, live[:, None]), np.inf)
        k = np.searchsorted(used, bases[:, None] * deg.ds, side="right") - 1
        bar = np.where(k >= 0, best[np.maximum(k, 0)], np.inf)[np.searchsorted(bases, base[live])]
        ok[ok] = np.any(lb_of < bar, axis=1)
        return ok

    def next_chunk(start: int) -> tuple[Any, int]:
        """The next CHUNK rows, from position ``start`` of the order, that could beat the best
        found, and where the order goes on after them. The best found only improves, so a row
        dropped now would be dropped at any later chunk, and a row kept now was kept at every
        earlier one: testing the rows as they are reached (each about once) takes the chunks
        that testing every pending row after each chunk took, at a fraction of its cost."""
        if not len(used):  # nothing found yet: nothing to test against
            return order[start : start + CHUNK], start + CHUNK
        got: list = []
        count = 0
        while start < len(order) and count < CHUNK:
            cand = order[start : start + 2 * (CHUNK - count) + 256]
            at = np.flatnonzero(kept(cand))[: CHUNK - count]
            got.append(cand[at])
            count += len(at)
            # past the last row taken (those after it are tested again with the next chunk's best)
            start += int(at[-1]) + 1 if count == CHUNK else len(cand)
        return np.concatenate(got) if got else order[:0], start

    tight = plain_inputs(x)  # (inputs held as arrays, one value per row: the rows' bounds alone)
    start = 0
    while start < len(order):
        idx, start = next_chunk(start)
        if not len(idx):
            break
        sub = sr.take(P, idx)
        t = row_terms(sub, m, idx, x, tp_both if tight else None, sets)  # every term of each micro row
        # (where the rows are priced alone, the plans on fewer replicas than hold the state,
        # which :func:`_sizes_plans_kept` drops, are not built: three fifths of the candidates)
        M = expand(sub, x, cap, pins, deg.fit[idx] if tight else None)
        if tight:  # nor the plans that cannot hold the state or beat the best found on their GPUs
            kept_plans = _sizes_plans_kept(M, sub, t, x, fsdp[idx], deg.fit[idx], used, best)
            M = sr.take(M, np.flatnonzero(kept_plans))
            if not len(M["dp"]):
                continue
        out = evaluate(M, index_terms(t, M["row"]), x, pins)
        fits = fits_memory(out, x)
        parts.append((M, out, fits))
        used = np.concatenate([used, (M["tp"] * M["cp"] * M["pp"] * M["dp"])[fits]])
        best = np.concatenate([best, objective(out)[fits]])
        o = np.argsort(used, kind="stable")
        used, best = used[o], np.minimum.accumulate(best[o])
    return by_size(_joined(parts))


def sizes_row_terms(P: sr.Columns, m: dict, fsdp: Any, x: dict, gbs: float) -> dict[str, Any]:
    """What :func:`sizes_row_bound` reads of the micro rows ``P`` (``m``: their grid terms;
    ``fsdp``: their :func:`fsdp_lower_bound`) at a pinned global batch of ``gbs`` sequences."""
    tokens = gbs * x["seq"]
    return {
        "t": m["fwd_s"] + m["bwd_s"], "fsdp": fsdp, "w": ts.bubble_bound(P), "fwd": m["fwd_s"],
        "mbs": P["mbs"], "gbs": gbs, "tokens": tokens, "penalty": batch_penalty(tokens, x),
        "rho": x.get("forward_weight", 0.0),
    }  # fmt: skip


def sizes_row_bound(b: dict[str, Any], d: Any, rows: Any) -> Any:
    """Seconds per token (:func:`search_sizes`' objective) no plan of the micro rows ``rows`` on
    ``d`` replicas beats (``b``: :func:`sizes_row_terms`): mb = gbs / (d mbs) micro-batches of
    fwd + bwd + FSDP's exposure, a bubble of w micro-batches of fwd + bwd (the bubble runs no FSDP
    gathers: :func:`plan_lower_bound`; until issue 16's review (mb + w)(fwd + bwd + fsdp), above
    41 of Llama 3.1 405B's FSDP plans that fit on 1,024 H100, by up to 1.9x), and an RL trainer's
    log-prob forwards (at least mb forwards each)."""
    t, mb = b["t"][rows], b["gbs"] / (d * b["mbs"][rows])
    step = (t + b["fsdp"][rows]) * mb + b["w"][rows] * t + b["rho"] * b["fwd"][rows] * mb
    return step / b["tokens"] * b["penalty"]


def sizes_plan_bound(M: sr.Columns, sub: sr.Columns, t: dict, x: dict, fsdp: Any) -> Any:
    """No plan of the macro rows ``M`` that fits ranks better in :func:`search_sizes` than this
    objective (seconds per token): :func:`plan_lower_bound` (``sub``: the micro rows, ``t``: every
    micro term of each, ``fsdp``: their :func:`fsdp_lower_bound`), plus an RL trainer's
    ``forward_weight`` log-prob passes, each at least its mb micro-batches' forwards."""
    lb = plan_lower_bound(M, *_step_floor(sub, t, x, fsdp), x)
    rho = x.get("forward_weight", 0.0)
    if not rho:
        return lb
    tokens = M["dp"] * M["mb"] * M["mbs"] * x["seq"]
    return lb + penalised_per_token(rho * M["mb"] * t["fwd_s"][M["row"]], tokens, x)


def _sizes_plans_kept(
    M: sr.Columns, sub: sr.Columns, t: dict, x: dict, fsdp: Any, fit: Any, used: Any, best: Any
) -> Any:
    """Which plans ``M`` of the micro rows ``sub`` could still change :func:`search_sizes`' table
    (``used``, ``best``: the GPUs of the plans found, ascending, and the best objective on so
    many; ``fit``: the replicas that hold each micro row's state, rounded up): those on at least
    ``fit`` replicas (on fewer, none fits in HBM) whose :func:`sizes_plan_bound` is not above the
    best found on at most their GPUs. A plan dropped does not fit, or is slower than one found on
    no more GPUs: the best on no cluster size (:func:`by_size` keeps a plan only where it is
    strictly faster than every plan on as many GPUs or fewer)."""
    import numpy as np

    keep = M["dp"] >= fit[M["row"]]
    if not len(used):
        return keep
    k = np.searchsorted(used, M["tp"] * M["cp"] * M["pp"] * M["dp"], side="right") - 1
    bar = np.where(k >= 0, best[np.maximum(k, 0)], np.inf)
    return keep & ~(sizes_plan_bound(M, sub, t, x, fsdp) > bar)


@dataclass
class Degrees:
    """The data-parallel degrees each micro row of :func:`search_sizes` can take: the divisors d of
    the pinned global batch (``ds``, ascending) with d mbs dividing the batch (``allowed``, per
    micro-batch size: a handful of rows, not one per micro row), tp cp pp d <= cap (d <= ``most``)
    and d >= ``fit`` (the replicas that hold the state); per row the largest (``top``) and the
    smallest (``least``) such degree (0 and inf where none)."""

    ds: Any
    allowed: Any  # [micro-batch size index, degree index]
    size: Any  # each row's micro-batch size index
    most: Any
    fit: Any
    top: Any = None
    least: Any = None

    def settle(self) -> Degrees:
        """Set ``top`` and ``least`` from the tables (after ``fit`` is set; no ``fit``: ``top``
        alone, the largest degree on a row that needs one replica, and no ``least``)."""
        import numpy as np

        n = len(self.ds)
        j = np.arange(n)
        below = np.maximum.accumulate(np.where(self.allowed, j, -1), axis=1)  # the last allowed <= j
        hi = np.searchsorted(self.ds, self.most, side="right") - 1
        t = np.where(hi >= 0, below[self.size, np.maximum(hi, 0)], -1)
        if self.fit is None:  # (every degree holds the state: the first allowed is at most t)
            self.top = np.where(t >= 0, self.ds[np.maximum(t, 0)], 0.0)
            return self
        above = np.minimum.accumulate(np.where(self.allowed, j, n)[:, ::-1], axis=1)[:, ::-1]
        lo = np.searchsorted(self.ds, self.fit, side="left")
        b = np.where(lo < n, above[self.size, np.minimum(lo, n - 1)], n)
        ok = (t >= 0) & (b <= t)
        self.top = np.where(ok, self.ds[np.maximum(t, 0)], 0.0)
        self.least = np.where(ok, self.ds[np.minimum(b, n - 1)], np.inf)
        return self

    def take(self, rows: Any) -> Degrees:
        cut = (self.size, self.most, self.fit, self.top, self.least)
        return Degrees(self.ds, self.allowed, *(None if v is None else v[rows] for v in cut))

    def usable(self, rows: Any) -> Any:
        """[row, degree]: the degrees the rows ``rows`` can take."""
        ds = self.ds[None, :]
        return self.allowed[self.size[rows]] & (ds <= self.most[rows, None]) & (ds >= self.fit[rows, None])


def degrees(P: sr.Columns, pins: dict, cap: float, fit: Any) -> Degrees:
    """:class:`Degrees` of the micro rows ``P`` on at most ``cap`` GPUs, needing ``fit`` replicas
    (None: one, and only ``top`` set)."""
    import numpy as np

    gbs = int(pins["gbs"])
    ds = np.array(divisors(gbs), dtype=float)
    sizes = np.array(sorted(_axis(pins, "mbs", list(MICRO_BATCHES))), dtype=float)
    allowed = np.array([[gbs % (int(d) * int(v)) == 0 for d in ds] for v in sizes], dtype=bool)
    most = np.floor(cap / (P["tp"] * P["cp"] * P["pp"]))
    return Degrees(ds, allowed, np.searchsorted(sizes, P["mbs"]), most, fit).settle()


def _sizes_grid(x: dict, cap: int, pins: dict) -> tuple[sr.Columns, dict, Degrees, Any, Any]:
    """The micro rows :func:`search_sizes` can use, their terms, their data-parallel degrees, and
    the replicas that hold their state (:func:`replicas_for_memory`):
    rows with a degree d that divides the pinned batch (d mbs too), fits tp cp pp d <= ``cap`` and
    holds the state. Rows whose state alone (no activations) does not fit on their largest such
    degree are dropped before their micro terms are computed (most of the grid for a large model
    on a small cap); then :func:`_fitting_micro`'s filter on the remaining rows, and the exact
    memory test; and the rows' :func:`~ipd_cli.engine.trainstep.tp_exposed_both`, priced once
    for the grid (the rows a search evaluates take theirs from it, not priced again per chunk)."""
    import numpy as np

    P = micro_grid(x, int(cap), pins)
    # some plan is built, then (each row's alone: on the rows left) some degree fits the cap (the
    # state needs one or more) and holds the state
    P = sr.take(P, np.flatnonzero(rows_with_plans(P, x, cap, pins)))
    deg = degrees(P, pins, cap, None)  # (fit and least are set below: none to take before)
    state = sr.by_blocks(lambda Pb: replicas_for_state(Pb, x, pins, x["hbm_cap"]), P)
    rows = np.flatnonzero((deg.top > 0) & (state <= deg.top))
    P, deg = sr.take(P, rows), deg.take(rows)
    tp_both = ts.tp_exposed_both(P, x)
    m = grid_terms(P, x, tp_both, sets_pinned(pins))
    keep = memory_fit_rows(P, m, x, cap, pins)
    # the replicas that hold each row's state, on every row (row by row: the rows kept read the
    # numbers they would alone), so the rows are taken once
    memory = replicas_for_memory(P, m, x, pins)
    deg.fit = np.maximum(np.ceil(np.minimum(memory, 1e9)), 1.0)
    deg.settle()
    rows = keep[deg.least[keep] < np.inf]  # some degree is left
    tp_both = _tp_at(tp_both, rows)
    return sr.take(P, rows), index_terms(m, rows), deg.take(rows), memory[rows], tp_both


def by_size(s: Searched) -> BySize:
    """The running best of the feasible plans of ``s`` by GPUs used (ties: less memory)."""
    import numpy as np

    if len(s) == 0:
        return BySize(s, np.empty(0), np.empty(0, dtype=int))
    idx = np.flatnonzero(s.space.feasible)
    used = (s.cols["tp"] * s.cols["cp"] * s.cols["pp"] * s.cols["dp"])[idx]
    o = np.lexsort((s.out["memory_bytes"][idx], s.seconds_per_token[idx], used))
    idx, used = idx[o], used[o]
    spt = s.seconds_per_token[idx]
    new = np.ones(len(idx), dtype=bool)
    new[1:] = spt[1:] < np.minimum.accumulate(spt)[:-1]
    pos = np.maximum.accumulate(np.where(new, np.arange(len(idx)), 0))
    return BySize(s, used, idx[pos])


def plan_forward_seconds(plan: dict[str, int], x: dict) -> float:
    """One forward-only pass of ``plan`` over its step's micro-batches (log-probabilities:
    :func:`~ipd_cli.engine.trainstep.forward_seconds`), evaluated on its single row."""
    P = {k: float(v) for k, v in plan.items()}
    return float(ts.forward_seconds(P, ts.micro_terms(P, x), x))


def smallest_by_size(x: dict, pins: dict, cap: int, limit: float, sizes=None) -> int | None:
    """The smallest cluster with a plan that fits (None: none up to ``limit`` GPUs): the search up to
    ``cap``, else searches on clusters four times larger each (``sizes``: the search to use, e.g. a
    memoised one)."""
    sizes = sizes or (lambda n: search_sizes(x, n, pins))
    while True:
        found = sizes(cap).min_gpus
        if found is not None or cap >= limit:
            return found
        cap = int(min(limit, max(4 * cap, 2 * min_gpus_for_memory(x))))
