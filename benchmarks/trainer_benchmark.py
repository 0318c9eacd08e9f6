"""Trainer benchmark: every figure of the launcher's recipe on one machine, in one table.

Rows, all with the launcher's recipe (its defaults; override any flag) on ``--data_dir``:

- one process: ``python -m trainer`` without TF_CONFIG (the default strategy, every core
  its own): the reference throughput;
- 2 workers + 1 ps and 2 workers, ps 0 (``python -m trainer.local``): training examples/s
  (over the epochs' time) and its ratio to the one process, the seconds each run spent
  building its first step function and the evaluation's before its first epoch
  (result.json's build_time_s) and the ratio with that time counted, measured side by side
  (one process, ps 1, ps 0 in turn, ``--pairs`` times; the ratio is the median of each
  turn's ratio), launch to exit and test accuracy;
- the same two with another ``--local_steps`` (``--exchange_every``, default 1: exchanging
  every step, against the recipe's rounds of 50 steps on each worker's own copy), in the
  same turns;
- the seeded runs: 2 workers + 1 ps with seeds 1..``--seeds``, each run's test accuracy,
  how many reach 0.99, and their launch-to-exit times; the same with ``--exchange_every``;
- the best-accuracy recipe (``--best``), its accuracy and time;
- the local Kubernetes cluster: read from the JSON file the cluster test writes
  (``--cluster_result``), "not measured in this run" without one;
- optionally plain Keras ``model.fit`` as one process (``--keras``) and the guide's recipe
  (``--guide_epochs``).

It also prints the machine's load average at the start and the end, and with ``--profile``
where one batch's time goes in each task (benchmarks/profile_table.py). A script that
prints numbers, not a test. ``--quick`` runs a subset (one turn, three seeds, no best
recipe, no profile) to check that everything runs.

    .venv/bin/python benchmarks/trainer_benchmark.py --data_dir ../shared/data/mnist-full
    .venv/bin/python benchmarks/trainer_benchmark.py --data_dir ../shared/data/mnist-full --quick
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import profile_table  # noqa: E402
from bench_runs import RECIPE_FLAGS, TARGET, run_launcher, run_plain, run_single_trainer  # noqa: E402

from trainer.launcher import cli  # noqa: E402

#: Where the opt-in full-MNIST cluster test (tests/cluster/test_full_mnist.py, TF_MNIST_FULL_E2E=1)
#: writes its measurement (see cluster_row for the fields).
DEFAULT_CLUSTER_RESULT = REPO / "runs" / "benchmarks" / "local-cluster.json"
DEFAULT_BEST = (
    "--model convnet_fc --epochs 15 --augment_shift 2 --learning_rate 0.003 --lr_scaling none "
    "--dropout 0.25 --label_smoothing 0 --local_steps 1"
)


def build_parser() -> argparse.ArgumentParser:
    defaults = cli.build_parser().parse_args([])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data_dir", default=defaults.data_dir)
    for name in RECIPE_FLAGS:
        parser.add_argument(
            f"--{name}",
            type=type(getattr(defaults, name)),
            default=getattr(defaults, name),
            help="default: the launcher's (%(default)s)",
        )
    parser.add_argument(
        "--quick", action="store_true", help="a subset: --pairs 1 --seeds 3, no --best, no --profile"
    )
    parser.add_argument(
        "--pairs", type=int, default=3, help="turns of (one process, ps 1, ps 0) for the ratios (default 3)"
    )
    parser.add_argument(
        "--seeds", type=int, default=25, help="seeded 2 workers + 1 ps runs, seeds 1..N (default 25; 0 skips)"
    )
    parser.add_argument(
        "--exchange_every",
        type=int,
        default=1,
        help="also run ps 1 and ps 0 with this --local_steps, in the same turns "
        "and seeds (default %(default)s: every step; 0, or the recipe's "
        "own --local_steps, skips)",
    )
    parser.add_argument(
        "--best",
        default=DEFAULT_BEST,
        help="the best-accuracy recipe: launcher flags in one string (default %(default)r; '' skips it)",
    )
    parser.add_argument(
        "--best_ps", type=int, default=0, help="ps tasks of the best recipe (default 0: synchronous workers)"
    )
    parser.add_argument(
        "--no_profile",
        dest="profile",
        action="store_false",
        help="skip the profile of one process and of 2 workers + 1 ps",
    )
    parser.add_argument("--keras", action="store_true", help="also run plain Keras model.fit as one process")
    parser.add_argument(
        "--guide_epochs",
        type=int,
        default=0,
        help="also run the guide's recipe (mlp, SGD lr 0.001, batch 20, 2 "
        "workers + 1 ps) for this many epochs (default 0: not run)",
    )
    parser.add_argument(
        "--cluster_result",
        type=Path,
        default=DEFAULT_CLUSTER_RESULT,
        help="the local-cluster test's JSON result (default %(default)s)",
    )
    parser.add_argument("--_plain_fit", action="store_true", help=argparse.SUPPRESS)
    return parser


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def with_flags(args: argparse.Namespace, parser: argparse.ArgumentParser, flags: str) -> argparse.Namespace:
    """``args``' data and recipe with the launcher flags in ``flags`` on top."""
    return parser.parse_args(["--data_dir", args.data_dir, *flags.split()])


