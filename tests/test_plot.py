"""ipd plot (PNG and text) and xlsx output."""

from __future__ import annotations

import pytest
from helpers import run_cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_curve_png_is_a_valid_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "curves.png"
    r = run_cli(
        "plot",
        "curve",
        "vera-rubin",
        "blackwell",
        "--model",
        "llama-3.3-70b",
        "--precision",
        "fp8",
        "-o",
        str(out),
    )
    assert r.code == 0, r.stderr
    assert out.read_bytes()[:8] == PNG_MAGIC and out.stat().st_size > 5000


def test_cost_and_sweep_plots(tmp_path):
    pytest.importorskip("matplotlib")
    r = run_cli(
        "plot",
        "cost",
        "vera-rubin",
        "blackwell",
        "--scenario",
        "open-model-agent",
        "-o",
        str(tmp_path / "c.png"),
    )
    assert r.code == 0, r.stderr
    assert (tmp_path / "c.png").read_bytes()[:8] == PNG_MAGIC
    csv_file = tmp_path / "s.csv"
    run_cli(
        "sweep",
        "--vary",
        "hardware=vera-rubin,blackwell",
        "--vary",
        "price_usd_per_gpu_hour=2:6:1",
        "--workload",
        "pretrain-10t-moe",
        "-o",
        str(csv_file),
    )
    r = run_cli(
        "plot",
        "sweep",
        str(csv_file),
        "--x",
        "price_usd_per_gpu_hour",
        "--y",
        "pretraining.cost_usd",
        "-o",
        str(tmp_path / "s.png"),
    )
    assert r.code == 0, r.stderr
    assert (tmp_path / "s.png").read_bytes()[:8] == PNG_MAGIC


def test_text_plot_without_a_file():
    r = run_cli("plot", "curve", "vera-rubin", "--model", "llama-3.3-70b", "--precision", "fp8")
    assert r.code == 0 and "a = vera-rubin-nvl72" in r.stdout and "tokens/s per user" in r.stdout
    r = run_cli("plot", "cost", "vera-rubin", "blackwell")
    assert r.code == 0 and "gb200-nvl72" in r.stdout


def test_plot_errors(tmp_path):
    csv_file = tmp_path / "s.csv"
    csv_file.write_text("hardware,x,y\na,1,2\n")
    r = run_cli("plot", "sweep", str(csv_file), "--x", "x", "--y", "yy")
    assert r.code == 2 and "did you mean 'y'" in r.stderr
    r = run_cli("plot", "cost", "vera-rubin", "-o", str(tmp_path / "c.jpg"))
    assert r.code == 2 and "PNG" in r.stderr


