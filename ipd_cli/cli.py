"""The thin Typer layer: parse, load the catalog, call the engine, render.

Data goes to stdout, every message to stderr. User errors exit 2 (input) or 1
(infeasible) with one line and no traceback; ``IPD_DEBUG=1`` shows it.
"""

import errno
import functools
import io
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from . import __version__
from .defaults import DEFAULT_RL_WORKLOAD, DEFAULT_SCENARIO
from .errors import ExitCode, InputError, IpdError
from .output import (
    check_budget,
    check_budget_options,
    check_format,
    check_target,
    emit,
    folded_format,
    format_for,
    stream_rows,
    write_stdout,
    wrote,
)
from .render import EXTENSION_FORMATS, FORMATS, OutputContext

if TYPE_CHECKING:
    from pydantic import BaseModel


app = typer.Typer(
    name="ipd",
    help="Intelligence-per-dollar cost modelling of AI hardware.\n\n"
    "Example: ipd compare vera-rubin blackwell",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
hardware_app = typer.Typer(
    help="Accelerator systems in the catalog.\n\nExample: ipd hardware show vera-rubin", no_args_is_help=True
)
models_app = typer.Typer(
    help="Model architectures in the catalog.\n\nExample: ipd models show deepseek-v3", no_args_is_help=True
)
workloads_app = typer.Typer(
    help="Workloads in the catalog.\n\nExample: ipd workloads show pretrain-10t-moe", no_args_is_help=True
)
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")
app.add_typer(workloads_app, name="workloads")
plot_app = typer.Typer(
    help="Plots: a PNG with -o FILE.png (needs matplotlib: pip install '.[plot]' in a checkout), "
    "else a text plot.\n\n"
    "Example: ipd plot curve vera-rubin blackwell --model kimi-k2 -o curves.png",
    no_args_is_help=True,
)
app.add_typer(plot_app, name="plot")


def _folded(value: str | None) -> str | None:
    """A choice in any case (`FP8`, `TRTLLM`, `TCO`, `ASYNC`), as system and model names are (a
    library review: --precision FP8 was taken, --pricing TCO and --mode ASYNC refused)."""
    return value.lower() if isinstance(value, str) else value


FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        "-f",
        help=f"Output format: {', '.join(FORMATS)} (auto: table on a terminal, JSON when piped).",
        callback=folded_format,
    ),
]
# catalog listings print to stdout only (no -o), so no xlsx
ListFormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        "-f",
        help=f"Output format: {', '.join(f for f in FORMATS if f != 'xlsx')} (auto: table on a "
        "terminal, JSON when piped).",
        callback=folded_format,
    ),
]
CatalogOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalog",
        help="Extra catalog directory (repeatable); entries override built-in ones. Also IPD_CATALOG.",
    ),
]
# a request's shape, for serve and plot curve
InputTokensOpt = Annotated[
    int | None, typer.Option("--input-tokens", help="Prompt tokens per request (ISL).", min=1)
]
OutputTokensOpt = Annotated[
    int | None, typer.Option("--output-tokens", help="Generated tokens per request (OSL).", min=1)
]
ContextTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--context-tokens",
        help="Cached context tokens each request attends to beyond its prompt (earlier turns of a "
        "conversation or agent task: held in its KV cache and read by its attention, not prefilled "
        "again). Default 0.",
        min=0,
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a catalog or workload field, PATH=VALUE (repeatable), e.g. economics.pue=1.2, "
        "systems.h100-sxm.prices.reserved=2.1, models.moe-10t.active_params=1e12; commands with a "
        "workload (compare, explain, sweep, rl, workloads show) also take workload.* paths: "
        "workload.pretraining.tokens=2e14 (a scenario's pre-training run; workload.tokens for a pretrain "
        "workload).",
    ),
]
OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", help="Write to FILE (atomically); its extension picks the format under auto."
    ),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace an existing --output file.")]


MaxUsdOpt = Annotated[
    float | None,
    typer.Option(
        "--max-usd", help="Budget gate: print the result, then exit 3 if --budget-metric exceeds it."
    ),
]
TrainMaxUsdOpt = Annotated[
    float | None,
    typer.Option(
        "--max-usd", help="Budget gate: print the result, then exit 3 if the run's cost exceeds it."
    ),
]
RlMaxUsdOpt = Annotated[
    float | None,
    typer.Option(
        "--max-usd", help="Budget gate: print the result, then exit 3 if the cost per step exceeds it."
    ),
]
BudgetMetricOpt = Annotated[
    str | None,
    typer.Option(
        "--budget-metric",
        help="Dotted metric that --max-usd checks, per system (default: the cost); needs --max-usd.",
    ),
]


PricingOpt = Annotated[
    str,
    typer.Option(
        "--pricing",
        help="rental (the first price point of economics.rental_label_preference a system has), "
        "rental:LABEL (on-demand, reserved, spot or tco-model) or tco (owning cost).",
        callback=_folded,
    ),
]


def _ctx() -> OutputContext:
    is_tty = sys.stdout.isatty()
    color = is_tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    width = None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:  # as a terminal's: to a pipe too (a table 327 wide)
        width = int(columns)
    elif is_tty:
        import shutil

        width = shutil.get_terminal_size().columns
    return OutputContext(is_tty=is_tty, width=width, color=color, ascii_only=not _unicode_stdout())


def _unicode_stdout() -> bool:
    """Whether stdout can encode the box drawing of tables (not under PYTHONIOENCODING=ascii)."""
    try:
        "\u2501\u2503\u2014\u00d7".encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _check_options(
    fmt: str,
    output: Path | None = None,
    force: bool = False,
    *,
    stream: bool = False,
    pricing: str | None = None,
    max_usd: float | None = None,
    budget_metric: str | None = None,
    to_files: bool = True,
) -> None:
    """Every option that needs no catalog, checked before anything is computed: a usage error is
    reported as such, never after (or instead of) the work."""
    check_target(output, force)
    chosen = check_format(fmt, output, stream=stream, to_files=to_files)
    named = (
        EXTENSION_FORMATS.get(output.suffix.lower()) if output is not None and str(output) != "-" else None
    )
    if named is not None and fmt != "auto" and named != chosen:  # a .json file of CSV text
        sys.stderr.write(f"ipd: warning: {output} gets {chosen} (--format); its name says {named}\n")
    if pricing is not None:
        from .engine.pricing import check_pricing

        check_pricing(pricing)
    check_budget_options(max_usd, budget_metric)


def _load(catalog: list[Path] | None, sets: list[str] | None) -> Any:
    """The catalog, with its warnings about user-supplied values (a unit slip: 19600 for a TB/s
    field) on stderr, each once, before anything is computed."""
    from . import api

    cat = api.load(catalog, sets)
    for line in cat.warnings:
        sys.stderr.write(f"ipd: warning: {line.replace('`sets`', PARAM_FLAGS['sets'])}\n")
    return cat


def _emit(result: "BaseModel", fmt: str, output: Path | None = None, cat: Any = None) -> None:
    data = result.model_dump(mode="json")  # once, for the output and its warnings
    written = emit(result, fmt, _ctx(), output, data)
    _warn(result, cat, data=data)
    if written is not None:
        wrote(written)


def price_terms(rows: list, cat: Any) -> list[str]:
    """Systems whose rental prices are contracts of different terms (H100's reserved rate is a
    1-year contract, Vera Rubin's a 3-year one, which is lower per hour): one line naming them
    (a user review). Nothing without a catalog or where the terms agree or are not stated."""
    from .engine.pricing import price_point
    from .render.views import pricing_bases

    if cat is None:
        return []
    rental = any(basis.startswith("rental") for basis in pricing_bases(rows))
    relabelled = _relabelled_terms(cat) if rental else []  # tco reads no term
    terms: dict[str, Any] = {}
    unstated: list[str] = []  # reserved prices of no stated term (a user catalog's, say)
    for basis, names in pricing_bases(rows).items():
        kind, _, label = basis.partition(":")
        for name in names if kind == "rental" else []:
            price = price_point(cat, name, label)
            if price is not None and price.term_years is not None:
                terms[name] = price.term_years
            elif price is not None and label == "reserved":
                unstated.append(name)
    named = ", ".join(f"{hw} {t:g}-year" for hw, t in terms.items())
    if unstated and terms:  # compared with contracts of a stated term: a reader cannot tell
        return [
            f"{', '.join(unstated)}: the reserved price names no contract term, beside {named}; a "
            "longer term is cheaper per hour: state it with --set "
            "systems.NAME.prices.reserved.term_years=YEARS"
        ]
    if len(set(terms.values())) < 2:
        return relabelled
    # a label every compared system prices on one term (on-demand: none stated); Vera Rubin has
    # only its reserved price, so `rental:on-demand` was suggested and then refused (a data audit)
    rented = [
        name for basis, names in pricing_bases(rows).items() if basis.startswith("rental") for name in names
    ]
    prices = [{p.label: p.term_years for p in cat.system(name).prices} for name in rented]
    alike = [
        f"--pricing rental:{label}"
        for label in sorted(set.intersection(*(set(p) for p in prices)))
        if len({p[label] for p in prices}) == 1
    ]
    return relabelled + [
        f"the rental prices are contracts of different terms ({named}): a longer term is cheaper per "
        f"hour, so the cost ratio is not like for like; compare on one basis with "
        f"{' or '.join([*alike, '--pricing tco'])}, or price them on one term with --set "
        "systems.NAME.prices.LABEL=USD and --set systems.NAME.prices.LABEL.term_years=YEARS"
    ]