def side_by_side(args: argparse.Namespace, local: argparse.Namespace | None) -> dict[str, list[dict]]:
    """``--pairs`` turns of (one process, ps 1, ps 0, and with ``local``, the recipe with
    --exchange_every, ps 1 and ps 0): each label's runs, in order."""
    runs: dict[str, list[dict]] = {"single": [], "ps1": [], "ps0": [], "ps1_local": [], "ps0_local": []}
    for turn in range(args.pairs):
        print(f"turn {turn + 1} of {args.pairs} (load {load()})", flush=True)
        runs["single"].append(run_single_trainer(args))
        runs["ps1"].append(run_launcher(args, ps=1))
        runs["ps0"].append(run_launcher(args, ps=0))
        if local:
            runs["ps1_local"].append(run_launcher(local, ps=1))
            runs["ps0_local"].append(run_launcher(local, ps=0))
    return runs


def turn_ratios(runs: list[dict], base: list[dict], key: str = "examples_per_s") -> list[float]:
    """Each turn's run's ``key`` over its turn's base run's, in turn order."""
    return [r[key] / b[key] for r, b in zip(runs, base)]


def median_ratio(runs: list[dict], base: list[dict], key: str = "examples_per_s") -> float:
    """The median over turns of each run's ``key`` over its turn's base run's."""
    return statistics.median(turn_ratios(runs, base, key))


def seeded_runs(args: argparse.Namespace, parser: argparse.ArgumentParser, flags: str = "") -> list[dict]:
    """2 workers + 1 ps with seeds 1..--seeds and the launcher ``flags`` given."""
    results = []
    for seed in range(1, args.seeds + 1):
        run = run_launcher(with_flags(args, parser, f"{flags} --seed {seed}"), ps=1)
        results.append({"seed": seed, **run})
        print(
            f"seed {seed}{' ' + flags if flags else ''}: {run['test_accuracy']:.4f} in "
            f"{run['wall_s']:.1f} s (load {load()})",
            flush=True,
        )
    return results