def test_xlsx_output(tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    out = tmp_path / "r.xlsx"
    r = run_cli("compare", "vera-rubin", "blackwell", "--workload", "pretrain-10t-moe", "-o", str(out))
    assert r.code == 0, r.stderr
    ws = openpyxl.load_workbook(out).active
    header = [c.value for c in ws[1]]
    assert header[0] == "hardware" and "pretraining.cost_usd" in header
    assert ws.cell(row=2, column=1).value == "vera-rubin-nvl72"
    assert isinstance(ws.cell(row=2, column=header.index("pretraining.cost_usd") + 1).value, float)
    # the sources sheet gives each cited source's URL, as the catalog does (a cross-command review:
    # the url column was empty, the assumptions carrying only titles and dates)
    from ipd_cli import load

    cat = load()
    rows = list(openpyxl.load_workbook(out)["sources"].iter_rows(values_only=True))
    assert rows[0] == ("source", "title", "url", "date") and len(rows) > 10
    assert [(sid, url) for sid, _, url, _ in rows[1:] if url != cat.sources[sid].url] == []
    assert rows[1:] and sum(url is not None for _, _, url, _ in rows[1:]) > len(rows[1:]) / 2
    assert run_cli("compare", "vera-rubin", "--format", "xlsx").code == 2


def test_xlsx_keeps_text_as_text(tmp_path):
    # a catalog or workload string that starts with "=" was stored as a live formula (a note
    # "=HYPERLINK(...)" became a link in a planner's workbook), and one with a control character
    # failed the whole workbook with an internal error where JSON and CSV wrote it (a review)
    openpyxl = pytest.importorskip("openpyxl")
    import numpy as np

    from ipd_cli.render.xlsx import SweepBook

    out = tmp_path / "r.xlsx"
    text = "=HYPERLINK(A1) bell\\a"  # YAML's escape of the bell character
    r = run_cli(
        "compare", "gb200", "--workload", "pretrain-10t-moe", "--set",
        f'systems.gb200-nvl72.description="{text}"', "-o", str(out),
    )  # fmt: skip
    assert r.code == 0, r.stderr
    ws = openpyxl.load_workbook(out)["results"]
    header = [c.value for c in ws[1]]
    cell = ws.cell(row=2, column=header.index("description") + 1)
    assert (cell.data_type, cell.value) == ("s", "=HYPERLINK(A1) bell\\x07")
    # a sweep's workbook, written row by row
    book = SweepBook()
    book.add({"hardware": np.array(["=1+1", "a\x07b"], dtype=object), "x": np.array([1.5, 2.5])})
    (tmp_path / "s.xlsx").write_bytes(book.finish([]))
    rows = list(openpyxl.load_workbook(tmp_path / "s.xlsx")["results"].iter_rows(min_row=2))
    assert [(c.data_type, c.value) for c, _ in rows] == [("s", "=1+1"), ("s", "a\\x07b")]


def test_a_missing_extra_is_refused_before_anything_is_computed(tmp_path, monkeypatch):
    # without openpyxl a sweep ran its estimates (11 s for 12) before saying so, and a PNG plot
    # computed its systems first (a review): the options are checked first (README)
    import importlib.util

    import ipd_cli.engine.sweep

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("openpyxl", "matplotlib") else real(name, *a),
    )
    monkeypatch.setattr(ipd_cli.engine.sweep, "plan_draws", lambda *a, **k: pytest.fail("computed"))
    for args, extra in [
        (
            ("sweep", "--vary", "hardware=vera-rubin", "-o", str(tmp_path / "s.xlsx")),
            "xlsx output needs openpyxl",
        ),
        (("compare", "vera-rubin", "-o", str(tmp_path / "c.xlsx")), "xlsx output needs openpyxl"),
        (("plot", "cost", "vera-rubin", "-o", str(tmp_path / "c.png")), "PNG plots need matplotlib"),
    ]:
        r = run_cli(*args)
        assert (r.code, r.stdout) == (2, ""), r.stderr
        assert r.stderr.startswith(f"ipd: error: {extra}: pip install 'intelligence-per-dollar[")
        assert "note:" not in r.stderr  # nothing ran
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_written_as_json_lines_or_json_plots_as_its_csv(tmp_path):
    # a JSON lines sweep was read as CSV: "no column 'x'; did you mean ' "x": 2'?" (a help audit)
    args = ("--vary", "hardware=vera-rubin,blackwell", "--vary", "price_usd_per_gpu_hour=2:4:1")
    plots = []
    for fmt in ("csv", "jsonl", "json"):
        out = tmp_path / f"s.{fmt}"
        r = run_cli("sweep", *args, "--workload", "pretrain-10t-moe", "-f", fmt, "-o", str(out))
        assert r.code == 0, r.stderr
        r = run_cli("plot", "sweep", str(out), "--x", "price_usd_per_gpu_hour", "--y", "pretraining.cost_usd")
        assert r.code == 0, r.stderr
        plots.append(r.stdout)
    assert plots[0] == plots[1] == plots[2] and "a = vera-rubin-nvl72" in plots[0]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hardware": "h", "x": 1, "y": 2}\n{"x": 2,\n')
    r = run_cli("plot", "sweep", str(bad), "--x", "x", "--y", "y")
    assert r.code == 2 and "bad.jsonl: line 2: not a row of a sweep's JSON lines" in r.stderr
    flags = tmp_path / "b.jsonl"
    flags.write_text('{"hardware": "h", "x": 1, "y": true}\n')
    r = run_cli("plot", "sweep", str(flags), "--x", "x", "--y", "y")
    assert r.code == 2 and "line 1: no number in column 'x' or 'y'" in r.stderr


def test_the_cost_plot_names_its_parts_and_horizon_as_the_compare_table(monkeypatch):
    # an output review: the stacks read `pretraining` (the amortised share, not a run) and the title
    # named no horizon
    from ipd_cli import cli

    drawn = []
    monkeypatch.setattr(cli, "_draw", lambda fig, output, force: drawn.append(fig))
    r = run_cli("plot", "cost", "vera-rubin", "--set", "workload.horizon_years=2")
    assert r.code == 0, r.stderr
    [fig] = drawn
    assert fig.title == "frontier-agentic: lifecycle cost over 2 year(s)"
    assert list(fig.bars["vera-rubin-nvl72"]) == ["pre-training (amortised)", "RL post-training", "serving"]