def _relabelled_terms(cat: Any) -> list[str]:
    """A --set of a price point's ``term_years`` without its price: the rate is relabelled, not
    repriced (a procurement review: h200's 1-year $2.41 set to a 3-year term silenced the
    mixed-terms warning and stayed $2.41)."""
    from .engine.pricing import price_point, rental_input

    paths = [o.path for o in cat.overrides]
    out = []
    for path in paths:
        point, _, field = path.rpartition(".")
        if field != "term_years" or not rental_input(point):
            continue
        if any(q in (point, f"{point}.usd_per_gpu_hour", f"{point}.usd_per_gpu_hour.value") for q in paths):
            continue
        parts = point.split(".")
        price = price_point(cat, parts[1], parts[3])
        shown = f"${price.usd_per_gpu_hour.value:g}" if price is not None else "its price"
        out.append(
            f"--set {path} restates the term of {parts[1]}'s {parts[3]} {shown} without repricing it (a "
            f"longer term is cheaper per hour): give that term's price too, --set {point}=USD"
        )
    return out


def _warn(
    result: "BaseModel", cat: Any = None, notes: bool = True, data: dict[str, Any] | None = None
) -> None:
    """What a reader of a table could miss, once more on stderr: blocks that cannot run, a missed
    service target, a roadmap system (and the result's notes, unless ``notes`` is off). ``data``:
    the result's ``model_dump(mode="json")`` where the caller has it."""
    from .render import dumped
    from .render.views import warnings

    data = dumped(result, data)
    systems = data.get("systems")
    rows = systems if isinstance(systems, list) else [data]
    names = [r["hardware"] for r in rows if isinstance(r, dict) and isinstance(r.get("hardware"), str)]
    statuses = {}
    for name in names if cat is not None else []:
        system = cat.system(name)
        statuses[name] = (system.status, system.unstable)
    lines = warnings(data, statuses, cat=cat)
    for line in lines + (price_terms(rows, cat) if len(rows) > 1 else []):
        sys.stderr.write(f"ipd: warning: {line}\n")
    for line in getattr(result, "notes", []) if notes else []:
        sys.stderr.write(f"ipd: note: {line}\n")


def _finish(
    result: "BaseModel",
    fmt: str,
    output: Path | None,
    max_usd: float | None,
    budget_metric: str,
    cat: Any = None,
) -> None:
    """Render, write, then apply the opt-in budget gate (exit 3). A metric this result does not
    have is refused before anything is written (a pretrain workload has no `rl.usd_per_step`)."""
    if max_usd is not None:
        from .output import budget_values

        budget_values(result, budget_metric, example=_default_budget_metric(result))
    _emit(result, fmt, output, cat)
    check_budget(result, max_usd, budget_metric)


def _version(value: bool) -> None:
    if value:
        write_stdout(f"ipd {__version__}\n")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """Intelligence-per-dollar cost modelling of AI hardware.

    Example: ipd compare vera-rubin blackwell
    """


@hardware_app.command("list")
def hardware_list(fmt: ListFormatOpt = "auto", catalog: CatalogOpt = None, sets: SetOpt = None) -> None:
    """List hardware systems with their key specs.

    Example: ipd hardware list --format csv
    """
    _check_options(fmt, to_files=False)
    from . import api

    _emit(api.list_hardware(_load(catalog, sets)), fmt)


@hardware_app.command("show")
def hardware_show(
    name: str, fmt: ListFormatOpt = "auto", catalog: CatalogOpt = None, sets: SetOpt = None
) -> None:
    """Show one system, its accelerator and host CPU, every value with its source, and its file.

    Example: ipd hardware show vera-rubin --format yaml
    """
    _check_options(fmt, to_files=False)
    from . import api

    _emit(api.show_hardware(_load(catalog, sets), name), fmt)


@models_app.command("list")
def models_list(fmt: ListFormatOpt = "auto", catalog: CatalogOpt = None, sets: SetOpt = None) -> None:
    """List model architectures.

    Example: ipd models list
    """
    _check_options(fmt, to_files=False)
    from . import api

    _emit(api.list_models(_load(catalog, sets)), fmt)


@models_app.command("show")
def models_show(
    name: str, fmt: ListFormatOpt = "auto", catalog: CatalogOpt = None, sets: SetOpt = None
) -> None:
    """Show one model architecture and its source.

    Example: ipd models show kimi-k2
    """
    _check_options(fmt, to_files=False)
    from . import api

    _emit(api.show_model(_load(catalog, sets), name), fmt)


@workloads_app.command("list")
def workloads_list(fmt: ListFormatOpt = "auto", catalog: CatalogOpt = None, sets: SetOpt = None) -> None:
    """List workloads.

    Example: ipd workloads list
    """
    _check_options(fmt, to_files=False)
    from . import api

    _emit(api.list_workloads(_load(catalog, sets)), fmt)


@workloads_app.command("show")
def workloads_show(
    name: str, fmt: ListFormatOpt = "auto", catalog: CatalogOpt = None, sets: SetOpt = None
) -> None:
    """Show one workload, with any --set workload.* applied (as compare, rl and sweep run it).

    Example: ipd workloads show pretrain-10t-moe

    Example: ipd workloads show pretrain-10t-moe --set workload.tokens=2e14 --format yaml
    """
    _check_options(fmt, to_files=False)
    from . import api

    view = api.show_workload(_load(catalog, sets), name)
    for line in _stage_sets_not_shown(view.entry, view.sets):
        sys.stderr.write(f"ipd: warning: {line}\n")
    _emit(view, fmt)


def _stage_sets_not_shown(entry: dict, sets: list[str]) -> list[str]:
    """A scenario's `--set workload.STAGE.FIELD` of the workload its stage names (the pre-training
    run's tokens) changes that workload, which the shown entry names and does not hold: a what-if
    file written from it ran without the set, without a word (a CLI review)."""
    out = []
    for item in sets:
        keys = item.partition("=")[0].split(".")
        stage = entry.get(keys[1]) if len(keys) > 2 and keys[0] == "workload" else None
        if isinstance(stage, dict) and "workload" in stage and keys[2] not in stage:
            out.append(
                f"--set {item}: changes the workload {stage['workload']!r} that this scenario's "
                f"{keys[1]} stage names, not the entry shown, so a file of this output runs without it: "
                f"give the --set again beside --scenario FILE, or write the stage's own workload (ipd "
                f"workloads show {stage['workload']} --set workload.{'.'.join(keys[2:])}=... -f yaml) into "
                "a --catalog directory's workloads/ and name it in the stage"
            )
    return out


@app.command()
def train(
    hardware: Annotated[str, typer.Option("--hardware", help="System name or alias (ipd hardware list).")],
    model: Annotated[str, typer.Option("--model", help="Model name or alias (ipd models list).")],
    tokens: Annotated[float, typer.Option("--tokens", help="Training tokens, e.g. 15.6e12.")],
    gpus: Annotated[
        int | None, typer.Option("--gpus", help="Fixed cluster size (give --gpus or --days).")
    ] = None,
    days: Annotated[
        float | None, typer.Option("--days", help="Deadline in days: size the cluster to meet it.")
    ] = None,
    precision: Annotated[
        str,
        typer.Option(
            "--precision",
            help="bf16, fp8 or fp4 (dense peak used); one the GPU lacks is refused (a comparison runs "
            "the next wider).",
            callback=_folded,
        ),
    ] = "bf16",
    mfu: Annotated[
        float | None,
        typer.Option("--mfu", help="Pin the MFU, in (0, 1], instead of deriving it from the plan."),
    ] = None,
    seq_len: Annotated[
        int | None,
        typer.Option(
            "--seq-len",
            help="Training sequence length (tokens; default: the model's pre-training recipe, "
            "models.<m>.training_sequence_length, else efficiency.default_training_sequence_length).",
        ),
    ] = None,
    plan: Annotated[
        str | None,
        typer.Option(
            "--plan",
            help="Pin parts of the parallelism plan: tp, pp, vp (or interleave), cp, ep, dp, mbs (or "
            "micro_batch), gbs (or global_batch: sequences), order=0|1 (1: pipeline stages inside the "
            "scale-up domain), recompute=none|selective|full|offload or Megatron-Core modules joined by + "
            "(core_attn, layernorm, moe_act, mla_up_proj, mlp, moe, shared_experts: "
            "recompute=mla_up_proj+mlp), zero=0-3 (3 = fsdp), "
            "schedule=1f1b|dualpipe, dispatcher=alltoall|deepep (MoE), a2a_overlap=on|off (MoE, 1F1B), "
            "cuda_graphs=on|off (MoE), routing=dropless|token-drop (MoE; not searched: dropless unless "
            "pinned; token-drop pads each expert to its capacity and drops the rest, which changes the "
            "model's quality), fp8_recipe=tensorwise|delayed|mxfp8|blockwise (precision fp8; "
            "not searched: tensorwise unless pinned), tp_comm_overlap=on|off (userbuffers, where the "
            "recipe has them; off: the NCCL path); e.g. tp=4,pp=8,recompute=selective.",
        ),
    ] = None,
    plans: Annotated[
        int,
        typer.Option(
            "--plans",
            help="Also list up to N best plans with step time, MFU and memory (CSV: one row per plan); "
            "with --days, those on the chosen cluster that meet the deadline.",
            min=0,
        ),
    ] = 0,
    pricing: PricingOpt = "rental",
    fmt: FormatOpt = "auto",
    output: OutputOpt = None,
    force: ForceOpt = False,
    max_usd: TrainMaxUsdOpt = None,
    catalog: CatalogOpt = None,
    sets: SetOpt = None,
) -> None:
    """Estimate a pre-training run with the best parallelism plan: the plan, step time, MFU, memory
    per GPU, GPUs, wall days, GPU-hours, cost and energy.

    Example: ipd train --hardware h100-sxm --model llama-3.1-405b --tokens 15.6e12 --gpus 16384

    Example: ipd train --hardware hopper --model gpt-3-175b --tokens 3e11 --gpus 1024 --seq-len 2048
    --plan gbs=1536 --plans 5
    """
    _check_options(fmt, output, force, pricing=pricing, max_usd=max_usd)
    from . import api

    cat = _load(catalog, sets)
    _finish(
        api.train(
            cat,
            hardware,
            model,
            tokens,
            gpus=gpus,
            deadline_days=days,
            precision=precision,
            mfu=mfu,
            sequence_length=seq_len,
            pricing=pricing,
            plan=plan,
            plans=plans,
        ),
        fmt,
        output,
        max_usd,
        "pretraining.cost_usd",
        cat,
    )


