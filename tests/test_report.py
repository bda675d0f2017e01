"""bench.report's README speed lines and page: generated from the results files alone, a GPU's
figures where a results file holds them, a line saying there are none where none does, and
each table saying what its file holds."""
import json

import pytest

from bench import report

HEADLINE = {**report.HEADLINE, "device": "gpu"}


def write(folder, name: str, result: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(result))


def peer(device: str, date: str, ours: float, theirs: float) -> dict:
    return {"device": f"{device} machine", "date": date, "commit": "abc",
            "config": {**HEADLINE, "device": device},
            "models": {"ncae_cuda": {"median_seconds": ours, "floor_multiple": 1.25},
                       "torch": {"median_seconds": theirs}},
            "ratio_torch_over_ncae": theirs / ours}


def test_the_speed_lines_say_what_the_latest_results_hold(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    monkeypatch.setattr(report, "ROOT", tmp_path)           # links relative to it
    assert " ".join(report.speed_lines()) == ("No GPU figure is measured yet: "
                                              "`bench/gpu_check.sh first` measures them on the "
                                              "first machine lent one.")
    write(tmp_path / "old-cpu", "peer_torch.json", peer("cpu", "2026-01-01", 10.0, 30.0))
    write(tmp_path / "new-cpu", "peer_torch.json", peer("cpu", "2026-02-01", 8.0, 40.0))
    write(tmp_path / "h100-first" / "peer-ml10m", "peer_torch.json",
          peer("gpu", "2026-03-01", 0.05, 0.8))
    write(tmp_path / "h100-first" / "epoch-time", "epoch_time.json", {
        "date": "2026-03-01", "devices": {"gpu": "H100", "gpu-graphs": "H100"},
        "cases": {"ml20m": {"gpu": {"rows_per_s": 500_000.0, "dense_output_tflop_s": 20.0},
                            "gpu-graphs": {"rows_per_s": 812_345.0,
                                           "dense_output_tflop_s": 31.25}}}})
    text = " ".join(report.speed_lines())
    assert "On cpu machine, an epoch at MovieLens 10M's shape" in text
    assert "takes 8 s, 1.2 times the floor" in text
    assert "5.0 times as long (40 s against 8 s" in text
    assert "10 s" not in text                                   # the older CPU run is not shown
    assert "On gpu machine, an epoch" in text and "16.0 times as long (0.8 s against 0.05 s" in text
    assert "trains 812k users/s on H100 (gpu-graphs, 31.2 TFLOP/s" in text
    assert "No GPU figure" not in text


def test_check_fails_where_the_readme_speed_lines_are_stale(tmp_path, monkeypatch, capsys):
    readme = tmp_path / "README.md"
    readme.write_text(report.README.read_text())
    monkeypatch.setattr(report, "README", readme)
    assert report.main(["--check"]) == 0
    readme.write_text(readme.read_text().replace(report.SPEED_BEGIN,
                                                 report.SPEED_BEGIN + "\nstale"))
    assert report.main(["--check"]) == 1
    assert "speed lines are not what bench/results give" in capsys.readouterr().err
    assert report.main([]) == 0
    assert readme.read_text() == report.README.read_text()


def test_a_quick_run_is_no_figure_of_the_page(tmp_path, monkeypatch):
    """A --quick run's files (tiny data under its cases' names) left in bench/results are not
    drawn into the page or the speed lines as the shapes' figures; before, they were."""
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    monkeypatch.setattr(report, "ROOT", tmp_path)
    timed = {"quick": True, "commit": "abc1234", "date": "2026-03-01",
             "devices": {"gpu": "H100"},
             "ceilings": {"gpu": {"bandwidth_gb_s": 1000.0, "gflop_s": 10000.0}},
             "cases": {"ml20m": {"title": "quick: ml20m's flags", "rows": 10,
                                 "gpu": {"median_after_first": 0.01, "x_floor": 2.0,
                                         "rows_per_s": 1000.0, "dense_output_tflop_s": 1.0}}}}
    write(tmp_path / "quick", "epoch_time.json", timed)
    write(tmp_path / "quick", "floors.json", {"quick": True, "floors": []})
    assert report.section() == "\n".join([report.BEGIN, "", "No benchmark results are "
                                                             "committed yet.", "", report.END])
    assert "users/s" not in " ".join(report.speed_lines())
    write(tmp_path / "full", "epoch_time.json", {**timed, "quick": False})
    assert "| quick: ml20m's flags | 0.01 (2.0x) |" in report.section()


def test_commits_show_in_one_short_form(tmp_path, monkeypatch):
    """A GPU run's file holds its commit whole ($COMMIT), a CPU run's as git shortens it: the
    page shows both short (before, 40 digits beside 7)."""
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    monkeypatch.setattr(report, "ROOT", tmp_path)
    write(tmp_path / "gpu", "kernel_peers.json", {
        "device": "H200", "commit": "c74178d3469506ad1b89a325e9607ec977af94c5",
        "date": "2026-11-28", "bandwidth_gb_s": 4000.0, "shapes": {}})
    text = report.section()
    assert "H200, commit c74178d, 2026-11-28" in text and "c74178d3" not in text


def test_tables_say_what_their_files_hold(tmp_path, monkeypatch, capsys):
    """The scalability table is titled with its file's data set (before: "ML-10M shape" for
    any), a mean batch recorded as None reads as a dash (before: a TypeError), and the usage
    names the command as it is run."""
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    monkeypatch.setattr(report, "ROOT", tmp_path)
    origin = {"device": "cpu", "commit": "abc1234", "date": "2026-03-01"}
    write(tmp_path / "s", "scalability.json", {**origin, "data": "synthetic-tiny", "table7": [
        {"K": 8, "D": d, "rows": int(50 * d), "columns": 4000, "seconds": 0.5, "x_floor": 2.0}
        for d in (0.5, 1.0)]})
    level = {"clients": 1, "requests_per_s": 100.0, "p50_ms": 1.0, "p99_ms": 2.0,
             "mean_batch": None}
    write(tmp_path / "l", "serve_load.json", {**origin, "machine": "box", "n": 10, "shapes": [
        {"shape": "tiny", "offline_users_per_s": 900.0,
         "levels": [{**level, "endpoint": "recommend"}, {**level, "endpoint": "healthz"}]}]})
    text = report.section()
    assert ("Seconds per epoch on synthetic-tiny (50 rows x 4,000 columns at D = 100%: "
            "item-based, explicit, hidden K,K)") in text and "ML-10M" not in text
    assert "| tiny | 1 | 100 | 1.00 | 2.00 | - | 100 | 900 |" in text and "nan" not in text
    with pytest.raises(SystemExit):
        report.main(["--help"])
    assert capsys.readouterr().out.startswith("usage: python -m bench.report ")


@pytest.mark.parametrize("rate, said", [
    (54321.0, "on TF32 54,321 GFLOP/s"),
    (None, "on TF32 none measured, so a TF32 case's FLOPs bound nothing")])
def test_every_table_says_the_tf32_rate_in_one_wording(tmp_path, monkeypatch, rate, said):
    """epoch_time.md, floors.md and the page's epoch-time table said a TF32 rate, or none, each
    in words of its own (before, "on TF32 54321 GFLOP/s", "54,321 on TF32", and for none "not
    measured", "none measured on TF32, ...", or nothing)."""
    from bench import epoch_time, floors
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    monkeypatch.setattr(report, "ROOT", tmp_path)
    ceilings = {"bandwidth_gb_s": 3000.0, "gflop_s": 48000.0, "tf32_gflop_s": rate}
    timed = {"commit": "abc1234", "date": "2026-03-01", "devices": {"gpu": "H200"},
             "ceilings": {"gpu": ceilings}, "cases": {}}
    write(tmp_path / "epoch-time", "epoch_time.json", timed)
    counted = {"ceilings": {**ceilings, "source": "epoch_time.json", "device": "H200",
                            "commit": "abc1234", "date": "2026-03-01"},
               "commit": "abc1234", "date": "2026-03-02", "floors": []}
    for text in ("\n".join(epoch_time.markdown(timed)), "\n".join(floors.table(counted)),
                 "\n".join(report.epoch_time_tables())):
        assert said in text, text