def _stdin(monkeypatch, text: str) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8"))


def test_plot_sweep_reads_standard_input_with_a_dash(tmp_path, monkeypatch):
    # `-` was "-: no such file" where --workload - and ipd diff - read stdin (the input review)
    text = "hardware,x,y\na,1,2\na,2,4\nb,1,3\n"
    csv_file = tmp_path / "s.csv"
    csv_file.write_text(text)
    from_file = run_cli("plot", "sweep", str(csv_file), "--x", "x", "--y", "y")
    _stdin(monkeypatch, text)
    r = run_cli("plot", "sweep", "-", "--x", "x", "--y", "y")
    assert r.code == 0 and r.stdout == from_file.stdout, r.stderr
    assert "y: 2 .. 4" in r.stdout and "a = a" in r.stdout and "b = b" in r.stdout
    _stdin(monkeypatch, "hardware,x,y\na,1,2\n")
    r = run_cli("plot", "sweep", "-", "--x", "x", "--y", "yy")
    assert r.code == 2 and r.stderr == "ipd: error: <stdin>: no column 'yy'; did you mean 'y'?\n"


def test_a_sweep_of_no_rows_is_an_input_error(tmp_path, monkeypatch):
    # a header alone drew "(no points)" and exited 0 (the input review)
    csv_file = tmp_path / "s.csv"
    csv_file.write_text("hardware,x,y\n")
    r = run_cli("plot", "sweep", str(csv_file), "--x", "x", "--y", "y")
    assert r.code == 2 and r.stdout == "", r.stdout
    assert (
        r.stderr
        == f"ipd: error: {csv_file}: no rows, only the columns' names; give a sweep's output with its rows\n"
    )
    _stdin(monkeypatch, '[\n{"hardware": "a", "x": 1, "y": 2}\n]\n')  # one row of JSON: a plot
    assert run_cli("plot", "sweep", "-", "--x", "x", "--y", "y").code == 0
    # an empty file or JSON array has no columns either: it said "no column 'x'" (a review)
    for text in ("", "[\n]\n", "[]\n", " [ ] "):  # "[]" on one line was "line 1: not a row"
        csv_file.write_text(text)
        r = run_cli("plot", "sweep", str(csv_file), "--x", "x", "--y", "y")
        assert (
            r.code == 2
            and r.stderr
            == f"ipd: error: {csv_file}: no rows and no columns; give a sweep's output with its rows\n"
        )


def test_a_stray_empty_array_among_json_lines_is_not_a_row(tmp_path):
    # a review: `[]` was skipped on any line, so a row, [], a row plotted without a word; only a
    # whole file of [] is "no rows"
    path = tmp_path / "mid.jsonl"
    path.write_text('{"hardware": "a", "x": 1, "y": 2}\n[]\n{"hardware": "a", "x": 2, "y": 3}\n')
    r = run_cli("plot", "sweep", str(path), "--x", "x", "--y", "y")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.startswith(f"ipd: error: {path}: line 2: not a row of a sweep's JSON lines")


def test_a_sweep_as_one_json_array_on_a_line_plots(tmp_path):
    # the helper's note: `ipd sweep -f json | jq -c .` writes the array on one line, which was
    # refused as "not a row"; its rows plot as the multi-line array's do
    rows = '{"hardware": "a", "x": 1, "y": 2}, {"hardware": "a", "x": 2, "y": 3}'
    one, many = tmp_path / "one.json", tmp_path / "many.json"
    one.write_text(f"[{rows}]\n")
    many.write_text("[\n" + rows.replace("}, {", "},\n{") + "\n]\n")
    from ipd_cli.render.plot import sweep_series

    assert sweep_series(one, "x", "y") == sweep_series(many, "x", "y")
    [series] = sweep_series(one, "x", "y")
    assert (series.name, series.x, series.y) == ("a", [1.0, 2.0], [2.0, 3.0])
    one.write_text(f"[{rows}]\n" + '{"hardware": "b", "x": 1, "y": 2}\n')  # more after it: not merged
    r = run_cli("plot", "sweep", str(one), "--x", "x", "--y", "y")
    assert r.code == 2 and f"{one}: line 2: more after the JSON array of line 1; give one sweep" in r.stderr
    one.write_text('[{"hardware": "a", "x": 1, "y": 2}, 3]\n')  # not every element a row
    r = run_cli("plot", "sweep", str(one), "--x", "x", "--y", "y")
    assert r.code == 2 and "line 1: not a row of a sweep's JSON lines" in r.stderr