@app.command()
def serve(
    hardware: Annotated[str, typer.Option("--hardware", help="System name or alias (ipd hardware list).")],
    model: Annotated[str, typer.Option("--model", help="Model name or alias (ipd models list).")],
    input_tokens: InputTokensOpt = None,
    output_tokens: OutputTokensOpt = None,
    context_tokens: ContextTokensOpt = None,
    precision: Annotated[
        str | None, typer.Option("--precision", help="Weights: bf16, fp8 or fp4.", callback=_folded)
    ] = None,
    kv_precision: Annotated[
        str | None,
        typer.Option(
            "--kv-precision",
            help="KV cache: bf16, fp8 or fp4 (the search tries the catalog's serving.kv_precisions, "
            "fp8 and bf16: published points run FP8 KV; fp4 only when given here).",
            callback=_folded,
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency", help="Sequences in flight per (decode) instance: the best layout there.", min=1
        ),
    ] = None,
    tokens_per_user_s: Annotated[
        float | None,
        typer.Option(
            "--tokens-per-user-s",
            help="Interactivity target, output tokens/s per user after the first token (1 / TPOT, as "
            "benchmarks publish it): the cheapest configuration that meets it (most tokens/s per GPU); "
            "where none does, the fastest per user, with a warning and serving.target_met false (exit 0).",
        ),
    ] = None,
    instance_gpus: Annotated[
        int | None,
        typer.Option("--instance-gpus", help="Pin the GPUs per (decode) instance (default: searched)."),
    ] = None,
    layout: Annotated[
        str | None,
        typer.Option(
            "--layout",
            help="Pin the layout: tp, tep or dep (MoE), optionally GPUs per stage and pipeline stages: "
            "tp4, dep8, tep16, tp8pp4, pp4 (dep is pure DEP, attention TP 1, unless --attention-tp; "
            "dep runs one stage; a size without ppN runs one stage, so a reported TP1 PP2 is tp1pp2).",
            callback=_folded,
        ),
    ] = None,
    attention_tp: Annotated[
        int | None,
        typer.Option(
            "--attention-tp",
            help="Pin the GPUs per attention tensor-parallel group (MoE: 'DEP8 (attention TP2)' is "
            "--layout dep8 --attention-tp 2; default: searched).",
            min=1,
        ),
    ] = None,
    disaggregated: Annotated[
        bool | None,
        typer.Option(
            "--disaggregated/--aggregated",
            help="Pin prefill and decode on separate pools, or on the same instances (default: searched).",
        ),
    ] = None,
    eplb: Annotated[
        bool | None,
        typer.Option(
            "--eplb/--no-eplb",
            help="Pin expert-parallel load balancing on or off, in both pools (default: searched; most "
            "published MoE runs ran without it).",
        ),
    ] = None,
    instance: Annotated[
        str,
        typer.Option(
            "--instance",
            help="best (the deployment search) or smallest (pins the smallest size that fits).",
            callback=_folded,
        ),
    ] = "best",
    speculative: Annotated[
        str | None,
        typer.Option(
            "--speculative",
            help="Speculative decoding: auto (default: the search tries none and each draft depth), off "
            "(or 0), on (a draft, its depth searched) or a draft depth (1, 2, 3).",
            callback=_folded,
        ),
    ] = None,
    stack: Annotated[
        str | None,
        typer.Option(
            "--stack",
            help="Serving stack whose measured efficiencies to use: trtllm, vllm, sglang, atom (default: the "
            "best published stack on the system's accelerator family).",
            callback=_folded,
        ),
    ] = None,
    stack_release: Annotated[
        str | None,
        typer.Option(
            "--stack-release",
            help="A release of the serving stack measured apart (the catalog's serving.stacks.<stack>."
            "releases: trtllm 1.1.0rc2, whose aggregated iterations holding a prompt stall decode for at "
            "least its measured time, FP4 on B200 only), at one point or at each point of --curve (an "
            "aggregated point moves where the stall is longer than its prompt); default: the stack's "
            "profile, every release alike.",
            callback=_folded,
        ),
    ] = None,
    requests_per_s: Annotated[
        float | None,
        typer.Option(
            "--requests-per-s",
            help="Traffic: the configuration that serves it on the fewest GPUs (gpus_for_traffic): whole "
            "copies of an aggregated instance, or prefill and decode pools sized for it, never at "
            "100 % of their sequence slots: enough that the mean time to first token at the traffic "
            "(the lone prompt + the M/D/c waits for a prefill instance and a free slot, "
            "ttft_at_traffic_s) is within serving.ttft_target_s (2 s; --set serving.ttft_target_s=).",
        ),
    ] = None,
    tokens_per_day: Annotated[
        float | None,
        typer.Option("--tokens-per-day", help="Traffic in output tokens per day (as --requests-per-s)."),
    ] = None,
    curve: Annotated[
        bool,
        typer.Option(
            "--curve", help="The Pareto frontier of tokens/s per GPU against tokens/s per user (1 / TPOT)."
        ),
    ] = False,
    pricing: PricingOpt = "rental",
    fmt: FormatOpt = "auto",
    output: OutputOpt = None,
    force: ForceOpt = False,
    catalog: CatalogOpt = None,
    sets: SetOpt = None,
) -> None:
    """Serving economics the way a competent operator would deploy the model: tokens/s per GPU and
    per user, TTFT, TPOT, $ per million tokens, tokens/s per MW, and the configuration chosen.

    The deployment search tries instance sizes (1 GPU to several scale-up domains), layouts (tp,
    tep, dep, pipeline stages across domains), EPLB, KV precision, batch per scheduler rank and
    aggregated vs disaggregated prefill/decode. With --tokens-per-user-s it returns the cheapest
    configuration that meets the target; without, maximum throughput; with --requests-per-s or
    --tokens-per-day, the one that serves that traffic on the fewest GPUs. --instance-gpus, --layout,
    --attention-tp, --eplb/--no-eplb and --disaggregated/--aggregated pin parts of the space;
    --curve gives the whole Pareto frontier. --context-tokens: the cached context (earlier turns)
    each request attends to: an agent's 15th call of 3,000 new prompt and 400 output tokens carries
    14 x 3,400 = 47,600.

    Example: ipd serve --hardware vera-rubin --model kimi-k2 --precision fp4 --tokens-per-user-s 50

    Example: ipd serve --hardware gb200 --model deepseek-r1 --input-tokens 3000 --context-tokens 47600

    Example: ipd serve --hardware h100-sxm --model llama-3.1-70b --layout tp2 --aggregated

    Example: ipd serve --hardware b200 --model llama-3.3-70b --precision fp8 --curve

    Example: ipd serve --hardware mi355x --model deepseek-r1 --stack vllm --speculative off
    """
    _check_options(fmt, output, force, pricing=pricing)
    from . import api

    cat = _load(catalog, sets)
    result = api.serve(
        cat,
        hardware,
        model,
        curve=curve,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        context_tokens=context_tokens,
        precision=precision,
        kv_precision=kv_precision,
        concurrency=concurrency,
        tokens_per_user_s=tokens_per_user_s,
        instance_gpus=instance_gpus,
        layout=layout,
        attention_tp=attention_tp,
        disaggregated=disaggregated,
        eplb=eplb,
        instance=instance,
        speculative=speculative,
        stack=stack,
        stack_release=stack_release,
        requests_per_s=requests_per_s,
        output_tokens_per_day=tokens_per_day,
        pricing=pricing,
    )
    _emit(result, fmt, output, cat)


