#!/usr/bin/env python3
"""Checks that the README's two commands share their dependency build.

`./localstack/demo.sh` runs `cargo run` (normal dependencies only) and `./localstack/test.sh` runs
`cargo test` (dev-dependencies too). When a dev-dependency turns on a feature of a crate the service also
uses, cargo builds that crate, and everything above it, a second time for the tests. This compares the
two builds' unit graphs (cargo's own plan, read with --unit-graph) and fails naming the crates that would
be built twice; the fix is to name the feature in Cargo.toml's [dependencies].
"""
import hashlib
import json
import os
import subprocess
import sys


def units(args):
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")  # --unit-graph is unstable; it only prints the plan
    out = subprocess.run(["cargo", *args, "--locked", "-Z", "unstable-options", "--unit-graph"],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"unit_graph.py: cargo {' '.join(args)} --unit-graph failed:\n{out.stderr}")
    graph = json.loads(out.stdout)["units"]
    memo = {}

    def unit(i):
        if i not in memo:
            u = graph[i]
            profile = {k: v for k, v in u["profile"].items() if k != "name"}  # cargo does not hash the name
            deps = sorted(unit(d["index"])[1] for d in u["dependencies"])
            ident = repr((u["pkg_id"], u["target"]["name"], u["mode"], sorted(u["features"]),
                          sorted(profile.items(), key=str), deps))
            memo[i] = (u["pkg_id"].split("#")[-1], hashlib.sha1(ident.encode()).hexdigest())
        return memo[i]

    return {unit(i) for i in range(len(graph))}


demo = units(["build"])
tests = units(["test", "--no-run"])
demo_crates = {name for name, _ in demo}
twice = sorted({name for name, _ in tests - demo if name in demo_crates and not name.startswith("kafka-s3-archiver")})
if twice:
    sys.exit("unit_graph.py: `cargo test` would build these again with other features than `cargo run`: "
             + ", ".join(twice) + ". Name the features the dev-dependencies turn on in Cargo.toml's [dependencies].")
print(f"unit_graph.py: the tests reuse every dependency the demo builds ({len(demo)} units; "
      f"{len(tests - demo)} more for the tests: the crate's test targets and the dev-dependencies)")
