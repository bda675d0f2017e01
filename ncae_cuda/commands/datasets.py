"""List the named data sets, or describe one (ncae_cuda.data.datasets).

    python -m ncae_cuda.datasets list
    python -m ncae_cuda.datasets describe ml-100k --data-dir ../shared/data
    python -m ncae_cuda.datasets describe ratings.csv
"""
from __future__ import annotations

import sys
import warnings

from ..cli import Parser, check_seed
from ..data.datasets import (
    DATA_ENV,
    DATASETS,
    CatalogueWarning,
    Generated,
    Published,
    UnverifiedArchiveWarning,
    folder_unread,
    load,
)
from ..data.interactions import Interactions
from ..errors import NcaeError
from .flags import add_file_flags


def describe(data: Interactions, entry: Published | Generated | None) -> str:
    """The paper's Table 2 columns (users, items, interactions, sparsity), as read, and what the
    data has; `entry` None: a data file."""
    ratings = ("none" if data.ratings is None
               else f"yes, {data.rating_scale[0]:g} to {data.rating_scale[1]:g}")
    feedback = "explicit" if data.ratings is not None else "implicit"
    lines = [
        f"{entry.name}: {entry.description}" if entry else f"{data.name}: a data file, "
                                                           f"{data.columns}",
        f"  users         {data.n_users:,}",
        f"  items         {data.n_items:,}",
        f"  interactions  {data.nnz:,}",
        f"  sparsity      {100 * data.sparsity:.2f}%",
        f"  ratings       {ratings}",
        f"  timestamps    {'yes' if data.timestamps is not None else 'none'}",
        f"  feedback      {entry.feedback if entry else feedback} (default)",
    ]
    if data.n_duplicates_merged:
        lines.append(f"  merged        {data.n_duplicates_merged:,} duplicate records "
                     "(rule: ncae_cuda.data.reader)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(
        prog="python -m ncae_cuda.datasets",
        description="List the named data sets, or describe one (reading, and for a published "
                    "one downloading, it).")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="names with a one-line description")
    shown = commands.add_parser(
        "describe", help="users, items, interactions, sparsity, ratings and timestamps",
        description="Print a data set's users, items, interactions and sparsity (the paper's "
                    "Table 2 columns) and whether it has ratings and timestamps.")
    shown.add_argument("name", help=f"a data set name ({', '.join(DATASETS)}) or a CSV/TSV "
                                    "file's path")
    shown.add_argument("--data-dir", help="an extracted copy: the folder holding the files, "
                                          f"or its parent (default: ${DATA_ENV})")
    shown.add_argument("--cache-dir", help="download cache (default: $NCAE_CUDA_CACHE, else "
                                           "~/.cache/ncae_cuda)")
    shown.add_argument("--no-download", action="store_true",
                       help="fail instead of downloading a missing archive")
    shown.add_argument("--seed", type=int, default=0,
                       help="seed of a synthetic data set, >= 0 (default: %(default)s)")
    add_file_flags(shown)
    args = parser.parse_args(argv)
    if args.command == "describe":
        check_seed(parser, args.seed)
        # (before, accepted and read by nothing: the description was the one without them)
        if args.seed != shown.get_default("seed") and not isinstance(DATASETS.get(args.name),
                                                                      Generated):
            parser.error(f"--seed {args.seed}: is a synthetic data set's seed; {args.name} is "
                         "not one: leave it out")
        if why := folder_unread(args.name, args.data_dir, args.cache_dir, args.name):
            parser.error(f"{why}: leave it out")
    if args.command == "list":
        width = max(map(len, DATASETS))
        for name, entry in DATASETS.items():
            print(f"{name:<{width}}  {entry.description}")
        return 0
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UnverifiedArchiveWarning)
            warnings.simplefilter("always", CatalogueWarning)
            data = load(args.name, args.data_dir, args.cache_dir, not args.no_download,
                        args.seed, args.sep, args.encoding)
        for warning in caught:
            print(f"note: {warning.message}", file=sys.stderr)
    except NcaeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(describe(data, DATASETS.get(args.name)))
    return 0