@app.command()
def rl(
    hardware: Annotated[str, typer.Option("--hardware", help="System name or alias (ipd hardware list).")],
    workload: Annotated[
        str, typer.Option("--workload", help="RL workload name or YAML file ('-' reads stdin).")
    ] = DEFAULT_RL_WORKLOAD,
    model: Annotated[str | None, typer.Option("--model", help="Model (default: the workload's).")] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="colocated, disaggregated, one-step-off or async (default: the workload's).",
            callback=_folded,
        ),
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option(
            "--gpus",
            help="Total GPUs, a pin: the step runs on all of them, split for the shortest step. "
            "Without it the workload's gpus is a cap: the step runs on the pool within it (a trainer "
            "and whole rollout replicas) with the least cost per step whose schedule fits the year "
            "(--set workload.pin_gpus=true runs on all of them).",
        ),
    ] = None,
    gen_gpus: Annotated[
        int | None, typer.Option("--gen-gpus", help="Generation GPUs (disaggregated modes).")
    ] = None,
    train_gpus: Annotated[
        int | None, typer.Option("--train-gpus", help="Training GPUs (disaggregated modes).")
    ] = None,
    split: Annotated[
        str | None,
        typer.Option(
            "--split",
            help="auto (the one value): the generation/training split of --gpus (or of all of the "
            "workload's gpus, a pin) with the shortest step, what --gpus alone does too; --gen-gpus and "
            "--train-gpus give a split instead.",
            callback=_folded,
        ),
    ] = None,
    transport: Annotated[
        str | None,
        typer.Option(
            "--transport",
            help="Weight sync: nccl-broadcast, nccl-reshard, rdma-p2p, checkpoint-engine or colocated "
            "(default: colocated in colocated mode, else the workload's, else rl.default_sync_transport).",
            callback=_folded,
        ),
    ] = None,
    stack_release: Annotated[
        str | None,
        typer.Option(
            "--stack-release",
            help="Generate the rollouts under a release of their serving stack measured apart, as ipd "
            "serve --stack-release (the workload's generation_stack_release; trtllm 1.1.0rc2: a "
            "replica's prompts stall its decode for at least 42.1 ms, FP4 on B200 only, none elsewhere); "
            "default: the stack's profile. A release the stack does not hold is refused first.",
            callback=_folded,
        ),
    ] = None,
    pricing: PricingOpt = "rental",
    fmt: FormatOpt = "auto",
    output: OutputOpt = None,
    force: ForceOpt = False,
    max_usd: RlMaxUsdOpt = None,
    catalog: CatalogOpt = None,
    sets: SetOpt = None,
) -> None:
    """Estimate one RL post-training step: phases, $ per step, samples/s, and a refresh cycle.

    Example: ipd rl --hardware vera-rubin --model nemotron-3-ultra --workload rl-swe-agent --mode async
    """
    _check_options(fmt, output, force, pricing=pricing, max_usd=max_usd)
    from . import api

    cat = _load(catalog, sets)
    result = api.rl(
        cat,
        hardware,
        workload,
        model=model,
        mode=mode,
        gpus=gpus,
        gen_gpus=gen_gpus,
        train_gpus=train_gpus,
        split=split,
        transport=transport,
        stack_release=stack_release,
        pricing=pricing,
    )
    _finish(result, fmt, output, max_usd, "rl.usd_per_step", cat)


ScenarioOpt = Annotated[
    str,
    typer.Option(
        "--scenario",
        "--workload",
        help="Scenario or workload name (ipd workloads list) or a YAML file ('-' reads stdin).",
    ),
]
# `ipd plot cost` draws a scenario's lifecycle: a pretrain or RL workload has none (a help review)
PlotScenarioOpt = Annotated[
    str,
    typer.Option(
        "--scenario",
        "--workload",
        help="Scenario name (ipd workloads list, kind scenario) or a YAML scenario file ('-' reads stdin).",
    ),
]
PlotOutputOpt = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write the plot to FILE, a PNG (.png), atomically.")
]


ScenarioReleaseOpt = Annotated[
    str | None,
    typer.Option(
        "--stack-release",
        help="Serve the scenario (or generate an RL workload's rollouts) under a release of each "
        "system's serving stack measured apart, as ipd serve --stack-release (a scenario's "
        "serving.stack_release, an RL workload's generation_stack_release; trtllm 1.1.0rc2: an "
        "aggregated prompt stalls decode for at least 42.1 ms, FP4 on B200 only, none elsewhere); a "
        "release a system's stack does not hold is refused before any estimate.",
        callback=_folded,
    ),
]


@app.command()
def compare(
    systems: Annotated[list[str], typer.Argument(help="One or more systems; ratios are against the first.")],
    workload: ScenarioOpt = DEFAULT_SCENARIO,
    mfu: Annotated[
        float | None, typer.Option("--mfu", help="Pin the MFU, in (0, 1], pretrain workloads only.")
    ] = None,
    pricing: PricingOpt = "rental",
    fmt: FormatOpt = "auto",
    output: OutputOpt = None,
    force: ForceOpt = False,
    max_usd: MaxUsdOpt = None,
    budget_metric: BudgetMetricOpt = None,
    site_mw: Annotated[
        float | None,
        typer.Option(
            "--site-mw",
            help="A site power budget (MW): the GPUs of whole systems it holds and the tasks/day they "
            "solve serving (scenarios; not a cap on the deployment).",
        ),
    ] = None,
    stack_release: ScenarioReleaseOpt = None,
    catalog: CatalogOpt = None,
    sets: SetOpt = None,
) -> None:
    """Compare systems on a lifecycle scenario: intelligence per dollar first, then pre-training,
    RL post-training and serving blocks; one column per system, ratios against the first.

    Without --scenario this runs frontier-agentic (a 10T MoE pre-trained on 100T tokens in a
    month, agentic SWE RL, agent serving). A pretrain or RL workload shows only its block.
    Every number comes from the catalog's specs and prices, never from a vendor claim.

    Example: ipd compare vera-rubin blackwell

    Example: ipd compare vera-rubin blackwell --workload pretrain-10t-moe -f json | jq .systems

    Example: ipd compare vera-rubin blackwell -o report.md --max-usd 5e8   (exit 3 when over budget)

    Example: ipd compare b200 h200 --workload open-model-agent --stack-release 1.1.0rc2
    """
    _check_options(fmt, output, force, pricing=pricing, max_usd=max_usd, budget_metric=budget_metric)
    if site_mw is not None:
        from .catalog.schema import MAX_SITE_MW

        if not (math.isfinite(site_mw) and 0 < site_mw <= MAX_SITE_MW):
            raise InputError(f"--site-mw must be a power in MW in (0, {MAX_SITE_MW:g}], got {site_mw:g}")
        sets = [*(sets or []), f"workload.site_mw={site_mw!r}"]
    from . import api

    cat = _load(catalog, sets)
    compared = api.compare(cat, systems, workload, mfu=mfu, pricing=pricing, stack_release=stack_release)
    result = _with_flags(compared, "compare")
    _finish(result, fmt, output, max_usd, budget_metric or _default_budget_metric(result), cat)


# the cost a budget gate checks by default, by the kind of workload compared
DEFAULT_BUDGET_METRICS = {
    "scenario": "intelligence_per_dollar.lifecycle_cost_usd",
    "pretrain": "pretraining.cost_usd",
    "rl": "rl.usd_per_step",
}


def _default_budget_metric(result: "BaseModel") -> str:
    """The cost a budget gate checks by default: by the workload compared, else the result's block."""
    workload = getattr(result, "workload", None)
    if workload is not None:
        return DEFAULT_BUDGET_METRICS.get(workload.kind, "pretraining.cost_usd")
    return "rl.usd_per_step" if getattr(result, "rl", None) is not None else "pretraining.cost_usd"


def _with_flags(result: Any, command: str) -> Any:
    """A comparison whose infeasible blocks' reasons and hints name this command's options."""

    def flags(text: str | None) -> str | None:
        return _cli_message(text, [command]) if text else text

    systems = [
        s.model_copy(
            update={
                "infeasible": {
                    k: v.model_copy(update={"reason": flags(v.reason), "hint": flags(v.hint)})
                    for k, v in s.infeasible.items()
                }
            }
        )
        for s in result.systems
    ]
    return result.model_copy(update={"systems": systems})


