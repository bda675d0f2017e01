"""The committed benchmark results as files of the site: every file under bench/results/ is
served at its repository path, so a page links to bench/results/NAME/... (and shows its plots)
as the README does, and a results folder's README.md is a page of its own. They are left out of
the navigation: the pages that cite them are the way in."""
from pathlib import Path

from mkdocs.structure.files import File, Files, InclusionLevel

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"


def on_files(files: Files, config) -> Files:
    for path in sorted(RESULTS.rglob("*")):
        if path.is_file():
            files.append(File(path.relative_to(ROOT).as_posix(), str(ROOT), config["site_dir"],
                              config["use_directory_urls"],
                              inclusion=InclusionLevel.NOT_IN_NAV))
    return files