def test_a_one_line_json_array_is_read_a_row_at_a_time(tmp_path):
    # a review: parsed whole, 95 MB of one-line array took 2.5 GB; decoded row by row, its errors
    # name the element, and an array that does not close says so
    row = '{"hardware": "a", "x": 1, "y": 2}'
    path = tmp_path / "s.json"
    for text, said in (
        (f"[{row}, {row}, 7]", "line 1: not a row of a sweep's JSON lines (element 3 of its array)"),
        (f"[{row}, {row}", "line 1: the JSON array does not close (no ']' after element 2)"),
        (f"[{row}] {row}", "line 1: not a row of a sweep's JSON lines (element 2 of its array)"),
        (f"[{row}, nul]", "line 1: not a row of a sweep's JSON lines (element 2 of its array)"),
    ):
        path.write_text(text + "\n")
        r = run_cli("plot", "sweep", str(path), "--x", "x", "--y", "y")
        assert r.code == 2 and r.stderr.startswith(f"ipd: error: {path}: {said}"), r.stderr
    path.write_text(f"[ {row} ,{row} ]\n")  # spaces around the separators
    assert run_cli("plot", "sweep", str(path), "--x", "x", "--y", "y").code == 0


def test_a_system_that_cannot_serve_or_run_is_left_out_of_a_plot_with_a_word():
    # a review: `plot curve vera-rubin v100 --model moe-10t` exited 1 and drew nothing, though Rubin
    # serves the model; `plot cost vera-rubin a100` drew one bar without saying why the other is gone
    # (text plots: no matplotlib needed)
    r = run_cli("plot", "curve", "vera-rubin", "v100", "--model", "moe-10t")
    assert r.code == 0 and "a = vera-rubin-nvl72" in r.stdout and "v100-sxm2" not in r.stdout
    assert r.stderr.startswith("ipd: warning: moe-10t at bf16 needs ") and r.stderr.endswith("; not drawn\n")
    alone = run_cli("plot", "curve", "v100", "--model", "moe-10t")
    assert alone.code == 1 and alone.stderr.startswith("ipd: error: moe-10t at bf16 needs ")
    cost = run_cli("plot", "cost", "vera-rubin", "a100")
    assert cost.code == 0
    assert "ipd: warning: a100-sxm: no lifecycle cost (a stage cannot run), so no bar\n" in cost.stderr


# a sweep's CSV as `ipd sweep` writes it: the system, the varied inputs, then the metrics
TWO_AXES = (
    "hardware,price_usd_per_gpu_hour,economics.pue,intelligence_per_dollar.solved_tasks_per_kusd,overrides\n"
    "r,8,1.1,10,o\nr,8,1.5,11,o\nr,4,1.1,20,o\nr,4,1.5,21,o\n"
    "g,8,1.1,30,o\ng,8,1.5,31,o\ng,4,1.1,40,o\ng,4,1.5,41,o\n"
)
TPK = "intelligence_per_dollar.solved_tasks_per_kusd"


def _plot_prices(path, *more):
    """`ipd plot sweep PATH` of solved tasks per $1k against the GPU-hour price (and ``more``)."""
    return run_cli("plot", "sweep", str(path), "--x", "price_usd_per_gpu_hour", "--y", TPK, *more)