@app.command()
def explain(
    systems: Annotated[list[str], typer.Argument(help="One or more systems.")],
    workload: ScenarioOpt = DEFAULT_SCENARIO,
    pricing: PricingOpt = "rental",
    fmt: FormatOpt = "auto",
    output: OutputOpt = None,
    force: ForceOpt = False,
    stack_release: ScenarioReleaseOpt = None,
    catalog: CatalogOpt = None,
    sets: SetOpt = None,
) -> None:
    """Explain the headline numbers of `ipd compare`: each formula with its input values, then
    every input with its unit, source id, catalog file and the --set path that overrides it.
    Where a stage cannot run on a system, the stages that did are explained and a "cannot be
    computed" row names the one that could not.

    Example: ipd explain vera-rubin blackwell --format markdown > explain.md
    """
    _check_options(fmt, output, force, pricing=pricing)
    from . import api

    cat = _load(catalog, sets)
    result, compared = api.explain_compared(
        cat, systems, workload, pricing=pricing, stack_release=stack_release
    )
    # the comparison's warnings, as `ipd compare` prints them (a warning audit: explain printed
    # none of the fallbacks, rental terms or site lines behind the numbers it explains)
    _warn(_with_flags(compared, "explain"), cat, notes=False)  # the notes: with the explanation
    items = [
        {
            **i,
            "formula": _cli_message(i["formula"], ["explain"]),
            "inputs": _cli_message(i["inputs"], ["explain"]),
        }
        for i in result.items
    ]
    _emit(result.model_copy(update={"items": items}), fmt, output)


@app.command()
def sweep(
    vary: Annotated[
        list[str],
        typer.Option(
            "--vary",
            help="PATH=START:STOP:STEP or PATH=V1,V2 (repeatable); PATH is hardware (required: the systems), "
            "price_usd_per_gpu_hour or any numeric --set path the estimate reads.",
        ),
    ],
    workload: Annotated[
        str,
        typer.Option(
            "--workload",
            "--scenario",
            help="Scenario, pretrain or RL workload: a name or a YAML file ('-' reads stdin).",
        ),
    ] = DEFAULT_SCENARIO,
    samples: Annotated[
        int | None,
        typer.Option(
            "--samples",
            help="Draw N values from each catalog range (triangular: low, catalog value, high; a "
            "varied path is not drawn); report P10/P50/P90 (linear interpolation; at least 100 "
            "draws for stable tails). The plan, deployment and RL split are searched at the "
            "catalog's values of the drawn inputs and re-priced at each draw, not re-chosen, so the "
            "spread leans slow and dear (a warning counts the draws whose memory the plan no longer "
            "fits); RL and serving throughput are not drawn (their percentiles coincide).",
            min=1,
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed for --samples.")] = 0,
    ratios: Annotated[
        bool,
        typer.Option(
            "--ratios",
            help="Also give each numeric metric's ratio to the first system's at the same point "
            "(METRIC.ratio: this system's value / the first's, empty where the first's is 0 or "
            "empty); with --samples the ratio is taken draw by draw, so its P10/P50/P90 keep what "
            "the systems share (not the ratio of their percentiles). Needs two or more systems.",
        ),
    ] = False,
    metrics: Annotated[
        str,
        typer.Option(
            "--metrics",
            help="headline, all, or comma-separated metric paths: the results' numbers and "
            "configuration names (intelligence_per_dollar.solved_tasks_per_kusd, rl.usd_per_step, "
            "serving.configuration, ...; all lists them).",
        ),
    ] = "headline",
    mfu: Annotated[
        float | None, typer.Option("--mfu", help="Pin the MFU, in (0, 1], pretrain workloads only.")
    ] = None,
    pricing: PricingOpt = "rental",
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="csv, jsonl, json, table, markdown or xlsx (auto: table on a terminal, csv when piped; "
            "the extension of -o FILE).",
            callback=folded_format,
        ),
    ] = "auto",
    output: OutputOpt = None,
    force: ForceOpt = False,
    catalog: CatalogOpt = None,
    sets: SetOpt = None,
) -> None:
    """Evaluate the estimate over a grid of inputs: one row per point, streamed. Each search (plan,
    deployment, RL split) runs once per distinct value of the physics inputs; prices, economics.*,
    power, capex and the workload's volumes (tasks per day, horizon, RL schedule or budget, ...)
    re-price the chosen configurations.

    Example: ipd sweep --vary hardware=vera-rubin,blackwell --vary price_usd_per_gpu_hour=4:12:1
    --metrics intelligence_per_dollar.solved_tasks_per_kusd --format csv > procurement.csv

    Example: ipd sweep --vary hardware=h100-sxm,gb200-nvl72,vera-rubin-nvl72
    --vary price_usd_per_gpu_hour=2:6:0.5 -o sweep.xlsx

    Example: ipd sweep --vary hardware=vera-rubin,blackwell --samples 2000   (P10/P50/P90 over catalog ranges)
    """
    from .render.xlsx import MAX_ROWS

    _check_options(fmt, output, force, stream=True, pricing=pricing)
    chosen = format_for(fmt, output)
    from . import api

    cat = _load(catalog, sets)
    from .catalog.plausibility import axis_warnings
    from .engine.sweep import HARDWARE, parse_axes

    try:  # a unit slip in a varied spec, as in --set: said before the searches (which may fail on it)
        axes = [a for a in parse_axes(cat, vary) if a.path != HARDWARE]
    except IpdError:
        axes = []  # api.sweep reports it
    for axis in axes:
        for line in axis_warnings(cat, axis.path, axis.values):
            sys.stderr.write(f"ipd: warning: {_cli_message(line, ['sweep'])}\n")
    chunks, total = api.sweep(
        cat,
        vary,
        workload,
        samples=samples,
        seed=seed,
        metrics=metrics,
        mfu=mfu,
        pricing=pricing,
        progress=_progress("searched {done:,} of {total:,} systems x physics points"),
        max_rows=MAX_ROWS if chosen == "xlsx" else None,
        ratios=ratios,
    )
    from .render.views import DEPLOYMENT_VARIES, deployment_inputs_vary, site_inputs_vary

    drawn = samples is not None  # draws of the ranges of the PUE and each system's power
    paths = [a.path for a in axes]
    varies = DEPLOYMENT_VARIES if deployment_inputs_vary(paths) else drawn or site_inputs_vary(paths)
    from .engine.sweep import plan_draws

    # the draws the rows took (the same seed and paths: common random numbers); None unsampled
    draws = plan_draws(chunks.plan)
    _warn_sweep(
        chunks.points, cat, chunks.notes, varies, axes if varies is True else None, draws, chunks.inputs
    )
    if seed != 0 and samples is None:  # a scripting review: it was ignored without a word
        sys.stderr.write("ipd: warning: --seed without --samples: nothing is drawn, so it changes nothing\n")
    show = _progress("swept {done:,} of {total:,} points")
    rows = stream_rows(chunks, chosen, _ctx(), output, progress=show and (lambda done: show(done, total)))
    if output is not None and str(output) != "-":  # as the other commands say what they wrote
        wrote(output, rows)


MAX_SWEEP_WARNINGS = 8


def _warn_sweep(
    points: list[tuple[str, Any]],
    cat: Any,
    notes: list[str],
    site_varies: bool | str = False,
    axes: list[Any] | None = None,
    draws: Any = None,
    inputs: list[Any] | None = None,
) -> None:
    """The warnings of `ipd compare` for the estimates a sweep searched (at which physics values,
    when it varies them), the sweep's own (``notes``: draws, ratios) before those of each point
    (a review: eight lines of a repeated point warning hid the draws' note), each line once;
    ``site_varies``: the rows vary the site's budget (views.site_inputs_vary) or their deployment
    (views.DEPLOYMENT_VARIES); ``axes`` (where the site varies): the line is said only for a system
    whose deployment the smallest of the rows' sites would not hold (views.fewest_site_gpus);
    ``inputs``: per system, the result that lists the inputs it read (Sweep.inputs), for the `--set`
    items none read (views.unread_overrides: an owning cost under rental prices, a price point of
    another label or system), said as compare says them (a CLI review: the sweep said nothing)."""
    from .render.views import fewest_site_gpus, unread_overrides, warnings

    lines: list[str] = []
    # the points' results (a system no point ran read no price: views.unread_overrides)
    dumped: list[dict] = []
    for name in dict.fromkeys(r.hardware for _, r in points):  # a roadmap system, once
        system = cat.system(name)
        lines += warnings({"systems": [{"hardware": name}]}, {name: (system.status, system.unstable)})
    lines += notes
    fewest: dict[str, float] = {}  # per system, once (the axes' ends and the site are the same)
    for where, r in points:
        site = getattr(getattr(r, "intelligence_per_dollar", None), "site_mw", None)
        if axes is not None and site is not None and r.hardware not in fewest:
            fewest[r.hardware] = fewest_site_gpus(cat, r.hardware, site, axes, draws)
        dumped.append(r.model_dump(mode="json"))
        found = warnings(
            {"systems": [dumped[-1]]},
            {r.hardware: ("shipping", False)},
            site_varies,
            fewest_site=fewest or None,
        )
        head = f"{r.hardware}: "
        lines += [
            f"{r.hardware} at {where}: {line.removeprefix(head)}" if where and line.startswith(head) else line
            for line in found
        ]
    if cat.overrides:  # the points' results list no inputs: each system's inputs do
        read = [r.model_dump(mode="json") for r in inputs or []]
        lines += unread_overrides([o.text for o in cat.overrides], read + dumped, cat)
    lines = list(dict.fromkeys(_cli_message(line, ["sweep"]) for line in lines))
    for line in lines[:MAX_SWEEP_WARNINGS]:
        sys.stderr.write(f"ipd: warning: {line}\n")
    if len(lines) > MAX_SWEEP_WARNINGS:
        sys.stderr.write(f"ipd: warning: {_more_warnings(lines[MAX_SWEEP_WARNINGS:], points)}\n")


