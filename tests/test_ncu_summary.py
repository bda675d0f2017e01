"""bench/ncu_summary.py on a raw-page CSV written by hand in Nsight Compute's layout (metric
names, a units row, a row per launch), with the figures worked out by hand."""
import pytest

from bench import ncu_summary

STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
HEADER = ["ID", "Process ID", "Kernel Name", ncu_summary.DURATION, ncu_summary.DRAM,
          ncu_summary.OCCUPANCY, ncu_summary.REGISTERS, STALL.format("long_scoreboard"),
          STALL.format("selected"), STALL.format("barrier"), STALL.format("wait")]
UNITS = ["", "", "", "usecond", "%", "%", "register/thread", "", "", "", ""]
LAUNCHES = [
    ["0", "7", "gather_forward_kernel(float*, int)", "30", "80", "60", "40", "9.5", "1", "0.5",
     "2"],
    ["1", "7", "adam_kernel(float*)", "10", "90", "95", "32", "3", "1", "0", "1"],
    ["2", "7", "gather_forward_kernel(float*, int)", "50", "70", "50", "40", "7.5", "1", "1.5",
     "2"],
]


def write(tmp_path, rows):
    path = tmp_path / "profile.csv"
    path.write_text("==PROF== a line ncu prints\n" + "\n".join(
        ",".join(f'"{cell}"' for cell in row) for row in rows) + "\n")
    return path


def test_kernels_by_share_of_time_with_their_means(tmp_path):
    rows, units = ncu_summary.read(write(tmp_path, [HEADER, UNITS, *LAUNCHES]))
    summary = ncu_summary.summarize(rows, units)
    assert [s["kernel"] for s in summary] == ["gather_forward_kernel", "adam_kernel"]
    gather, adam = summary
    assert gather["launches"] == 2 and gather["us"] == 40.0
    assert gather["share"] == 80 / 90 and adam["share"] == 10 / 90
    assert (gather["dram_pct"], gather["occupancy_pct"], gather["registers"]) == (75, 55, 40)
    assert gather["stalls"] == [("long_scoreboard", 8.5), ("wait", 2.0), ("barrier", 1.0)]
    text = ncu_summary.table(summary)
    assert "| gather_forward_kernel | 2 | 40.0 | 89% | 75% | 55% | 40 | long_scoreboard 8.5, " \
           "wait 2.0, barrier 1.0 |" in text


def test_nanoseconds_without_a_units_row_and_an_empty_profile(tmp_path, capsys):
    rows, units = ncu_summary.read(write(tmp_path, [HEADER, *LAUNCHES]))
    assert units == {} and len(rows) == 3
    assert ncu_summary.summarize(rows, units)[0]["us"] == 0.04        # ncu's default: ns
    assert ncu_summary.main([str(write(tmp_path, [HEADER, UNITS]))]) == 2
    assert "no profiled launches" in capsys.readouterr().err


@pytest.mark.parametrize("name, why", [("none.csv", "No such file or directory"),
                                       (".", "Is a directory")])
def test_a_file_that_cannot_be_read_is_refused_in_a_line(tmp_path, capsys, name, why):
    with pytest.raises(SystemExit) as refused:
        ncu_summary.main([str(tmp_path / name)])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and f"cannot read it ({why})" in err, err


@pytest.mark.parametrize("rows", [
    [],                                                 # an empty file: ncu wrote nothing
    [["a", "b"], ["1", "2"]],                           # not ncu's: no ID, no Kernel Name
    [["ID", "x"], ["0", "2"]],                          # another page's: no Kernel Name
    b"\x81\x00binary",                                  # not text: the .ncu-rep itself
])
def test_a_file_that_is_not_a_raw_page_is_refused_in_a_line(tmp_path, capsys, rows):
    # before, a traceback: IndexError, ValueError ('ID' is not in list), KeyError
    path = tmp_path / "profile.csv"
    if isinstance(rows, bytes):
        path.write_bytes(rows)
    else:
        write(tmp_path, rows)
    with pytest.raises(SystemExit) as refused:
        ncu_summary.main([str(path)])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and "Traceback" not in err, err
    assert "not the raw page of an Nsight Compute report (no ID and Kernel Name columns): " \
           "save it with ncu --import REPORT --page raw --csv" in err, err
