"""Where the engine's host time goes, from a py-spy `record -f raw` file (folded stacks).

For each function named in --focus: its share of all samples of the engine process
(inclusive), and below it the functions that were on top of the stack (self time) and the
direct callees (inclusive), so a slow phase (the draft's first pass, input preparation)
can be read down to the call that costs.

    python benchmarks/e2e/pyspy_summary.py pyspy.txt --focus propose,_prepare_inputs
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path

FRAME = re.compile(r"^(?P<func>[^ ]+) \((?P<file>[^:]+)(:\d+)?\)$")


def _name(frame: str) -> str:
    m = FRAME.match(frame.strip())
    if not m:
        return frame.strip()[:80]
    return f"{m.group('func')} ({Path(m.group('file')).name})"


def load(path: Path, process_filter: str = "EngineCore"):
    """(stack as a list of function names root first, count) of the engine core process."""
    stacks = []
    with open(path) as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line or " " not in line:
                continue
            frames, count = line.rsplit(" ", 1)
            try:
                n = int(count)
            except ValueError:
                continue
            parts = frames.split(";")
            if process_filter and process_filter not in parts[0]:
                continue
            stacks.append(([_name(f) for f in parts[1:]], n))
    return stacks


def summarise(stacks, focus: list[str], top: int = 20) -> dict:
    total = sum(n for _, n in stacks)
    inclusive = collections.Counter()
    for frames, n in stacks:
        for f in set(frames):
            inclusive[f] += n
    out = {"samples": total,
           "top_inclusive": [(f, round(c / total, 4)) for f, c in inclusive.most_common(40)]}
    for target in focus:
        within = [(frames, n) for frames, n in stacks
                  if any(f.startswith(target + " ") for f in frames)]
        count = sum(n for _, n in within)
        leaves, callees = collections.Counter(), collections.Counter()
        for frames, n in within:
            i = max(k for k, f in enumerate(frames) if f.startswith(target + " "))
            leaves[frames[-1]] += n
            if i + 1 < len(frames):
                callees[frames[i + 1]] += n
            else:
                callees["(self)"] += n
        out[target] = {
            "share": round(count / total, 4) if total else 0.0,
            "callees": [(f, round(c / max(count, 1), 3)) for f, c in callees.most_common(top)],
            "leaves": [(f, round(c / max(count, 1), 3)) for f, c in leaves.most_common(top)],
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("raw")
    p.add_argument("--focus", default="")
    p.add_argument("--process", default="EngineCore")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    stacks = load(Path(args.raw), args.process)
    if not stacks:  # the process name differs: show what there is, take everything
        names = collections.Counter()
        with open(args.raw) as fh:
            for line in fh:
                names[line.split(";", 1)[0][:100]] += 1
        print("no stacks of", repr(args.process), "; processes:", names.most_common(8))
        stacks = load(Path(args.raw), "")
    summary = summarise(stacks, [f for f in args.focus.split(",") if f])
    text = json.dumps(summary, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    print(text[:20000])


if __name__ == "__main__":
    main()