def _more_warnings(left: list[str], points: list) -> str:
    """The line for the warnings a sweep leaves out: how many, whose, and the command that prints
    them (a fresh-eyes review: "... and 4 more" said neither)."""
    names = [
        n for n in dict.fromkeys(r.hardware for _, r in points) if any(x.startswith(f"{n}:") for x in left)
    ]
    if not names:
        return f"... and {len(left)} more"
    return (
        f"... and {len(left)} more (of {', '.join(names)}; `ipd compare {names[0]}` with the sweep's "
        "--workload and a row's --set prints them)"
    )


def _progress(text: str):
    """A one-line progress counter on stderr, ``show(done, total)``: only on a terminal and after
    about a second."""
    import time

    if not sys.stderr.isatty():
        return None
    start = time.monotonic()

    def show(done: int, total: int) -> None:
        if time.monotonic() - start > 1.0:
            end = "\n" if done >= total else ""
            sys.stderr.write("\r" + text.format(done=done, total=total) + end)
            sys.stderr.flush()

    return show


@app.command()
def diff(
    base: Annotated[
        Path,
        typer.Argument(
            help="Earlier JSON output of an ipd command (a sweep's: json or jsonl); - reads stdin."
        ),
    ],
    new: Annotated[Path, typer.Argument(help="Later JSON output of the same command; - reads stdin.")],
    all_rows: Annotated[bool, typer.Option("--all", help="Also list metrics that did not change.")] = False,
    fmt: FormatOpt = "auto",
    output: OutputOpt = None,
    force: ForceOpt = False,
) -> None:
    """Compare two JSON outputs metric by metric: old, new, change and percent; text values that
    differ (the price basis, a configuration, the overrides given) are listed too.

    Example: ipd compare vera-rubin blackwell -o base.json; ipd compare vera-rubin blackwell
    --set economics.pue=1.5 -o new.json; ipd diff base.json new.json
    """
    from .diff import diff as diff_outputs
    from .diff import read_json

    _check_options(fmt, output, force)
    if str(base) == str(new) == "-":
        raise InputError("BASE and NEW are both - (stdin); give one of them as a file")
    _emit(diff_outputs(read_json(base), read_json(new), only_changed=not all_rows), fmt, output)