def cluster_row(path: Path) -> str:
    """The local-cluster row from ``path``: a JSON object with ``up_to_done_s`` (``pulumi
    up`` to the chief's done, seconds) and ``test_accuracy``, and optionally ``launcher_s``
    (the launcher on the same data) and other ``*_s`` parts (pod start, image, DNS, volume),
    ``measured_at`` and ``load``."""
    if not path.is_file():
        return f"| local cluster (pods) | not measured in this run ({path} absent) |"
    result = json.loads(path.read_text())
    parts = ", ".join(
        f"{k[:-2].replace('_', ' ')} {v:.1f} s"
        for k, v in result.items()
        if k.endswith("_s") and k != "up_to_done_s" and isinstance(v, (int, float))
    )
    if isinstance(result.get("launcher_s"), (int, float)) and isinstance(
        result.get("up_to_done_s"), (int, float)
    ):
        parts += f"; Kubernetes adds {result['up_to_done_s'] - result['launcher_s']:.1f} s to the launcher's"
    when = f"{result.get('measured_at', 'time unknown')}, load {result.get('load', '?')}"
    return (
        f"| local cluster (pods): `pulumi up` to the chief's done | "
        f"{result.get('up_to_done_s', float('nan')):.1f} s | "
        f"{result.get('test_accuracy', float('nan')):.4f} | {parts or '-'} ({when}; "
        f"from {path}) |"
    )


def ratio_text(runs: list[dict], base: list[dict]) -> str:
    """The median of each turn's examples/s ratio to its base run, to 3 decimals so that a
    target such as 0.95x is read without rounding, and with more than one turn the turns'
    range: ``0.946x (0.93-0.97)``."""
    turns = turn_ratios(runs, base)
    spread = f" ({min(turns):.2f}-{max(turns):.2f})" if len(turns) > 1 else ""
    return f"{statistics.median(turns):.3f}x{spread}"


def run_row(name: str, runs: list[dict], base: list[dict] | None) -> str:
    """One table row for ``runs`` of one configuration (medians over the runs)."""
    eps = statistics.median(r["examples_per_s"] for r in runs)
    ratio = ratio_text(runs, base) if base else "-"
    build = f"{statistics.median(r['build_s'] for r in runs):.2f} s"
    built_ratio = f"{median_ratio(runs, base, 'examples_per_s_built'):.2f}x" if base else "-"
    walls = [r["wall_s"] for r in runs]
    wall = f"{statistics.median(walls):.1f} s" + (
        f" ({min(walls):.1f}-{max(walls):.1f})" if len(walls) > 1 else ""
    )
    accs = ", ".join(f"{r['test_accuracy']:.4f}" for r in runs)
    reach = [next((t for t, a in r["epochs"] if a >= TARGET), None) for r in runs]
    reached = [t for t in reach if t is not None]
    to_target = (
        f"{statistics.median(reached):.1f} s"
        if len(reached) == len(runs)
        else f"{len(reached)} of {len(runs)} runs"
    )
    mem = ", ".join(f"{k} {v / 2**20:.0f}" for k, v in sorted(runs[-1]["peaks"].items()))
    return (
        f"| {name} | {eps:.0f} | {ratio} | {build} | {built_ratio} | {wall} | {to_target} | {accs} | {mem} |"
    )


def seeds_lines(results: list[dict], flags: str = "") -> list[str]:
    accs = [r["test_accuracy"] for r in results]
    walls = [r["wall_s"] for r in results]
    reached = sum(a >= TARGET for a in accs)
    return [
        f"Seeded runs, 2 workers + 1 ps{', ' + flags if flags else ''}, seeds "
        f"1-{len(results)}: {reached} of "
        f"{len(results)} reach {TARGET}; mean {statistics.mean(accs):.4f}, "
        f"min {min(accs):.4f}; launch to exit {min(walls):.1f}-{max(walls):.1f} s, "
        f"median {statistics.median(walls):.1f} s",
        "    " + ", ".join(f"{r['test_accuracy']:.4f} ({r['seed']})" for r in results),
    ]