def test_a_second_varied_input_draws_a_line_per_value(tmp_path, monkeypatch):
    # a review: a sweep that also varied economics.pue joined each system's rows into one sawtooth
    # line (4, 4, 8, 8 on x); now one line per system and PUE, labelled, joined in x order
    from ipd_cli import cli
    from ipd_cli.render.plot import sweep_lines

    path = tmp_path / "s.csv"
    path.write_text(TWO_AXES)
    drawn = sweep_lines(path, "price_usd_per_gpu_hour", TPK)
    assert (drawn.by, drawn.fixed, drawn.traced) == (["economics.pue"], [], None)
    assert [(s.name, s.x, s.y) for s in drawn.series] == [
        ("r, economics.pue=1.1", [4.0, 8.0], [20.0, 10.0]),
        ("r, economics.pue=1.5", [4.0, 8.0], [21.0, 11.0]),
        ("g, economics.pue=1.1", [4.0, 8.0], [40.0, 30.0]),
        ("g, economics.pue=1.5", [4.0, 8.0], [41.0, 31.0]),
    ]
    r = _plot_prices(path)
    assert r.code == 0 and r.stderr == "", r.stderr
    assert r.stdout.endswith(
        "  a = r, economics.pue=1.1\n  b = r, economics.pue=1.5\n"
        "  c = g, economics.pue=1.1\n  d = g, economics.pue=1.5\n"
    )
    # percentile and ratio columns are metrics too; a single-value input goes to the title
    sampled = tmp_path / "p.csv"
    sampled.write_text(
        f"hardware,a,b,{TPK}.p50,{TPK}.ratio.p10\nr,1,7,5,1\nr,2,7,6,1\ng,1,7,3,0.6\ng,2,7,4,0.7\n"
    )
    drawn = sweep_lines(sampled, "a", f"{TPK}.p50")
    assert (drawn.by, drawn.fixed) == ([], ["b=7"])
    assert [(s.name, s.x, s.y) for s in drawn.series] == [
        ("r", [1.0, 2.0], [5.0, 6.0]),
        ("g", [1.0, 2.0], [3.0, 4.0]),
    ]
    r = run_cli("plot", "sweep", str(sampled), "--x", "a", "--y", f"{TPK}.p50")
    assert r.stdout.startswith(f"{TPK}.p50 against a (b=7)\n")
    # the PNG draws the same figure (its series are what the legend names)
    import ipd_cli.render.plot

    monkeypatch.setattr(ipd_cli.render.plot, "check_installed", lambda: None)
    figs = []
    monkeypatch.setattr(cli, "_draw", lambda fig, output, force: figs.append(fig))
    r = _plot_prices(path, "-o", str(tmp_path / "s.png"))
    assert r.code == 0, r.stderr
    assert [s.name for s in figs[0].series] == [
        s.name for s in sweep_lines(path, "price_usd_per_gpu_hour", TPK).series
    ]


def test_a_real_two_axis_sweep_plots_a_line_per_system_and_value(tmp_path):
    # the review's case, end to end: ipd sweep's own CSV, and its JSON lines alike
    args = ("--vary", "hardware=vera-rubin,blackwell", "--vary", "price_usd_per_gpu_hour=4:8:2")
    args += (
        "--vary",
        "economics.pue=1.1,1.5",
        "--workload",
        "pretrain-10t-moe",
        "--metrics",
        "pretraining.cost_usd",
    )
    plots = []
    for fmt in ("csv", "jsonl"):
        out = tmp_path / f"s.{fmt}"
        assert run_cli("sweep", *args, "-f", fmt, "-o", str(out)).code == 0
        r = run_cli("plot", "sweep", str(out), "--x", "price_usd_per_gpu_hour", "--y", "pretraining.cost_usd")
        assert r.code == 0, r.stderr
        plots.append(r.stdout)
    assert plots[0] == plots[1]
    assert plots[0].endswith(
        "  a = vera-rubin-nvl72, economics.pue=1.1\n  b = vera-rubin-nvl72, economics.pue=1.5\n"
        "  c = gb200-nvl72, economics.pue=1.1\n  d = gb200-nvl72, economics.pue=1.5\n"
    )
    if importlib_has("matplotlib"):
        png = tmp_path / "s.png"
        r = run_cli("plot", "sweep", str(tmp_path / "s.csv"), "--x", "price_usd_per_gpu_hour", "--y",
                    "pretraining.cost_usd", "-o", str(png))  # fmt: skip
        assert r.code == 0 and png.read_bytes()[:8] == PNG_MAGIC


def importlib_has(name: str) -> bool:
    from importlib.util import find_spec

    return find_spec(name) is not None