@app.command()
def validate(
    split: Annotated[str | None, typer.Option("--split", help="fitting, checking (default) or all.")] = None,
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="PATH=VALUE overrides (repeatable); a bare split name is read as --split (older form).",
        ),
    ] = None,
    cases: Annotated[
        Path | None,
        typer.Option("--cases", help="A validation cases YAML (default: the shipped one; '-' reads stdin)."),
    ] = None,
    max_median_error: Annotated[
        float | None,
        typer.Option("--max-median-error", help="Exit 1 when the median absolute error % exceeds this."),
    ] = None,
    fmt: FormatOpt = "auto",
    output: OutputOpt = None,
    force: ForceOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Run the model on published measurements: case, predicted, measured, signed error %, and a
    summary (median absolute error, worst case, share within 25 %) overall and per kind.

    Example: ipd validate --split checking

    Example: ipd validate --split all --format csv > validation.csv
    """
    from . import validate as val

    splits = [s for s in sets or [] if "=" not in s]
    overrides = [s for s in sets or [] if "=" in s]
    if len(splits) > 1 or (splits and split):
        raise InputError("give one split: --split fitting|checking|all")
    _check_options(fmt, output, force)
    if max_median_error is not None and not (math.isfinite(max_median_error) and max_median_error >= 0):
        raise InputError(f"--max-median-error is a finite percentage >= 0, got {max_median_error}")

    cat = _load(catalog, overrides)
    result = val.validate(cat, split or (splits[0] if splits else "checking"), cases)
    # a case not reached has the engine's message as its status, in the CLI's words as explain's
    # formulas are (it showed the library's `eplb` True, `concurrency` 1)
    items = [{**i, "status": _cli_message(i["status"], ["validate"])} for i in result.items]
    _emit(result.model_copy(update={"items": items}), fmt, output)
    from .output import format_for
    from .render import resolve_format

    # one row per case: no summary (a review); xlsx is a file's only format (resolve_format refused
    # it, exit 2 after the file was written)
    shown = format_for(fmt, output)
    if shown != "xlsx" and resolve_format(shown, _ctx()) == "csv":
        sys.stderr.write(
            "ipd: note: the CSV holds the cases; their summary by group: --format json or table\n"
        )
    median = result.summary[0]["median_abs_error_pct"]
    if max_median_error is not None and median is None:  # a gate with nothing to gate: not a pass
        # (a split with no case is an input error: validate raises it)
        raise IpdError(
            "no case could be run, so --max-median-error has no median to check (see each case's status)",
            ExitCode.RUNTIME,
        )
    if max_median_error is not None and median > max_median_error:
        raise IpdError(  # a valid request whose bound is not met: exit 1, as the README says
            f"median absolute error {median:.1f} % exceeds --max-median-error {max_median_error}",
            ExitCode.RUNTIME,
        )


@app.command()
def calibrate(
    cases: Annotated[
        Path | None,
        typer.Option("--cases", help="A validation cases YAML (default: the shipped one; '-' reads stdin)."),
    ] = None,
    fmt: FormatOpt = "auto",
    output: OutputOpt = None,
    force: ForceOpt = False,
    catalog: CatalogOpt = None,
    sets: SetOpt = None,
) -> None:
    """Fit the efficiency defaults on the fitting cases and print the fitted values with the
    --set that applies each (the catalog's defaults cite this procedure).

    Each knob (training GEMM shares, tensor-parallel and all-to-all overlap, serving floors per
    layer, GEMM factors, decode HBM efficiency and MoE compute shares per stack, the scale-out
    collective latency, weight-sync link efficiencies, the RL trainer's share and fixed step time)
    is fitted in turn by a log-spaced grid
    search over its catalog range (a knob given with --set has none: half to twice its value),
    minimising the squared log error of its fitting cases.
    A fit's fit_note says where the trials are flat around it (values that price its cases
    alike: a cap binds the knob there) or that its best is at an end of the range searched.

    Example: ipd calibrate
    """
    from . import validate as val

    _check_options(fmt, output, force)

    from . import api

    _load(catalog, sets)  # the overrides checked, their warnings said, before anything is fitted
    # the fit starts from them on the catalog as shipped, whose sources say which values are fitted
    # knobs (a set value cites the command line: a set serving knob dropped out, a scripting review)
    fitted = val.calibrate(api.load(catalog), cases, sets)
    _emit(fitted, fmt, output)
    if not fitted.items:  # a CSV of no rows is one empty line: say why
        sys.stderr.write(
            "ipd: note: no fitting case reads a fitted catalog value (one citing ipd-calibration): "
            "nothing was calibrated\n"
        )


def _check_plot_target(output: Path | None, force: bool) -> None:
    """Before drawing: a plot goes to the terminal as text, or to a new (or --force) .png file."""
    check_target(output, force)
    if output is not None and str(output) != "-" and output.suffix.lower() != ".png":
        raise InputError(f"{output}: plots are written as PNG; use a .png file name")
    if output is not None and str(output) != "-":
        from .render.plot import check_installed

        check_installed()


def _draw(fig, output: Path | None, force: bool) -> None:
    from .render.plot import to_png, to_text

    if output is None or str(output) == "-":
        write_stdout(to_text(fig))
        return
    to_png(fig, output)
    wrote(output)


@plot_app.command("curve")
def plot_curve(
    systems: Annotated[list[str], typer.Argument(help="Systems to draw, one curve each.")],
    model: Annotated[str, typer.Option("--model", help="Model name or alias.")],
    precision: Annotated[
        str | None, typer.Option("--precision", help="bf16, fp8 or fp4.", callback=_folded)
    ] = None,
    input_tokens: InputTokensOpt = None,
    output_tokens: OutputTokensOpt = None,
    output: PlotOutputOpt = None,
    force: ForceOpt = False,
    catalog: CatalogOpt = None,
    sets: SetOpt = None,
) -> None:
    """Serving throughput-interactivity curves: output tokens/s per GPU against tokens/s per user
    after the first token (interactivity, 1 / TPOT). Each curve names its precision (without
    --precision, each system's at the catalog's serving.default_precision); a note on stderr says
    when they differ.

    Example: ipd plot curve vera-rubin blackwell --model kimi-k2 --precision fp4 -o curves.png
    """
    from .engine.results import ServeCurveResult
    from .render.plot import Figure, Series

    _check_plot_target(output, force)
    from . import api

    cat = _load(catalog, sets)
    fig = Figure(
        f"{model}: throughput vs interactivity", "tokens/s per user (1 / TPOT)", "output tokens/s per GPU"
    )
    from .errors import InfeasibleError

    refused: InfeasibleError | None = None
    drawn: list[ServeCurveResult] = []
    for name in systems:
        try:
            c = api.serve(
                cat,
                name,
                model,
                curve=True,
                precision=precision,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
            )
        except InfeasibleError as e:  # the others are drawn; none: exit 1 (a review: one system that
            if len(systems) == 1:  # could not serve the model dropped every curve)
                raise
            refused = e
            sys.stderr.write(f"ipd: warning: {_cli_message(str(e), ['plot'])}; not drawn\n")
            continue
        assert isinstance(c, ServeCurveResult)  # curve=True
        drawn.append(c)
        fig.series.append(  # each curve names its precision (a review: Rubin at fp4 against A100
            Series(  # at bf16 read as one comparison)
                f"{c.hardware} ({c.precision})",
                [p.interactivity_tokens_per_s for p in c.serving],
                [p.tokens_per_s_per_gpu for p in c.serving],
            )
        )
    if not fig.series and refused is not None:
        raise InfeasibleError(f"no system given can serve {model}: nothing to draw")
    if len({c.precision for c in drawn}) > 1:  # only without --precision: the catalog's policy
        from .catalog.schema import PRECISIONS

        each = ", ".join(f"{c.hardware} at {c.precision}" for c in drawn)
        accs = [cat.accelerator_of(cat.system(c.hardware)) for c in drawn]
        common = next((p for p in PRECISIONS if all(a.dense_tflops(p) for a in accs)), None)
        how = f"; --precision {common} draws them all at one" if common else ""
        sys.stderr.write(
            f"ipd: note: the curves are at different precisions ({each}: serving.default_precision "
            f"'{cat.serving.default_precision}'), not like for like{how}\n"
        )
    _draw(fig, output, force)


@plot_app.command("cost")
def plot_cost(
    systems: Annotated[list[str], typer.Argument(help="Systems to draw, one bar each.")],
    workload: PlotScenarioOpt = DEFAULT_SCENARIO,
    pricing: PricingOpt = "rental",
    output: PlotOutputOpt = None,
    force: ForceOpt = False,
    catalog: CatalogOpt = None,
    sets: SetOpt = None,
) -> None:
    """Lifecycle cost per system, stacked: amortised pre-training, RL post-training, serving.

    Example: ipd plot cost vera-rubin blackwell gb300-nvl72 -o cost.png
    """
    from .engine.pricing import check_pricing
    from .render.plot import Figure

    _check_plot_target(output, force)
    check_pricing(pricing)
    from . import api

    cat = _load(catalog, sets)
    r = _with_flags(api.compare(cat, systems, workload, pricing=pricing), "plot")
    if r.workload.kind != "scenario":
        raise InputError(f"'{workload}' is not a scenario; plot cost needs a lifecycle scenario")
    _warn(r, cat)
    from .render.views import COST_PARTS

    ran = [s.intelligence_per_dollar for s in r.systems]
    bars = {  # the parts named as the compare table names them (`pretraining` read as a whole run)
        s.hardware: {COST_PARTS[k]: v for k, v in ipd.cost_breakdown_usd.model_dump().items()}
        for s, ipd in zip(r.systems, ran, strict=True)
        if ipd is not None  # a system that cannot run it: warned about above
    }
    for s, ipd in zip(r.systems, ran, strict=True):
        if ipd is None:  # it kept its column in compare; here it has no bar (a review: dropped silently)
            sys.stderr.write(
                f"ipd: warning: {s.hardware}: no lifecycle cost (a stage cannot run), so no bar\n"
            )
    years = next((ipd.horizon_years for ipd in ran if ipd is not None), None)
    over = f" over {years:g} year(s)" if years is not None else ""
    _draw(Figure(f"{r.workload.name}: lifecycle cost{over}", "", "USD", bars=bars), output, force)


@plot_app.command("sweep")
def plot_sweep(
    csv_file: Annotated[
        Path,
        typer.Argument(
            help="A sweep's output file: CSV, JSON lines or JSON (`ipd sweep -f csv|jsonl|json`); "
            "'-' reads stdin."
        ),
    ],
    x: Annotated[str, typer.Option("--x", help="The column on the x axis: a varied input (or a metric).")],
    y: Annotated[str, typer.Option("--y", help="The metric column on the y axis.")],
    logx: Annotated[bool, typer.Option("--logx", help="Logarithmic x axis.")] = False,
    where: Annotated[
        list[str] | None,
        typer.Option(
            "--where",
            help="COLUMN=VALUE: plot only the rows whose COLUMN holds VALUE (repeatable), e.g. "
            "--where economics.pue=1.1.",
        ),
    ] = None,
    output: PlotOutputOpt = None,
    force: ForceOpt = False,
) -> None:
    """A sweep's metric against its varied parameter: one line per system and per value of each
    other varied input (labelled with them; an input left at one value is named in the title).
    Where --x is a metric, each line traces the last varied input.

    Example: ipd sweep --vary hardware=vera-rubin,blackwell --vary price_usd_per_gpu_hour=2:8:1 -o s.csv;
    ipd plot sweep s.csv --x price_usd_per_gpu_hour --y serving.usd_per_million_output_tokens
    """
    from .render.plot import Figure, sweep_lines

    _check_plot_target(output, force)
    drawn = sweep_lines(csv_file, x, y, where)
    series = drawn.series
    low = min((v for s in series for v in s.x), default=1.0)
    if logx and low <= 0:
        from ipd_cli.files import shown_name

        raise InputError(f"--logx needs every {x} above 0; {shown_name(csv_file)} has {low:g} (drop --logx)")
    text = output is None or str(output) == "-"
    most = 26 if text else 10  # the text plot's letters, matplotlib's colours
    if len(series) > most:
        by = ", ".join(["hardware", *drawn.by])
        column = drawn.by[-1] if drawn.by else "hardware"
        sys.stderr.write(
            f"ipd: warning: {len(series)} lines (one per {by}): the "
            f"{'letters repeat after 26' if text else 'colours repeat after 10'}; keep one value of a "
            f"column with --where, e.g. --where {column}={series[0].name.rsplit('=', 1)[-1]}\n"
        )
    title = f"{y} against {x}"
    if drawn.fixed:
        title += f" ({', '.join(drawn.fixed)})"
    _draw(Figure(title, x, y, series, logx=logx), output, force)


@app.command()
def schema() -> None:
    """Print the JSON Schema of every data command's output (compare, train, serve, rl, ...).

    Example: ipd schema > ipd-output.schema.json
    """
    import json

    from . import api

    write_stdout(json.dumps(api.output_schema(), indent=2) + "\n")


# Engine and API errors name parameters in backticks (`deadline_days`); the CLI shows the flag that
# sets each. Most flags match their parameter's name; these do not.
PARAM_FLAGS = {
    "sets": "--set",
    "vary": "--vary",
    "deadline_days": "--days",
    "sequence_length": "--seq-len",
    "output_tokens_per_day": "--tokens-per-day",
    "extra_dirs": "--catalog",
}


def _command_flags(args: list[str]) -> dict[str, str]:
    """Parameter name -> flag for the command that ``args`` invoke (built only on an error); an
    on/off switch also as ``name True`` and ``name False`` -> the flag that sets each
    (``disaggregated False`` -> ``--aggregated``)."""
    flags = dict(PARAM_FLAGS)
    command: Any = _command()
    for arg in args:
        sub = getattr(command, "commands", {}).get(arg)
        if sub is None:
            continue
        command = sub
    for param in getattr(command, "params", []):
        long = [o for o in param.opts if o.startswith("--")]
        if param.name and long:
            flags[param.name] = (
                max(long, key=len) if param.name not in PARAM_FLAGS else PARAM_FLAGS[param.name]
            )
        off = [o for o in getattr(param, "secondary_opts", []) if o.startswith("--")]
        if param.name and long and off:
            flags[f"{param.name} True"], flags[f"{param.name} False"] = long[0], off[0]
    return flags


def _cli_message(message: str, args: list[str]) -> str:
    """An engine message with its backticked parameter names shown as this command's flags."""
    import re

    if "`" not in message:
        return message
    flags = _command_flags(args)

    def switch(m: re.Match) -> str:  # "`disaggregated` False": the flag as typed, --aggregated
        return flags.get(f"{m.group(1)} {m.group(2)}", m.group(0))

    message = re.sub(r"`([A-Za-z_][A-Za-z0-9_]*)` (True|False)\b", switch, message)
    return re.sub(r"`([A-Za-z_][A-Za-z0-9_]*)`", lambda m: flags.get(m.group(1), m.group(1)), message)


class _Stored:
    """A result as the catalog cache stored it: its ``model_dump``, for the render layer, which
    reads a result only through ``model_dump``. Stored only where the JSON dump equals the Python
    one (no NaN, which JSON makes null, nor objects), so both modes give the same data."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        import copy

        return copy.deepcopy(self._data)


def _listed_from_cache(args: list[str]) -> bool:
    """``ipd hardware|models|workloads list [-f FORMAT]`` served from the listing the catalog
    cache stores with the validated catalog (same key: every catalog file's content and the
    listing's code), without building the Typer app (its option converters cost more than the
    rest of the command) or any pydantic model. The same checks and output as
    :func:`hardware_list` and its siblings; False (the full path) for any other arguments, a
    format it does not name, or a cache miss."""
    if len(args) < 2 or args[0] not in ("hardware", "models", "workloads") or args[1] != "list":
        return False
    rest, fmt = args[2:], "auto"
    if len(rest) == 2 and rest[0] in ("-f", "--format"):
        fmt = folded_format(rest[1])  # -f JSON, as the full path's callback reads it
    elif len(rest) == 1 and rest[0].startswith("--format="):
        fmt = folded_format(rest[0].removeprefix("--format="))
    elif rest:
        return False
    if fmt not in FORMATS:  # its error, or what click makes of it, comes from the full path
        return False
    from .catalog.cache import stored_listing_and_warnings

    found = stored_listing_and_warnings(args[0])
    if found is None:
        return False
    data, warnings = found
    _check_options(fmt, to_files=False)
    for line in warnings:  # an IPD_CATALOG file's unit slips, as _load says them
        sys.stderr.write(f"ipd: warning: {line}\n")
    _emit(cast("BaseModel", _Stored(data)), fmt)
    return True


class _ReaderGone(Exception):
    """The reader of the output went away (EPIPE: ``ipd ... | head``), carried past click, whose
    own handler would exit 1 with no message."""


@functools.cache
def _command() -> Any:
    """The click command tree of the app, built once per process (Typer would rebuild it, and the
    converters of its options, on every call: tests and the API run many commands in one process)."""
    command = typer.main.get_command(app)
    invoke = command.invoke

    def invoke_to_a_reader(ctx: Any) -> Any:
        try:
            return invoke(ctx)
        except BrokenPipeError as e:
            raise _ReaderGone from e

    command.invoke = invoke_to_a_reader  # type: ignore[method-assign]
    return command


def _reader_gone() -> None:
    """A reader that stops reading (``| head``) is no error: exit 0 quietly, whatever the command
    and however much it had still to write. What is still buffered goes to /dev/null rather than
    to a second EPIPE when Python flushes stdout at exit."""
    from .signals import discard_stdout

    discard_stdout()
    raise SystemExit(0)


def _fail(message: str, code: int) -> None:
    sys.stderr.write(f"ipd: error: {message}\n")
    raise SystemExit(code)


def _click_exceptions() -> Any:
    """Typer vendors click from 0.2x on; older Typer uses the click package."""
    try:
        from typer._click import exceptions
    except ImportError:  # pragma: no cover - depends on the installed Typer
        from click import exceptions  # type: ignore[no-redef]
    return exceptions


# A word a user may take for a command, and where ipd does what it names: `ipd tco` was "No such
# command 'tco'" alone, though owning cost is an option of every estimate (a capacity planner's
# review, 2026-12-05).
_NOT_COMMANDS = {
    "tco": "Owning cost is an option, --pricing tco, of compare, explain, sweep, train, serve and rl"
    " (ipd compare vera-rubin blackwell --pricing tco)",
    "lifecycle": "A lifecycle scenario is run by ipd compare HW... [--scenario NAME|FILE], its formulas"
    " by ipd explain",
    "budget": "A budget is an option, --max-usd USD (and --budget-metric), of compare, train and rl",
    "samples": "Uncertainty is ipd sweep --samples N (P10/P50/P90 over the catalog's ranges)",
}
_NOT_COMMANDS["scenario"] = _NOT_COMMANDS["lifecycle"]
_NOT_COMMANDS["uncertainty"] = _NOT_COMMANDS["samples"]


def _command_hint(message: str, args: list[str]) -> str:
    """' Owning cost is ...' where an unknown command is a word that ipd does with an option."""
    if not message.startswith("No such command"):
        return ""
    word = next((a for a in args if not a.startswith("-")), "")
    hint = _NOT_COMMANDS.get(word.lower())
    return f" {hint}." if hint else ""


def _given_value(e: Exception, args: list[str]) -> str:
    """' (got 'x')' for a bad option value: click's message names the option, not what was typed."""
    opts = getattr(getattr(e, "param", None), "opts", None) or []
    for i, a in enumerate(args):
        for opt in opts:
            if a == opt and i + 1 < len(args):
                return f" (got {args[i + 1]!r})"
            if a.startswith(opt + "="):
                return f" (got {a[len(opt) + 1 :]!r})"
    return ""


def main(argv: list[str] | None = None) -> Any:
    """Console entry point: run the app, turn every error into one line and an exit code.

    SIGINT, SIGTERM and SIGHUP stop the command the same way (see :mod:`ipd_cli.signals`):
    temporary files are removed, a sweep keeps its complete rows, and ipd exits 128 + the
    signal (130, 143, 129) after ``ipd: interrupted``.
    """
    import warnings

    from .errors import Interrupted
    from .signals import installed

    try:
        with installed(), warnings.catch_warnings():
            # numpy's overflow warnings are several lines each; a result that is not finite is
            # refused anyway, in one line (output.check_finite, render.stream.check_chunk)
            warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"ipd_cli\.")
            return _run(argv)
    except Interrupted as e:
        _interrupted(e)