def profile_tables(args: argparse.Namespace) -> list[str]:
    """One profiled run of one process and of 2 workers + 1 ps (trainer/profiling.py)."""
    lines = []
    for label, ps in (("one process", None), ("2 workers + 1 ps", 1)):
        directory = Path(tempfile.mkdtemp(prefix="bench-profile-"))
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TRAINER_PROFILE=str(directory))
        start_load = load()
        if ps is None:
            run_single_trainer(args, env=env)
        else:
            run_launcher(args, ps=ps, env=env)
        lines += [
            "",
            f"Profile, {label} (load at the start {start_load}):",
            "",
            profile_table.format_table(profile_table.read_profile(directory)),
        ]
        shutil.rmtree(directory, ignore_errors=True)
    return lines


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()
    if args._plain_fit:
        from bench_runs import plain_fit

        plain_fit(args)
        return
    if args.quick:
        args.pairs, args.seeds, args.best, args.profile = 1, min(args.seeds, 3), "", False
    started = time.perf_counter()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}; data {args.data_dir}; model {args.model}; "
        f"{args.epochs} epochs; batch {args.batch_size} per replica; {args.optimizer} lr "
        f"{args.learning_rate} ({args.lr_schedule}, {args.lr_scaling} scaling); dropout "
        f"{args.dropout}; label smoothing {args.label_smoothing}; precision "
        f"{args.precision}; exchanging every {args.local_steps} steps; "
        f"{args.steps_per_execution} steps per execution; {os.cpu_count()} CPUs; load average "
        f"at the start {load()} (1, 5, 15 min)",
        flush=True,
    )
    # TensorFlow's files into the page cache before anything is timed: the first run of one
    # benchmark took 61 s from start to exit for 16.5 s of training (later runs: 34-45 s).
    subprocess.run(
        [sys.executable, "-c", "import keras, tensorflow"], cwd=REPO, capture_output=True, check=False
    )
    exchange = (
        f"--local_steps {args.exchange_every}"
        if args.exchange_every >= 1 and args.exchange_every != args.local_steps
        else ""
    )
    local = with_flags(args, parser, exchange) if exchange else None
    runs = side_by_side(args, local)
    rows = [
        run_row("one process, python -m trainer", runs["single"], runs["single"]),
        run_row("local: 2 workers + 1 ps", runs["ps1"], runs["single"]),
        run_row("local: 2 workers, ps 0", runs["ps0"], runs["single"]),
    ]
    if local:
        rows += [
            run_row(f"local: 2 workers + 1 ps, {exchange}", runs["ps1_local"], runs["single"]),
            run_row(f"local: 2 workers, ps 0, {exchange}", runs["ps0_local"], runs["single"]),
        ]
    if args.keras:
        rows.append(run_row("one process, Keras model.fit", [run_plain(args, __file__)], runs["single"]))
    if args.guide_epochs:
        guide = with_flags(
            args,
            parser,
            "--model mlp --optimizer sgd --learning_rate 0.001 "
            "--lr_schedule constant --lr_scaling none --batch_size 20 "
            f"--epochs {args.guide_epochs}",
        )
        rows.append(
            run_row(
                "the guide's recipe: mlp, SGD lr 0.001, batch 20, 2 workers + 1 ps",
                [run_launcher(guide, ps=1)],
                None,
            )
        )
    if args.best:
        topology = "2 workers + 1 ps" if args.best_ps == 1 else f"2 workers, ps {args.best_ps}"
        rows.append(
            run_row(
                f"best accuracy: {args.best}, {topology}",
                [run_launcher(with_flags(args, parser, args.best), ps=args.best_ps)],
                None,
            )
        )
    seeds = seeded_runs(args, parser) if args.seeds else []
    local_seeds = seeded_runs(args, parser, exchange) if args.seeds and local else []
    extra = profile_tables(args) if args.profile else []
    print(f"\nload average at the end {load()}; the benchmark took {time.perf_counter() - started:.0f} s\n")
    print(
        "| run | examples/s | vs one process | building | vs one process, building counted | "
        "launch to exit | to 0.99 | test accuracy | peak memory per process (MiB) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    print("\n".join(rows))
    print("\n| run | launch to done | test accuracy | parts |\n|---|---:|---:|---|")
    print(cluster_row(args.cluster_result))
    if seeds:
        print("\n" + "\n".join(seeds_lines(seeds)))
    if local_seeds:
        print("\n" + "\n".join(seeds_lines(local_seeds, exchange)))
    print("\n".join(extra))


if __name__ == "__main__":
    main()