def test_where_keeps_the_rows_of_one_value(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text(TWO_AXES)
    r = _plot_prices(path, "--where", "economics.pue=1.50")
    assert r.code == 0, r.stderr
    assert r.stdout.startswith(f"{TPK} against price_usd_per_gpu_hour (economics.pue=1.5)\n{TPK}: 11 .. 41\n")
    assert r.stdout.endswith("  a = r\n  b = g\n")
    for where, said in (
        ("economics.pue=1.2", f"{path}: no row has economics.pue=1.2; its values: 1.1, 1.5"),
        ("pue=1.1", f"{path}: no column 'pue'; did you mean 'economics.pue'?"),
        ("economics.pue", "--where 'economics.pue': give COLUMN=VALUE, e.g. --where economics.pue=1.1"),
    ):
        r = _plot_prices(path, "--where", where)
        assert (r.code, r.stdout, r.stderr) == (2, "", f"ipd: error: {said}\n")
    r = _plot_prices(path, "--where", "economics.pue=1.1", "--where", "hardware=x")
    assert r.stderr == f"ipd: error: {path}: no row has hardware=x; its values: g, r\n"


def test_a_metric_on_x_traces_the_last_varied_input(tmp_path):
    # x a metric (cost against tasks per $1k, say): each line follows the last varied input in the
    # rows' order, one per system and value of the others
    from ipd_cli.render.plot import sweep_lines

    path = tmp_path / "s.csv"
    path.write_text(TWO_AXES)
    drawn = sweep_lines(path, TPK, TPK)
    assert (drawn.by, drawn.traced) == (["price_usd_per_gpu_hour"], "economics.pue")
    assert [(s.name, s.x) for s in drawn.series] == [
        ("r, price_usd_per_gpu_hour=8", [10.0, 11.0]),
        ("r, price_usd_per_gpu_hour=4", [20.0, 21.0]),
        ("g, price_usd_per_gpu_hour=8", [30.0, 31.0]),
        ("g, price_usd_per_gpu_hour=4", [40.0, 41.0]),
    ]


def test_more_lines_than_letters_is_warned(tmp_path, monkeypatch):
    rows = "".join(f"h,{x},{v},{x * v}\n" for v in range(27) for x in (1, 2))
    path = tmp_path / "s.csv"
    path.write_text(f"hardware,x,v,{TPK}\n{rows}")
    r = run_cli("plot", "sweep", str(path), "--x", "x", "--y", TPK)
    assert r.code == 0 and "  a = h, v=26\n" in r.stdout
    assert r.stderr == (
        "ipd: warning: 27 lines (one per hardware, v): the letters repeat after 26; keep one value of "
        "a column with --where, e.g. --where v=0\n"
    )
    # a PNG: more than matplotlib's 10 colours; 11 systems alone, told apart by nothing else
    import ipd_cli.render.plot
    from ipd_cli import cli

    monkeypatch.setattr(ipd_cli.render.plot, "check_installed", lambda: None)
    monkeypatch.setattr(cli, "_draw", lambda fig, output, force: None)
    path.write_text(f"hardware,x,{TPK}\n" + "".join(f"h{k},1,{k}\n" for k in range(11)))
    r = run_cli("plot", "sweep", str(path), "--x", "x", "--y", TPK, "-o", str(tmp_path / "s.png"))
    assert r.code == 0 and r.stderr == (
        "ipd: warning: 11 lines (one per hardware): the colours repeat after 10; keep one value of "
        "a column with --where, e.g. --where hardware=h0\n"
    )


def test_curves_name_their_precision_and_differing_ones_are_noted(monkeypatch):
    # a review: Rubin at fp4 and A100 at bf16 (it has no fp4) were drawn side by side unnamed
    r = run_cli("plot", "curve", "vera-rubin", "a100", "--model", "llama-3.3-70b")
    assert r.code == 0, r.stderr
    assert r.stdout.endswith("  a = vera-rubin-nvl72 (fp4)\n  b = a100-sxm (bf16)\n")
    assert r.stderr == (
        "ipd: note: the curves are at different precisions (vera-rubin-nvl72 at fp4, a100-sxm at bf16: "
        "serving.default_precision 'narrowest'), not like for like; --precision bf16 draws them all at one\n"
    )
    same = run_cli("plot", "curve", "vera-rubin", "a100", "--model", "llama-3.3-70b", "--precision", "bf16")
    assert same.code == 0 and same.stderr == ""
    assert same.stdout.endswith("  a = vera-rubin-nvl72 (bf16)\n  b = a100-sxm (bf16)\n")
    # the PNG's legend: the same names
    import ipd_cli.render.plot
    from ipd_cli import cli

    monkeypatch.setattr(ipd_cli.render.plot, "check_installed", lambda: None)

    figs = []
    monkeypatch.setattr(cli, "_draw", lambda fig, output, force: figs.append(fig))
    r = run_cli("plot", "curve", "vera-rubin", "hopper", "--model", "llama-3.3-70b", "-o", "c.png")
    assert r.code == 0 and [s.name for s in figs[0].series] == ["vera-rubin-nvl72 (fp4)", "h100-sxm (fp8)"]
    assert "vera-rubin-nvl72 at fp4, h100-sxm at fp8" in r.stderr and "--precision fp8 draws" in r.stderr