def _interrupted(e: Any) -> None:
    detail = "" if e.name == "SIGINT" else f" ({e.name})"
    sys.stderr.write(f"ipd: interrupted{detail}\n")
    raise SystemExit(e.exit_code) from None


class _ClosedStream(io.TextIOBase):
    """A standard stream the shell closed (``>&-``, ``<&-``), which Python leaves as None: reading
    or writing it is a one-line error, not an AttributeError on None."""

    def __init__(self, name: str, exit_code: ExitCode) -> None:
        self.stream_name, self.exit_code = name, exit_code

    def isatty(self) -> bool:
        return False

    def _closed(self, *_: Any) -> Any:
        raise IpdError(
            f"standard {self.stream_name} is closed (the shell ran ipd without it)", self.exit_code
        )

    read = readline = write = _closed

    def flush(self) -> None:  # at exit: nothing was written
        pass


def _closed_streams() -> None:
    """Stand-ins for the standard streams the shell closed: stdin and stdout say so when used (a
    `-` input is a usage error, output a runtime one; `-o FILE` still works), stderr goes to
    /dev/null so the exit code stays the command's."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (for the process's life)
    if sys.stdout is None:
        sys.stdout = _ClosedStream("output", ExitCode.RUNTIME)
    if sys.stdin is None:
        sys.stdin = _ClosedStream("input", ExitCode.USAGE)


def _command_path(ctx: Any, args: list[str]) -> str:
    """The command a usage error names: its context's, else ``ipd`` and the commands ``args``
    start with (``ipd hardware list``): an option's missing value is raised before the command's
    context (a CLI review: `ipd sweep --vary` said "see 'ipd --help'")."""
    where = ctx.command_path if ctx is not None else "ipd"
    if where != "ipd":
        return where
    group, path = _command(), ["ipd"]
    for word in args:
        group = getattr(group, "commands", {}).get(word)
        if group is None:
            break
        path.append(word)
    return " ".join(path)


def _run(argv: list[str] | None) -> Any:
    debug = os.environ.get("IPD_DEBUG") == "1"
    _closed_streams()
    errors = _click_exceptions()
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        rv = 0 if _listed_from_cache(args) else _command()(args=argv, prog_name="ipd", standalone_mode=False)
    except errors.NoArgsIsHelpError as e:
        sys.stderr.write(e.format_message() + "\n")
        raise SystemExit(int(ExitCode.USAGE)) from None
    except errors.UsageError as e:
        where = _command_path(e.ctx, args)
        got = _given_value(e, args) + _command_hint(e.format_message(), args)
        _fail(f"{e.format_message()}{got} (see '{where} --help')", int(ExitCode.USAGE))
    except IpdError as e:
        if debug:
            raise
        _fail(_cli_message(str(e), args), int(e.exit_code))
    except (KeyboardInterrupt, typer.Abort):  # a KeyboardInterrupt raised by code, not by a signal
        sys.stderr.write("ipd: interrupted\n")
        raise SystemExit(int(ExitCode.INTERRUPTED)) from None
    except (BrokenPipeError, _ReaderGone):
        _reader_gone()
    except ArithmeticError as e:  # overflow or division by zero: extreme inputs, not a usable estimate
        if debug:
            raise
        _fail(f"numbers out of range ({type(e).__name__}: {e}); check the inputs for extreme values", 1)
    except Exception as e:  # a bug, or an input no check caught: still one line, no traceback
        if debug:
            raise
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            # a full disk under a write no command wraps (`ipd --help > /dev/full`)
            from .signals import discard_stdout

            discard_stdout()
            _fail(f"could not write ({e.strerror or e})", 1)
        detail = " ".join(str(e).split())[:300]
        _fail(f"internal error: {type(e).__name__}: {detail} (IPD_DEBUG=1 shows the traceback)", 1)
    if rv == ExitCode.INTERRUPTED:  # Typer turned a KeyboardInterrupt into its exit code
        sys.stderr.write("ipd: interrupted\n")
    raise SystemExit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":  # `python -m ipd_cli.cli` runs as `python -m ipd_cli` (it printed nothing)
    from ipd_cli.__main__ import main as _entry

    _entry()
